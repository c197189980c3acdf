//! Cost of one Claude Code hook event through the bridge, as Claude Code pays it: a new
//! `palisade claude-code DIR` process per event (start, load five plugins from the compiled
//! component cache, dispatch `PreToolUse`, answer, exit), measured from spawn to exit.
//!
//! Two plugin sets of five, every plugin loaded on every event:
//! - `examples`: the bundled Rust examples (shell-guard, secret-guard, audit-log, retry,
//!   timeout), of which the two guards run at `PreToolUse`;
//! - `five-guards`: shell-guard, secret-guard and three more `pre-tool` guards (the scripted
//!   test guest, allowing): all five run.
//!
//! The event is a `PreToolUse` of `Bash` as Claude Code writes it. The cache is filled once
//! before measuring (as the first event of a session does).
//!
//! Run: `cargo bench -p palisade --bench bridge`.

use criterion::{Criterion, criterion_group, criterion_main};
use std::io::Write;
use std::process::{Command, Stdio};

const EVENT: &str = r#"{"session_id":"bench","transcript_path":"/tmp/t.jsonl","cwd":"/tmp","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"cargo test --workspace","description":"run the tests"},"tool_use_id":"toolu_bench"}"#;

fn event(dir: &std::path::Path, cache: &std::path::Path, input: &str) -> std::process::Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .arg("claude-code")
        .arg(dir)
        .env("PALISADE_CACHE_DIR", cache)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let examples = dir.path().join("examples");
    palisade_examples::install(&examples).unwrap();
    let guards = dir.path().join("five-guards");
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
    let mut group = c.benchmark_group("bridge");
    group.sample_size(50);
    // The floor: starting and exiting the same binary, no engine, no plugins.
    group.bench_function("baseline: palisade --version", |b| {
        b.iter(|| {
            let out = Command::new(env!("CARGO_BIN_EXE_palisade"))
                .arg("--version")
                .output()
                .unwrap();
            assert!(out.status.success());
        })
    });
    for (name, plugins) in [("examples", &examples), ("five-guards", &guards)] {
        assert_eq!(std::fs::read_dir(plugins).unwrap().count(), 5);
        // The first event compiles and caches; every later one loads from the cache.
        let first = event(plugins, &cache, EVENT);
        assert!(first.status.success(), "{first:?}");
        // A denied event, to check the bridge really dispatches.
        let denied = event(
            plugins,
            &cache,
            &EVENT.replace("cargo test --workspace", "rm -rf /"),
        );
        assert!(
            String::from_utf8_lossy(&denied.stdout).contains("\"deny\""),
            "{denied:?}"
        );
        group.bench_function(
            format!("claude-code PreToolUse, cold process, {name}"),
            |b| {
                b.iter(|| {
                    let out = event(plugins, &cache, EVENT);
                    assert!(out.status.success());
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
