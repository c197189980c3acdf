//! Cost of one Claude Code hook event through `palisade serve` on loopback, as an http hook
//! pays it: POST the event, get the answer, over a kept-alive connection; the session's
//! instances are warm after the first event. Then throughput: 16 clients at once, each with
//! its own session; and (printed after it) the server under load from a client as light as
//! `wrk`: its events per second and the latency percentiles of single requests. And what an
//! agent pays through `install --serve`: a `palisade forward` process per event, spawn to
//! exit.
//!
//! The plugin sets are the bridge bench's (`support/plugin_sets.rs`), so the two compare; the
//! load is measured with no plugin too, the server's own floor, and with an audit log.
//!
//! Run: `cargo bench -p palisade-cli --bench serve`; with
//! `PALISADE_BENCH_DIST_BIN=target/dist/palisade` (built with `cargo build --profile dist -p
//! palisade-cli --bin palisade`), the load is measured on the installed binary's server too,
//! and with `PALISADE_BENCH_STATIC_BIN` on the static one's (`scripts/install-static.sh`).

#[path = "support/plugin_sets.rs"]
mod plugin_sets;

#[path = "../tests/support/server.rs"]
mod server;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use plugin_sets::{EVENT, binaries, event_in_session, plugin_sets};

/// A server of `plugins`, and its endpoint.
struct Served {
    server: server::Server,
    url: String,
}

/// `binary`'s `palisade serve` of `plugins`.
fn serve(binary: &std::path::Path, plugins: &std::path::Path, cache: &std::path::Path) -> Served {
    serve_with(binary, plugins, cache, &[])
}

/// [`serve`], with the arguments `more` too.
fn serve_with(
    binary: &std::path::Path,
    plugins: &std::path::Path,
    cache: &std::path::Path,
    more: &[&str],
) -> Served {
    let args = [&["--max-concurrency", "64"], more].concat();
    let server = server::Server::start_binary(
        binary,
        plugins,
        &args,
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
    let binaries = binaries();
    // The floor under every set: the server with no plugin (HTTP, the event's JSON, the
    // session, the answer), loaded as below.
    let none = dir.path().join("no-plugins");
    std::fs::create_dir_all(&none).unwrap();
    for (suffix, binary) in &binaries {
        report_load(
            &serve(binary, &none, &cache),
            &format!("no plugins{suffix}"),
        );
    }
    // What an audit log adds: every event's lines written too (the first set's).
    let (name, plugins) = &sets[0];
    for (n, (suffix, binary)) in binaries.iter().enumerate() {
        let log = dir.path().join(format!("audit-{n}.jsonl"));
        let args = ["--audit-log", log.to_str().unwrap()];
        report_load(
            &serve_with(binary, plugins, &cache, &args),
            &format!("{name} with --audit-log{suffix}"),
        );
    }
    for (name, plugins) in &sets {
        let served = serve(&binaries[0].1, plugins, &cache);
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
        report_load(&served, name);
        // The installed binary's server too, when it is named.
        for (suffix, binary) in &binaries[1..] {
            report_load(&serve(binary, plugins, &cache), &format!("{name}{suffix}"));
        }
    }
    group.finish();
}

/// How long the load of [`report_load`] runs, after its warm-up.
const LOAD_FOR: std::time::Duration = std::time::Duration::from_secs(5);
/// Connections of [`report_load`], each its own agent session, and the threads they share.
const LOAD_CONNECTIONS: usize = 16;
const LOAD_THREADS: usize = 2;

/// The server's own throughput and latency under load: `LOAD_CONNECTIONS` kept-alive
/// connections, each its own agent session, each sending the event again as soon as the
/// answer is in, for [`LOAD_FOR`]. The client is as light as `wrk -t2 -c16` (two threads, a
/// request's bytes written once and sent as they are, an answer read as far as its
/// `Content-Length`), because it runs on the server's two cores: the reqwest clients above
/// cost more than the server they measure. Printed, not asserted (a bench, not a test).
fn report_load(served: &Served, name: &str) {
    let requests: Vec<Vec<u8>> = (0..LOAD_CONNECTIONS)
        .map(|i| {
            let body = event_in_session(i);
            format!(
                "POST /claude-code HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {}\r\n\
                 content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                served.server.address,
                served.server.token,
                body.len()
            )
            .into_bytes()
        })
        .collect();
    let address = served.server.address;
    // A second of warm-up (every session's instances made), then the measured run.
    load(address, &requests, std::time::Duration::from_secs(1));
    let started = std::time::Instant::now();
    let mut latencies = load(address, &requests, LOAD_FOR);
    let elapsed = started.elapsed();
    latencies.sort();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
    println!(
        "serve/{LOAD_CONNECTIONS} connections for {} s (a wrk-like client), {name}: {:.0} \
         events/s, latency p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        LOAD_FOR.as_secs(),
        latencies.len() as f64 / elapsed.as_secs_f64(),
        at(0.50).as_secs_f64() * 1e3,
        at(0.90).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        at(1.0).as_secs_f64() * 1e3,
    );
}

/// Sends each of `requests` on a connection of its own, again and again for `run_for`, the
/// connections shared among [`LOAD_THREADS`] threads. Returns every request's latency.
fn load(
    address: std::net::SocketAddr,
    requests: &[Vec<u8>],
    run_for: std::time::Duration,
) -> Vec<std::time::Duration> {
    let until = std::time::Instant::now() + run_for;
    let threads: Vec<_> = (0..LOAD_THREADS)
        .map(|t| {
            let mine: Vec<Vec<u8>> = requests
                .iter()
                .skip(t)
                .step_by(LOAD_THREADS)
                .cloned()
                .collect();
            std::thread::spawn(move || load_thread(address, mine, until))
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|thread| thread.join().unwrap())
        .collect()
}

/// One load thread: a connection per request in `requests`, each sending its request again
/// as soon as the answer is in, until `until`. Returns every request's latency.
fn load_thread(
    address: std::net::SocketAddr,
    requests: Vec<Vec<u8>>,
    until: std::time::Instant,
) -> Vec<std::time::Duration> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let tasks: Vec<_> = requests
            .into_iter()
            .map(|request| tokio::spawn(connection(address, request, until)))
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.extend(task.await.unwrap());
        }
        all
    })
}

/// One kept-alive connection sending `request` again and again until `until`.
async fn connection(
    address: std::net::SocketAddr,
    request: Vec<u8>,
    until: std::time::Instant,
) -> Vec<std::time::Duration> {
    use tokio::io::AsyncWriteExt;
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.set_nodelay(true).unwrap();
    let mut buffer = Vec::with_capacity(4096);
    let mut took = Vec::new();
    while std::time::Instant::now() < until {
        let sent = std::time::Instant::now();
        stream.write_all(&request).await.unwrap();
        buffer.clear();
        // The head, then the body to its length.
        let whole = loop {
            if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4 + content_length(&buffer[..at]);
            }
            read_more(&mut stream, &mut buffer).await;
        };
        while buffer.len() < whole {
            read_more(&mut stream, &mut buffer).await;
        }
        took.push(sent.elapsed());
    }
    took
}

/// The `Content-Length` of a `200` answer's `head`.
fn content_length(head: &[u8]) -> usize {
    let head = std::str::from_utf8(head).unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    head.lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().unwrap())
        })
        .expect("an answer with a Content-Length")
}

/// Appends what the server sent next to `buffer`.
async fn read_more(stream: &mut tokio::net::TcpStream, buffer: &mut Vec<u8>) {
    use tokio::io::AsyncReadExt;
    let mut chunk = [0u8; 4096];
    let n = stream.read(&mut chunk).await.unwrap();
    assert!(n > 0, "the server closed the connection");
    buffer.extend_from_slice(&chunk[..n]);
}

criterion_group!(benches, bench);
criterion_main!(benches);
