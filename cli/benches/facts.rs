//! Cost of the durable fact stream (`palisade::facts`), per backend: the embedded log (on the
//! build tree's disk, `fsync`ed) and Redis (a real `redis-server` on a Unix socket, installed
//! by `scripts/tools.sh`).
//!
//! - **Appended per second**: `PALISADE_FACTS_RECORDS` (default 100,000) committed facts,
//!   queued as fast as a session commits them, until the stream has acknowledged the last.
//! - **Added to a decision**: one tool step through a lifecycle — its call committed, a
//!   guard's `pre-tool` and `tool-guard` decided, the decision recorded — without a stream
//!   and with each backend, taken in turn (one step of each after the other, so the VM's
//!   drift falls on every case alike). By default a decision waits until the records before it
//!   are acknowledged; `relaxed` waits only past the queue's bound.
//!
//! Run: `cargo bench -p palisade-cli --bench facts`.

#[path = "support/in_turn.rs"]
#[expect(dead_code, reason = "its summary is the proxy benches' own")]
mod in_turn;

use palisade::{AskPolicy, CommittedFact, FactStream, Host, Lifecycle, Observation, ToolCall};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

/// A plugin directory with the scripted guest allowing every call at `pre-tool`.
fn guard(dir: &Path) {
    let folder = dir.join("guard");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(palisade_fixtures::SCRIPTED, folder.join("plugin.wasm")).unwrap();
    std::fs::write(
        folder.join("plugin.toml"),
        "name = \"guard\"\nwasm = \"plugin.wasm\"\n[[hooks]]\npoint = \"pre-tool\"\n\
         capability = \"guard\"\n[config]\npre_tool = \"allow\"\n",
    )
    .unwrap();
}

/// A fresh directory on the build tree's disk (not a tmpfs: `fsync` must reach a disk).
fn on_disk() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

/// Records per second `stream` acknowledges, `n` facts committed at once by one session.
fn appended_per_second(runtime: &tokio::runtime::Runtime, stream: FactStream, n: usize) -> f64 {
    let empty = tempfile::tempdir().unwrap();
    let plugins = Host::builder()
        .fact_stream(stream.clone())
        .build()
        .unwrap()
        .load_dir(empty.path())
        .unwrap();
    let session = plugins.session("bench-append");
    let _enter = runtime.enter();
    let started = Instant::now();
    for i in 0..n {
        session.committed(&Observation {
            interaction_id: format!("bench-append:tool-call:t{i}"),
            turn: 1,
            fact: CommittedFact::ToolCall {
                call: ToolCall::new(
                    format!("t{i}"),
                    "Bash",
                    json!({ "command": "cargo test -p palisade --lib", "description": "test" }),
                ),
            },
        });
    }
    stream.flush(Duration::from_secs(600)).unwrap();
    n as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let records: usize = std::env::var("PALISADE_FACTS_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let steps: usize = std::env::var("PALISADE_FACTS_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let redis = palisade_tests::redis::Redis::start();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let log = on_disk();
    let embedded = appended_per_second(&runtime, FactStream::embedded(log.path()), records);
    let in_redis = appended_per_second(&runtime, FactStream::redis(&redis.url()), records);
    println!("facts: appended, embedded log: {embedded:.0} records/s ({records} records)");
    println!("facts: appended, redis: {in_redis:.0} records/s ({records} records)");

    let plugins_dir = tempfile::tempdir().unwrap();
    guard(plugins_dir.path());
    let (log_durable, log_relaxed) = (on_disk(), on_disk());
    let cases: Vec<(&str, Option<FactStream>)> = vec![
        ("no stream", None),
        ("embedded", Some(FactStream::embedded(log_durable.path()))),
        (
            "embedded, relaxed",
            Some(FactStream::embedded(log_relaxed.path()).acknowledge_before_decisions(false)),
        ),
        ("redis", Some(FactStream::redis(&redis.url()))),
        (
            "redis, relaxed",
            Some(FactStream::redis(&redis.url()).acknowledge_before_decisions(false)),
        ),
    ];
    let lifecycles: Vec<Lifecycle> = cases
        .iter()
        .enumerate()
        .map(|(k, (_, stream))| {
            let mut builder = Host::builder();
            if let Some(stream) = stream {
                builder = builder.fact_stream(stream.clone());
            }
            let plugins = builder
                .build()
                .unwrap()
                .load_dir(plugins_dir.path())
                .unwrap();
            Lifecycle::new(plugins.session(format!("bench-step-{k}")))
        })
        .collect();
    let mut next = vec![0usize; cases.len()];
    let mut step = |k: usize| {
        let call = ToolCall::new(format!("t{}", next[k]), "Bash", json!({ "command": "ls" }));
        next[k] += 1;
        runtime.block_on(lifecycles[k].authorize(&call, AskPolicy::Deny));
    };
    // Warm: instances made, logs and connections opened.
    for k in 0..cases.len() {
        for _ in 0..50 {
            step(k);
        }
    }
    let times = in_turn::percentiles(cases.len(), steps, step);
    let (base_p50, base_p99) = times[0];
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    for ((name, _), (p50, p99)) in cases.iter().zip(&times) {
        println!(
            "facts: a tool step, {name}: median {:.1} µs, p99 {:.1} µs; adds {:.1} µs at the \
             median, {:.1} µs at p99 ({:.2}× the median, {:.2}× p99 without a stream; \
             {steps} steps)",
            us(*p50),
            us(*p99),
            us(p50.saturating_sub(base_p50)),
            us(p99.saturating_sub(base_p99)),
            us(*p50) / us(base_p50),
            us(*p99) / us(base_p99),
        );
    }
    for (_, stream) in &cases {
        if let Some(stream) = stream {
            stream.flush(Duration::from_secs(60)).unwrap();
        }
    }
}
