//! Builds the Rust example plugins for wasm32-wasip2 and embeds them with their manifests.

use palisade_guest_build::{Guest, build, workspace_root};
use std::fmt::Write as _;

/// The Rust example plugins (folder under example-plugins/ = cargo package).
const EXAMPLES: &[&str] = &[
    "shell-guard",
    "secret-guard",
    "audit-log",
    "retry",
    "timeout",
    "bash-budget",
    "policy-file-guard",
    "classifier-guard",
    "rego-guard",
    "cedar-guard",
];

/// Those that `install` leaves out (the demo's set is the first five): built, with the `all`
/// feature, for the tests that need them by name.
const ON_REQUEST: &[&str] = &[
    "bash-budget",
    "policy-file-guard",
    "classifier-guard",
    "rego-guard",
    "cedar-guard",
];

fn main() {
    let root = workspace_root();
    let all = std::env::var_os("CARGO_FEATURE_ALL").is_some();
    let examples: Vec<&str> = EXAMPLES
        .iter()
        .copied()
        .filter(|name| all || !ON_REQUEST.contains(name))
        .collect();
    let guests: Vec<Guest> = examples
        .iter()
        .map(|name| Guest {
            package: name.to_string(),
            dir: format!("example-plugins/{name}").into(),
        })
        .collect();
    let built = build(&guests);
    let mut code =
        String::from("/// The Rust example plugins.\npub const EXAMPLES: &[Example] = &[\n");
    for (name, built) in examples.iter().zip(&built) {
        let manifest = root.join("example-plugins").join(name).join("plugin.toml");
        let wasm_file = format!("{}.wasm", name.replace('-', "_"));
        let text = std::fs::read_to_string(&manifest).expect("every example has a plugin.toml");
        assert!(
            text.contains(&format!("wasm = \"{wasm_file}\"")),
            "{} must say `wasm = \"{wasm_file}\"`",
            manifest.display()
        );
        // The files its manifest grants it (its `policy/` folder), installed beside it.
        let policy = root.join("example-plugins").join(name).join("policy");
        let mut files = String::new();
        if let Ok(entries) = std::fs::read_dir(&policy) {
            println!("cargo:rerun-if-changed={}", policy.display());
            let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
            paths.sort();
            for path in paths.iter().filter(|p| p.is_file()) {
                let file = path.file_name().unwrap().to_string_lossy();
                write!(
                    files,
                    "(\"policy/{file}\", include_bytes!({:?})), ",
                    path.display().to_string()
                )
                .unwrap();
            }
        }
        writeln!(
            code,
            "    Example {{ name: {name:?}, manifest: include_str!({m:?}), wasm_file: {wasm_file:?}, \
             wasm: include_bytes!({w:?}), wasm_path: {w:?}, installed: {installed}, \
             files: &[{files}] }},",
            m = manifest.display().to_string(),
            w = built.wasm.display().to_string(),
            installed = !ON_REQUEST.contains(name),
        )
        .unwrap();
    }
    code.push_str("];\n");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("examples.rs");
    std::fs::write(out, code).unwrap();
}
