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
//! - **A bridged event**: what a process-per-event bridge pays for its stream — a new
//!   stream on the embedded log (its log opened by the writer), two records committed, the
//!   flush it waits for before it answers — on a log of 1,000 records and on one of
//!   `PALISADE_FACTS_LOG` (default 100,000), `PALISADE_FACTS_EVENTS` (default 200) events of
//!   each, taken in turn.
//!
//! Run: `cargo bench -p palisade-cli --bench facts`; `-- append`, `-- step` or `-- bridged`
//! runs one part.

#[path = "support/in_turn.rs"]
#[expect(dead_code, reason = "its summary is the proxy benches' own")]
mod in_turn;

use palisade::facts::FactStream;
use palisade::{AskPolicy, CommittedFact, Host, Lifecycle, Observation, ToolCall};
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

/// One bridged event on the log in `log`: a new stream (as a new process opens it), the
/// event's two records committed in session `session`, and the flush; times the last two.
fn bridged_event(runtime: &tokio::runtime::Runtime, log: &Path, session: &str) -> Duration {
    let stream = FactStream::embedded(log);
    let empty = tempfile::tempdir().unwrap();
    let plugins = Host::builder()
        .fact_stream(stream.clone())
        .build()
        .unwrap()
        .load_dir(empty.path())
        .unwrap();
    let session = plugins.session(session);
    let _enter = runtime.enter();
    let started = Instant::now();
    for call in ["t1", "t2"] {
        session.committed(&Observation {
            interaction_id: format!("{}:tool-call:{call}", session.id()),
            turn: 1,
            fact: CommittedFact::ToolCall {
                call: ToolCall::new(call, "Bash", json!({ "command": "ls" })),
            },
        });
    }
    stream.flush(Duration::from_secs(600)).unwrap();
    started.elapsed()
}

/// The median and p99 of a bridged event on a log of 1,000 records and on one of `big`.
fn bridged(runtime: &tokio::runtime::Runtime, big: usize, events: usize) {
    let sizes = [1_000, big];
    let logs: Vec<tempfile::TempDir> = sizes.iter().map(|_| on_disk()).collect();
    for (log, &n) in logs.iter().zip(&sizes) {
        appended_per_second(runtime, FactStream::embedded(log.path()), n);
    }
    let mut times = vec![Vec::with_capacity(events); sizes.len()];
    for round in 0..events {
        for k in 0..sizes.len() {
            let case = (round + k) % sizes.len();
            let session = format!("bench-bridged-{round}");
            times[case].push(bridged_event(runtime, logs[case].path(), &session));
        }
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    for (n, mut times) in sizes.iter().zip(times) {
        times.sort();
        println!(
            "facts: a bridged event on a log of {n} records: median {:.1} µs, p99 {:.1} µs \
             ({events} events)",
            us(times[events / 2]),
            us(times[events * 99 / 100]),
        );
    }
}

/// The number in the environment variable `name`, else `default`.
fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Records per second each backend acknowledges, `records` facts committed at once.
fn append(runtime: &tokio::runtime::Runtime, redis: &palisade_tests::redis::Redis, records: usize) {
    let log = on_disk();
    let embedded = appended_per_second(runtime, FactStream::embedded(log.path()), records);
    let in_redis = appended_per_second(runtime, FactStream::redis(&redis.url()), records);
    println!("facts: appended, embedded log: {embedded:.0} records/s ({records} records)");
    println!("facts: appended, redis: {in_redis:.0} records/s ({records} records)");
}

/// What each backend adds to a tool step's decision, `steps` steps of each case.
fn step(runtime: &tokio::runtime::Runtime, redis: &palisade_tests::redis::Redis, steps: usize) {
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

fn main() {
    // `cargo bench` passes `--bench`; any other argument names the parts to run.
    let parts: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let runs = |part: &str| parts.is_empty() || parts.iter().any(|p| p == part);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if runs("append") || runs("step") {
        let redis = palisade_tests::redis::Redis::start();
        if runs("append") {
            append(&runtime, &redis, knob("PALISADE_FACTS_RECORDS", 100_000));
        }
        if runs("step") {
            step(&runtime, &redis, knob("PALISADE_FACTS_STEPS", 2_000));
        }
    }
    if runs("bridged") {
        let big = knob("PALISADE_FACTS_LOG", 100_000);
        bridged(&runtime, big, knob("PALISADE_FACTS_EVENTS", 200));
    }
}
