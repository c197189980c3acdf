//! Cost of one Claude Code hook event through the bridge, as Claude Code pays it: a new
//! `palisade claude-code DIR` process per event (start, load five plugins from the compiled
//! component cache, dispatch `PreToolUse`, answer, exit), measured from spawn to exit.
//!
//! Two plugin sets of five (see `support/plugin_sets.rs`), every plugin loaded on every event.
//! The event is a `PreToolUse` of `Bash` as Claude Code writes it. The cache is filled once
//! before measuring (as the first event of a session does).
//!
//! Run: `cargo bench -p palisade-cli --bench bridge`.

#[path = "support/plugin_sets.rs"]
mod plugin_sets;

use criterion::{Criterion, criterion_group, criterion_main};
use plugin_sets::{EVENT, plugin_sets};
use std::io::Write;
use std::process::{Command, Stdio};

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
    let sets = plugin_sets(dir.path());
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
    for (name, plugins) in &sets {
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
