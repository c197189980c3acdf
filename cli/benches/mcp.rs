//! Cost of one MCP `tools/call` through `palisade mcp`, against the same call made to the
//! server directly: the filesystem MCP server (`@modelcontextprotocol/server-filesystem`,
//! installed by `scripts/tools.sh`) reading a small file, both over stdio, both called by the
//! official Rust MCP client (rmcp). The proxy runs the five bundled examples, of which
//! shell-guard (`mcp__.+`), secret-guard (every tool) and the `timeout` wrapper (every tool) run
//! on each call, and audit-log observes the result.
//!
//! A third case, the proxy with no plugins, splits the proxy's own cost (two more pipe hops,
//! the line framing, the pipeline's bookkeeping) from the plugins'.
//!
//! Criterion's estimate per call, then the median and p99 of 2,000 calls each way, printed:
//! those calls taken in turn, one of each case after the other, so that the VM's drift falls on
//! every case alike.
//!
//! Run: `cargo bench -p palisade-cli --bench mcp`. With `PALISADE_BENCH_BASELINE_BIN=PATH`
//! (another build of `palisade`, e.g. the commit before a change), the proxy's cases run with
//! that binary too, each right before this build's, and the ratios are printed.

#[path = "support/in_turn.rs"]
mod in_turn;

use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::{ServiceExt, transport::TokioChildProcess};
use std::path::{Path, PathBuf};

fn filesystem_server() -> PathBuf {
    let dir = std::env::var_os("PALISADE_MCP_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/mcp"));
    let server = dir.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        server.exists(),
        "the filesystem MCP server is not installed at {}: run `bash scripts/tools.sh`",
        server.display()
    );
    server
}

async fn connect(command: tokio::process::Command) -> RunningService<RoleClient, ()> {
    ().serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap()
}

async fn read(client: &RunningService<RoleClient, ()>, path: &str) {
    let mut arguments = serde_json::Map::new();
    arguments.insert("path".into(), path.into());
    let result = client
        .call_tool(CallToolRequestParams::new("read_text_file").with_arguments(arguments))
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
}

/// Calls of each case for the percentiles.
const CALLS: usize = 2_000;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let root = root.canonicalize().unwrap();
    let file = root.join("notes.txt");
    std::fs::write(&file, "a line of notes\n".repeat(16)).unwrap();
    let file = file.display().to_string();
    let plugins = dir.path().join("examples");
    palisade_examples::install(&plugins).unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();

    let mut direct = tokio::process::Command::new("node");
    direct.arg(filesystem_server()).arg(&root);
    let empty = dir.path().join("none");
    std::fs::create_dir_all(&empty).unwrap();
    let baseline = std::env::var_os("PALISADE_BENCH_BASELINE_BIN").map(PathBuf::from);
    let proxy = |binary: &Path, plugins: &Path| {
        let mut proxied = tokio::process::Command::new(binary);
        proxied
            .args(["mcp", "--name", "fs", "--plugins"])
            .arg(plugins)
            .arg("--")
            .arg("node")
            .arg(filesystem_server())
            .arg(&root)
            .env("PALISADE_CACHE_DIR", dir.path().join("cache"))
            .env("PALISADE_STATE_DIR", dir.path().join("state"));
        proxied
    };

    let mut group = c.benchmark_group("mcp");
    let this = Path::new(env!("CARGO_BIN_EXE_palisade"));
    let mut cases = vec![("direct".to_string(), direct)];
    for (what, plugins) in [("no plugins", &empty), ("the five examples", &plugins)] {
        if let Some(baseline) = &baseline {
            let name = format!("through palisade mcp (baseline), {what}");
            cases.push((name, proxy(baseline, plugins)));
        }
        cases.push((
            format!("through palisade mcp, {what}"),
            proxy(this, plugins),
        ));
    }
    let clients: Vec<_> = cases
        .into_iter()
        .map(|(name, command)| {
            let client = runtime.block_on(connect(command));
            runtime.block_on(read(&client, &file));
            (name, client)
        })
        .collect();
    for (name, client) in &clients {
        group.bench_function(format!("tools/call read_text_file, {name}"), |b| {
            b.to_async(&runtime).iter(|| read(client, &file))
        });
    }
    let times = in_turn::percentiles(clients.len(), CALLS, |case| {
        runtime.block_on(read(&clients[case].1, &file))
    });
    let mut summary = Vec::new();
    for ((name, client), times) in clients.into_iter().zip(times) {
        summary.push((name, times));
        runtime.block_on(client.cancel()).unwrap();
    }
    group.finish();
    in_turn::print("mcp", "a tools/call", CALLS, &summary, baseline.is_some());
}

criterion_group!(benches, bench);
criterion_main!(benches);
