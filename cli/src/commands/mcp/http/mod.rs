//! `palisade mcp --listen ADDR --upstream URL`: the proxy over MCP's streamable-HTTP
//! transport.
//!
//! The client sends its requests to `ADDR` (on the upstream URL's path) with the proxy's
//! bearer token, as to `palisade serve`; each is passed to the upstream server with the MCP
//! headers (`Content-Type`, `Accept`, `Mcp-Session-Id`, `MCP-Protocol-Version`,
//! `Last-Event-ID`; never the client's token — `--upstream-token-file` has the server's), and
//! the server's answer streams back as it came (JSON or an event stream, with its session id).
//! A POSTed `tools/call` is the exception: it runs the pipeline, whose tool is that same POST to
//! the server. It is answered on an event stream when the client accepts one — carrying, read
//! strictly and re-encoded, what the server sends on the call's own stream before its answer
//! (progress, log messages, its requests, whose answers the client POSTs as usual), then the
//! answer — else as one JSON response. When the server ends the call's stream early, the proxy
//! resumes it (`GET` with `Last-Event-ID`, after the server's `retry:`), so that the pipeline
//! judges the real answer; a stream that cannot be resumed leaves the call unanswered, as the
//! server left it. The call's stream to the client is resumable in turn ([`replay`]): a `GET`
//! with a `Last-Event-ID` of the proxy's is answered by the proxy, from what it held.
//!
//! A POSTed message is read strictly and forwarded as it was read, re-encoded, never as the
//! client's bytes (see [`crate::jsonrpc::strict`]); a `GET` or `DELETE` is forwarded without a
//! body, and any other method is refused (405): the transport defines only those three.
//!
//! One Palisade session per MCP session (its `Mcp-Session-Id`; requests without one share
//! one), at most `--max-sessions` (1,024 unless told): past it, the least recently opened session that holds no
//! plugin state and has no call in flight goes, and when there is none the request is refused
//! (503) — a flood of sessions never ends a stateful guard's session. A `DELETE` of the session
//! ends it. An `Origin`, when sent, must be the address listened on, as the Host must. An `ask`
//! becomes an `elicitation/create` to a client that declared it takes them, on the event
//! stream that answers its `tools/call` (when it accepts one), under a random id of the
//! proxy's; the client POSTs its answer, as MCP's transport has it, and only an answer in the
//! same session counts. Any other client's ask is a denial.

mod mirrored;
mod questions;
mod replay;
mod upstream;

use super::call::{Answer, Seen, Upstream, approval, call_tool, elicitation, tool_use_id};
use super::{id_key, lock, rounds};
use crate::http_front::{AllowedHost, bearer_matches, problem, serve_connections};
use crate::jsonrpc::relay::own_id;
use crate::jsonrpc::strict::{self, Kind};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use palisade::{Approval, Approver, AskRequest, Lifecycle, Plugins, Signal, ToolCall};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use upstream::{Http, read_bounded, reencoded_events};

/// The MCP revision from which a stream is not resumed and a refusal has its own status.
const STATELESS_SINCE: &str = "2026-07-28";
/// How long a 2026-07-28 client's streamed call waits for its first message before its
/// stream starts without it.
const FIRST_MESSAGE_WITHIN: Duration = Duration::from_secs(2);
/// The largest request body a client may send, and the largest answer to a `tools/call` the
/// pipeline reads from the server.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// How long a client may take to send a request's headers, then its body.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections open at once at most.
const MAX_CONNECTIONS: usize = 256;

/// The headers of MCP's transport, passed both ways.
const PASSED: [&str; 5] = [
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// What `--listen` runs with.
pub(super) struct Listen {
    pub address: SocketAddr,
    pub upstream: String,
    pub name: String,
    pub token_file: PathBuf,
    pub upstream_token: Option<String>,
    /// Live MCP sessions at most.
    pub max_sessions: usize,
}

/// The proxy of one upstream server, for every client.
struct Gateway {
    plugins: Plugins,
    name: String,
    upstream: String,
    path: String,
    http: reqwest::Client,
    upstream_token: Option<String>,
    token: String,
    token_file: PathBuf,
    hosts: Vec<AllowedHost>,
    sessions: Mutex<Sessions>,
    max_sessions: usize,
}

#[derive(Default)]
struct Sessions {
    live: HashMap<String, Arc<McpSession>>,
    /// Oldest first.
    order: VecDeque<String>,
    /// The gateway itself, for the sessions' approvers.
    me: Weak<Gateway>,
}

/// One MCP session's Palisade session, and its calls in the pipeline (by JSON-RPC id).
struct McpSession {
    lifecycle: Arc<Lifecycle>,
    in_flight: Mutex<HashMap<String, Signal>>,
    /// Whether the client declared it takes elicitations (in its `initialize`).
    elicits: AtomicBool,
    /// The event streams of the calls answered on one, by the id hooks see: where an ask goes.
    streams: Mutex<HashMap<String, mpsc::UnboundedSender<Value>>>,
    /// Elicitations Palisade sent in this session (on a `tools/call`'s stream), by id: the
    /// client POSTs the answers, in this session.
    asks: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    /// The server's tool schemas and the questions it asked in this session.
    seen: Seen,
    /// The server's questions passed to the client and not yet answered: the method of each,
    /// by its id (see [`questions`]).
    questions_out: Mutex<HashMap<String, String>>,
    /// The event streams of its calls, held for a client that resumes one.
    replays: replay::Replays,
}

impl replay::HeldBy for McpSession {
    fn replays(&self) -> &replay::Replays {
        &self.replays
    }
}

/// A call of the session's in flight: it leaves the session's table when dropped.
struct InFlight<'a>(&'a McpSession, String);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        lock(&self.0.in_flight).remove(&self.1);
    }
}

impl McpSession {
    /// Whether ending it loses nothing: no plugin state, no call in flight.
    fn idle(&self) -> bool {
        lock(&self.in_flight).is_empty() && !self.lifecycle.session().holds_state()
    }
}

/// Serves until SIGINT or SIGTERM.
pub(super) async fn serve(plugins: Plugins, listen: Listen) -> anyhow::Result<()> {
    let upstream = url::Url::parse(&listen.upstream)
        .map_err(|e| anyhow::anyhow!("--upstream {}: {e}", listen.upstream))?;
    if !matches!(upstream.scheme(), "http" | "https") {
        anyhow::bail!("--upstream takes an http:// or https:// URL");
    }
    let token_file = listen.token_file;
    let (token, created) = crate::token::ensure(&token_file)?;
    let http = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .build()?;
    let gateway = Arc::new(Gateway {
        plugins,
        name: listen.name,
        path: upstream.path().to_string(),
        upstream: upstream.to_string(),
        http,
        upstream_token: listen.upstream_token,
        token,
        token_file: token_file.clone(),
        hosts: AllowedHost::of(listen.address),
        sessions: Mutex::default(),
        max_sessions: listen.max_sessions,
    });
    lock(&gateway.sessions).me = Arc::downgrade(&gateway);
    let listener = tokio::net::TcpListener::bind(listen.address)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", listen.address))?;
    let address = listener.local_addr()?;
    eprintln!(
        "palisade mcp: listening on http://{address}{} for {} (bearer token in {}{})",
        gateway.path,
        gateway.upstream,
        token_file.display(),
        if created { ", created now" } else { "" }
    );
    let app = axum::Router::new()
        .fallback(handle)
        .with_state(gateway.clone());
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let token = gateway.token.clone();
    serve_connections(
        "palisade mcp",
        listener,
        app,
        (MAX_CONNECTIONS, READ_TIMEOUT),
        token,
        stop,
    )
    .await;
    Ok(())
}

async fn handle(
    State(gateway): State<Arc<Gateway>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if uri.path() != gateway.path {
        return problem(
            StatusCode::NOT_FOUND,
            format!("the MCP endpoint is {}", gateway.path),
        );
    }
    if let Err(refused) = gateway.admitted(&headers) {
        return *refused;
    }
    if ![Method::POST, Method::GET, Method::DELETE].contains(&method) {
        // Another method's body would reach the server unjudged.
        let mut refused = problem(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("MCP's transport takes POST, GET and DELETE, not {method}"),
        );
        refused
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("POST, GET, DELETE"));
        return refused;
    }
    let body = match tokio::time::timeout(READ_TIMEOUT, axum::body::to_bytes(body, MAX_BODY_BYTES))
        .await
    {
        Ok(Ok(body)) => body,
        _ => {
            return problem(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the body is over {MAX_BODY_BYTES} bytes, or did not arrive within {} s",
                    READ_TIMEOUT.as_secs()
                ),
            );
        }
    };
    let session_id = header_text(&headers, "mcp-session-id");
    if method == Method::GET
        && let Some((token, n)) = replay::parse(&header_text(&headers, "last-event-id"))
    {
        return gateway.resume(&session_id, token, n);
    }
    if method == Method::GET || method == Method::DELETE {
        if method == Method::DELETE {
            gateway.end(&session_id);
        }
        return gateway.forward(method, &headers, Bytes::new()).await;
    }
    let message = match std::str::from_utf8(&body) {
        Ok(text) => strict::read_body(text),
        Err(_) => Err(strict::Refusal {
            code: strict::PARSE_ERROR,
            why: "the body is not UTF-8".into(),
        }),
    };
    // What Palisade cannot read, or could read two ways, is not passed on: the server might
    // read a call in it.
    let message = match message {
        Ok(message) => message,
        Err(refusal) => return jsonrpc_error(&Value::Null, refusal.code, &refusal.why),
    };
    // A server may route or authorise by the headers that mirror the body: they must say
    // what the body Palisade judges says.
    if let Some(why) = mirrored::mismatch(&headers, &message.value) {
        let mut refused = jsonrpc_error(message.id(), mirrored::HEADER_MISMATCH, &why);
        *refused.status_mut() = StatusCode::BAD_REQUEST;
        return refused;
    }
    match (message.kind, message.method()) {
        (Kind::Request, method) if method.starts_with("tasks/") => {
            return gateway
                .tasks_request(&headers, &session_id, message.value)
                .await;
        }
        (Kind::Request, "tools/call") => {
            return gateway
                .tools_call(&headers, &session_id, message.value)
                .await;
        }
        (Kind::Request, "initialize") => {
            let elicits = !message.value["params"]["capabilities"]["elicitation"].is_null();
            let body = Bytes::from(strict::encode(&message.value));
            return gateway.initialize(&headers, body, elicits).await;
        }
        (Kind::Request, method) => {
            let params = &message.value["params"];
            if let Some(why) = rounds::unjudged_answers(method, params) {
                return jsonrpc_error(message.id(), super::INVALID_PARAMS, &why);
            }
            // A 2026-07-28 client's request that takes rounds: they are judged.
            if rounds::MULTI_ROUND.contains(&method) && super::call::envelope(params).is_some() {
                return gateway
                    .multi_round(&headers, &session_id, message.value)
                    .await;
            }
        }
        (Kind::Notification, "tools/call") => {
            // A call without an id would run at the server unjudged.
            return problem(
                StatusCode::BAD_REQUEST,
                "a tools/call must be a request, with an id: Palisade judges every call",
            );
        }
        (Kind::Notification, "notifications/cancelled") => {
            gateway.cancelled(&session_id, &message.value["params"]["requestId"]);
        }
        (Kind::Response, _) => {
            // An answer: to one of Palisade's questions in this session, or to the server's
            // request.
            let session = lock(&gateway.sessions).live.get(&session_id).cloned();
            let waiting = session
                .as_ref()
                .and_then(|s| lock(&s.asks).remove(&id_key(message.id())));
            if let Some(waiting) = waiting {
                let _ = waiting.send(message.value);
                return StatusCode::ACCEPTED.into_response();
            }
            // An answer to one of the server's questions: judged before the server hears it.
            if let Some(session) = session {
                let judge = questions::Questions {
                    gateway: gateway.clone(),
                    session,
                    headers: passed(&headers),
                };
                if judge.answered(&message.value).await.is_some() {
                    return StatusCode::ACCEPTED.into_response();
                }
            }
        }
        _ => {}
    }
    let body = Bytes::from(strict::encode(&message.value));
    gateway.forward(Method::POST, &headers, body).await
}

/// The server's answer to a request the proxy sent in the client's name, as Palisade read it
/// (re-encoded), with the server's status.
fn relayed(reply: super::call::Reply) -> Response {
    let status = reply
        .status
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);
    let body = Body::from(strict::encode(&reply.message));
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// An event stream response of `body`.
fn event_stream(
    body: impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + Send + 'static,
) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .unwrap_or_else(|e| problem(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

fn header_text(headers: &HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

fn too_many_sessions(max: usize) -> Response {
    problem(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "{max} MCP sessions are live and each holds plugin state or a call in flight: end \
             one (DELETE), try again later, or raise --max-sessions"
        ),
    )
}

fn jsonrpc_error(id: &Value, code: i64, message: &str) -> Response {
    let error =
        json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } });
    (StatusCode::OK, axum::Json(error)).into_response()
}

impl Gateway {
    /// The Host must be the address listened on, so must an `Origin` when there is one (a web
    /// page served from elsewhere may not ask), and the bearer token must be the proxy's.
    fn admitted(&self, headers: &HeaderMap) -> Result<(), Box<Response>> {
        let host = header_text(headers, "host");
        if !self.hosts.iter().any(|allowed| allowed.accepts(&host)) {
            return Err(Box::new(problem(
                StatusCode::FORBIDDEN,
                format!(
                    "the Host header `{}` is not the address this proxy listens on",
                    crate::output::printable(&host)
                ),
            )));
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            // A page served from the address listened on may ask (with the token); any
            // other page may not: it could be a rebound DNS name.
            let origin = origin.to_str().unwrap_or_default();
            let host = origin.strip_prefix("http://").unwrap_or_default();
            if !self.hosts.iter().any(|allowed| allowed.accepts(host)) {
                return Err(Box::new(problem(
                    StatusCode::FORBIDDEN,
                    format!(
                        "the Origin `{}` is not the address this proxy listens on",
                        crate::output::printable(origin)
                    ),
                )));
            }
        }
        if !bearer_matches(&self.token, headers) {
            return Err(Box::new(problem(
                StatusCode::UNAUTHORIZED,
                format!(
                    "missing or wrong bearer token (send `Authorization: Bearer <token>`, the \
                     token in {})",
                    self.token_file.display()
                ),
            )));
        }
        Ok(())
    }

    /// Whether a new session can be opened: below the bound, or an idle one can end.
    fn has_room(&self) -> bool {
        let sessions = lock(&self.sessions);
        sessions.live.len() < self.max_sessions || sessions.live.values().any(|s| s.idle())
    }

    /// The MCP session's Palisade session, made on first sight. Past `max_sessions`, the
    /// oldest session that holds no plugin state and has no call in flight goes; `None` when
    /// every one does (the request is refused, never a stateful session ended).
    fn session(&self, id: &str) -> Option<Arc<McpSession>> {
        let mut sessions = lock(&self.sessions);
        if let Some(session) = sessions.live.get(id) {
            return Some(session.clone());
        }
        if sessions.live.len() >= self.max_sessions {
            let live = &sessions.live;
            let idle = |id: &String| live.get(id).is_some_and(|s| s.idle());
            let at = sessions.order.iter().position(idle)?;
            let oldest = sessions.order.remove(at).expect("found above");
            if let Some(session) = sessions.live.remove(&oldest) {
                session
                    .lifecycle
                    .session_ended("evicted: the proxy's session table is full");
            }
        }
        let name = if id.is_empty() { "none" } else { id };
        let approver = Arc::new(Elicit {
            gateway: sessions.me.clone(),
            session: id.to_string(),
        });
        let session = self
            .plugins
            .session(format!("mcp-http-{name}"))
            .with_approver(approver);
        let session = Arc::new(McpSession {
            lifecycle: Arc::new(Lifecycle::new(session)),
            in_flight: Mutex::default(),
            elicits: AtomicBool::new(false),
            streams: Mutex::default(),
            asks: Mutex::default(),
            seen: Seen::default(),
            questions_out: Mutex::default(),
            replays: Mutex::default(),
        });
        sessions.live.insert(id.to_string(), session.clone());
        sessions.order.push_back(id.to_string());
        Some(session)
    }

    /// The client's `initialize`, passed on; whether it takes elicitations is remembered for
    /// the session the server's answer names.
    async fn initialize(
        self: &Arc<Self>,
        headers: &HeaderMap,
        body: Bytes,
        elicits: bool,
    ) -> Response {
        // Refused before the server opens a session the proxy could not hold.
        if !self.has_room() {
            return too_many_sessions(self.max_sessions);
        }
        let response = self.forward(Method::POST, headers, body).await;
        let session_id = header_text(response.headers(), "mcp-session-id");
        match self.session(&session_id) {
            Some(session) => session.elicits.store(elicits, Ordering::Relaxed),
            None => return too_many_sessions(self.max_sessions),
        }
        response
    }

    fn cancelled(&self, session_id: &str, request: &Value) {
        let session = lock(&self.sessions).live.get(session_id).cloned();
        if let Some(session) = session
            && let Some(signal) = lock(&session.in_flight).get(&id_key(request))
        {
            signal.cancel();
        }
    }

    /// The client ends its session.
    fn end(&self, session_id: &str) {
        let mut sessions = lock(&self.sessions);
        if let Some(session) = sessions.live.remove(session_id) {
            session
                .lifecycle
                .session_ended("the client ended the session");
            sessions.order.retain(|id| id != session_id);
        }
    }

    /// A `tools/call`: through the pipeline, its tool the same POST to the server.
    async fn tools_call(
        self: &Arc<Self>,
        headers: &HeaderMap,
        session_id: &str,
        message: Value,
    ) -> Response {
        let Some(session) = self.session(session_id) else {
            return too_many_sessions(self.max_sessions);
        };
        if header_text(headers, "accept").contains("text/event-stream") {
            return self.tools_call_streamed(headers, session, message).await;
        }
        match self.decide(passed(headers), &session, message, None).await {
            Some((answer, status)) => (status, axum::Json(answer)).into_response(),
            // Cancelled: the client expects no answer.
            None => StatusCode::ACCEPTED.into_response(),
        }
    }

    /// A 2026-07-28 client's request that takes rounds (`prompts/get`, `resources/read`):
    /// a retry's answers judged before the server hears them, and an `input_required`
    /// answer's questions before the client sees them; a refusal answered in their place.
    async fn multi_round(
        self: &Arc<Self>,
        headers: &HeaderMap,
        session_id: &str,
        mut message: Value,
    ) -> Response {
        let Some(session) = self.session(session_id) else {
            return too_many_sessions(self.max_sessions);
        };
        let id = message["id"].clone();
        let method = message["method"].as_str().unwrap_or_default().to_string();
        let params = message["params"].clone();
        let rounds = rounds::Rounds::of_request(
            &session.lifecycle,
            self.name.clone(),
            &session.seen.questions,
            &method,
            &params,
        );
        match rounds.answers(&params).await {
            Ok(judged) => message["params"] = judged,
            Err(why) => return jsonrpc_error(&id, super::INVALID_PARAMS, &why),
        }
        let upstream = self.answered_whole(headers, &id);
        let reply = match upstream.post(&method, message["params"].clone()).await {
            Ok(reply) => reply,
            Err(why) => return problem(StatusCode::BAD_GATEWAY, why),
        };
        if let Some(result) = reply.message.get("result")
            && rounds::result_type(result) == "input_required"
            && let Err(why) = rounds.questions(result).await
        {
            return jsonrpc_error(&id, strict::INVALID_REQUEST, &why);
        }
        relayed(reply)
    }

    /// The server, for the client's request `id` (with `headers`) whose answer the proxy
    /// judges and sends as one JSON message: nothing else of the request's stream goes on.
    fn answered_whole(self: &Arc<Self>, headers: &HeaderMap, id: &Value) -> Http {
        Http {
            gateway: self.clone(),
            headers: passed(headers),
            id: id.clone(),
            events: None,
            lost: Signal::new(),
            questions: None,
        }
    }

    /// A client's `tasks/*` request (MCP's tasks extension, see [`super::tasks`]): refused
    /// when it is about no task of the session's; a `tasks/update`'s answers judged before the
    /// server hears them, and a `tasks/get`'s task state before the client reads it.
    async fn tasks_request(
        self: &Arc<Self>,
        headers: &HeaderMap,
        session_id: &str,
        message: Value,
    ) -> Response {
        let Some(session) = self.session(session_id) else {
            return too_many_sessions(self.max_sessions);
        };
        let id = message["id"].clone();
        let method = message["method"].as_str().unwrap_or_default().to_string();
        let mut params = message["params"].clone();
        let tasks = &session.seen.tasks;
        if let Some(error) = tasks.refusal(&method, &params) {
            let refused = json!({ "jsonrpc": "2.0", "id": id, "error": error });
            return (StatusCode::OK, axum::Json(refused)).into_response();
        }
        if method == "tasks/update" {
            match tasks.update(&params).await {
                Ok(judged) => params = judged,
                Err(why) => return jsonrpc_error(&id, super::INVALID_PARAMS, &why),
            }
        }
        let upstream = Arc::new(self.answered_whole(headers, &id));
        let mut reply = match upstream.post(&method, params.clone()).await {
            Ok(reply) => reply,
            Err(why) => return problem(StatusCode::BAD_GATEWAY, why),
        };
        if method == "tasks/get"
            && let Some(result) = reply.message.get_mut("result")
        {
            match tasks.got(upstream, &params, result.take()).await {
                Ok(task) => *result = task,
                Err(why) => return jsonrpc_error(&id, strict::INVALID_REQUEST, &why),
            }
        }
        relayed(reply)
    }

    /// The pipeline over the client's `tools/call` in `session`, its tool the same POST to the
    /// server: the JSON-RPC answer (with the server's status when it is the server's refusal,
    /// passed on), or `None` when the client cancelled it or the server ended the call's
    /// stream without an answer it could resume. What else the server sends on the call's
    /// stream goes to `events`, when the client takes one.
    async fn decide(
        self: &Arc<Self>,
        headers: Vec<(HeaderName, String)>,
        session: &Arc<McpSession>,
        message: Value,
        events: Option<mpsc::UnboundedSender<Value>>,
    ) -> Option<(Value, StatusCode)> {
        let id = message["id"].clone();
        let cancel = Signal::new();
        lock(&session.in_flight).insert(id_key(&id), cancel.clone());
        // Out of flight however this ends: answered, or dropped with the client's connection.
        let _in_flight = InFlight(session, id_key(&id));
        let questions = questions::Questions {
            gateway: self.clone(),
            session: session.clone(),
            headers: headers.clone(),
        };
        let upstream: Arc<dyn Upstream> = Arc::new(Http {
            gateway: self.clone(),
            headers,
            id: id.clone(),
            events,
            lost: cancel.clone(),
            questions: Some(questions),
        });
        let params = message["params"].clone();
        let name = self.name.clone();
        let seen = &session.seen;
        let decided = call_tool(
            &session.lifecycle,
            upstream,
            name,
            &id,
            params,
            seen,
            &cancel,
        );
        let decided = decided.await;
        let answer = |body: Value, status: StatusCode| {
            let mut message = json!({ "jsonrpc": "2.0", "id": id });
            message.as_object_mut().expect("an object").extend(
                body.as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone())),
            );
            Some((message, status))
        };
        match decided {
            Ok(Some(Answer::Result(result))) => answer(json!({ "result": result }), StatusCode::OK),
            Ok(Some(Answer::Error { error, status })) => {
                let status = status
                    .and_then(|s| StatusCode::from_u16(s).ok())
                    .unwrap_or(StatusCode::OK);
                answer(json!({ "error": error }), status)
            }
            Ok(None) => None,
            // A header mismatch is answered as the revision has a server answer it.
            Err((code, why)) => answer(
                json!({ "error": { "code": code, "message": why } }),
                match code {
                    mirrored::HEADER_MISMATCH => StatusCode::BAD_REQUEST,
                    _ => StatusCode::OK,
                },
            ),
        }
    }

    /// A `tools/call` answered on an event stream, which carries what the server sends on the
    /// call's own stream (its notifications and requests, re-encoded) and Palisade's asks;
    /// the last event is the call's answer. For a client of MCP 2026-07-28, which resumes no
    /// stream, the response starts with the first of them, or after
    /// [`FIRST_MESSAGE_WITHIN`]: a call the server refused at once (that revision answers such
    /// a refusal with 400) is answered as the server answered it, JSON with its status.
    async fn tools_call_streamed(
        self: &Arc<Self>,
        headers: &HeaderMap,
        session: Arc<McpSession>,
        message: Value,
    ) -> Response {
        let key = tool_use_id(&message["id"]);
        let (events, mut stream) = mpsc::unbounded_channel::<Value>();
        lock(&session.streams).insert(key.clone(), events.clone());
        let version = header_text(headers, "mcp-protocol-version");
        let (gateway, headers) = (self.clone(), passed(headers));
        let refused: Arc<Mutex<Option<StatusCode>>> = Arc::default();
        let streamed = session.clone();
        let refusal = refused.clone();
        tokio::spawn(async move {
            let answer = gateway
                .decide(headers, &session, message, Some(events.clone()))
                .await;
            lock(&session.streams).remove(&key);
            if let Some((answer, status)) = answer {
                if status != StatusCode::OK {
                    *lock(&refusal) = Some(status);
                }
                let _ = events.send(answer);
            }
        });
        // A client of an earlier revision resumes a lost stream from its priming event, which
        // goes out at once: its stream starts now, as before.
        if version.as_str() < STATELESS_SINCE {
            return event_stream(replay::Replay::start(&streamed, &version, stream));
        }
        // Held for the first message at most a moment: a refusal comes at once, and a slow
        // hook or tool must not hold the response's head (a client gives up waiting for it).
        let first = match tokio::time::timeout(FIRST_MESSAGE_WITHIN, stream.recv()).await {
            Ok(Some(first)) => first,
            Ok(None) | Err(_) => {
                return event_stream(replay::Replay::start(&streamed, &version, stream));
            }
        };
        if first.get("method").is_none()
            && let Some(status) = *lock(&refused)
        {
            return (status, axum::Json(first)).into_response();
        }
        // The first message goes out first, then the rest as they come.
        let (rest, messages) = mpsc::unbounded_channel::<Value>();
        let _ = rest.send(first);
        tokio::spawn(async move {
            while let Some(message) = stream.recv().await {
                if rest.send(message).is_err() {
                    break;
                }
            }
        });
        event_stream(replay::Replay::start(&streamed, &version, messages))
    }

    /// A client's GET with a `Last-Event-ID` of the proxy's: the rest of that call's stream,
    /// from where the client lost it, or 400 when the stream is no longer held.
    fn resume(&self, session_id: &str, token: &str, n: u64) -> Response {
        let session = lock(&self.sessions).live.get(session_id).cloned();
        match session.and_then(|session| replay::resume(&session.replays, token, n)) {
            Some(rest) => event_stream(rest),
            None => problem(
                StatusCode::BAD_REQUEST,
                "the event stream of this Last-Event-ID is no longer held (it ended long ago, \
                 or its session did): send the request again",
            ),
        }
    }

    /// A request to the server.
    fn request(&self, method: Method, headers: &[(HeaderName, String)]) -> reqwest::RequestBuilder {
        let mut request = self.http.request(method, &self.upstream);
        for (name, value) in headers {
            request = request.header(name.as_str(), value);
        }
        if let Some(token) = &self.upstream_token {
            request = request.bearer_auth(token);
        }
        request
    }

    /// Passes the request to the server, and its answer back as the proxy read it: a JSON
    /// answer read strictly and re-encoded, an event stream event by event, each event's
    /// message read strictly and re-encoded (see [`reencoded_events`]); anything else (an
    /// empty 202, an error page) as it came.
    async fn forward(
        self: &Arc<Self>,
        method: Method,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Response {
        let sent = self
            .request(method, &passed(headers))
            .body(body)
            .send()
            .await;
        let answer = match sent {
            Ok(answer) => answer,
            Err(e) => {
                return problem(
                    StatusCode::BAD_GATEWAY,
                    format!("the MCP server at {} did not answer: {e}", self.upstream),
                );
            }
        };
        let mut response = Response::builder().status(answer.status().as_u16());
        for name in PASSED {
            if let Some(value) = answer.headers().get(name) {
                response = response.header(name, value.as_bytes());
            }
        }
        let kind = header_text(answer.headers(), "content-type");
        let body = if kind.starts_with("text/event-stream") {
            // The server's questions on it are judged in the request's MCP session.
            let session_id = header_text(headers, "mcp-session-id");
            let session = lock(&self.sessions).live.get(&session_id).cloned();
            let judge = session.map(|session| questions::Questions {
                gateway: self.clone(),
                session,
                headers: passed(headers),
            });
            Body::from_stream(reencoded_events(answer, judge))
        } else if kind.starts_with("application/json") {
            let read = read_bounded(answer).await.and_then(|body| {
                let text = String::from_utf8(body).map_err(|_| "not UTF-8".to_string())?;
                strict::read_body(&text).map_err(|refusal| refusal.why)
            });
            match read {
                Ok(message) => Body::from(strict::encode(&message.value)),
                Err(why) => {
                    return problem(
                        StatusCode::BAD_GATEWAY,
                        format!("the MCP server's answer was refused: {why}"),
                    );
                }
            }
        } else {
            Body::from_stream(answer.bytes_stream())
        };
        response
            .body(body)
            .unwrap_or_else(|e| problem(StatusCode::BAD_GATEWAY, e.to_string()))
    }
}

/// The MCP headers of a client's request (its `Content-Type` too: what the proxy POSTs in its
/// name is JSON, as the client's was).
fn passed(headers: &HeaderMap) -> Vec<(HeaderName, String)> {
    PASSED
        .iter()
        .filter_map(|name| {
            let value = headers.get(*name)?.to_str().ok()?;
            Some((HeaderName::from_static(name), value.to_string()))
        })
        .chain(mirrored::of(headers))
        .collect()
}

/// A session's approver: an ask goes to the client as an elicitation, on the event stream of
/// the call that asked, when the client takes them; otherwise nobody can be asked.
struct Elicit {
    gateway: Weak<Gateway>,
    session: String,
}

impl Approver for Elicit {
    fn approve<'a>(
        &'a self,
        call: &'a ToolCall,
        ask: &'a AskRequest,
    ) -> palisade::BoxFuture<'a, Approval> {
        Box::pin(async move {
            let Some(gateway) = self.gateway.upgrade() else {
                return Approval::Unavailable;
            };
            let session = lock(&gateway.sessions).live.get(&self.session).cloned();
            let Some(session) = session else {
                return Approval::Unavailable;
            };
            if let Some(approval) = session.seen.asks.approve(call, ask) {
                return approval;
            }
            if !session.elicits.load(Ordering::Relaxed) {
                return Approval::Unavailable;
            }
            let Some(stream) = lock(&session.streams).get(&call.tool_use_id).cloned() else {
                return Approval::Unavailable;
            };
            let id = own_id();
            let key = id_key(&id);
            let (answered, answer) = oneshot::channel();
            lock(&session.asks).insert(key.clone(), answered);
            if stream.send(elicitation(&id, call, ask)).is_err() {
                lock(&session.asks).remove(&key);
                return Approval::Cancelled;
            }
            match answer.await {
                Ok(answer) => approval(&answer),
                Err(_) => Approval::Cancelled,
            }
        })
    }
}
