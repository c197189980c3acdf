//! Cost of host-kept plugin state (`[state]`), per backend: a guard's warm `pre-tool` call
//! that makes one atomic increment in its session scope, against the same guard with no
//! state call (the difference is the state call: the host call and the store's transaction);
//! and one hook event through `palisade serve` with `bash-budget` (which counts in state),
//! with the embedded store and with Redis.
//!
//! Redis is a real `redis-server` on a Unix socket (installed by `scripts/tools.sh`).
//!
//! Run: `cargo bench -p palisade-cli --bench state`.

#[path = "../tests/support/server.rs"]
mod server;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use palisade::state::StateStore;
use palisade::{Host, PreToolDecision, ToolCall};
use serde_json::json;
use std::path::Path;

/// A plugin directory with the scripted guest doing `behaviour` at `pre-tool`.
fn scripted(dir: &Path, behaviour: &str) {
    let folder = dir.join("guard");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(palisade_fixtures::SCRIPTED, folder.join("plugin.wasm")).unwrap();
    std::fs::write(
        folder.join("plugin.toml"),
        format!(
            "name = \"guard\"\nwasm = \"plugin.wasm\"\n[state]\nscopes = [\"session\"]\n\
             [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
             [config]\npre_tool = \"{behaviour}\"\nlimit = 9000000000000000000\n"
        ),
    )
    .unwrap();
}

fn in_process(c: &mut Criterion, redis: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let embedded = dir.path().join("state");
    let cases: Vec<(&str, &str, StateStore)> = vec![
        ("no state call", "allow", StateStore::memory()),
        ("memory", "state-count", StateStore::memory()),
        ("embedded", "state-count", StateStore::embedded(&embedded)),
        ("redis", "state-count", StateStore::redis(redis)),
    ];
    let mut group = c.benchmark_group("state/pre-tool warm, one increment");
    for (name, behaviour, store) in cases {
        let plugins_dir = tempfile::tempdir().unwrap();
        scripted(plugins_dir.path(), behaviour);
        let plugins = Host::builder()
            .state(store)
            .build()
            .unwrap()
            .load_dir(plugins_dir.path())
            .unwrap();
        let session = plugins.session("bench");
        let call = ToolCall::new("t", "Bash", json!({ "command": "ls" }));
        rt.block_on(async {
            assert_eq!(session.pre_tool(&call).await, PreToolDecision::Allow);
        });
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| session.pre_tool(&call));
        });
    }
    group.finish();
}

fn through_serve(c: &mut Criterion, redis: &str) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    let budget = palisade_examples::get("bash-budget").unwrap();
    palisade_examples::install_one(budget, &plugins).unwrap();
    let manifest = plugins.join("bash-budget/plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("max_calls = 50", "max_calls = 9000000000000000000"),
    )
    .unwrap();
    let embedded = dir.path().join("state");
    let event = json!({
        "session_id": "bench", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
        "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": { "command": "ls" }, "tool_use_id": "t1"
    })
    .to_string();
    let mut group = c.benchmark_group("state/serve PreToolUse, bash-budget");
    for (name, state) in [("embedded", embedded.to_str().unwrap()), ("redis", redis)] {
        let server = server::Server::start(&plugins, &["--state", state], &[]);
        let url = format!("{}/claude-code", server.url());
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let post = || {
            let (client, url, body, token) = (
                client.clone(),
                url.clone(),
                event.clone(),
                server.token.clone(),
            );
            async move {
                let response = client
                    .post(&url)
                    .bearer_auth(token)
                    .header("content-type", "application/json")
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                assert!(response.status().is_success(), "{response:?}");
                response.text().await.unwrap()
            }
        };
        let first = runtime.block_on(post());
        assert!(!first.contains("deny"), "{first}");
        group.throughput(Throughput::Elements(1));
        group.bench_function(format!("one client, {name}"), |b| {
            b.to_async(&runtime).iter(post)
        });
        // 16 clients at once, each its own agent session and connection: every event an
        // increment in the store.
        let clients: Vec<(reqwest::Client, String)> = (0..16)
            .map(|i| {
                let client = reqwest::Client::builder().no_proxy().build().unwrap();
                (
                    client,
                    event.replace("\"bench\"", &format!("\"bench-{i}\"")),
                )
            })
            .collect();
        group.throughput(Throughput::Elements(16));
        group.bench_function(format!("16 concurrent clients, {name}"), |b| {
            b.to_async(&runtime).iter(|| async {
                let tasks: Vec<_> = clients
                    .iter()
                    .map(|(client, body)| {
                        let (client, url, body, token) = (
                            client.clone(),
                            url.clone(),
                            body.clone(),
                            server.token.clone(),
                        );
                        tokio::spawn(async move {
                            let response = client
                                .post(&url)
                                .bearer_auth(token)
                                .header("content-type", "application/json")
                                .body(body)
                                .send()
                                .await
                                .unwrap();
                            assert!(response.status().is_success(), "{response:?}");
                        })
                    })
                    .collect();
                for task in tasks {
                    task.await.unwrap();
                }
            })
        });
    }
    group.finish();
}

fn bench(c: &mut Criterion) {
    let redis = palisade_tests::redis::Redis::start();
    in_process(c, &redis.url());
    through_serve(c, &redis.url());
}

criterion_group!(benches, bench);
criterion_main!(benches);
