//! The two plugin sets of five the hook-event benches measure (shared by `bridge` and
//! `serve`):
//! - `examples`: the bundled Rust examples (shell-guard, secret-guard, audit-log, retry,
//!   timeout), of which the two guards and the audit log run at `PreToolUse`;
//! - `five-guards`: shell-guard, secret-guard and three more `pre-tool` guards (the scripted
//!   test guest, allowing): all five run.
//!
//! And the binaries they measure: the bench profile's, and the installed ones when they are
//! named (paths from the workspace root): the `dist` profile's, with whole-program LTO
//! (`cargo build --profile dist -p palisade-cli --bin palisade`, then
//! `PALISADE_BENCH_DIST_BIN=target/dist/palisade`), and the static one of
//! `scripts/install-static.sh` (`PALISADE_BENCH_STATIC_BIN=…`).

use std::path::{Path, PathBuf};

/// A `PreToolUse` of `Bash` as Claude Code writes it.
pub const EVENT: &str = r#"{"session_id":"bench","transcript_path":"/tmp/t.jsonl","cwd":"/tmp","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"cargo test --workspace","description":"run the tests"},"tool_use_id":"toolu_bench"}"#;

/// [`EVENT`] in the agent session `bench-{id}`.
pub fn event_in_session(id: impl std::fmt::Display) -> String {
    EVENT.replace("\"bench\"", &format!("\"bench-{id}\""))
}

/// Writes both sets under `dir`; returns them by name.
pub fn plugin_sets(dir: &Path) -> [(&'static str, PathBuf); 2] {
    let examples = dir.join("examples");
    palisade_examples::install(&examples).unwrap();
    let guards = dir.join("five-guards");
    for name in ["shell-guard", "secret-guard"] {
        palisade_examples::install_one(palisade_examples::get(name).unwrap(), &guards).unwrap();
    }
    for name in ["guard-a", "guard-b", "guard-c"] {
        let folder = guards.join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::copy(palisade_fixtures::SCRIPTED, folder.join("plugin.wasm")).unwrap();
        std::fs::write(
            folder.join("plugin.toml"),
            format!(
                "name = \"{name}\"\nwasm = \"plugin.wasm\"\n\
                 [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n"
            ),
        )
        .unwrap();
    }
    for set in [&examples, &guards] {
        assert_eq!(std::fs::read_dir(set).unwrap().count(), 5);
    }
    [("examples", examples), ("five-guards", guards)]
}

/// The binaries to measure, each with the suffix its figures are printed with: the bench
/// profile's `palisade`, the one `PALISADE_BENCH_DIST_BIN` names, if any (the installed glibc
/// build), and the one `PALISADE_BENCH_STATIC_BIN` names, if any (the static build of
/// `scripts/install-static.sh`).
pub fn binaries() -> Vec<(&'static str, PathBuf)> {
    let mut binaries = vec![("", PathBuf::from(env!("CARGO_BIN_EXE_palisade")))];
    for (var, suffix) in [
        ("PALISADE_BENCH_DIST_BIN", " (dist)"),
        ("PALISADE_BENCH_STATIC_BIN", " (static)"),
    ] {
        if let Some(bin) = std::env::var_os(var) {
            let bin =
                std::fs::canonicalize(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(&bin))
                    .unwrap_or_else(|e| panic!("{var}={bin:?}: {e}"));
            binaries.push((suffix, bin));
        }
    }
    binaries
}
