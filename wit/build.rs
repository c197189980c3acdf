//! Writes the binding macros of `src/lib.rs`: each passes the bindings generator this
//! package's folder as an absolute path, since `bindgen!`'s `path` takes only a literal,
//! resolved against the crate that calls it (a relative path would reach outside that crate,
//! and break once it is published).

use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    // The path written into the macros, watched as such: a build of another checkout that
    // shares the target directory (a worktree; cargo hashes path packages by their relative
    // path, so they share this script's output) runs the script again when that folder is
    // gone or changed, rather than keep macros that name a folder no longer there.
    println!("cargo:rerun-if-changed={}", dir.display());
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    // `{:?}` of a str is a valid Rust string literal (quotes and backslashes escaped).
    let dir = format!("{:?}", dir.to_str().expect("the package path is UTF-8"));
    let macros = format!(
        r#"/// `wasmtime::component::bindgen!` over this package; takes the other options of
/// `bindgen!` (`world`, `imports`, `exports`, ...). For the host.
#[macro_export]
macro_rules! wasmtime_bindgen {{
    ({{ $($option:tt)* }}) => {{
        ::wasmtime::component::bindgen!({{ path: {dir}, $($option)* }});
    }};
}}

/// `wit_bindgen::generate!` over this package; takes the other options of `generate!`
/// (`world`, `generate_all`, ...). For guests (the SDK).
#[macro_export]
macro_rules! wit_bindgen_generate {{
    ({{ $($option:tt)* }}) => {{
        ::wit_bindgen::generate!({{ path: {dir}, $($option)* }});
    }};
}}
"#
    );
    std::fs::write(out.join("macros.rs"), macros).expect("OUT_DIR is writable");
    println!("cargo:rerun-if-changed=build.rs");
}
