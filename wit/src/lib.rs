//! The WIT package `palisade:hooks`: the contract between the Palisade host and its plugins
//! — one interface per extension point, the shared types, the host's imports and the worlds
//! a plugin can target.
//!
//! The `.wit` files live in this crate's folder, and only here: the host binds them with
//! [`wasmtime_bindgen!`], the guest SDK with [`wit_bindgen_generate!`] and its `export!` macro
//! with [`FILES`], and `palisade new` writes [`FILES`] into every plugin it creates.

#![deny(missing_docs)]
#![no_std]

/// Every file of the package: its name and its text.
pub const FILES: &[(&str, &str)] = &[
    ("types.wit", include_str!("../types.wit")),
    ("host.wit", include_str!("../host.wit")),
    ("worlds.wit", include_str!("../worlds.wit")),
    ("session-start.wit", include_str!("../session-start.wit")),
    ("prompt-submit.wit", include_str!("../prompt-submit.wit")),
    ("pre-tool.wit", include_str!("../pre-tool.wit")),
    ("tool-guard.wit", include_str!("../tool-guard.wit")),
    ("tool-execute.wit", include_str!("../tool-execute.wit")),
    ("post-tool.wit", include_str!("../post-tool.wit")),
    ("tool-result.wit", include_str!("../tool-result.wit")),
    ("turn-stopping.wit", include_str!("../turn-stopping.wit")),
    ("committed.wit", include_str!("../committed.wit")),
];

/// The package's version: `palisade:hooks@VERSION`.
pub const VERSION: &str = "0.1.0";

/// The folder that holds the package (this crate's own), for tools that read it from disk.
pub const DIR: &str = env!("CARGO_MANIFEST_DIR");

include!(concat!(env!("OUT_DIR"), "/macros.rs"));

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    /// A `.wit` file that is not in [`super::FILES`] would be bound by the host but missing
    /// from the SDK's worlds and from every plugin `palisade new` writes.
    #[test]
    fn every_wit_file_of_the_folder_is_listed() {
        let mut on_disk: Vec<_> = std::fs::read_dir(super::DIR)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(".wit"))
            .collect();
        on_disk.sort();
        let mut listed: Vec<_> = super::FILES.iter().map(|(name, _)| *name).collect();
        listed.sort();
        assert_eq!(on_disk, listed);
    }

    #[test]
    fn the_version_is_the_packages() {
        let package = std::format!("package palisade:hooks@{};", super::VERSION);
        for (name, text) in super::FILES {
            assert!(text.contains(&package), "{name} does not declare {package}");
        }
    }
}
