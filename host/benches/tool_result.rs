//! What awaiting the foreground `tool-result` observers costs a tool call
//! (`Session::execute`): with no observer, with one foreground observer awaited (the default,
//! docs/semantics.md), and with the same observer detached
//! (`HostBuilder::detached_tool_result(true)`, the behaviour before observers were awaited).
//! The observer is the scripted test guest (per-session, `tool_result = "ok"`: it logs nothing
//! and returns). A detached observer's work is drained after each call, untimed, so that its
//! queue never fills.
//!
//! Run: `cargo bench -p palisade --bench tool_result`.

use criterion::{Criterion, criterion_group, criterion_main};
use palisade::{Host, Tool, ToolOutcome, ToolRegistry, ToolRequest};
use serde_json::json;
use std::time::{Duration, Instant};

fn observer_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("audit");
    std::fs::create_dir_all(&plugin).unwrap();
    std::fs::copy(palisade_fixtures::SCRIPTED, plugin.join("plugin.wasm")).unwrap();
    std::fs::write(
        plugin.join("plugin.toml"),
        "name = \"audit\"\nwasm = \"plugin.wasm\"\n\
         [[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\n\
         [config]\ntool_result = \"ok\"\n",
    )
    .unwrap();
    dir
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = ToolRegistry::new([Tool::new("echo", |_| async {
        Ok(ToolOutcome::text("ran"))
    })]);
    let request = ToolRequest::new("t1", "echo", json!({}));
    let empty = tempfile::tempdir().unwrap();
    let observed = observer_dir();
    for (label, dir, detached) in [
        ("no-observer", empty.path(), false),
        ("awaited", observed.path(), false),
        ("detached", observed.path(), true),
    ] {
        let host = Host::builder()
            .detached_tool_result(detached)
            .build()
            .unwrap();
        let plugins = host.load_dir(dir).unwrap();
        let session = plugins.session("bench");
        // Warm up: the observer's per-session instance exists.
        rt.block_on(async {
            session.execute(&registry, request.clone()).await;
            session.drain_background().await;
        });
        c.bench_function(&format!("tool-result/{label}"), |b| {
            b.to_async(&rt).iter_custom(|iters| {
                let (session, registry, request) = (&session, &registry, &request);
                async move {
                    let mut took = Duration::ZERO;
                    for _ in 0..iters {
                        let start = Instant::now();
                        std::hint::black_box(session.execute(registry, request.clone()).await);
                        took += start.elapsed();
                        session.drain_background().await;
                    }
                    took
                }
            });
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
