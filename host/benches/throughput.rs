//! Guard decisions per second across both cores: `SESSIONS` sessions, each making `CALLS`
//! `pre-tool` calls in a row on a task of its own, on the multi-thread runtime (one worker per
//! core), with a per-session instance (warm after each session's first call) of the minimal
//! guard (the `allow` test guest, which makes no host call) and of the scripted test guest
//! (three `config` host calls per call); and the minimal guard per-call (`per-call`: a new
//! instance for every call, on a spare when one is ready — what per-call costs a busy host).
//!
//! Criterion reports the time of one batch of `SESSIONS` × `CALLS` decisions and, from it,
//! decisions per second (`thrpt`).
//!
//! Run: `cargo bench -p palisade --bench throughput`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use palisade::{Host, PreToolDecision, ToolCall};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

const SESSIONS: usize = 64;
const CALLS: usize = 1_000;

/// A folder with the test guest `wasm`, guarding every tool, its instances living `lifetime`.
fn plugin_dir(wasm: &str, lifetime: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("guard");
    std::fs::create_dir_all(&plugin).unwrap();
    std::fs::copy(wasm, plugin.join("plugin.wasm")).unwrap();
    std::fs::write(
        plugin.join("plugin.toml"),
        format!(
            "name = \"guard\"\nwasm = \"plugin.wasm\"\ninstance = \"{lifetime}\"\n\
             [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n"
        ),
    )
    .unwrap();
    dir
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let host = Host::new().unwrap();
    let call = Arc::new(ToolCall::new("t", "Bash", json!({ "command": "ls" })));
    let mut group = c.benchmark_group("throughput");
    group.throughput(Throughput::Elements((SESSIONS * CALLS) as u64));
    group.sample_size(10);
    for (label, wasm, lifetime) in [
        ("minimal-guard", palisade_fixtures::ALLOW, "per-session"),
        ("scripted-guard", palisade_fixtures::SCRIPTED, "per-session"),
        (
            "minimal-guard-per-call",
            palisade_fixtures::ALLOW,
            "per-call",
        ),
    ] {
        let dir = plugin_dir(wasm, lifetime);
        let plugins = host.load_dir(dir.path()).unwrap();
        group.bench_function(
            format!("{label}/{SESSIONS} sessions x {CALLS} calls"),
            |b| {
                b.iter_custom(|iterations| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iterations {
                        let sessions: Vec<_> = (0..SESSIONS)
                            .map(|i| Arc::new(plugins.session(format!("s{i}"))))
                            .collect();
                        total += rt.block_on(async {
                            let started = Instant::now();
                            let tasks: Vec<_> = sessions
                                .iter()
                                .map(|session| {
                                    let (session, call) = (session.clone(), call.clone());
                                    tokio::spawn(async move {
                                        for _ in 0..CALLS {
                                            let decision = session.pre_tool(&call).await;
                                            assert_eq!(decision, PreToolDecision::Allow);
                                        }
                                    })
                                })
                                .collect();
                            for task in tasks {
                                task.await.unwrap();
                            }
                            started.elapsed()
                        });
                    }
                    total
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
