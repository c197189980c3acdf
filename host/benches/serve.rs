//! Cost of one Claude Code hook event through `palisade serve` on loopback, as an http hook
//! pays it: POST the event, get the answer, over a kept-alive connection; the session's
//! instances are warm after the first event. Then throughput: 16 clients at once, each with
//! its own session.
//!
//! The plugin sets are the bridge bench's (`support/plugin_sets.rs`), so the two compare.
//!
//! Run: `cargo bench -p palisade --bench serve`.

#[path = "support/plugin_sets.rs"]
mod plugin_sets;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use plugin_sets::{EVENT, plugin_sets};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

struct Served {
    child: Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(plugins: &std::path::Path, cache: &std::path::Path) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .arg("serve")
        .arg("--plugins")
        .arg(plugins)
        .args(["--listen", "127.0.0.1:0", "--max-concurrency", "64"])
        .env("PALISADE_CACHE_DIR", cache)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let address = loop {
        let line = lines
            .next()
            .expect("palisade serve says where it listens")
            .unwrap();
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_string();
        }
    };
    // Keep draining its stderr (evictions, reloads) so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    Served {
        child,
        url: format!("{address}/claude-code"),
    }
}

async fn post(client: reqwest::Client, url: String, body: String) -> String {
    let response = client
        .post(&url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{response:?}");
    response.text().await.unwrap()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let sets = plugin_sets(dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("serve");
    for (name, plugins) in &sets {
        let served = serve(plugins, &cache);
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        // The plugins really run: a deny comes back.
        let denied = runtime.block_on(post(
            client.clone(),
            served.url.clone(),
            EVENT.replace("cargo test --workspace", "rm -rf /"),
        ));
        assert!(denied.contains("\"deny\""), "{denied}");
        group.throughput(Throughput::Elements(1));
        group.bench_function(format!("PreToolUse, one client, {name}"), |b| {
            b.to_async(&runtime)
                .iter(|| post(client.clone(), served.url.clone(), EVENT.to_string()))
        });
        // 16 clients, each its own agent session, each with its own connection.
        let clients: Vec<(reqwest::Client, String)> = (0..16)
            .map(|i| {
                (
                    reqwest::Client::builder().no_proxy().build().unwrap(),
                    EVENT.replace("\"bench\"", &format!("\"bench-{i}\"")),
                )
            })
            .collect();
        group.throughput(Throughput::Elements(16));
        group.bench_function(format!("PreToolUse, 16 concurrent clients, {name}"), |b| {
            b.to_async(&runtime).iter(|| async {
                let tasks: Vec<_> = clients
                    .iter()
                    .map(|(client, event)| {
                        tokio::spawn(post(client.clone(), served.url.clone(), event.clone()))
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

criterion_group!(benches, bench);
criterion_main!(benches);
