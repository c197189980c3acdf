//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, its server
//! scenarios), directly and through `palisade mcp` over streamable HTTP (`--listen`) and over
//! stdio, with the example plugins loaded (and at 2026-07-28 with an empty plugin folder too):
//! every scenario that passes without the proxy passes through it. Against two servers: the official reference
//! server `@modelcontextprotocol/server-everything` (from npm; it implements some of the
//! scenarios), and `conformance-server.mjs`, a server of our own on the official TypeScript
//! library that implements every one (the suite's own reference server is not published). What
//! the proxy adds beyond the suite (a call's closed stream resumed, a log and a question on a
//! call's stream) is tested against `asking-server.mjs`, another server of ours.
//!
//! The suite speaks only streamable HTTP, so on stdio it drives the chain `gateway.mjs` (HTTP
//! to a stdio child per session) → `palisade mcp` → `bridge.mjs` (stdio to the server's
//! HTTP), and its baseline is the same chain without the proxy. The suite cannot be given
//! headers: `bearer.mjs`, preloaded into its node, adds the proxy's bearer token to the
//! requests it sends to the proxy.
//!
//! A scenario that fails in a run is run once more alone before it counts as failing: the
//! reference server sends its sampling and elicitation requests on the session's own event
//! stream, which the suite's client opens concurrently with its first call, and drops them
//! when the call reaches it first (see docs/bridges.md).

use palisade_tests::PluginDir;
use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Node 22 and the directory the suite is installed in (with the scripts of
/// `tests/conformance/` copied beside its `node_modules`).
fn tools() -> (PathBuf, PathBuf) {
    let dir = std::env::var_os("PALISADE_CONFORMANCE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/conformance")
        });
    let node = std::env::var_os("PALISADE_NODE22")
        .map(PathBuf::from)
        .unwrap_or_else(|| dir.join("node_modules/node/bin/node"));
    assert!(
        suite_in(&dir).exists() && node.exists(),
        "the MCP conformance suite or Node 22 is not installed in {}: run `bash \
         scripts/tools.sh` (scripts/test.sh does), or set PALISADE_CONFORMANCE and \
         PALISADE_NODE22",
        dir.display()
    );
    // Beside the suite's `node_modules`, where node finds the MCP library; once, before any
    // test runs them.
    static COPIED: std::sync::Once = std::sync::Once::new();
    COPIED.call_once(|| {
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
        for script in [
            "gateway.mjs",
            "bridge.mjs",
            "bearer.mjs",
            "asking-server.mjs",
            "conformance-server.mjs",
        ] {
            std::fs::copy(scripts.join(script), dir.join(script)).expect("copy the scripts");
        }
    });
    (node, dir)
}

/// The suite's release that runs MCP 2026-07-28 (`--spec-version 2026-07-28`), with Node 22
/// and the official TypeScript library's v2 beside it, and `modern-server.mjs` copied there.
fn tools_2026() -> (PathBuf, PathBuf) {
    let dir = std::env::var_os("PALISADE_CONFORMANCE_2026")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/conformance-2026")
        });
    let node = dir.join("node_modules/node/bin/node");
    assert!(
        suite_in(&dir).exists() && node.exists(),
        "the MCP conformance suite for 2026-07-28 or Node 22 is not installed in {}: run \
         `bash scripts/tools.sh` (scripts/test.sh does), or set PALISADE_CONFORMANCE_2026",
        dir.display()
    );
    static COPIED: std::sync::Once = std::sync::Once::new();
    COPIED.call_once(|| {
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance");
        for script in ["bearer.mjs", "modern-server.mjs", "modern-bridge.mjs"] {
            std::fs::copy(scripts.join(script), dir.join(script)).expect("copy the scripts");
        }
    });
    (node, dir)
}

/// Held by each test while it runs: each starts servers and proxies of its own, and the
/// suite's timing-sensitive scenarios run without another test's load.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn suite_in(dir: &Path) -> PathBuf {
    dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("conformance-cache")
}

/// A process killed when the test ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `command`, and waits until something listens on `port`.
fn listening(mut command: Command, port: u16) -> Running {
    let running = Running(command.stdout(Stdio::null()).spawn().expect("it starts"));
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "nothing listened on {port}: {command:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    running
}

/// `palisade mcp` with `plugins`, and `args` after them.
fn palisade_mcp(plugins: &Path, state: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_palisade"));
    command
        .args(["mcp", "--plugins"])
        .arg(plugins)
        .args(args)
        .env("PALISADE_CACHE_DIR", cache_dir())
        .env("PALISADE_STATE_DIR", state);
    command
}

/// The scenarios that pass (no check failed) when the suite runs against `url`, sending
/// `token` when there is one. One the whole run failed is run again alone, where `wanted`
/// holds it (every one, without `wanted`): a pass alone counts.
fn passing(
    label: &str,
    node: &Path,
    dir: &Path,
    (url, token): (&str, Option<&str>),
    wanted: Option<&BTreeSet<String>>,
) -> BTreeSet<String> {
    let out = tempfile::tempdir().unwrap();
    let (mut passed, failed) = run_suite(node, dir, url, token, out.path(), None);
    // Only a scenario that counts is run again: one the run compared against passed. One
    // the server does not implement fails alone too, and a run of it costs seconds.
    for scenario in failed
        .into_iter()
        .filter(|scenario| wanted.is_none_or(|wanted| wanted.contains(scenario)))
    {
        let (again, _) = run_suite(node, dir, url, token, out.path(), Some(&scenario));
        if again.contains(&scenario) {
            eprintln!("{label}: {scenario} failed in the whole run and passed alone");
            passed.insert(scenario);
        }
    }
    passed
}

/// One run of the suite (every scenario, or `scenario`): the scenarios passed and failed.
fn run_suite(
    node: &Path,
    dir: &Path,
    url: &str,
    token: Option<&str>,
    out: &Path,
    scenario: Option<&str>,
) -> (BTreeSet<String>, BTreeSet<String>) {
    let results = tempfile::tempdir_in(out).unwrap();
    let mut command = Command::new(node);
    if let Some(token) = token {
        let origin = url.trim_end_matches("/mcp");
        command
            .arg("--import")
            .arg(dir.join("bearer.mjs"))
            .env("PALISADE_CONFORMANCE_ORIGIN", origin)
            .env("PALISADE_CONFORMANCE_TOKEN", token);
    }
    command
        .arg(suite_in(dir))
        .args(["server", "--url", url, "--output-dir"])
        .arg(results.path());
    // The suite of MCP 2026-07-28 runs that revision's wire (stateless, no `initialize`).
    if dir == tools_2026().1 {
        command.args(["--spec-version", "2026-07-28"]);
    }
    match scenario {
        Some(scenario) => command.args(["--scenario", scenario]),
        None => command.args(["--suite", "all"]),
    };
    // The tasks extension's scenarios, which no suite holds, run when named.
    if dir == tools_2026().1 && scenario.is_some_and(|s| s.starts_with("tasks-")) {
        command.arg("--force");
    }
    let output = command
        .stdin(Stdio::null())
        .output()
        .expect("the suite runs");
    let (mut passed, mut failed) = (BTreeSet::new(), BTreeSet::new());
    for entry in std::fs::read_dir(results.path()).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        // `server-SCENARIO-2026-01-02T03-04-05-678Z`.
        let Some(scenario) = name
            .strip_prefix("server-")
            .and_then(|rest| rest.get(..rest.len().checked_sub(25)?))
        else {
            continue;
        };
        let checks = std::fs::read_to_string(entry.path().join("checks.json")).unwrap_or_default();
        let checks: serde_json::Value = serde_json::from_str(&checks).unwrap_or_default();
        let ok = checks.as_array().is_some_and(|checks| {
            !checks.is_empty() && checks.iter().all(|check| check["status"] != "FAILURE")
        });
        if ok { &mut passed } else { &mut failed }.insert(scenario.to_string());
    }
    assert!(
        !passed.is_empty() || !failed.is_empty(),
        "the suite left no results for {url}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (passed, failed)
}

/// What passed without the proxy and not through it, or nothing.
fn lost(label: &str, without: &BTreeSet<String>, through: &BTreeSet<String>) -> Option<String> {
    let lost: Vec<_> = without.difference(through).collect();
    (!lost.is_empty()).then(|| {
        format!(
            "{label}: {lost:?} pass without the proxy but not through it\n  without ({}): \
             {without:?}\n  through ({}): {through:?}",
            without.len(),
            through.len()
        )
    })
}

/// The reference server on streamable HTTP, on a port of its own: it and its endpoint.
fn reference_server(node: &Path, dir: &Path) -> (Running, String) {
    let port = free_port();
    let mut command = Command::new(node);
    command
        .arg(dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stderr(Stdio::null());
    (
        listening(command, port),
        format!("http://localhost:{port}/mcp"),
    )
}

/// A server of ours (`script`, beside the suite): it and its endpoint.
fn our_server(node: &Path, dir: &Path, script: &str) -> (Running, String) {
    use std::io::BufRead;
    let mut server = Command::new(node)
        .arg(dir.join(script))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let server = Running(server);
    let port: serde_json::Value = serde_json::from_str(&line).expect("the server says its port");
    (server, format!("http://127.0.0.1:{}/mcp", port["port"]))
}

/// `palisade mcp --listen` in front of `upstream`: it, its endpoint and its token.
fn listen(plugins: &Path, state: &Path, upstream: &str) -> (Running, String, String) {
    let port = free_port();
    let token_file = state.join("token");
    let address = format!("127.0.0.1:{port}");
    let mut command = palisade_mcp(plugins, state, &["--name", "everything"]);
    command
        .args(["--listen", &address, "--upstream", upstream, "--token-file"])
        .arg(&token_file)
        .stderr(Stdio::null());
    let proxy = listening(command, port);
    let token = std::fs::read_to_string(&token_file).unwrap();
    (
        proxy,
        format!("http://localhost:{port}/mcp"),
        token.trim().to_string(),
    )
}

/// The MCP session an `initialize` answer opened (its body read).
async fn session_of(answer: reqwest::Response) -> String {
    let session = answer.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let _ = answer.text().await.unwrap();
    session
}

#[test]
fn the_conformance_suite_passes_through_palisade_mcp_as_it_does_directly() {
    let _one = ONE_AT_A_TIME.blocking_lock();
    let (node, dir) = tools();
    let (_server, upstream) = reference_server(&node, &dir);
    // The reference server implements some of the suite's scenarios, not all (11 at
    // server-everything 2026.8.31 and the suite 0.1.16).
    through_the_proxy_as_directly(&node, &dir, &upstream, 10, Runs::WithStdioBaseline);
}

/// Every one of the suite's 32 server scenarios, against a server that implements them all.
#[test]
fn every_conformance_scenario_passes_through_palisade_mcp() {
    let _one = ONE_AT_A_TIME.blocking_lock();
    let (node, dir) = tools();
    let (_server, upstream) = our_server(&node, &dir, "conformance-server.mjs");
    through_the_proxy_as_directly(&node, &dir, &upstream, 32, Runs::AgainstDirect);
}

/// MCP 2026-07-28, the stateless revision: every scenario of the suite at that revision
/// (`--suite all --spec-version 2026-07-28`: discovery, per-request `_meta`, the headers that
/// mirror the body, multi-round-trip requests, subscriptions, caching) against
/// `modern-server.mjs`, a server of ours on the official TypeScript library's v2 that
/// implements them all, directly and through `palisade mcp --listen` with no plugins and with
/// the example plugins: every one that passes directly passes through the proxy. (The tasks
/// extension's scenarios are in no suite: see the next test.)
#[test]
fn the_2026_07_28_conformance_suite_passes_through_palisade_mcp_as_it_does_directly() {
    let _one = ONE_AT_A_TIME.blocking_lock();
    let (node, dir) = tools_2026();
    let (_server, upstream) = our_server(&node, &dir, "modern-server.mjs");
    let direct = passing("direct", &node, &dir, (&upstream, None), None);
    assert!(direct.len() >= 40, "only {direct:?} pass directly");
    let empty = PluginDir::new();
    let examples = PluginDir::new();
    palisade_examples::install(examples.path()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (set, plugins) in [("no plugins", &empty), ("the examples", &examples)] {
        let label = &format!("2026-07-28, --listen, {set}");
        let (_proxy, url, token) = listen(plugins.path(), state.path(), &upstream);
        let through = passing(label, &node, &dir, (&url, Some(&token)), Some(&direct));
        eprintln!("{label}: {} of {} pass", through.len(), direct.len());
        failures.extend(lost(label, &direct, &through));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The suite's ten scenarios of MCP's tasks extension (`io.modelcontextprotocol/tasks`), which
/// it runs only when named, against `modern-server.mjs`, which serves the extension: all pass
/// through `palisade mcp --listen` with the example plugins, which judges every task's
/// questions, answers and end, as they do directly.
#[test]
fn the_tasks_scenarios_pass_through_palisade_mcp_as_they_do_directly() {
    const TASKS: [&str; 10] = [
        "tasks-lifecycle",
        "tasks-capability-negotiation",
        "tasks-wire-fields",
        "tasks-request-state-removal",
        "tasks-mrtr-input",
        "tasks-request-headers",
        "tasks-dispatch-and-envelope",
        "tasks-status-notifications",
        "tasks-required-task-error",
        "tasks-mrtr-composition",
    ];
    let _one = ONE_AT_A_TIME.blocking_lock();
    let (node, dir) = tools_2026();
    let (_server, upstream) = our_server(&node, &dir, "modern-server.mjs");
    let out = tempfile::tempdir().unwrap();
    let passing = |url: &str, token: Option<&str>, scenarios: &[&str]| -> BTreeSet<String> {
        scenarios
            .iter()
            .flat_map(|scenario| run_suite(&node, &dir, url, token, out.path(), Some(scenario)).0)
            .collect()
    };
    let examples = PluginDir::new();
    palisade_examples::install(examples.path()).unwrap();
    let state = tempfile::tempdir().unwrap();
    let (_proxy, url, token) = listen(examples.path(), state.path(), &upstream);
    let through = passing(&url, Some(&token), &TASKS);
    // All pass directly (checked when the server was written): a run of them costs seconds,
    // so only those that did not pass through are run directly, to tell the proxy's loss
    // from the server's.
    let missed: Vec<&str> = TASKS
        .into_iter()
        .filter(|s| !through.contains(*s))
        .collect();
    if !missed.is_empty() {
        let direct = passing(&upstream, None, &missed);
        panic!(
            "tasks, --listen, the examples: {missed:?} did not pass through the proxy; of \
             them, {direct:?} pass directly (the others fail directly too)"
        );
    }
}

/// Which runs through the proxy [`through_the_proxy_as_directly`] makes. Each is with the
/// example plugins: an empty folder judges nothing, and a scenario that passes with the
/// examples loaded (objecting to none of its calls) passes with none (the 2026-07-28 test
/// runs both).
#[derive(Clone, Copy, PartialEq)]
enum Runs {
    /// Over `--listen` against the direct run, and over stdio against the stdio chain
    /// without the proxy (which may lose scenarios of its own).
    WithStdioBaseline,
    /// Over `--listen` and over stdio, both against the direct run: for a server whose
    /// scenarios all pass directly and through the stdio chain alone (checked when it was
    /// written).
    AgainstDirect,
}

/// Runs the suite against `upstream` directly (at least `at_least` scenarios pass), then
/// through `palisade mcp` over `--listen` and over stdio, as `runs` says: fails naming every
/// scenario that passed directly and not through the proxy.
fn through_the_proxy_as_directly(
    node: &Path,
    dir: &Path,
    upstream: &str,
    at_least: usize,
    runs: Runs,
) {
    let (node, dir) = (node.to_path_buf(), dir.to_path_buf());
    let upstream = upstream.to_string();
    let direct = passing("direct", &node, &dir, (&upstream, None), None);
    assert!(direct.len() >= at_least, "only {direct:?} pass directly");

    let examples = PluginDir::new();
    palisade_examples::install(examples.path()).unwrap();
    // Compiled ahead, so that no call waits for a compile.
    let checked = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .arg("check")
        .arg(examples.path())
        .env("PALISADE_CACHE_DIR", cache_dir())
        .output()
        .unwrap();
    assert!(checked.status.success(), "{checked:?}");
    let state = tempfile::tempdir().unwrap();

    let mut failures = Vec::new();
    let sets = [("the examples", &examples)];
    for (set, plugins) in &sets {
        let label = &format!("--listen, {set}");
        let (_proxy, url, token) = listen(plugins.path(), state.path(), &upstream);
        let through = passing(label, &node, &dir, (&url, Some(&token)), Some(&direct));
        eprintln!("{label}: {} of {} pass", through.len(), direct.len());
        failures.extend(lost(label, &direct, &through));
    }

    // Over stdio: behind the gateway, against the gateway and the bridge alone.
    let gateway = |proxy: &[&std::ffi::OsStr]| {
        let port = free_port();
        let mut command = Command::new(&node);
        command
            .arg(dir.join("gateway.mjs"))
            .arg(port.to_string())
            .arg("--")
            .args(proxy)
            .arg(&node)
            .arg(dir.join("bridge.mjs"))
            .arg(&upstream)
            .stderr(Stdio::null());
        (
            listening(command, port),
            format!("http://localhost:{port}/mcp"),
        )
    };
    let baseline = if runs == Runs::WithStdioBaseline {
        let (_baseline_gateway, url) = gateway(&[]);
        let baseline = passing("stdio baseline", &node, &dir, (&url, None), Some(&direct));
        eprintln!(
            "stdio baseline: {} of {} pass",
            baseline.len(),
            direct.len()
        );
        baseline
    } else {
        direct.clone()
    };
    for (set, plugins) in &sets {
        let label = &format!("stdio, {set}");
        let cache = format!("PALISADE_CACHE_DIR={}", cache_dir().display());
        let state = format!("PALISADE_STATE_DIR={}", state.path().display());
        let proxy = [
            "/usr/bin/env".as_ref(),
            cache.as_ref(),
            state.as_ref(),
            env!("CARGO_BIN_EXE_palisade").as_ref(),
            "mcp".as_ref(),
            "--plugins".as_ref(),
            plugins.path().as_os_str(),
            "--".as_ref(),
        ];
        let (_gateway, url) = gateway(&proxy);
        let through = passing(label, &node, &dir, (&url, None), Some(&baseline));
        eprintln!("{label}: {} of {} pass", through.len(), baseline.len());
        failures.extend(lost(label, &baseline, &through));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Over `--listen`: a call whose event stream the server closes (with an event id and a
/// `retry:`) is resumed by the proxy and answered with the tool's result, not a failure; a
/// tool's log messages reach the client on the call's stream, before its answer; an Origin
/// of the address listened on is taken (with the token), any other refused.
#[tokio::test(flavor = "multi_thread")]
async fn over_http_a_closed_call_stream_resumes_and_notifications_stream() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (node, dir) = tools();
    let (_server, upstream) = our_server(&node, &dir, "asking-server.mjs");
    let plugins = PluginDir::new();
    let state = tempfile::tempdir().unwrap();
    let (_proxy, url, token) = listen(plugins.path(), state.path(), &upstream);
    let origin = url.trim_end_matches("/mcp").to_string();
    let http = reqwest::Client::new();
    let post = |session: Option<&str>, origin: Option<&str>, body: serde_json::Value| {
        let mut request = http
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    let initialize = serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "test", "version": "1" } } });
    let refused = post(None, Some("http://evil.example.com"), initialize.clone())
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let answer = post(None, Some(&origin), initialize).await.unwrap();
    assert_eq!(answer.status(), 200, "{:?}", answer.text().await);
    let session = session_of(answer).await;
    let initialized =
        serde_json::json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    post(Some(&session), None, initialized).await.unwrap();

    let call = |id: u64, tool: &str| {
        serde_json::json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": { "name": tool, "arguments": {} } })
    };
    let started = Instant::now();
    let resumed = post(Some(&session), None, call(2, "reconnect"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        resumed.contains("answered after the stream was resumed") && !resumed.contains("isError"),
        "{resumed}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );

    let logged = post(Some(&session), None, call(3, "log"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let log = logged.find("notifications/message");
    let answer = logged.find("\"id\":3");
    assert!(
        log.is_some() && answer.is_some() && log < answer,
        "{logged}"
    );
}

/// Over `--listen`: a request the server sends on a call's own event stream (an elicitation
/// related to the call) reaches the client on the proxy's stream for that call, the client's
/// POSTed answer reaches the server, and the call's answer is the tool's. With a guard on the
/// user's answers (`post-tool` over `elicitation/create`), the server hears `decline` in the
/// user's place.
#[tokio::test(flavor = "multi_thread")]
async fn over_http_a_servers_request_on_the_call_stream_is_relayed_both_ways() {
    let _one = ONE_AT_A_TIME.lock().await;
    let (node, dir) = tools();
    let (_server, upstream) = our_server(&node, &dir, "asking-server.mjs");
    let plugins = PluginDir::new();
    let seen = asked_over_http(&upstream, &plugins).await;
    assert!(seen.contains(r#"answered accept {\"go\":true}"#), "{seen}");
    plugins.scripted(
        "answers",
        "[[hooks]]\npoint = \"post-tool\"\ncapability = \"guard\"\n\
         matcher = \"elicitation/create\"\n[config]\npost_tool = \"block\"\n",
    );
    let seen = asked_over_http(&upstream, &plugins).await;
    assert!(seen.contains("answered decline"), "{seen}");
}

/// A call of the asking server's `ask` through `palisade mcp --listen` with `plugins`, whose
/// question the client answers yes: everything the call's stream carried.
async fn asked_over_http(upstream: &str, plugins: &PluginDir) -> String {
    let state = tempfile::tempdir().unwrap();
    let (_proxy, url, token) = listen(plugins.path(), state.path(), upstream);
    let http = reqwest::Client::new();
    let post = |session: Option<&str>, body: serde_json::Value| {
        let mut request = http
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-06-18");
        }
        request.send()
    };
    let initialize = serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": { "protocolVersion": "2025-06-18", "capabilities": { "elicitation": {} },
                    "clientInfo": { "name": "test", "version": "1" } } });
    let answer = post(None, initialize).await.unwrap();
    let session = session_of(answer).await;
    let initialized =
        serde_json::json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
    post(Some(&session), initialized).await.unwrap();

    let call = serde_json::json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "ask", "arguments": {} } });
    let mut stream = post(Some(&session), call).await.unwrap();
    let mut seen = String::new();
    let read_until = async |stream: &mut reqwest::Response, seen: &mut String, what: &str| {
        while !seen.contains(what) {
            let chunk = stream.chunk().await.unwrap().expect("the stream goes on");
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    let asked = tokio::time::timeout(
        Duration::from_secs(20),
        read_until(&mut stream, &mut seen, "elicitation/create"),
    )
    .await;
    assert!(asked.is_ok(), "the server's question never came: {seen}");
    let question: serde_json::Value = seen
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .find_map(|data| serde_json::from_str(data).ok())
        .unwrap();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let yes = serde_json::json!({ "jsonrpc": "2.0", "id": question["id"],
        "result": { "action": "accept", "content": { "go": true } } });
    assert_eq!(post(Some(&session), yes).await.unwrap().status(), 202);
    let answered = tokio::time::timeout(
        Duration::from_secs(20),
        read_until(&mut stream, &mut seen, "\"id\":2"),
    )
    .await;
    assert!(answered.is_ok(), "the call was never answered: {seen}");
    seen
}

/// Over `--listen`, a 2026-07-28 client's `prompts/get` takes rounds as over stdio (the
/// suite's `input-required-result-non-tool-request` prompt of `modern-server.mjs`, which asks
/// for context first): with no plugins the round reaches the client and the retry finishes
/// it; a guard on questions answers the request with why in the round's place; a guard on
/// answers refuses the retry before the server hears the user's answer.
#[tokio::test(flavor = "multi_thread")]
async fn over_listen_a_prompts_rounds_are_judged_as_a_tools_are() {
    use serde_json::{Value, json};
    let (node, dir) = tools_2026();
    let (_server, upstream) = our_server(&node, &dir, "modern-server.mjs");
    let prompt = "test_input_required_result_prompt";
    let envelope = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "palisade-test", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": { "elicitation": { "form": {} } },
    });
    let first = json!({ "jsonrpc": "2.0", "id": 1, "method": "prompts/get",
        "params": { "name": prompt, "_meta": envelope } });
    let mut retry = first.clone();
    retry["id"] = json!(2);
    retry["params"]["inputResponses"] = json!({ "user_context": {
        "action": "accept", "content": { "context": "the launch plan" } } });
    let get = |url: String, token: String, body: Value| async move {
        let answer = reqwest::Client::new()
            .post(url)
            .bearer_auth(token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "prompts/get")
            .header("mcp-name", prompt)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let text = answer.text().await.unwrap();
        serde_json::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    };
    let guarded = |body: &str| {
        let plugins = PluginDir::new();
        let manifest = format!(
            "[[hooks]]\ncapability = \"guard\"\nmatcher = \"elicitation/create\"\n{body}\n"
        );
        plugins.scripted("questions", &manifest);
        plugins
    };
    let cases = [
        (PluginDir::new(), "no plugins"),
        (
            guarded("point = \"pre-tool\"\n[config]\npre_tool = \"deny\""),
            "a guard on questions",
        ),
        (
            guarded("point = \"post-tool\"\n[config]\npost_tool = \"block\""),
            "a guard on answers",
        ),
    ];
    for (plugins, case) in &cases {
        let state = tempfile::tempdir().unwrap();
        let (_proxy, url, token) = listen(plugins.path(), state.path(), &upstream);
        let asked = get(url.clone(), token.clone(), first.clone()).await;
        let answered = get(url, token, retry.clone()).await;
        match *case {
            "no plugins" => {
                let result = &asked["result"];
                assert_eq!(result["resultType"], "input_required", "{asked}");
                assert!(
                    result["inputRequests"]["user_context"].is_object(),
                    "{asked}"
                );
                let said = &answered["result"]["messages"][0]["content"]["text"];
                assert_eq!(
                    said, "Use the following context: the launch plan",
                    "{answered}"
                );
            }
            "a guard on questions" => {
                let why = asked["error"]["message"].as_str().unwrap_or_default();
                assert!(
                    why.contains("declined the server's question `user_context`"),
                    "{case}: {asked}"
                );
            }
            _ => {
                assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
                let why = answered["error"]["message"].as_str().unwrap_or_default();
                assert!(
                    why.contains("refused the answer to the server's question `user_context`"),
                    "{case}: {answered}"
                );
            }
        }
    }
}

/// Where a test's client reaches `palisade mcp`: over `--listen`, or on stdio in front of
/// `modern-bridge.mjs`, which passes each request to the 2026-07-28 server over HTTP.
enum Door {
    Listen {
        _proxy: Running,
        url: String,
        token: String,
    },
    Stdio(tokio::sync::Mutex<StdioClient>),
}

struct StdioClient {
    _proxy: tokio::process::Child,
    input: tokio::process::ChildStdin,
    output: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl Door {
    /// `palisade mcp` over `--listen` and on stdio, in front of `upstream`, each named.
    fn both(plugins: &Path, state: &Path, upstream: &str) -> [(&'static str, Door); 2] {
        [
            ("--listen", Door::listen(plugins, state, upstream)),
            ("stdio", Door::stdio(plugins, state, upstream)),
        ]
    }

    fn listen(plugins: &Path, state: &Path, upstream: &str) -> Door {
        let (proxy, url, token) = listen(plugins, state, upstream);
        Door::Listen {
            _proxy: proxy,
            url,
            token,
        }
    }

    fn stdio(plugins: &Path, state: &Path, upstream: &str) -> Door {
        use tokio::io::AsyncBufReadExt;
        let (node, dir) = tools_2026();
        let mut command = tokio::process::Command::from(palisade_mcp(
            plugins,
            state,
            &["--name", "everything", "--"],
        ));
        let mut proxy = command
            .arg(node)
            .arg(dir.join("modern-bridge.mjs"))
            .arg(upstream)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let input = proxy.stdin.take().unwrap();
        let output = tokio::io::BufReader::new(proxy.stdout.take().unwrap()).lines();
        Door::Stdio(tokio::sync::Mutex::new(StdioClient {
            _proxy: proxy,
            input,
            output,
        }))
    }

    /// The answer to a 2026-07-28 request `method` about `name` (its `Mcp-Name`) with `params`.
    async fn send(&self, method: &str, name: &str, params: serde_json::Value) -> serde_json::Value {
        use tokio::io::AsyncWriteExt;
        let request =
            serde_json::json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
        match self {
            Door::Listen { url, token, .. } => {
                let answer = reqwest::Client::new()
                    .post(url)
                    .bearer_auth(token)
                    .header("content-type", "application/json")
                    .header("accept", "application/json")
                    .header("mcp-protocol-version", "2026-07-28")
                    .header("mcp-method", method)
                    .header("mcp-name", name)
                    .body(request.to_string())
                    .send()
                    .await
                    .unwrap();
                let text = answer.text().await.unwrap();
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
            }
            Door::Stdio(client) => {
                let mut client = client.lock().await;
                let line = format!("{request}\n");
                client.input.write_all(line.as_bytes()).await.unwrap();
                let line = tokio::time::timeout(Duration::from_secs(30), client.output.next_line())
                    .await
                    .expect("an answer within 30 s")
                    .unwrap()
                    .expect("the proxy is still there");
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
            }
        }
    }
}

/// A 2026-07-28 request of a client that takes tasks, through `door`: its answer.
async fn tasks_send(
    door: &Door,
    method: &str,
    name: &str,
    mut params: serde_json::Value,
) -> serde_json::Value {
    params["_meta"] = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "palisade-test", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": { "form": {} },
            "extensions": { "io.modelcontextprotocol/tasks": {} },
        },
    });
    door.send(method, name, params).await
}

/// The `tasks/get` answer of `task` once it is `status` or has ended.
async fn task_poll(door: &Door, task: &str, status: &str) -> serde_json::Value {
    for _ in 0..100 {
        let params = serde_json::json!({ "taskId": task });
        let got = tasks_send(door, "tasks/get", task, params).await;
        let now = got["result"]["status"].as_str().unwrap_or_default();
        if now == status || ["completed", "failed", "cancelled"].contains(&now) {
            return got;
        }
        assert!(got.get("error").is_none(), "{got}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("task {task} never came to {status}");
}

/// A 2026-07-28 client that takes tasks (MCP's tasks extension), on stdio and over
/// `--listen`, and the tasks of `modern-server.mjs`: `confirm_delete` asks for a confirmation
/// through its task, `slow_compute` ends with a text. With no plugins the task asks, takes the
/// answer and ends; a guard on questions fails the task with why, for every later poll too; a
/// guard on answers refuses the `tasks/update` before the server hears it; a redacting
/// `post-tool` judges the task's end; a task the proxy did not see made is refused.
#[tokio::test(flavor = "multi_thread")]
async fn a_tasks_questions_answers_and_end_are_judged() {
    use serde_json::json;
    let (node, dir) = tools_2026();
    let (_server, upstream) = our_server(&node, &dir, "modern-server.mjs");
    let guarded = |point: &str, config: &str, matcher: &str| {
        let plugins = PluginDir::new();
        let capability = if config.contains("redact") {
            "transform"
        } else {
            "guard"
        };
        let manifest = format!(
            "[[hooks]]\ncapability = \"{capability}\"\npoint = \"{point}\"\n\
             matcher = \"{matcher}\"\n[config]\n{config}\n"
        );
        plugins.scripted("tasks", &manifest);
        plugins
    };
    let cases = [
        (PluginDir::new(), "no plugins"),
        (
            guarded("pre-tool", "pre_tool = \"deny\"", "elicitation/create"),
            "a guard on questions",
        ),
        (
            guarded("post-tool", "post_tool = \"block\"", "elicitation/create"),
            "a guard on answers",
        ),
        (
            guarded(
                "post-tool",
                "post_tool = \"redact\"\nsecret = \"launch\"",
                "mcp__everything__slow_compute",
            ),
            "a redaction of the end",
        ),
    ];
    for (plugins, case) in &cases {
        let state = tempfile::tempdir().unwrap();
        let doors = Door::both(plugins.path(), state.path(), &upstream);
        for (over, door) in &doors {
            let case = format!("{case}, {over}");
            let door = &door;
            if case.starts_with("a redaction of the end") {
                let arguments = json!({ "seconds": 1, "label": "launch plan" });
                let params = json!({ "name": "slow_compute", "arguments": arguments });
                let made = tasks_send(door, "tools/call", "slow_compute", params).await;
                assert_eq!(made["result"]["resultType"], "task", "{case}: {made}");
                let task = made["result"]["taskId"].as_str().unwrap();
                let ended = task_poll(door, task, "completed").await;
                let said = ended["result"]["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default();
                assert!(
                    said.contains("[REDACTED] plan") && !said.contains("launch"),
                    "{case}: {ended}"
                );
                continue;
            }
            let arguments = json!({ "filename": "notes.txt" });
            let params = json!({ "name": "confirm_delete", "arguments": arguments });
            let made = tasks_send(door, "tools/call", "confirm_delete", params).await;
            assert_eq!(made["result"]["resultType"], "task", "{case}: {made}");
            let task = made["result"]["taskId"].as_str().unwrap().to_string();
            let asked = task_poll(door, &task, "input_required").await;
            let answer = json!({ "taskId": task, "inputResponses": { "confirm": {
                "action": "accept", "content": { "confirm": true } } } });
            if case.starts_with("no plugins") {
                let question = &asked["result"]["inputRequests"]["confirm"];
                assert_eq!(question["method"], "elicitation/create", "{case}: {asked}");
                let updated = tasks_send(door, "tasks/update", &task, answer).await;
                assert!(updated.get("error").is_none(), "{case}: {updated}");
                let ended = task_poll(door, &task, "completed").await;
                let said = &ended["result"]["result"]["content"][0]["text"];
                assert_eq!(said, "Deleted notes.txt", "{case}: {ended}");
            } else if case.starts_with("a guard on questions") {
                for got in [asked, task_poll(door, &task, "failed").await] {
                    assert_eq!(got["result"]["status"], "failed", "{case}: {got}");
                    assert!(got["result"].get("inputRequests").is_none(), "{got}");
                    let why = got["result"]["error"]["message"]
                        .as_str()
                        .unwrap_or_default();
                    assert!(
                        why.contains("declined the server's question `confirm`"),
                        "{case}: {got}"
                    );
                }
            } else {
                assert_eq!(
                    asked["result"]["status"], "input_required",
                    "{case}: {asked}"
                );
                let updated = tasks_send(door, "tasks/update", &task, answer).await;
                let why = updated["error"]["message"].as_str().unwrap_or_default();
                assert!(
                    why.contains("refused the answer to the server's question `confirm`"),
                    "{case}: {updated}"
                );
                // The server never heard it: the task still waits.
                let still = task_poll(door, &task, "input_required").await;
                assert_eq!(
                    still["result"]["status"], "input_required",
                    "{case}: {still}"
                );
            }
            let unknown = tasks_send(door, "tasks/get", "nope", json!({ "taskId": "nope" })).await;
            assert_eq!(unknown["error"]["code"], -32602, "{case}: {unknown}");
        }
    }
}

/// A hook's ask to a 2026-07-28 client that takes elicitations is a round of Palisade's, on
/// stdio and over `--listen`: the call is answered `input_required` with Palisade's question
/// and a `requestState` of its own, and the retry that carries them runs the call when the
/// answer is yes, and is denied when it is no.
#[tokio::test(flavor = "multi_thread")]
async fn an_ask_to_a_2026_client_is_a_round_of_palisades() {
    use serde_json::json;
    let (node, dir) = tools_2026();
    let (_server, upstream) = our_server(&node, &dir, "modern-server.mjs");
    let plugins = PluginDir::new();
    plugins.scripted(
        "asker",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         matcher = \"mcp__everything__greet\"\n[config]\npre_tool = \"ask\"\n",
    );
    let state = tempfile::tempdir().unwrap();
    let doors = Door::both(plugins.path(), state.path(), &upstream);
    for (over, door) in &doors {
        for yes in [true, false] {
            let call = json!({ "name": "greet", "arguments": { "name": "Ada" } });
            let round = tasks_send(door, "tools/call", "greet", call.clone()).await;
            let result = &round["result"];
            assert_eq!(result["resultType"], "input_required", "{over}: {round}");
            let question = &result["inputRequests"]["palisade/approve"];
            assert_eq!(question["method"], "elicitation/create", "{over}: {round}");
            let mut retry = call.clone();
            retry["requestState"] = result["requestState"].clone();
            retry["inputResponses"] = json!({ "palisade/approve": {
                "action": "accept", "content": { "approve": yes } } });
            let answered = tasks_send(door, "tools/call", "greet", retry).await;
            let said = answered["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default();
            if yes {
                assert_eq!(said, "Hello, Ada!", "{over}: {answered}");
            } else {
                assert_eq!(answered["result"]["isError"], true, "{over}: {answered}");
                assert!(said.contains("approver rejected"), "{over}: {answered}");
            }
        }
    }
}
