//! Builds Rust guest components from a build script, the way wasmtime's `test-programs`
//! artifacts are built: a nested `cargo build --target wasm32-wasip2` of workspace packages,
//! in a target directory of its own, with the outer build's flags removed.
//!
//! Every crate that needs guests (the example-plugin bundle, the test fixtures) shares one
//! target directory (`target/guests`), so a guest is compiled once however many crates embed it.
#![deny(missing_docs)]

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target triple guests are built for.
pub const TARGET: &str = "wasm32-wasip2";
/// The cargo profile guests are built with (see the workspace `Cargo.toml`).
pub const PROFILE: &str = "guest";

/// A guest package to build.
#[derive(Debug, Clone)]
pub struct Guest {
    /// The cargo package name (`shell-guard`).
    pub package: String,
    /// Its folder, relative to the workspace root; watched for changes.
    pub dir: PathBuf,
}

/// A built guest.
#[derive(Debug, Clone)]
pub struct Built {
    /// The cargo package name.
    pub package: String,
    /// The component.
    pub wasm: PathBuf,
}

/// The workspace root: the nearest ancestor of `CARGO_MANIFEST_DIR` with a `[workspace]`.
pub fn workspace_root() -> PathBuf {
    let manifest_dir =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("run from a build script"));
    manifest_dir
        .ancestors()
        .find(|dir| {
            std::fs::read_to_string(dir.join("Cargo.toml"))
                .is_ok_and(|text| text.lines().any(|l| l.trim() == "[workspace]"))
        })
        .expect("the crate is inside a cargo workspace")
        .to_path_buf()
}

/// Where guests are built: `guests/` beside the outer build's profile directories.
pub fn guest_target_dir() -> PathBuf {
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("run from a build script"));
    // OUT_DIR is <target>/[<triple>/]<profile>/build/<pkg>-<hash>/out.
    let build = out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .expect("OUT_DIR is inside a cargo target directory");
    build
        .parent()
        .and_then(Path::parent)
        .expect("a profile directory has a parent")
        .join("guests")
}

/// Builds `guests` and returns their components, in the same order.
///
/// Panics with a message that says how to fix the machine when the build cannot run (the
/// usual cause: the `wasm32-wasip2` target is missing — `rustup target add wasm32-wasip2`,
/// which `rust-toolchain.toml` normally does by itself).
pub fn build(guests: &[Guest]) -> Vec<Built> {
    let root = workspace_root();
    let target_dir = guest_target_dir();
    println!("cargo:rerun-if-changed={}", root.join("wit").display());
    println!(
        "cargo:rerun-if-changed={}",
        root.join("guest-sdk").display()
    );
    for guest in guests {
        println!("cargo:rerun-if-changed={}", root.join(&guest.dir).display());
    }

    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .arg("build")
        .arg("--target")
        .arg(TARGET)
        .arg("--profile")
        .arg(PROFILE)
        .env("CARGO_TARGET_DIR", &target_dir)
        // The outer build's flags are for the host, not for wasm; clippy's driver would
        // re-lint the guests with the outer flags.
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env_remove("RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .env_remove("CARGO_BUILD_TARGET");
    for guest in guests {
        cmd.arg("--package").arg(&guest.package);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the guest components: {e}"));
    assert!(
        status.success(),
        "building the guest components failed (see the cargo output above). If the error is \
         about a missing target, run `rustup target add {TARGET}`."
    );
    guests
        .iter()
        .map(|guest| {
            let wasm = target_dir
                .join(TARGET)
                .join(PROFILE)
                .join(format!("{}.wasm", guest.package.replace('-', "_")));
            assert!(
                wasm.exists(),
                "the build did not produce {}",
                wasm.display()
            );
            Built {
                package: guest.package.clone(),
                wasm,
            }
        })
        .collect()
}
