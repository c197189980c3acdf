//! `palisade mcp`: a Model Context Protocol proxy in front of an MCP server. The client (an
//! agent, an editor) starts Palisade as its server; Palisade starts the real server as a
//! child and passes every message both ways unchanged, but `tools/call`, which runs
//! Palisade's whole tool pipeline (see [`call`]):
//!
//! `pre-tool → approval → tool-guard → tool-execute wrappers → the server's tools/call →
//! post-tool → tool-result`, and the committed facts.
//!
//! Tool names reach hooks as `mcp__SERVER__TOOL` (Claude Code's convention, so one matcher
//! serves both), SERVER being `--name` or the name the server gives in its `initialize`
//! answer. One Palisade session per connection: per-session instances keep their state
//! across the connection's calls.
//!
//! Transport: MCP's stdio framing (JSON-RPC 2.0, one message per line), proxied line by line
//! so that every field of every message — including those of protocol versions newer than
//! this build — reaches the other side as it was sent; the messages Palisade judges are read
//! with the types of the official Rust SDK (`rmcp`'s model), and one that does not match them
//! is refused, never passed on unjudged. The server's exit, or a line from it that is not
//! JSON, ends the proxy: every request still open is answered with an error first.

mod call;
mod http;

use crate::jsonrpc::{
    Lines, Writer, load_plugins, next_message, reap, spawn_child, truncate, until_exit,
};
use palisade::{Lifecycle, Plugins, Signal};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;
use tokio::sync::oneshot;

/// Guard an MCP server: `palisade mcp --plugins DIR -- SERVER [ARGS…]`, configured in the
/// client as the server's command.
#[derive(clap::Args)]
pub struct McpCommand {
    /// The plugin directory.
    #[arg(long)]
    plugins: PathBuf,
    /// The server's name in the tool names hooks see (`mcp__NAME__TOOL`) [default: the name
    /// the server gives in its `initialize` answer].
    #[arg(long)]
    name: Option<String>,
    /// Append every lifecycle event to this JSON Lines file.
    #[arg(long)]
    audit_log: Option<PathBuf>,
    /// Serve MCP's streamable-HTTP transport on this address, in front of the server at
    /// --upstream (instead of a server started on stdio).
    #[arg(long, value_name = "ADDR", requires_all = ["upstream", "name"], conflicts_with = "server")]
    listen: Option<std::net::SocketAddr>,
    /// With --listen: the MCP server's streamable-HTTP endpoint, e.g. http://127.0.0.1:3001/mcp.
    #[arg(long, value_name = "URL", requires = "listen")]
    upstream: Option<String>,
    /// With --listen: the file holding the bearer token every client request must send;
    /// created with a random token when missing [default: palisade serve's,
    /// ~/.config/palisade/serve-token].
    #[arg(long, value_name = "FILE", requires = "listen")]
    token_file: Option<PathBuf>,
    /// With --listen: a file holding the bearer token the upstream server takes.
    #[arg(long, value_name = "FILE", requires = "listen")]
    upstream_token_file: Option<PathBuf>,
    /// The server's command and its arguments (after `--`).
    #[arg(last = true, required_unless_present = "listen")]
    server: Vec<String>,
}

/// JSON-RPC's code for a message that is not JSON.
const PARSE_ERROR: i64 = -32700;
/// JSON-RPC's code for an invalid request (a batch, which this proxy does not take).
const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC's code for parameters that do not match the method's schema.
const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC's code for an internal error: the server went away.
const INTERNAL_ERROR: i64 = -32603;
/// How long the calls in flight get to answer once the server has gone.
const SETTLE: Duration = Duration::from_secs(5);

impl McpCommand {
    /// Whether it proxies a server on stdio (one client), not on HTTP.
    pub fn over_stdio(&self) -> bool {
        self.listen.is_none()
    }

    /// Runs the proxy until the client or the server goes away. Never returns: the process
    /// exits (0 when the client closed the connection, 1 when the server ended), since a read
    /// of standard input in flight would otherwise hold the runtime open.
    pub async fn execute(self) -> anyhow::Result<std::process::ExitCode> {
        let plugins = load_plugins(&self.plugins, self.audit_log.as_deref()).await?;
        if let (Some(address), Some(upstream)) = (self.listen, self.upstream) {
            let upstream_token = match &self.upstream_token_file {
                Some(file) => Some(crate::token::read(file)?),
                None => None,
            };
            let listen = http::Listen {
                address,
                upstream,
                name: self.name.unwrap_or_default(),
                token_file: crate::token::path_or_default(self.token_file.as_deref())?,
                upstream_token,
            };
            http::serve(plugins, listen).await?;
            return Ok(std::process::ExitCode::SUCCESS);
        }
        let mut child = spawn_child(&self.server, "the MCP server")?;
        let server = Writer::new(child.stdin.take().expect("piped"));
        let from_server = child.stdout.take().expect("piped");
        let proxy = Proxy::new(plugins, self.name, server);
        tokio::spawn(proxy.clone().from_client());
        let ended = until_exit(&mut child, proxy.clone().from_server(from_server)).await;
        let status = reap(&mut child).await;
        let why = format!("the MCP server ended ({ended}; {status})");
        crate::jsonrpc::decide_exit(1);
        eprintln!("palisade mcp: {why}");
        proxy.server_gone(&why).await;
        crate::jsonrpc::exit(1);
    }
}

/// The proxy between one client and one server: one connection, one Palisade session.
struct Proxy {
    lifecycle: Lifecycle,
    client: Writer,
    server: Writer,
    /// `--name`, else the server's own (from its `initialize` answer).
    name: Mutex<Option<String>>,
    /// What makes the ids Palisade sends unlike any the client or the server chose.
    prefix: String,
    next: AtomicU64,
    /// The client's `initialize` request, whose answer names the server.
    initialize: Mutex<Option<String>>,
    /// Whether the client takes `elicitation/create` (declared in its `initialize`).
    elicits: AtomicBool,
    /// Requests Palisade sent the server (the pipeline's calls of the tool), by id; `None`
    /// once the server has gone, so that a call after that fails at once.
    calls: Mutex<Option<HashMap<String, oneshot::Sender<Value>>>>,
    /// Requests Palisade sent the client (elicitations), by id.
    asks: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    /// Client requests passed to the server and not yet answered, by id.
    open: Mutex<HashMap<String, Value>>,
    /// The client's `tools/call`s in the pipeline, by id: their cancellation.
    in_flight: Mutex<HashMap<String, Signal>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn id_key(id: &Value) -> String {
    id.to_string()
}

/// 64 random bits, in hex: the proxy's own ids and its session's.
pub(super) fn random_hex() -> String {
    let mut bytes = [0u8; 8];
    // Without the OS's randomness the ids are still unique within the process.
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Proxy {
    fn new(plugins: Plugins, name: Option<String>, server: Writer) -> Arc<Proxy> {
        let prefix = format!("palisade-{}", random_hex());
        Arc::new_cyclic(|weak: &Weak<Proxy>| {
            let session = plugins
                .session(format!("mcp-{}", random_hex()))
                .with_approver(Arc::new(call::Elicit(weak.clone())));
            Proxy {
                lifecycle: Lifecycle::new(session),
                client: Writer::new(tokio::io::stdout()),
                server,
                name: Mutex::new(name),
                prefix,
                next: AtomicU64::new(1),
                initialize: Mutex::default(),
                elicits: AtomicBool::new(false),
                calls: Mutex::new(Some(HashMap::new())),
                asks: Mutex::default(),
                open: Mutex::default(),
                in_flight: Mutex::default(),
            }
        })
    }

    /// A new id for a request of Palisade's own.
    fn own_id(&self, what: &str) -> String {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        format!("{}-{what}-{n}", self.prefix)
    }

    /// The server's name, as tool names carry it.
    fn server_name(&self) -> String {
        lock(&self.name)
            .clone()
            .unwrap_or_else(|| "server".to_string())
    }

    async fn from_client(self: Arc<Self>) {
        let mut lines = Lines::new(tokio::io::stdin());
        loop {
            let line = match lines.next().await {
                Ok(Some(line)) => line,
                Ok(None) => break,
                Err(e) => {
                    eprintln!("palisade mcp: the client's input ends: {e}");
                    break;
                }
            };
            let message = match crate::jsonrpc::parse(&line) {
                Ok(message @ Value::Object(_)) => message,
                Ok(Value::Array(_)) => {
                    // A batch could hide a tools/call from the pipeline: refused whole.
                    let why = "palisade mcp takes one JSON-RPC message per line, not a batch";
                    self.client
                        .error(&Value::Null, INVALID_REQUEST, why.into(), None);
                    continue;
                }
                // What Palisade cannot read is not passed on: the server might read a call in
                // it.
                _ => {
                    let why = format!("not a JSON-RPC message: {}", truncate(&line));
                    self.client.error(&Value::Null, PARSE_ERROR, why, None);
                    continue;
                }
            };
            let method = message["method"].as_str().unwrap_or_default().to_string();
            match message.get("id").cloned() {
                Some(id) if method == "tools/call" => {
                    let proxy = self.clone();
                    tokio::spawn(async move { proxy.call_tool(id, message).await });
                }
                Some(id) if method.is_empty() => {
                    // An answer: to one of Palisade's questions, or to the server's request.
                    match lock(&self.asks).remove(&id_key(&id)) {
                        Some(waiting) => {
                            let _ = waiting.send(message);
                        }
                        None => self.server.line(line),
                    }
                }
                Some(id) => {
                    if method == "initialize" {
                        let elicits = !message["params"]["capabilities"]["elicitation"].is_null();
                        self.elicits.store(elicits, Ordering::Relaxed);
                        *lock(&self.initialize) = Some(id_key(&id));
                    }
                    lock(&self.open).insert(id_key(&id), id);
                    self.server.line(line);
                }
                None if method == "tools/call" => {
                    // A call without an id would run at the server unjudged: it goes nowhere.
                    eprintln!(
                        "palisade mcp: dropped a tools/call without an id (not judged, not sent)"
                    );
                }
                None => {
                    if method == "notifications/cancelled" {
                        self.cancelled(&message["params"]["requestId"]);
                    }
                    self.server.line(line);
                }
            }
        }
        // The client went away: what it sent reaches the server, whose input then ends; the
        // session ends, and the server goes too, with what it started (`jsonrpc::exit`).
        self.server.close().await;
        self.lifecycle
            .session_ended("the client closed the connection");
        self.lifecycle
            .session()
            .drain_background_for(Duration::from_secs(2))
            .await;
        crate::jsonrpc::exit(0);
    }

    /// The client cancelled request `id`: a `tools/call` in the pipeline stops where it is.
    fn cancelled(&self, id: &Value) {
        if let Some(signal) = lock(&self.in_flight).get(&id_key(id)) {
            signal.cancel();
        }
    }

    async fn from_server(self: Arc<Self>, stdout: tokio::process::ChildStdout) -> String {
        let mut lines = Lines::new(stdout);
        loop {
            let (line, message) = match next_message(&mut lines).await {
                Ok(next) => next,
                Err(why) => return why,
            };
            let is_answer = message.get("method").is_none();
            if let (true, Some(id)) = (is_answer, message.get("id")) {
                let key = id_key(id);
                let waiting = lock(&self.calls).as_mut().and_then(|c| c.remove(&key));
                if let Some(waiting) = waiting {
                    let _ = waiting.send(message);
                    continue;
                }
                if lock(&self.initialize).as_deref() == Some(key.as_str()) {
                    self.named(&message);
                }
                lock(&self.open).remove(&key);
            }
            self.client.line(line);
        }
    }

    /// The server's `initialize` answer: its name, unless `--name` gave one.
    fn named(&self, answer: &Value) {
        let mut name = lock(&self.name);
        if name.is_none() {
            *name = answer["result"]["serverInfo"]["name"]
                .as_str()
                .map(tool_name_part)
                .filter(|n| !n.is_empty());
        }
    }

    /// The server has gone: the pipeline's calls waiting for it fail (and their tools/calls
    /// answer, within [`SETTLE`]), then every other open request is answered with `why`.
    async fn server_gone(&self, why: &str) {
        // Dropping the senders fails every waiting call; `None` fails those still to come.
        lock(&self.calls).take();
        let settle = tokio::time::Instant::now() + SETTLE;
        while !lock(&self.in_flight).is_empty() && tokio::time::Instant::now() < settle {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let open: Vec<Value> = lock(&self.open).drain().map(|(_, id)| id).collect();
        for id in open {
            self.client
                .error(&id, INTERNAL_ERROR, why.to_string(), None);
        }
        let stuck: Vec<String> = lock(&self.in_flight).drain().map(|(id, _)| id).collect();
        for id in stuck {
            if let Ok(id) = serde_json::from_str::<Value>(&id) {
                self.client
                    .error(&id, INTERNAL_ERROR, why.to_string(), None);
            }
        }
        self.client.flush().await;
    }
}

/// A server name as a part of `mcp__SERVER__TOOL`: Claude Code's rule, every character other
/// than a letter, a digit, `_` or `-` becomes `_`.
fn tool_name_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A JSON-RPC request of Palisade's own.
fn request(id: &str, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}
