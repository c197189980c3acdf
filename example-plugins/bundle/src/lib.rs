//! The example plugins, built from source by this crate's build script and embedded, so
//! `palisade demo` runs with no plugin directory and tests load the real examples. Without
//! the `all` feature, only the demo's set (those [`install`] writes) is built.
#![deny(missing_docs)]

use std::io;
use std::path::Path;

/// One example plugin.
#[derive(Debug, Clone, Copy)]
pub struct Example {
    /// Its folder name under `example-plugins/` (also its plugin name).
    pub name: &'static str,
    /// Its `plugin.toml`.
    pub manifest: &'static str,
    /// The component's file name, as the manifest names it.
    pub wasm_file: &'static str,
    /// The component.
    pub wasm: &'static [u8],
    /// Where the build left the component.
    pub wasm_path: &'static str,
    /// Whether [`install`] installs it (the demo's set); the others only by name.
    pub installed: bool,
    /// The files its manifest grants it (its `policy/` folder), by their path in its folder.
    pub files: &'static [(&'static str, &'static [u8])],
}

include!(concat!(env!("OUT_DIR"), "/examples.rs"));

/// Writes each example of the demo's set as a plugin folder (`plugin.toml` + component)
/// under `dir`.
pub fn install(dir: &Path) -> io::Result<()> {
    for example in EXAMPLES.iter().filter(|e| e.installed) {
        install_one(example, dir)?;
    }
    Ok(())
}

/// Writes one example as a plugin folder under `dir`, with the files its manifest grants it.
pub fn install_one(example: &Example, dir: &Path) -> io::Result<()> {
    let folder = dir.join(example.name);
    std::fs::create_dir_all(&folder)?;
    std::fs::write(folder.join("plugin.toml"), example.manifest)?;
    for (path, bytes) in example.files {
        let path = folder.join(path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, bytes)?;
    }
    std::fs::write(folder.join(example.wasm_file), example.wasm)
}

/// The example named `name`.
pub fn get(name: &str) -> Option<&'static Example> {
    EXAMPLES.iter().find(|e| e.name == name)
}
