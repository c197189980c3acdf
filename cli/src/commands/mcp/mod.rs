//! `palisade mcp`: a Model Context Protocol proxy in front of an MCP server. The client (an
//! agent, an editor) starts Palisade as its server; Palisade starts the real server as a
//! child and passes every message both ways unchanged, but `tools/call`, which runs
//! Palisade's whole tool pipeline (see [`call`]):
//!
//! `pre-tool → approval → tool-guard → tool-execute wrappers → the server's tools/call →
//! post-tool → tool-result`, and the committed facts. What reaches either side past a call's
//! answer is judged where it passes: a 2026-07-28 server's questions and the client's answers
//! ([`rounds`]), and a call run as a task, to its end ([`tasks`]).
//!
//! Tool names reach hooks as `mcp__SERVER__TOOL` (Claude Code's convention, so one matcher
//! serves both), SERVER being `--name` or the name the server gives in its `initialize`
//! answer. One Palisade session per connection: per-session instances keep their state
//! across the connection's calls.
//!
//! Transport: MCP's stdio framing (JSON-RPC 2.0, one message per line). Every message is read
//! strictly and forwarded as it was read, re-encoded, never as the peer's bytes: a line that
//! parsers could read two ways is refused ([`crate::jsonrpc::strict`]); every field of every
//! message — including those of protocol versions newer than this build — still reaches the
//! other side as a JSON value. Every request either side sends goes on under an id of the
//! proxy's ([`crate::jsonrpc::relay`]), and an answer to no request in flight is dropped. The
//! messages Palisade judges are read with the types of the official Rust SDK (`rmcp`'s model),
//! and one that does not match them is refused, never passed on unjudged. The server's exit
//! ends the proxy: every request still open is answered with an error first.

mod asks;
mod call;
mod http;
mod rounds;
mod schema;
mod tasks;

use crate::jsonrpc::relay::{self, Relay};
use crate::jsonrpc::strict::{INVALID_REQUEST, Kind};
use crate::jsonrpc::{Lines, Writer, load_plugins, reap, spawn_child, until_exit};
use palisade::{Lifecycle, Plugins, Signal};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// With --listen: MCP sessions live at once at most. Past it the oldest session that holds
    /// no plugin state and has no call in flight ends; when every one does, a new session is
    /// refused (503).
    #[arg(long, value_name = "N", default_value_t = 1024, requires = "listen",
          value_parser = clap::value_parser!(u32).range(1..))]
    max_sessions: u32,
    /// The server's command and its arguments (after `--`).
    #[arg(last = true, required_unless_present = "listen")]
    server: Vec<String>,
}

/// JSON-RPC's code, in MCP 2026-07-28, for a header that does not match the body.
pub(super) const HEADER_MISMATCH: i64 = -32020;
/// JSON-RPC's code for a method the callee does not serve.
const METHOD_NOT_FOUND: i64 = -32601;
/// `_meta`'s key of the server's name and version in a 2026-07-28 result.
const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta`'s key of the `subscriptions/listen` request a notification is sent for.
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// Rewrites the subscription `value` (a notification's params, or a result) is tagged with,
/// if it is, to what `map` makes of it; `None` removes the tag.
fn subscription_of(value: &mut Value, map: impl FnOnce(&Value) -> Option<Value>) {
    let Some(meta) = value.get_mut("_meta").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(tag) = meta.get(SUBSCRIPTION_ID) else {
        return;
    };
    match map(tag) {
        Some(mapped) => meta.insert(SUBSCRIPTION_ID.to_string(), mapped),
        None => meta.remove(SUBSCRIPTION_ID),
    };
}

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
                max_sessions: self.max_sessions as usize,
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
    lifecycle: Arc<Lifecycle>,
    client: Writer,
    server: Writer,
    /// `--name`, else the server's own (from its `initialize` answer).
    name: Mutex<Option<String>>,
    /// The client's `initialize` request, or a 2026-07-28 client's `server/discover` (by the
    /// proxy's id), whose answer names the server.
    initialize: Mutex<Option<String>>,
    /// Whether the client takes `elicitation/create` (declared in its `initialize`).
    elicits: AtomicBool,
    /// Requests Palisade sent the server (the pipeline's calls of the tool), by id; `None`
    /// once the server has gone, so that a call after that fails at once.
    calls: Mutex<Option<HashMap<String, oneshot::Sender<Value>>>>,
    /// Requests Palisade sent the client (elicitations), by id.
    asks: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    /// Client requests passed to the server and not yet answered.
    to_server: Relay,
    /// Server requests passed to the client and not yet answered.
    to_client: Relay,
    /// The client's `tools/call`s in the pipeline, by id: their cancellation.
    in_flight: Mutex<HashMap<String, Signal>>,
    /// The server's tool schemas and the questions it asked, for the calls to come.
    seen: call::Seen,
    /// The server's questions passed to the client and not yet answered: the method of each,
    /// by the id the client has it under.
    questions_out: Mutex<HashMap<String, String>>,
    /// The client's requests that take rounds (`prompts/get`, `resources/read`) passed to the
    /// server, by the proxy's id: their method and parameters, for the round an answer opens.
    rounds_out: Mutex<HashMap<String, (String, Value)>>,
    /// The client's `tasks/get`s passed to the server, by the proxy's id: their parameters,
    /// for the task state an answer carries.
    tasks_out: Mutex<HashMap<String, Value>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn id_key(id: &Value) -> String {
    relay::key(id)
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
        Arc::new_cyclic(|weak: &Weak<Proxy>| {
            let session = plugins
                .session(format!("mcp-{}", random_hex()))
                .with_approver(Arc::new(call::Elicit(weak.clone())));
            Proxy {
                lifecycle: Arc::new(Lifecycle::new(session)),
                client: Writer::new(crate::jsonrpc::stdout()),
                server,
                name: Mutex::new(name),
                initialize: Mutex::default(),
                elicits: AtomicBool::new(false),
                calls: Mutex::new(Some(HashMap::new())),
                asks: Mutex::default(),
                to_server: Relay::default(),
                to_client: Relay::default(),
                in_flight: Mutex::default(),
                seen: call::Seen::default(),
                questions_out: Mutex::default(),
                rounds_out: Mutex::default(),
                tasks_out: Mutex::default(),
            }
        })
    }

    /// The server's name, as tool names carry it.
    fn server_name(&self) -> String {
        lock(&self.name)
            .clone()
            .unwrap_or_else(|| "server".to_string())
    }

    async fn from_client(self: Arc<Self>) {
        let mut lines = Lines::new(crate::jsonrpc::stdin());
        loop {
            // What Palisade cannot read, or could read two ways, is not passed on: the server
            // might read a call in it.
            let mut message = match lines
                .next_judgeable("mcp", ("client", &self.client), &self.server)
                .await
            {
                Ok(message) => message,
                Err(why) => {
                    eprintln!("palisade mcp: the client's input ends: {why}");
                    break;
                }
            };
            let method = message.method().to_string();
            let id = message.id().clone();
            match message.kind {
                Kind::Request => {
                    if lock(&self.in_flight).contains_key(&id_key(&id))
                        || self.to_server.in_flight(&id)
                    {
                        let why = relay::DuplicateId.to_string();
                        self.client.error(&id, INVALID_REQUEST, why, None);
                        continue;
                    }
                    if method == "tools/call" {
                        let cancel = Signal::new();
                        lock(&self.in_flight).insert(id_key(&id), cancel.clone());
                        let proxy = self.clone();
                        let message = message.value;
                        tokio::spawn(async move { proxy.call_tool(id, message, cancel).await });
                        continue;
                    }
                    let params = message.value.get("params").cloned().unwrap_or(Value::Null);
                    if method.starts_with("tasks/")
                        && let Some(error) = self.seen.tasks.refusal(&method, &params)
                    {
                        self.client
                            .send(&json!({ "jsonrpc": "2.0", "id": id, "error": error }));
                        continue;
                    }
                    if let Some(why) = rounds::unjudged_answers(&method, &params) {
                        self.client.error(&id, INVALID_PARAMS, why, None);
                        continue;
                    }
                    let own = self.to_server.relay(&id).expect("checked above");
                    if method == "initialize" {
                        let capabilities = &message.value["params"]["capabilities"];
                        let elicits = !capabilities["elicitation"].is_null();
                        self.elicits.store(elicits, Ordering::Relaxed);
                        *lock(&self.initialize) = Some(id_key(&own));
                    }
                    if method == "server/discover" {
                        *lock(&self.initialize) = Some(id_key(&own));
                    }
                    message.value["id"] = own.clone();
                    if method == "tasks/get" {
                        lock(&self.tasks_out).insert(id_key(&own), params.clone());
                    }
                    if method == "tasks/update" {
                        // Its answers judged before the server hears them, in a task of its own.
                        let proxy = self.clone();
                        tokio::spawn(async move { proxy.task_updated(own, message.value).await });
                        continue;
                    }
                    if rounds::MULTI_ROUND.contains(&method.as_str()) {
                        let round = (method.clone(), params.clone());
                        lock(&self.rounds_out).insert(id_key(&own), round);
                        if params.get("inputResponses").is_some() {
                            // A retry: its answers judged before the server hears them, in a
                            // task of its own.
                            let proxy = self.clone();
                            tokio::spawn(async move { proxy.retried(own, message.value).await });
                            continue;
                        }
                    }
                    self.server.send(&message.value);
                }
                Kind::Response => {
                    // To one of Palisade's questions, or to a request of the server's.
                    if let Some(waiting) = lock(&self.asks).remove(&id_key(&id)) {
                        let _ = waiting.send(message.value);
                        continue;
                    }
                    if let Some(request) = self.to_client.answered_or_drop(&id, "mcp", "client") {
                        message.value["id"] = request.peer_id;
                        match lock(&self.questions_out).remove(&id_key(&id)) {
                            // The answer to a server's question: judged before the server
                            // hears it, in a task of its own.
                            Some(method) => {
                                let proxy = self.clone();
                                let key = id_key(&id);
                                tokio::spawn(async move {
                                    proxy.answered(key, method, message.value).await
                                });
                            }
                            None => self.server.send(&message.value),
                        }
                    }
                }
                Kind::Notification if method == "tools/call" => {
                    // A call without an id would run at the server unjudged: it goes nowhere.
                    eprintln!(
                        "palisade mcp: dropped a tools/call without an id (not judged, not sent)"
                    );
                }
                Kind::Notification if method == "notifications/cancelled" => {
                    let params = &mut message.value["params"];
                    if let Some(own) = self.cancelled(&params["requestId"]) {
                        params["requestId"] = own;
                        self.server.send(&message.value);
                    }
                }
                Kind::Notification => self.server.send(&message.value),
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

    /// The client cancelled its request `id`: a `tools/call` in the pipeline stops where it
    /// is (and cancels its own call at the server, if one is out); a request passed on is
    /// cancelled at the server under the proxy's id, returned. Any other id is nobody's.
    fn cancelled(&self, id: &Value) -> Option<Value> {
        if let Some(signal) = lock(&self.in_flight).get(&id_key(id)) {
            signal.cancel();
            return None;
        }
        self.to_server.own_of(id)
    }

    async fn from_server(self: Arc<Self>, stdout: tokio::process::ChildStdout) -> String {
        let mut lines = Lines::new(stdout);
        loop {
            let mut message = match lines
                .next_judgeable("mcp", ("server", &self.server), &self.client)
                .await
            {
                Ok(message) => message,
                Err(why) => return why,
            };
            let id = message.id().clone();
            match message.kind {
                Kind::Response => {
                    let key = id_key(&id);
                    let waiting = lock(&self.calls).as_mut().and_then(|c| c.remove(&key));
                    if let Some(waiting) = waiting {
                        let _ = waiting.send(message.value);
                        continue;
                    }
                    let Some(request) = self.to_server.answered_or_drop(&id, "mcp", "server")
                    else {
                        continue;
                    };
                    if lock(&self.initialize).as_deref() == Some(key.as_str()) {
                        self.named(&message.value);
                    }
                    let asked = lock(&self.tasks_out).remove(&key);
                    if let (Some(params), Some(_)) = (asked, message.value.get("result")) {
                        // A task's state, judged before the client reads it.
                        message.value["id"] = request.peer_id;
                        let proxy = self.clone();
                        let message = message.value;
                        tokio::spawn(async move { proxy.task_got(params, message).await });
                        continue;
                    }
                    let round = lock(&self.rounds_out).remove(&key);
                    if let (Some((method, params)), Some(result)) =
                        (round, message.value.get("result"))
                        && rounds::result_type(result) == "input_required"
                    {
                        // The server's questions, judged before the client sees them.
                        message.value["id"] = request.peer_id;
                        let proxy = self.clone();
                        let message = message.value;
                        tokio::spawn(async move { proxy.round(method, params, message).await });
                        continue;
                    }
                    // A `subscriptions/listen` ended by the server names its subscription by
                    // the request's id: the client's.
                    if let Some(result) = message.value.get_mut("result") {
                        subscription_of(result, |_| Some(request.peer_id.clone()));
                    }
                    message.value["id"] = request.peer_id;
                }
                Kind::Request => match self.to_client.relay_or_refuse(&id, &self.server) {
                    Some(own) if rounds::is_question(message.method()) => {
                        // A question for the client's user or model (MCP 2025-11-25): judged
                        // before the client sees it, in a task of its own.
                        let proxy = self.clone();
                        tokio::spawn(async move { proxy.ask(own, message.value).await });
                        continue;
                    }
                    Some(own) => message.value["id"] = own,
                    None => continue,
                },
                Kind::Notification if message.method() == "notifications/cancelled" => {
                    let params = &mut message.value["params"];
                    let Some(own) = self.to_client.own_of(&params["requestId"]) else {
                        continue;
                    };
                    self.to_client.answered(&own);
                    params["requestId"] = own;
                }
                Kind::Notification => {
                    if message.method() == "notifications/tools/list_changed" {
                        self.seen.schemas.changed();
                    }
                    if message.method() == "notifications/tasks"
                        && !self.seen.tasks.notified(&mut message.value["params"])
                    {
                        continue;
                    }
                    // On a `subscriptions/listen` (MCP 2026-07-28), tagged with the id the
                    // server knows the request by: the proxy's, which the client never saw.
                    let mut known = true;
                    if let Some(params) = message.value.get_mut("params") {
                        subscription_of(params, |own| {
                            let peer = self.to_server.peer_of(own);
                            known = peer.is_some();
                            peer
                        });
                    }
                    if !known {
                        continue;
                    }
                }
            }
            self.client.send(&message.value);
        }
    }

    /// The judge of the server's own questions to the client (MCP 2025-11-25's requests),
    /// each by the id the client sees it under.
    fn questions_judge(&self) -> rounds::Rounds {
        let server = self.server_name();
        rounds::Rounds::of_server_requests(&self.lifecycle, server, &self.seen.questions)
    }

    /// The server's question `message` (a request, relayed as `own`), through the tool step:
    /// on to the client, or, denied, answered in the client's place (see [`refused`]).
    async fn ask(self: Arc<Self>, own: Value, mut message: Value) {
        let key = id_key(&own);
        let method = message["method"].as_str().unwrap_or_default().to_string();
        let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
        match self
            .questions_judge()
            .question(None, &key, &method, params)
            .await
        {
            Ok(()) => {
                lock(&self.questions_out).insert(key, method);
                message["id"] = own;
                self.client.send(&message);
            }
            Err(why) => {
                if let Some(request) = self.to_client.answered(&own) {
                    self.server.send(&refused(&request.peer_id, &method, &why));
                }
            }
        }
    }

    /// The client's answer `message` (to the server's question `key`, of `method`, already
    /// under the server's id), as the question's result: on to the server as `post-tool` left
    /// it, or, blocked, refused in the client's place (see [`refused`]).
    async fn answered(self: Arc<Self>, key: String, method: String, mut message: Value) {
        let Some(result) = message.get("result").cloned() else {
            // An error answers nothing: it goes on as it is.
            return self.server.send(&message);
        };
        match self.questions_judge().answer(None, &key, &result).await {
            Ok(kept) => {
                message["result"] = kept;
                self.server.send(&message);
            }
            Err(why) => self.server.send(&refused(&message["id"], &method, &why)),
        }
    }

    /// The judge of the rounds of the client's `method` request with `params`.
    fn rounds_of(&self, method: &str, params: &Value) -> rounds::Rounds {
        let server = self.server_name();
        rounds::Rounds::of_request(
            &self.lifecycle,
            server,
            &self.seen.questions,
            method,
            params,
        )
    }

    /// The client's retry `message` of a round (under the proxy's id `own`): on to the server
    /// with its answers as `post-tool` left them, or, a hook blocking one, refused.
    async fn retried(self: Arc<Self>, own: Value, mut message: Value) {
        let method = message["method"].as_str().unwrap_or_default().to_string();
        let rounds = self.rounds_of(&method, &message["params"]);
        match rounds.answers(&message["params"]).await {
            Ok(params) => {
                message["params"] = params;
                self.server.send(&message);
            }
            Err(why) => {
                lock(&self.rounds_out).remove(&id_key(&own));
                if let Some(request) = self.to_server.answered(&own) {
                    self.client
                        .error(&request.peer_id, INVALID_PARAMS, why, None);
                }
            }
        }
    }

    /// The server's `input_required` answer `message` (already under the client's id) to
    /// the client's `method` request with `params`: on to the client, or, a hook denying one
    /// of its questions, an error in its place.
    async fn round(self: Arc<Self>, method: String, params: Value, message: Value) {
        let rounds = self.rounds_of(&method, &params);
        match rounds.questions(&message["result"]).await {
            Ok(()) => self.client.send(&message),
            Err(why) => self
                .client
                .error(&message["id"], INVALID_REQUEST, why, None),
        }
    }

    /// The client's `tasks/update` `message` (under the proxy's id `own`): on to the server
    /// with its answers as `post-tool` left them, or, a hook blocking one, refused.
    async fn task_updated(self: Arc<Self>, own: Value, mut message: Value) {
        match self.seen.tasks.update(&message["params"]).await {
            Ok(params) => {
                message["params"] = params;
                self.server.send(&message);
            }
            Err(why) => {
                if let Some(request) = self.to_server.answered(&own) {
                    self.client
                        .error(&request.peer_id, INVALID_PARAMS, why, None);
                }
            }
        }
    }

    /// The server's answer `message` (already under the client's id) to the client's
    /// `tasks/get` with `params`: the task's state as judged, or an error in its place.
    async fn task_got(self: Arc<Self>, params: Value, mut message: Value) {
        let upstream = Arc::new(call::Stdio(Arc::downgrade(&self)));
        let result = message["result"].take();
        match self.seen.tasks.got(upstream, &params, result).await {
            Ok(task) => {
                message["result"] = task;
                self.client.send(&message);
            }
            Err(why) => self
                .client
                .error(&message["id"], INVALID_REQUEST, why, None),
        }
    }

    /// The server's `initialize` answer (its `serverInfo`), or its `server/discover` answer
    /// (the same, in the result's `_meta`): its name, unless `--name` gave one.
    fn named(&self, answer: &Value) {
        let mut name = lock(&self.name);
        if name.is_none() {
            let result = &answer["result"];
            let info = match result.get("serverInfo") {
                Some(info) => info,
                None => &result["_meta"][SERVER_INFO],
            };
            *name = info["name"]
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
        for open in self.to_server.drain() {
            self.client
                .error(&open.peer_id, INTERNAL_ERROR, why.to_string(), None);
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

/// The answer to a server's question (request `id`, of `method`) that Palisade refused: an
/// elicitation is declined, as a user who says no (the server goes on without the answer);
/// anything else is an error, as a client that cannot answer.
pub(super) fn refused(id: &Value, method: &str, why: &str) -> Value {
    match method {
        "elicitation/create" => {
            json!({ "jsonrpc": "2.0", "id": id, "result": { "action": "decline" } })
        }
        _ => {
            json!({ "jsonrpc": "2.0", "id": id, "error": { "code": INVALID_REQUEST, "message": why } })
        }
    }
}

/// A JSON-RPC request of Palisade's own.
fn request(id: &Value, method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}
