//! The tools the build scripts of the examples, the templates and the docs read from the
//! environment: used by the test modules that build guests.
#![allow(dead_code)] // each test module uses a part

use std::path::{Path, PathBuf};

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The target directory of the Rust plugins that `palisade new` generates in the tests and the
/// tutorials: one for all of them (each is a workspace of its own), so the SDK's dependencies
/// are built once per checkout rather than once per test (50 s each on 2 cores).
pub fn user_plugin_target() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("user-plugins")
}

/// The compiled-component cache of the plugins that the docs and the language tests build:
/// one for both, so a component that two tests build alike is compiled once, and never the
/// user's own cache.
pub fn component_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("languages-cache")
}

/// A tool the build needs: `$var`, else the copy `scripts/tools.sh` installs at `installed`
/// (relative to the workspace). Panics, saying how to install it, when neither exists.
pub fn tool(var: &str, installed: &str, what: &str) -> PathBuf {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join(installed));
    assert!(
        path.exists(),
        "{what} is not installed (looked at {}). Run `scripts/tools.sh`, which installs it into \
         target/tools, or set {var} to its path.",
        path.display()
    );
    path
}

/// The environment the build scripts of `lang` read their tools from.
pub fn toolchain(lang: &str) -> Vec<(&'static str, PathBuf)> {
    let tools: &[(&str, &str, &str, &str)] = match lang {
        "python" => &[(
            "COMPONENTIZE_PY",
            "PALISADE_COMPONENTIZE_PY",
            "target/tools/venv/bin/componentize-py",
            "componentize-py",
        )],
        "js" => &[(
            "COMPONENTIZE_JS",
            "PALISADE_COMPONENTIZE_JS",
            "target/tools/js/componentize-js",
            "componentize-js",
        )],
        "c" => &[
            (
                "CLANG",
                "PALISADE_CLANG",
                "target/tools/c/clang",
                "clang 19 with wasi-libc",
            ),
            (
                "WIT_BINDGEN",
                "PALISADE_WIT_BINDGEN",
                "target/tools/cargo/bin/wit-bindgen",
                "wit-bindgen-cli",
            ),
            (
                "WASM_TOOLS",
                "PALISADE_WASM_TOOLS",
                "target/tools/venv/bin/wasm-tools",
                "wasm-tools",
            ),
            (
                "WASI_ADAPTER",
                "PALISADE_WASI_ADAPTER",
                "target/tools/wasi_snapshot_preview1.reactor.wasm",
                "the WASI preview1 reactor adapter",
            ),
        ],
        _ => &[],
    };
    tools
        .iter()
        .map(|(name, var, installed, what)| (*name, tool(var, installed, what)))
        .collect()
}
