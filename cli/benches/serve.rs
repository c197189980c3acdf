//! Cost of one Claude Code hook event through `palisade serve` on loopback, as an http hook
//! pays it: POST the event, get the answer, over a kept-alive connection; the session's
//! instances are warm after the first event. Then throughput: 16 clients at once, each with
//! its own session, and (printed after it) their events per second and the latency
//! percentiles of single requests. And what an agent pays through `install --serve`: a
//! `palisade forward` process per event, spawn to exit.
//!
//! The plugin sets are the bridge bench's (`support/plugin_sets.rs`), so the two compare.
//!
//! Run: `cargo bench -p palisade-cli --bench serve`.

#[path = "support/plugin_sets.rs"]
mod plugin_sets;

#[path = "../tests/support/server.rs"]
mod server;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use plugin_sets::{EVENT, event_in_session, plugin_sets};

/// A server of `plugins`, and its endpoint.
struct Served {
    server: server::Server,
    url: String,
}

fn serve(plugins: &std::path::Path, cache: &std::path::Path) -> Served {
    let server = server::Server::start(
        plugins,
        &["--max-concurrency", "64"],
        &[("PALISADE_CACHE_DIR", cache.to_str().unwrap())],
    );
    let url = format!("{}/claude-code", server.url());
    Served { server, url }
}

impl Served {
    /// A client that sends the server's token with every request.
    fn client(&self) -> reqwest::Client {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            reqwest::header::AUTHORIZATION,
            format!("Bearer {}", self.server.token).parse().unwrap(),
        );
        reqwest::Client::builder()
            .no_proxy()
            .default_headers(headers)
            .build()
            .unwrap()
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
        let client = served.client();
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
        // What the agent pays with `install --serve`: a `palisade forward` process per event
        // (start, read the token file, POST, print the answer, exit).
        let token_file = served.server.token_file.clone();
        group.bench_function(format!("PreToolUse, a forward process, {name}"), |b| {
            b.iter(|| {
                let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_palisade"))
                    .args(["forward", &served.url, "--token-file"])
                    .arg(&token_file)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped())
                    .spawn()
                    .unwrap();
                std::io::Write::write_all(&mut child.stdin.take().unwrap(), EVENT.as_bytes())
                    .unwrap();
                let out = child.wait_with_output().unwrap();
                assert!(out.status.success(), "{out:?}");
            })
        });
        // 16 clients, each its own agent session, each with its own connection.
        let clients: Vec<(reqwest::Client, String)> = (0..16)
            .map(|i| (served.client(), event_in_session(i)))
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
        report_latency(&runtime, &served, &clients, name);
    }
    group.finish();
}

/// The 16 clients again, each sending `LATENCY_REQUESTS` events in a row: events per second
/// and the latency percentiles of single requests, which criterion's mean of a batch of 16
/// does not show. Printed, not asserted (a bench, not a test).
fn report_latency(
    runtime: &tokio::runtime::Runtime,
    served: &Served,
    clients: &[(reqwest::Client, String)],
    name: &str,
) {
    const LATENCY_REQUESTS: usize = 500;
    let started = std::time::Instant::now();
    let mut latencies: Vec<std::time::Duration> = runtime.block_on(async {
        let tasks: Vec<_> = clients
            .iter()
            .map(|(client, event)| {
                let (client, url, event) = (client.clone(), served.url.clone(), event.clone());
                tokio::spawn(async move {
                    let mut took = Vec::with_capacity(LATENCY_REQUESTS);
                    for _ in 0..LATENCY_REQUESTS {
                        let sent = std::time::Instant::now();
                        post(client.clone(), url.clone(), event.clone()).await;
                        took.push(sent.elapsed());
                    }
                    took
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        all
    });
    let elapsed = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    println!(
        "serve/16 clients x {LATENCY_REQUESTS} events, {name}: {:.0} events/s, latency p50 \
         {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        latencies.len() as f64 / elapsed.as_secs_f64(),
        at(0.50).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        at(1.0).as_secs_f64() * 1e3,
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
