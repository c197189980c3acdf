//! The front doors under attack: what a hostile or unlucky peer sends `palisade mcp` and
//! `palisade acp` byte for byte, and what reaches the other side. The peers are small Python
//! programs that record every line they receive, so a test sees exactly what was forwarded.

use palisade_tests::PluginDir;
use palisade_tests::web::{Reply, Server};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// An MCP server on stdio that records every line it reads into `argv[1]`, answers every
/// request with an empty result, and, given `argv[2]`, sends that line to the client when it
/// reads `initialize`.
const RECORDING_SERVER: &str = r#"
import json, sys
log = open(sys.argv[1], "a", buffering=1)
for line in sys.stdin:
    log.write(line)
    message = json.loads(line)
    if "method" in message and "id" in message:
        result = {"serverInfo": {"name": "rec", "version": "1"}, "capabilities": {},
                  "protocolVersion": "2025-06-18"} if message["method"] == "initialize" else {}
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
        if message["method"] == "initialize" and len(sys.argv) > 2:
            print(sys.argv[2], flush=True)
"#;

/// An ACP agent on stdio that records every line it reads into `argv[1]`. At a
/// `session/prompt` it sends the requests of `argv[2]` (a JSON list; `"$PROMPT_ID"` in one
/// stands for the prompt's id) to the editor, and answers the prompt once it has an answer for
/// each.
const SCRIPTED_AGENT: &str = r#"
import json, sys
log = open(sys.argv[1], "a", buffering=1)
script = json.loads(sys.argv[2])
prompt, answers = None, 0
for line in sys.stdin:
    log.write(line)
    message = json.loads(line)
    if message.get("method") == "session/prompt":
        prompt = message["id"]
        for request in script:
            # `$PROMPT_ID`: the prompt's id, as the agent received it.
            print(json.dumps(request).replace('"$PROMPT_ID"', json.dumps(prompt)), flush=True)
    elif "method" not in message:
        answers += 1
    if prompt is not None and answers >= len(script):
        print(json.dumps({"jsonrpc": "2.0", "id": prompt, "result": {"stopReason": "end_turn"}}),
              flush=True)
        prompt = None
"#;

fn python() -> String {
    std::env::var("PALISADE_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// A peer program in `dir`, and the file it records into.
fn peer(dir: &Path, name: &str, source: &str) -> (PathBuf, PathBuf) {
    let script = dir.join(format!("{name}.py"));
    std::fs::write(&script, source).unwrap();
    (script, dir.join(format!("{name}.log")))
}

/// A proxy process driven line by line: what it writes is read on a thread.
struct Driven {
    child: Child,
    input: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Driven {
    fn start(args: &[String], dir: &Path) -> Driven {
        let mut child = Command::new(env!("CARGO_BIN_EXE_palisade"))
            .args(args)
            .env("PALISADE_CACHE_DIR", dir.join("cache"))
            .env("PALISADE_STATE_DIR", dir.join("state"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let output: ChildStdout = child.stdout.take().unwrap();
        let (send, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    return;
                }
            }
        });
        Driven {
            child,
            input: Some(input),
            lines,
        }
    }

    fn send_bytes(&mut self, bytes: &[u8]) {
        let input = self.input.as_mut().expect("its input is open");
        input.write_all(bytes).unwrap();
        input.flush().unwrap();
    }

    /// Closes its input, as a peer that goes away does, and waits for it to exit.
    fn close(&mut self) {
        self.input = None;
        let started = Instant::now();
        while self.child.try_wait().unwrap().is_none() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "it did not exit"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn send(&mut self, message: &Value) {
        self.send_bytes(format!("{message}\n").as_bytes());
    }

    /// The next message it writes, within 30 s.
    fn next(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(30))
            .expect("the proxy answered in time");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
    }

    /// Messages until one `until` accepts, which is returned with those before it.
    fn until(&self, until: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let message = self.next();
            if until(&message) {
                return (message, before);
            }
            before.push(message);
        }
    }
}

impl Drop for Driven {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines a peer recorded, once there are `at_least` (or after 10 s).
fn recorded(log: &Path, at_least: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let lines: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect();
        if lines.len() >= at_least || started.elapsed() > Duration::from_secs(10) {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mcp_proxy(dir: &Path, plugins: &PluginDir, server: &Path, log: &Path, extra: &[&str]) -> Driven {
    let mut args = vec![
        "mcp".to_string(),
        "--plugins".into(),
        plugins.path().display().to_string(),
        "--name".into(),
        "rec".into(),
        "--".into(),
        python(),
        server.display().to_string(),
        log.display().to_string(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    Driven::start(&args, dir)
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// A `tools/call` hidden from Palisade as a `ping` (Go's `encoding/json` reads the `Method`
/// key as `method`, the last one winning) or inside a notification split by bare carriage
/// returns (the official Python SDK reads stdin with universal newlines): each is refused with
/// a JSON-RPC error naming why, and the server reads neither; what it reads is what Palisade
/// judged, re-encoded, under an id of Palisade's.
#[test]
fn mcp_refuses_lines_that_parsers_read_two_ways_and_forwards_what_it_judged() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    let (server, log) = peer(dir.path(), "server", RECORDING_SERVER);
    let mut proxy = mcp_proxy(dir.path(), &plugins, &server, &log, &[]);
    proxy.send_bytes(format!("{INITIALIZE}\n").as_bytes());
    assert_eq!(proxy.next()["id"], 0);
    let call = r#"{"name":"write_file","arguments":{"path":"/tmp/x","content":"pwned"}}"#;
    let cased = format!(
        r#"{{"jsonrpc":"2.0","id":4,"method":"ping","Method":"tools/call","params":{call}}}"#
    );
    let hidden = format!(
        "{{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{{\"x\":\r\
         {{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{call}}}\r}}}}"
    );
    let twice = format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"tools/call","method":"ping","params":{call}}}"#
    );
    for line in [&cased, &hidden, &twice] {
        proxy.send_bytes(format!("{line}\n").as_bytes());
        let refused = proxy.next();
        assert_eq!(refused["error"]["code"], -32600, "{refused}");
        assert_eq!(refused["id"], Value::Null, "{refused}");
    }
    proxy.send_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\",\"params\":{\"t\":\"a\xe2\x80\xa8b\"}}\n");
    let pong = proxy.next();
    assert_eq!(pong["id"], "p", "{pong}");
    let seen = recorded(&log, 2);
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen.iter().all(|m| !m.to_string().contains("tools/call")),
        "{seen:?}"
    );
    // The ping as judged, under an id of Palisade's, with its line separator escaped.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains('\u{2028}'), "{text}");
    assert_eq!(seen[1]["method"], "ping");
    assert_eq!(seen[1]["params"]["t"], "a\u{2028}b");
    let id = seen[1]["id"].as_str().expect("a string id");
    assert!(id.starts_with("palisade-") && id.len() > 40, "{id}");
}

/// An MCP server on stdio that records every line it reads into `argv[1]` and lists one
/// tool, `move_file`, whose schema names `destination` (not a protocol key).
const LISTING_SERVER: &str = r#"
import json, sys
log = open(sys.argv[1], "a", buffering=1)
tool = {"name": "move_file", "inputSchema": {"type": "object", "properties": {
    "source": {"type": "string"}, "destination": {"type": "string"}}}}
for line in sys.stdin:
    log.write(line)
    message = json.loads(line)
    if "method" not in message or "id" not in message:
        continue
    method = message["method"]
    if method == "initialize":
        result = {"serverInfo": {"name": "rec", "version": "1"}, "capabilities": {"tools": {}},
                  "protocolVersion": "2025-06-18"}
    elif method == "tools/list":
        result = {"tools": [tool]}
    else:
        result = {"content": [{"type": "text", "text": "moved"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"#;

/// A tool argument whose key is the tool's own property in another case (`Destination` for
/// `destination`) is refused before any hook runs: a guard reads `destination` and sees
/// none, and a server that reads keys case-insensitively would move the file there. The
/// proxy reads the tool's schema from the server's `tools/list` itself (the client never
/// listed); the key as the schema spells it passes.
#[test]
fn mcp_refuses_a_tool_argument_spelled_in_another_case_than_the_tools_schema() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    let (server, log) = peer(dir.path(), "server", LISTING_SERVER);
    let mut proxy = mcp_proxy(dir.path(), &plugins, &server, &log, &[]);
    proxy.send_bytes(format!("{INITIALIZE}\n").as_bytes());
    assert_eq!(proxy.next()["id"], 0);
    let call = |id: u32, key: &str| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "move_file", "arguments": { "source": "a", key: "/etc/cron.d/x" } } })
    };
    proxy.send(&call(1, "Destination"));
    let refused = proxy.next();
    assert_eq!(refused["id"], 1, "{refused}");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let why = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("`Destination`") && why.contains("`destination`"),
        "{why}"
    );
    proxy.send(&call(2, "destination"));
    let moved = proxy.next();
    assert_eq!(moved["id"], 2, "{moved}");
    assert_eq!(moved["result"]["content"][0]["text"], "moved", "{moved}");
    let seen = recorded(&log, 3);
    let calls: Vec<&Value> = seen
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .collect();
    assert_eq!(calls.len(), 1, "{seen:?}");
    assert_eq!(
        calls[0]["params"]["arguments"]["destination"],
        "/etc/cron.d/x"
    );
    let lists = seen.iter().filter(|m| m["method"] == "tools/list").count();
    assert_eq!(lists, 1, "the list is read once: {seen:?}");
}

/// A request id in flight is the client's once: a second request with it is refused, and an
/// answer to no request of the server's (a guess at one of Palisade's ids, or a stale one) is
/// dropped, never passed on.
#[test]
fn mcp_owns_the_ids_it_relays() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    let (server, log) = peer(dir.path(), "server", RECORDING_SERVER);
    // The server asks the client a question at initialize.
    let question = r#"{"jsonrpc":"2.0","id":"q1","method":"roots/list"}"#;
    let mut proxy = mcp_proxy(dir.path(), &plugins, &server, &log, &[question]);
    proxy.send_bytes(format!("{INITIALIZE}\n").as_bytes());
    let (_, before) = proxy.until(|m| m["id"] == 0);
    let (asked, _) = if before.is_empty() {
        proxy.until(|m| m["method"] == "roots/list")
    } else {
        (before[0].clone(), Vec::new())
    };
    let relayed = asked["id"].as_str().unwrap().to_string();
    assert_ne!(relayed, "q1", "the server's own id reached the client");
    // Answers to ids the proxy never sent go nowhere.
    for id in [json!("q1"), json!("palisade-1-ask-1"), json!(99)] {
        proxy.send(&json!({ "jsonrpc": "2.0", "id": id, "result": { "roots": [] } }));
    }
    proxy.send(&json!({ "jsonrpc": "2.0", "id": relayed, "result": { "roots": [] } }));
    let seen = recorded(&log, 3);
    let answers: Vec<&Value> = seen.iter().filter(|m| m.get("result").is_some()).collect();
    assert_eq!(answers.len(), 1, "{seen:?}");
    assert_eq!(
        answers[0]["id"], "q1",
        "the answer reached the server under its id"
    );
    // A second request with an id in flight is refused; the server sees the first alone.
    // (The recording server answers at once, so the two are sent in one write.)
    let ping = json!({ "jsonrpc": "2.0", "id": 8, "method": "ping" });
    let slow = json!({ "jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": { "name": "x", "arguments": {} } });
    proxy.send_bytes(format!("{slow}\n{ping}\n").as_bytes());
    let mut got = vec![proxy.next(), proxy.next()];
    got.sort_by_key(|m| m.get("error").is_none());
    assert!(
        got[0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("in flight")),
        "{got:?}"
    );
}

/// Over streamable HTTP, only POST, GET and DELETE: a `tools/call` PUT is refused with 405 and
/// never reaches the server; a POSTed one hidden behind a case-folded key is refused too.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_over_http_refuses_other_methods_and_ambiguous_bodies() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    // A server whose answers to ids 3 and 4 could be read two ways (as JSON; in an event
    // stream, beside an ordinary event).
    let upstream = Server::start(|request| {
        let body = String::from_utf8_lossy(&request.body);
        let typed = |kind: &str, body: &str| Reply {
            headers: vec![("content-type".into(), kind.into())],
            ..Reply::ok(body.to_string())
        };
        if body.contains("\"id\":3") {
            typed(
                "application/json",
                r#"{"jsonrpc":"2.0","id":3,"result":{},"Result":{"x":1}}"#,
            )
        } else if body.contains("\"id\":4") {
            typed(
                "text/event-stream",
                "id: e1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"a\",\"METHOD\":\"b\"}\n\n\
                 id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{\"t\":\"x\u{2028}y\"}}\n\n",
            )
        } else {
            Reply::ok(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
        }
    });
    let (_proxy, url, token) = mcp_over_http(dir.path(), &plugins, &upstream, &[]);
    let http = reqwest::Client::new();
    let send = |method: reqwest::Method, body: &'static str| {
        http.request(method, &url)
            .bearer_auth(token.trim())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body)
            .send()
    };
    let call =
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w","arguments":{}}}"#;
    let put = send(reqwest::Method::PUT, call).await.unwrap();
    assert_eq!(put.status(), 405);
    let cased =
        r#"{"jsonrpc":"2.0","id":1,"method":"ping","METHOD":"tools/call","params":{"name":"w"}}"#;
    let post = send(reqwest::Method::POST, cased).await.unwrap();
    let answer: Value = serde_json::from_str(&post.text().await.unwrap()).unwrap();
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    // A plain ping is forwarded as judged: re-encoded, on one line.
    let ping = "{\r\n  \"jsonrpc\": \"2.0\",\r\n  \"id\": 2,\r\n  \"method\": \"ping\"\r\n}";
    let post = send(reqwest::Method::POST, ping).await.unwrap();
    assert_eq!(post.status(), 200);
    let received = upstream.received();
    assert_eq!(received.len(), 1, "{received:?}");
    assert_eq!(received[0].method, "POST");
    let body = String::from_utf8_lossy(&received[0].body);
    assert!(!body.contains('\r') && body.contains("\"ping\""), "{body}");
    // What the server answers is read as strictly, and forwarded re-encoded: a JSON answer
    // that could be read two ways is refused; in an event stream, such an event is dropped and
    // the others pass re-encoded, with their ids.
    let ambiguous = send(
        reqwest::Method::POST,
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
    );
    assert_eq!(ambiguous.await.unwrap().status(), 502);
    let streamed = send(
        reqwest::Method::POST,
        r#"{"jsonrpc":"2.0","id":4,"method":"ping"}"#,
    );
    let streamed = streamed.await.unwrap().text().await.unwrap();
    assert!(!streamed.contains("METHOD"), "{streamed}");
    assert!(
        streamed.contains("id: e2") && streamed.contains("\\u2028"),
        "{streamed}"
    );
}

/// Over streamable HTTP too, a tool argument spelled in another case than the tool's schema
/// is refused, and the server never receives that call; the proxy reads the schema from the
/// server's `tools/list`, in the client's session.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_over_http_refuses_a_tool_argument_spelled_in_another_case_than_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    let upstream = Server::start(|request| {
        let message: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let result = match message["method"].as_str() {
            Some("tools/list") => json!({ "tools": [{ "name": "move_file", "inputSchema": {
                "type": "object", "properties": { "destination": { "type": "string" } } } }] }),
            _ => json!({ "content": [{ "type": "text", "text": "moved" }] }),
        };
        Reply {
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("mcp-session-id".into(), "s1".into()),
            ],
            ..Reply::ok(
                json!({ "jsonrpc": "2.0", "id": message["id"], "result": result }).to_string(),
            )
        }
    });
    let (_proxy, url, token) = mcp_over_http(dir.path(), &plugins, &upstream, &[]);
    let http = reqwest::Client::new();
    let call = |id: u32, key: &str| {
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "move_file", "arguments": { key: "/etc/cron.d/x" } } });
        http.post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("mcp-session-id", "s1")
            .body(body.to_string())
            .send()
    };
    let answer = |text: String| serde_json::from_str::<Value>(&text).unwrap();
    let refused = answer(call(1, "DESTINATION").await.unwrap().text().await.unwrap());
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let moved = answer(call(2, "destination").await.unwrap().text().await.unwrap());
    assert_eq!(moved["result"]["content"][0]["text"], "moved", "{moved}");
    let received: Vec<Value> = upstream
        .received()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap_or_default())
        .collect();
    let methods: Vec<&str> = received
        .iter()
        .filter_map(|m| m["method"].as_str())
        .collect();
    assert_eq!(methods, ["tools/list", "tools/call"], "{received:?}");
    assert_eq!(
        received[1]["params"]["arguments"]["destination"],
        "/etc/cron.d/x"
    );
}

/// A client whose connection dropped while its `tools/call` ran resumes the call's stream
/// with a GET and the last event id it saw, and receives the answer that came meanwhile:
/// the proxy's own event streams carry ids (a 2025-11-25 client first gets a priming event)
/// and are held for a resume. The resume never reaches the server; another session's GET with
/// the same id gets 400.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_over_http_a_dropped_call_stream_resumes_with_its_last_event_id() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    let upstream = slow_calls_upstream("done late", Duration::from_secs(1));
    let (_proxy, url, token) = mcp_over_http(dir.path(), &plugins, &upstream, &[]);
    let http = reqwest::Client::new();
    let call = json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": { "name": "slow", "arguments": {} } });
    let mut posted = http
        .post(&url)
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", "s1")
        .header("mcp-protocol-version", "2025-11-25")
        .body(call.to_string())
        .send()
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(1), posted.chunk())
        .await
        .expect("a priming event at once")
        .unwrap()
        .unwrap();
    let first = String::from_utf8_lossy(&first).into_owned();
    let last_id = first
        .lines()
        .find_map(|line| line.strip_prefix("id: "))
        .unwrap_or_else(|| panic!("no event id: {first:?}"))
        .to_string();
    drop(posted);
    // The answer comes while nobody listens.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let resume = |session: &'static str| {
        http.get(&url)
            .bearer_auth(&token)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", session)
            .header("last-event-id", &last_id)
            .send()
    };
    let resumed = resume("s1").await.unwrap();
    assert_eq!(resumed.status(), 200);
    let rest = tokio::time::timeout(Duration::from_secs(10), resumed.text())
        .await
        .expect("the resumed stream ends after the answer")
        .unwrap();
    assert!(
        rest.contains("\"id\":5") && rest.contains("done late"),
        "{rest}"
    );
    assert!(!rest.contains(&format!("id: {last_id}\n")), "{rest}");
    assert_eq!(resume("s2").await.unwrap().status(), 400);
    let received = upstream.received();
    assert!(
        received.iter().all(|r| r.method == "POST"),
        "a GET reached the server"
    );
    let calls = received
        .iter()
        .filter(|r| String::from_utf8_lossy(&r.body).contains("tools/call"))
        .count();
    assert_eq!(calls, 1);
}

/// A client that goes away while its `tools/call` waits for a plain JSON answer leaves no
/// call in flight behind: once the call is over (or cut off with the connection), its session
/// is idle again, and a full session table can make room by ending it.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_over_http_a_client_gone_mid_call_leaves_its_session_idle() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    let upstream = slow_calls_upstream("done", Duration::from_secs(1));
    let (_proxy, url, token) =
        mcp_over_http(dir.path(), &plugins, &upstream, &["--max-sessions", "1"]);
    let http = reqwest::Client::new();
    let post = |session: &str| {
        let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": { "name": "slow", "arguments": {} } });
        http.post(&url)
            .bearer_auth(&token)
            .header("mcp-session-id", session)
            .header("accept", "application/json")
            .header("content-type", "application/json")
            .body(call.to_string())
            .send()
    };
    // The client gives up on its call half a second in, and its connection closes.
    let gone = tokio::time::timeout(Duration::from_millis(500), post("a")).await;
    assert!(gone.is_err(), "the call was answered early");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let answered = post("b").await.unwrap();
    assert_eq!(answered.status(), 200, "{}", answered.text().await.unwrap());
}

/// An MCP server over HTTP that answers every request at once with a tool result of `text`,
/// but a `tools/call` only after `delay`; a `GET` (a stream of its own) gets 405.
fn slow_calls_upstream(text: &'static str, delay: Duration) -> Server {
    Server::start(move |request| {
        if request.method == "GET" {
            return Reply {
                status: 405,
                ..Reply::ok("no stream here")
            };
        }
        let message: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let answer = json!({ "jsonrpc": "2.0", "id": message["id"], "result": {
            "content": [{ "type": "text", "text": text }] } });
        let reply = Reply {
            headers: vec![("content-type".into(), "application/json".into())],
            ..Reply::ok(answer.to_string())
        };
        if message["method"] == "tools/call" {
            reply.after(delay)
        } else {
            reply
        }
    })
}

/// `palisade mcp --listen` in front of `upstream`, with `extra` arguments: the proxy, its URL
/// and its bearer token.
fn mcp_over_http(
    dir: &Path,
    plugins: &PluginDir,
    upstream: &Server,
    extra: &[&str],
) -> (Running, String, String) {
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = free.local_addr().unwrap();
    drop(free);
    let token_file = dir.join("token");
    let proxy = Running(
        Command::new(env!("CARGO_BIN_EXE_palisade"))
            .args(["mcp", "--plugins"])
            .arg(plugins.path())
            .args(["--name", "up", "--listen", &address.to_string()])
            .arg("--upstream")
            .arg(format!("http://127.0.0.1:{}/mcp", upstream.port))
            .arg("--token-file")
            .arg(&token_file)
            .args(extra)
            .env("PALISADE_CACHE_DIR", dir.join("cache"))
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    while std::net::TcpStream::connect(address).is_err() || !token_file.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let token = std::fs::read_to_string(&token_file).unwrap();
    (
        proxy,
        format!("http://{address}/mcp"),
        token.trim().to_string(),
    )
}

/// Past `--max-sessions`, a new session ends an idle one, and is refused (503) while every
/// live one has a call in flight; the server never sees the refused session's `initialize`.
#[tokio::test(flavor = "multi_thread")]
async fn mcp_over_http_a_full_session_table_never_ends_a_busy_session() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    let upstream = slow_calls_upstream("done", Duration::from_secs(3));
    let (_proxy, url, token) =
        mcp_over_http(dir.path(), &plugins, &upstream, &["--max-sessions", "2"]);
    let http = reqwest::Client::new();
    let post = |session: &str, body: Value| {
        http.post(&url)
            .bearer_auth(&token)
            .header("mcp-session-id", session)
            .header("accept", "application/json")
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
    };
    let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": { "name": "slow", "arguments": {} } });
    let initialize = json!({ "jsonrpc": "2.0", "id": 0, "method": "initialize",
                             "params": { "protocolVersion": "2025-06-18", "capabilities": {},
                                         "clientInfo": { "name": "t", "version": "1" } } });
    // Two sessions, each with a call in flight.
    let busy = [post("a", call.clone()), post("b", call.clone())];
    let busy = tokio::spawn(futures_util::future::join_all(busy));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let refused = post("c", call.clone()).await.unwrap();
    assert_eq!(refused.status(), 503, "{}", refused.text().await.unwrap());
    let refused = http
        .post(&url)
        .bearer_auth(&token)
        .header("accept", "application/json")
        .header("content-type", "application/json")
        .body(initialize.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 503);
    assert!(
        refused.text().await.unwrap().contains("--max-sessions"),
        "the refusal names the fix"
    );
    assert!(
        !upstream
            .received()
            .iter()
            .any(|r| String::from_utf8_lossy(&r.body).contains("initialize")),
        "the server saw the refused session's initialize"
    );
    // The busy sessions' calls were answered, untouched; now idle, one makes room.
    for answered in busy.await.unwrap() {
        let answer: Value = serde_json::from_str(&answered.unwrap().text().await.unwrap()).unwrap();
        assert_eq!(answer["result"]["content"][0]["text"], "done", "{answer}");
    }
    let answered = post("c", call).await.unwrap();
    assert_eq!(answered.status(), 200);
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn acp_proxy(dir: &Path, plugins: &PluginDir, script: &Value) -> (Driven, PathBuf) {
    let (agent, log) = peer(dir, "agent", SCRIPTED_AGENT);
    let agent = [
        agent.display().to_string(),
        log.display().to_string(),
        script.to_string(),
    ];
    (Driven::start(&acp_args(plugins, &agent), dir), log)
}

/// `palisade acp --plugins DIR -- python3 AGENT…`.
fn acp_args(plugins: &PluginDir, agent: &[String]) -> Vec<String> {
    let mut args = vec![
        "acp".to_string(),
        "--plugins".into(),
        plugins.path().display().to_string(),
        "--".into(),
        python(),
    ];
    args.extend(agent.iter().cloned());
    args
}

/// Two `palisade acp` processes, one after the other, on one session (the second loads it):
/// the second's turns go on from the first's, so no interaction id repeats; its session-start
/// sees `resume`, and its contexts wait for the first prompt that enters — a rejected first
/// prompt does not lose them.
#[test]
fn acp_a_loaded_session_goes_on_numbering_its_turns_and_starts_as_resume() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    plugins.scripted(
        "ids",
        "[[hooks]]\npoint = \"message-committed\"\ncapability = \"observe\"\n",
    );
    plugins.scripted(
        "starter",
        "[[hooks]]\npoint = \"session-start\"\ncapability = \"transform\"\n\
         [config]\ncontexts = [\"START-CTX\"]\n",
    );
    plugins.scripted(
        "gate",
        "[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"guard\"\n\
         [config]\nprompt_submit = \"reject-secrets\"\n",
    );
    let (args, audit, agent_log) = audited_acp(dir.path(), &plugins);
    let prompt = |id: u64, text: &str| {
        json!({ "jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": { "sessionId": "s1", "prompt": [{ "type": "text", "text": text }] } })
    };
    // The first process: two turns.
    let mut first = Driven::start(&args, dir.path());
    for id in [1, 2] {
        first.send(&prompt(id, "go"));
        first.until(|m| m["id"] == id);
    }
    first.close();
    // The second loads the session: a rejected prompt, then one that enters.
    let mut second = Driven::start(&args, dir.path());
    second.send(
        &json!({ "jsonrpc": "2.0", "id": 9, "method": "session/load",
        "params": { "sessionId": "s1", "cwd": "/", "mcpServers": [] } }),
    );
    second.send(&prompt(3, "my password is hunter2"));
    second.until(|m| m["id"] == 3);
    second.send(&prompt(4, "go on"));
    second.until(|m| m["id"] == 4);
    second.close();
    let ids: Vec<String> = recorded(&audit, 1)
        .iter()
        .filter(|e| e["event"] == "plugin_log")
        .filter_map(|e| {
            e["message"]
                .as_str()?
                .strip_prefix("message ")
                .map(String::from)
        })
        .collect();
    assert_eq!(
        ids,
        [
            "s1:turn-1:message-0",
            "s1:turn-2:message-0",
            "s1:turn-4:message-0"
        ],
        "the second process goes on from the first's turns"
    );
    let prompts: Vec<Value> = std::fs::read_to_string(&agent_log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|m: &Value| m["method"] == "session/prompt")
        .collect();
    let last = prompts.last().unwrap().to_string();
    assert!(
        last.contains("go on") && last.contains("START-CTX (SessionSource::Resume)"),
        "the loaded session's start contexts go with its first prompt that enters: {last}"
    );
    assert!(!last.contains("hunter2"), "{last}");
}

/// ACP's `session/close` ends the session: its `session-ended` fact is committed (the hooks
/// observing it run) and the proxy forgets it.
#[test]
fn acp_a_closed_session_is_ended() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    plugins.scripted(
        "ids",
        "[[hooks]]\npoint = \"session-ended\"\ncapability = \"observe\"\n",
    );
    let (args, audit, agent_log) = audited_acp(dir.path(), &plugins);
    let mut proxy = Driven::start(&args, dir.path());
    proxy.send(&prompt());
    proxy.until(|m| m["id"] == 1);
    proxy.send(
        &json!({ "jsonrpc": "2.0", "id": 2, "method": "session/close",
        "params": { "sessionId": "s1" } }),
    );
    // The close reaches the agent (under the proxy's id) before the proxy's input ends.
    let started = Instant::now();
    while !std::fs::read_to_string(&agent_log)
        .unwrap_or_default()
        .contains("session/close")
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the close never reached the agent"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    proxy.close();
    let ended: Vec<Value> = recorded(&audit, 1)
        .into_iter()
        .filter(|e| e["event"] == "plugin_log")
        .collect();
    assert!(
        ended
            .iter()
            .any(|e| e["message"] == "session-ended s1:session-ended"),
        "{ended:?}"
    );
}

/// `palisade acp` with `plugins` and an audit log, in front of the scripted agent (no
/// requests of its own): its arguments, the audit log and the agent's log.
fn audited_acp(dir: &Path, plugins: &PluginDir) -> (Vec<String>, PathBuf, PathBuf) {
    let audit = dir.join("audit.jsonl");
    let (agent, agent_log) = peer(dir, "agent", SCRIPTED_AGENT);
    let mut args = vec![
        "acp".to_string(),
        "--plugins".into(),
        plugins.path().display().to_string(),
        "--audit-log".into(),
        audit.display().to_string(),
        "--".into(),
        python(),
    ];
    args.extend([
        agent.display().to_string(),
        agent_log.display().to_string(),
        "[]".into(),
    ]);
    (args, audit, agent_log)
}

fn read_request(id: u64, path: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": "fs/read_text_file",
        "params": { "sessionId": "s1", "path": path } })
}

fn prompt() -> Value {
    json!({ "jsonrpc": "2.0", "id": 1, "method": "session/prompt",
        "params": { "sessionId": "s1", "prompt": [{ "type": "text", "text": "go" }] } })
}

/// Plays the editor until the prompt is answered: reads are answered with the file's text
/// (`SECRET-42` for the secret file), permission requests with `permit`'s choice. Returns the
/// messages the editor received, the prompt's answer last.
fn editor(proxy: &mut Driven, permit: impl Fn(&Value) -> &'static str) -> Vec<Value> {
    editor_reading(proxy, permit, |_| {})
}

/// [`editor`], calling `before_read` with each file read before it answers it.
fn editor_reading(
    proxy: &mut Driven,
    permit: impl Fn(&Value) -> &'static str,
    before_read: impl Fn(&Value),
) -> Vec<Value> {
    proxy.send(&prompt());
    let mut received = Vec::new();
    loop {
        let message = proxy.next();
        received.push(message.clone());
        let id = message["id"].clone();
        match message["method"].as_str() {
            Some("fs/read_text_file") => {
                before_read(&message);
                let secret = message["params"]["path"]
                    .as_str()
                    .is_some_and(|p| p.contains("secret"));
                let text = if secret { "SECRET-42" } else { "harmless" };
                proxy.send(&json!({ "jsonrpc": "2.0", "id": id, "result": { "content": text } }));
            }
            Some("session/request_permission") => {
                let option = permit(&message);
                proxy.send(&json!({ "jsonrpc": "2.0", "id": id,
                    "result": { "outcome": { "outcome": "selected", "optionId": option } } }));
            }
            Some(_) => {}
            None if id == 1 => return received,
            None => {}
        }
    }
}

fn reads(received: &[Value]) -> Vec<&Value> {
    received
        .iter()
        .filter(|m| m["method"] == "fs/read_text_file")
        .collect()
}

/// The agent reads a harmless file and then the secret one under the same request id: the
/// second is refused while the first is in flight, so no editor answer can reach the agent
/// without passing `post-tool`, whose block withholds every read here.
#[test]
fn acp_a_reused_request_id_cannot_route_an_answer_past_post_tool() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    plugins.scripted(
        "withhold",
        "[[hooks]]\npoint = \"post-tool\"\ncapability = \"guard\"\n\
         matcher = \"fs/read_text_file\"\n[config]\npost_tool = \"block\"\n",
    );
    let script = json!([
        read_request(7, "/work/harmless.txt"),
        read_request(7, "/work/secret.txt")
    ]);
    let (mut proxy, log) = acp_proxy(dir.path(), &plugins, &script);
    // The first read stays in flight until the agent has its answer to the second (the
    // refusal), however the threads are scheduled: else the second could come after the
    // first was answered, when reusing the id is no longer a collision.
    let refused = || {
        recorded(&log, 1)
            .iter()
            .any(|m| m["id"] == 7 && m.get("error").is_some())
    };
    let received = editor_reading(
        &mut proxy,
        |_| "none",
        |_| {
            let waited = Instant::now();
            while !refused() && waited.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(20));
            }
        },
    );
    assert_eq!(received.last().unwrap()["result"]["stopReason"], "end_turn");
    let reads = reads(&received);
    assert_eq!(
        reads.len(),
        1,
        "only the first read reached the editor: {received:?}"
    );
    assert_eq!(reads[0]["params"]["path"], "/work/harmless.txt");
    assert_ne!(reads[0]["id"], 7, "the agent's own id reached the editor");
    let seen = recorded(&log, 3);
    assert!(
        seen.iter().all(|m| !m.to_string().contains("SECRET-42")),
        "{seen:?}"
    );
    let answers: Vec<&Value> = seen.iter().filter(|m| m["id"] == 7).collect();
    assert_eq!(answers.len(), 2, "{seen:?}");
    assert!(
        answers.iter().all(|a| a.get("error").is_some()),
        "{answers:?}"
    );
}

/// A hook's ask before a client-side tool reaches the editor's permission flow (a permission
/// request of Palisade's); the user's rejection refuses the call, which never reaches the
/// editor; without the ask, the call would have run unasked.
/// ACP 1.7's `$/cancel_request`, both ways: a side cancelling its own request names it by the
/// id the other side received (the proxy's), not by its own, which the other side never saw;
/// a cancel of a request the other side never received goes nowhere.
#[test]
fn acp_a_cancel_request_names_the_request_as_the_other_side_knows_it() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    let cancel = |id: u64| json!({ "jsonrpc": "2.0", "method": "$/cancel_request", "params": { "requestId": id } });
    let script = json!([read_request(5, "/work/notes.txt"), cancel(5), cancel(77)]);
    let (mut proxy, log) = acp_proxy(dir.path(), &plugins, &script);
    proxy.send(&prompt());
    let mut received = Vec::new();
    while received.len() < 2 {
        received.push(proxy.next());
    }
    let read = received
        .iter()
        .find(|m| m["method"] == "fs/read_text_file")
        .unwrap_or_else(|| panic!("{received:?}"));
    let cancelled = received
        .iter()
        .find(|m| m["method"] == "$/cancel_request")
        .unwrap_or_else(|| panic!("{received:?}"));
    assert_eq!(
        cancelled["params"]["requestId"], read["id"],
        "the cancel names another request: {received:?}"
    );
    assert_ne!(read["id"], 5, "the agent's own id reached the editor");
    // The cancel of request 77, which never reached the editor, does not follow.
    std::thread::sleep(Duration::from_millis(300));
    while let Ok(line) = proxy.lines.try_recv() {
        let message: Value = serde_json::from_str(&line).unwrap();
        assert_ne!(message["method"], "$/cancel_request", "{message}");
    }
    // The editor cancels a request of its own (ACP 1.7's `session/list`).
    proxy.send(&json!({ "jsonrpc": "2.0", "id": 9, "method": "session/list", "params": {} }));
    proxy.send(&cancel(9));
    let seen = recorded(&log, 3);
    let listed = seen.iter().find(|m| m["method"] == "session/list");
    let cancelled = seen.iter().find(|m| m["method"] == "$/cancel_request");
    let (Some(listed), Some(cancelled)) = (listed, cancelled) else {
        panic!("the agent did not get both: {seen:?}");
    };
    assert_eq!(cancelled["params"]["requestId"], listed["id"], "{seen:?}");
    assert_ne!(listed["id"], 9, "{seen:?}");
}

/// ACP 1.7's `elicitation/create` (the agent asks the editor's user for input) is a guardable
/// ask: a guard's deny declines it, and the editor never shows it. With no objection it reaches
/// the editor under the proxy's id, and a request-scoped one names the editor's request (the
/// prompt) by the editor's own id, not the one the agent received.
#[test]
fn acp_an_elicitation_is_a_guardable_ask() {
    let elicit = |scope: Value| {
        let mut params = json!({ "message": "Your API key?", "mode": "form",
            "requestedSchema": { "type": "object",
                "properties": { "key": { "type": "string" } } } });
        params
            .as_object_mut()
            .unwrap()
            .extend(scope.as_object().unwrap().clone());
        json!({ "jsonrpc": "2.0", "id": 21, "method": "elicitation/create", "params": params })
    };
    // A guard on elicitations: declined, never shown.
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    plugins.scripted(
        "no-asking",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         matcher = \"elicitation/create\"\n[config]\npre_tool = \"deny\"\n",
    );
    let script = json!([elicit(json!({ "sessionId": "s1" }))]);
    let (mut proxy, log) = acp_proxy(dir.path(), &plugins, &script);
    let received = editor(&mut proxy, |_| "none");
    assert!(
        received.iter().all(|m| m["method"] != "elicitation/create"),
        "{received:?}"
    );
    let seen = recorded(&log, 2);
    let answer = seen.iter().find(|m| m["id"] == 21).expect("answered");
    assert_eq!(answer["result"]["action"], "decline", "{seen:?}");
    // No objection, request-scoped: the editor sees its own prompt's id.
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    let script = json!([elicit(json!({ "requestId": "$PROMPT_ID" }))]);
    let (mut proxy, log) = acp_proxy(dir.path(), &plugins, &script);
    proxy.send(&prompt());
    let asked = proxy.until(|m| m["method"] == "elicitation/create").0;
    assert_eq!(asked["params"]["requestId"], 1, "{asked}");
    assert_ne!(asked["id"], 21, "{asked}");
    proxy.send(&json!({ "jsonrpc": "2.0", "id": asked["id"],
        "result": { "action": "accept", "content": { "key": "k-1" } } }));
    proxy.until(|m| m["id"] == 1);
    let seen = recorded(&log, 2);
    let answer = seen.iter().find(|m| m["id"] == 21).expect("answered");
    assert_eq!(answer["result"]["action"], "accept", "{seen:?}");
    let at_agent = seen
        .iter()
        .find(|m| m["method"] == "session/prompt")
        .unwrap();
    assert_ne!(
        at_agent["id"], 1,
        "the prompt kept the editor's id: {seen:?}"
    );
}

/// ACP 1.7's other methods pass through, under the proxy's ids, and their answers come back
/// under the editor's: `session/list`, `logout`, `session/resume` (with its sessions' identity
/// kept: see `acp_a_loaded_session_goes_on_numbering_its_turns_and_starts_as_resume`), and the
/// agent's `usage_update` reaches the editor as sent.
#[test]
fn acp_the_1_7_methods_pass_through_under_the_proxys_ids() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    let (agent, log) = peer(
        dir.path(),
        "agent",
        r#"
import json, sys
log = open(sys.argv[1], "a", buffering=1)
for line in sys.stdin:
    log.write(line)
    message = json.loads(line)
    if "method" not in message or "id" not in message:
        continue
    method = message["method"]
    result = {}
    if method == "session/list":
        result = {"sessions": [{"sessionId": "s1", "cwd": "/work"}]}
    if method == "session/resume":
        update = {"sessionUpdate": "usage_update", "used": 1200, "size": 200000}
        print(json.dumps({"jsonrpc": "2.0", "method": "session/update",
                          "params": {"sessionId": "s1", "update": update}}), flush=True)
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"#,
    );
    let args = acp_args(
        &plugins,
        &[agent.display().to_string(), log.display().to_string()],
    );
    let mut proxy = Driven::start(&args, dir.path());
    let requests = [
        json!({ "jsonrpc": "2.0", "id": 31, "method": "session/list", "params": {} }),
        json!({ "jsonrpc": "2.0", "id": 32, "method": "logout", "params": {} }),
        json!({ "jsonrpc": "2.0", "id": 33, "method": "session/resume",
            "params": { "sessionId": "s1", "cwd": "/work", "mcpServers": [] } }),
    ];
    for request in &requests {
        proxy.send(request);
    }
    let mut received = Vec::new();
    while received.len() < 4 {
        received.push(proxy.next());
    }
    for id in [31, 32, 33] {
        assert!(
            received
                .iter()
                .any(|m| m["id"] == id && m.get("result").is_some()),
            "no answer to {id}: {received:?}"
        );
    }
    assert_eq!(
        received.iter().find(|m| m["id"] == 31).unwrap()["result"]["sessions"][0]["sessionId"],
        "s1"
    );
    let usage = received
        .iter()
        .find(|m| m["method"] == "session/update")
        .unwrap_or_else(|| panic!("{received:?}"));
    assert_eq!(usage["params"]["update"]["sessionUpdate"], "usage_update");
    let seen = recorded(&log, 3);
    for (request, at_agent) in requests.iter().zip(&seen) {
        assert_eq!(at_agent["method"], request["method"], "{seen:?}");
        assert_ne!(
            at_agent["id"], request["id"],
            "the editor's id reached the agent"
        );
    }
}

#[test]
fn acp_an_ask_before_a_client_tool_asks_the_editor() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    plugins.scripted(
        "asks",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         matcher = \"fs/read_text_file\"\n[config]\npre_tool = \"ask\"\n",
    );
    let script = json!([read_request(3, "/work/secret.txt")]);
    let (mut proxy, log) = acp_proxy(dir.path(), &plugins, &script);
    let received = editor(&mut proxy, |request| {
        let options = request["params"]["options"].as_array().unwrap();
        let reject = options.iter().find(|o| o["kind"] == "reject_once").unwrap();
        if reject["optionId"] == "palisade-reject-once" {
            "palisade-reject-once"
        } else {
            "none"
        }
    });
    let asked: Vec<&Value> = received
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .collect();
    assert_eq!(asked.len(), 1, "{received:?}");
    assert!(
        asked[0]["params"]["toolCall"]["title"]
            .as_str()
            .is_some_and(|t| t.contains("asks/pre-tool")),
        "{asked:?}"
    );
    assert!(reads(&received).is_empty(), "{received:?}");
    let seen = recorded(&log, 2);
    let answer = seen
        .iter()
        .find(|m| m["id"] == 3)
        .expect("the agent was answered");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("approval-rejected") || m.contains("rejected")),
        "{answer}"
    );
}

/// What a test's agent wrote to `file` once it started (it renames the file into place).
fn written_by_the_agent(file: &Path) -> String {
    let started = Instant::now();
    while !file.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the agent never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::read_to_string(file).unwrap()
}

/// An agent whose shell tool started a command in a session of its own, then died: the
/// command does not outlive the proxy (killing the agent's process group misses it).
#[test]
fn acp_ends_what_the_agent_started_in_another_session() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    let pids = dir.path().join("pids");
    let agent = dir.path().join("agent.py");
    std::fs::write(
        &agent,
        r#"
import os, subprocess, sys
command = subprocess.Popen(["sleep", "300"], start_new_session=True)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {command.pid}")
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
for line in sys.stdin:
    pass
"#,
    )
    .unwrap();
    let agent = [agent.display().to_string(), pids.display().to_string()];
    let mut proxy = Driven::start(&acp_args(&plugins, &agent), dir.path());
    let pids = written_by_the_agent(&pids);
    let (agent_pid, command_pid) = pids.split_once(' ').unwrap();
    let alive = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit(')')
                .next()
                .unwrap_or_default()
                .trim()
                .starts_with('Z')
        })
    };
    assert!(alive(command_pid));
    Command::new("kill")
        .args(["-9", agent_pid])
        .status()
        .unwrap();
    let status = proxy.child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "the proxy ends with its agent");
    let gone = Instant::now();
    while alive(command_pid) {
        assert!(
            gone.elapsed() < Duration::from_secs(5),
            "the agent's command outlived the proxy"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// An agent whose shell tool left a background command behind (its shell exited at once):
/// when the command ends, it is waited for, not left a zombie of the proxy until the proxy
/// exits (a long session would fill the process table).
#[test]
fn acp_waits_for_what_the_agent_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    let pids = dir.path().join("pids");
    let agent = dir.path().join("agent.py");
    std::fs::write(
        &agent,
        r#"
import subprocess, sys
left = subprocess.run(["sh", "-c", "sleep 0.3 >/dev/null 2>&1 & echo $!"],
                      capture_output=True, text=True).stdout.strip()
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(left)
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
for line in sys.stdin:
    pass
"#,
    )
    .unwrap();
    let agent = [agent.display().to_string(), pids.display().to_string()];
    let _proxy = Driven::start(&acp_args(&plugins, &agent), dir.path());
    let left = written_by_the_agent(&pids);
    let waited = Instant::now();
    // A zombie keeps its entry in /proc until its parent waits for it.
    while std::fs::metadata(format!("/proc/{left}")).is_ok() {
        assert!(
            waited.elapsed() < Duration::from_secs(5),
            "process {left}, which the agent left behind, ended but was never waited for: {}",
            std::fs::read_to_string(format!("/proc/{left}/stat")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A client that stops reading while its server floods it: the proxy stops reading the
/// server once 64 MiB wait for the client, instead of holding the whole flood.
#[test]
fn mcp_a_client_that_does_not_read_slows_the_server_instead_of_filling_memory() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    let server = dir.path().join("flood.py");
    std::fs::write(
        &server,
        r#"
import json, sys
chunk = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "data": "x" * (1 << 20)}}) + "\n"
for _ in range(400):
    sys.stdout.write(chunk)
    sys.stdout.flush()
sys.stdin.read()
"#,
    )
    .unwrap();
    let args = vec![
        "mcp".to_string(),
        "--plugins".into(),
        plugins.path().display().to_string(),
        "--name".into(),
        "flood".into(),
        "--".into(),
        python(),
        server.display().to_string(),
    ];
    // The client's end of the proxy's stdout is never read.
    let proxy = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(&args)
        .env("PALISADE_CACHE_DIR", dir.path().join("cache"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let proxy = Running(proxy);
    let rss_mib = || {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", proxy.0.id())).unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kb| kb / 1024)
    };
    let mut most = 0;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        most = most.max(rss_mib());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(most > 0, "the proxy's memory could not be read");
    assert!(
        most < 250,
        "the proxy held {most} MiB of a flood nobody read"
    );
}

/// A permission request held by a slow `pre-tool` hook while the editor cancels the turn is
/// answered `cancelled` to the agent, never passed to the editor late (an agent that honoured
/// a late "allow" would run a cancelled command).
#[test]
fn acp_a_permission_request_the_editors_cancel_overtook_is_answered_cancelled() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    plugins.plugin(
        "slow",
        palisade_fixtures::NAPPER,
        "name = \"slow\"\nwasm = \"plugin.wasm\"\n[limits]\ntimeout_ms = 5000\n\
         [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\nms = 1500\n",
    );
    let permission = json!({ "jsonrpc": "2.0", "id": 5, "method": "session/request_permission",
        "params": { "sessionId": "s1",
            "toolCall": { "toolCallId": "c1", "title": "rm -rf build", "kind": "execute",
                "rawInput": { "command": "rm -rf build" } },
            "options": [
                { "optionId": "yes", "name": "Allow", "kind": "allow_once" },
                { "optionId": "no", "name": "Reject", "kind": "reject_once" } ] } });
    let (mut proxy, log) = acp_proxy(dir.path(), &plugins, &json!([permission]));
    proxy.send(&prompt());
    // The agent has the prompt, and its permission request is with the slow hook.
    recorded(&log, 1);
    std::thread::sleep(Duration::from_millis(300));
    proxy.send(&json!({ "jsonrpc": "2.0", "method": "session/cancel",
        "params": { "sessionId": "s1" } }));
    let (answer, before) = proxy.until(|m| m["id"] == 1);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(
        before
            .iter()
            .all(|m| m["method"] != "session/request_permission"),
        "the request reached the editor after its cancel: {before:?}"
    );
    let seen = recorded(&log, 3);
    let answered = seen
        .iter()
        .find(|m| m["id"] == 5)
        .expect("the agent was answered");
    assert_eq!(
        answered["result"]["outcome"]["outcome"], "cancelled",
        "{answered}"
    );
}

/// `palisade acp` with no agent of its own is one proxy of a conductor chain: this test plays
/// the conductor. The editor's messages come plain, the successor's (the agent's) wrapped in
/// `proxy/successor`; Palisade judges both as it does with an agent of its own, passes on
/// what goes on — to the successor wrapped, under ids of its own — and answers the
/// successor's requests plain, under the conductor's ids.
#[test]
fn acp_is_one_proxy_of_a_conductor_chain() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    plugins.scripted(
        "prompts",
        "[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"guard\"\n\
         [config]\nprompt_submit = \"reject-secrets\"\n",
    );
    plugins.scripted(
        "tools",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         [config]\npre_tool = \"deny\"\n",
    );
    let args = [
        "acp".to_string(),
        "--plugins".into(),
        plugins.path().display().to_string(),
    ];
    let mut proxy = Driven::start(&args, dir.path());
    let successor = |message: &Value| message["method"] == "proxy/successor";

    // Initialization: Palisade passes `initialize` on before it answers.
    let init = json!({ "protocolVersion": 1, "clientCapabilities": {} });
    proxy.send(
        &json!({ "jsonrpc": "2.0", "id": 1, "method": "proxy/initialize",
        "params": init }),
    );
    let wrapped = proxy.next();
    assert!(successor(&wrapped), "{wrapped}");
    assert_eq!(
        wrapped["params"],
        json!({ "method": "initialize", "params": init })
    );
    let own = wrapped["id"].clone();
    assert!(
        own.as_str().is_some_and(|id| id.starts_with("palisade-")),
        "{own}"
    );
    let agent_info = json!({ "protocolVersion": 1, "agentCapabilities": {}, "authMethods": [] });
    proxy.send(&json!({ "jsonrpc": "2.0", "id": own, "result": agent_info }));
    assert_eq!(
        proxy.next(),
        json!({ "jsonrpc": "2.0", "id": 1, "result": agent_info })
    );

    // A session, passed on and answered.
    proxy.send(&json!({ "jsonrpc": "2.0", "id": 2, "method": "session/new",
        "params": { "cwd": "/", "mcpServers": [] } }));
    let wrapped = proxy.next();
    assert_eq!(wrapped["params"]["method"], "session/new", "{wrapped}");
    proxy.send(&json!({ "jsonrpc": "2.0", "id": wrapped["id"],
        "result": { "sessionId": "s1" } }));
    assert_eq!(proxy.next()["result"]["sessionId"], "s1");

    // A prompt a hook rejects never reaches the successor.
    proxy.send(
        &json!({ "jsonrpc": "2.0", "id": 3, "method": "session/prompt",
        "params": { "sessionId": "s1",
            "prompt": [{ "type": "text", "text": "my password is hunter2" }] } }),
    );
    let (answer, before) = proxy.until(|m| m["id"] == 3);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(before.iter().all(|m| !successor(m)), "{before:?}");

    // The successor's permission request, which a guard denies: answered plain under the
    // conductor's id, with the request's reject option; the editor is told, not asked.
    proxy.send(
        &json!({ "jsonrpc": "2.0", "id": 9, "method": "proxy/successor",
        "params": { "method": "session/request_permission", "params": { "sessionId": "s1",
            "toolCall": { "toolCallId": "c1", "title": "rm -rf /", "kind": "execute",
                "rawInput": { "command": "rm -rf /" } },
            "options": [
                { "optionId": "yes", "name": "Allow", "kind": "allow_once" },
                { "optionId": "no", "name": "Reject", "kind": "reject_once" } ] } } }),
    );
    let (answer, before) = proxy.until(|m| m["id"] == 9);
    assert_eq!(
        answer,
        json!({ "jsonrpc": "2.0", "id": 9,
            "result": { "outcome": { "outcome": "selected", "optionId": "no" } } })
    );
    assert!(
        before
            .iter()
            .all(|m| m["method"] != "session/request_permission" && !successor(m)),
        "{before:?}"
    );

    // The successor's notification reaches the editor plain.
    let update = json!({ "sessionId": "s1", "update": { "sessionUpdate": "agent_message_chunk",
        "content": { "type": "text", "text": "working" } } });
    proxy.send(&json!({ "jsonrpc": "2.0", "method": "proxy/successor",
        "params": { "method": "session/update", "params": update } }));
    let plain = json!({ "jsonrpc": "2.0", "method": "session/update", "params": update });
    let (_, before) = proxy.until(|m| *m == plain);
    // The editor was told of the denial, not asked.
    assert!(
        before.iter().all(|m| m["method"] == "session/update"
            && m["params"]["update"]["content"]["text"]
                .as_str()
                .is_some_and(|t| t.contains("tools/pre-tool"))),
        "{before:?}"
    );

    // An envelope of another shape is refused, and a plain `initialize`: Palisade has no agent.
    proxy.send(
        &json!({ "jsonrpc": "2.0", "id": 10, "method": "proxy/successor",
        "params": { "method": "session/update", "sessionId": "s1" } }),
    );
    let refused = proxy.next();
    assert_eq!(refused["id"], 10, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`sessionId`")
    );
    proxy.send(&json!({ "jsonrpc": "2.0", "id": 11, "method": "initialize", "params": init }));
    let refused = proxy.next();
    assert_eq!(refused["id"], 11, "{refused}");
    proxy.close();
}

/// A `palisade acp` that starts its own agent is a chain's last component, not a proxy: a
/// `proxy/initialize` is refused, saying how to run it in a chain, and never reaches the agent.
#[test]
fn acp_with_an_agent_of_its_own_refuses_to_be_a_chains_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = PluginDir::new();
    let (mut proxy, log) = acp_proxy(dir.path(), &plugins, &json!([]));
    proxy.send(
        &json!({ "jsonrpc": "2.0", "id": 1, "method": "proxy/initialize",
        "params": { "protocolVersion": 1, "clientCapabilities": {} } }),
    );
    let refused = proxy.next();
    assert_eq!(refused["id"], 1, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("leave `-- AGENT` out"),
        "{refused}"
    );
    proxy.send(&prompt());
    recorded(&log, 1);
    let seen = std::fs::read_to_string(&log).unwrap();
    assert!(!seen.contains("initialize"), "{seen}");
}
