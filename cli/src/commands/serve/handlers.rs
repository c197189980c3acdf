//! `palisade serve`'s HTTP handlers: admission (the Host, the bearer token), the hook events
//! (`POST /AGENT`, one route per agent), `/health` and `/metrics`. May touch: nothing but the
//! server's state.

use super::{Busy, QUEUE_WAIT, Server};
use crate::http_front::{bearer_matches, problem};
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use palisade::bridge::{self, Dialect};
use serde_json::{Value, json};
use std::sync::Arc;

/// Whether a request may be served at all, before its token is checked: its `Host` must be
/// the address the server listens on (a web page whose name was rebound to 127.0.0.1 sends its
/// own name), it must carry no `Origin` (agents do not; browsers do), and a POST must declare
/// a JSON body (a browser's "simple" cross-site POST cannot). `Err` is the refusal.
pub(super) fn admitted(
    server: &Server,
    headers: &HeaderMap,
    post: bool,
) -> Result<(), Box<Response>> {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !server.hosts.iter().any(|allowed| allowed.accepts(host)) {
        return Err(Box::new(problem(
            StatusCode::FORBIDDEN,
            format!(
                "the Host header `{}` is not the address this server listens on",
                crate::output::printable(host)
            ),
        )));
    }
    if headers.contains_key(header::ORIGIN) {
        return Err(Box::new(problem(
            StatusCode::FORBIDDEN,
            "a request with an Origin header (from a web page) is refused",
        )));
    }
    if !authorized(server, headers) {
        return Err(Box::new(problem(
            StatusCode::UNAUTHORIZED,
            format!(
                "missing or wrong bearer token (send `Authorization: Bearer <token>`, the token \
                 in {})",
                server.options.token_file.display()
            ),
        )));
    }
    if post {
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
        if !json {
            return Err(Box::new(problem(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "the body must be declared `Content-Type: application/json`",
            )));
        }
    }
    Ok(())
}

pub(super) fn authorized(server: &Server, headers: &HeaderMap) -> bool {
    bearer_matches(&server.options.token, headers)
}

/// One hook event of `dialect` (`POST /AGENT`): who is asking, before reading what they send.
pub(super) async fn hook_event(
    State(server): State<Arc<Server>>,
    headers: HeaderMap,
    body: Body,
    dialect: Dialect,
) -> Response {
    if let Err(refused) = admitted(&server, &headers, true) {
        return *refused;
    }
    match read_body(&server, body).await {
        Ok(body) => answer(&server, dialect, &body).await,
        Err(refused) => *refused,
    }
}

/// The request body, read within `--read-timeout` and `--payload-max-bytes`.
pub(super) async fn read_body(server: &Server, body: Body) -> Result<Bytes, Box<Response>> {
    let limit = server.options.payload_max_bytes;
    let within = server.options.read_timeout;
    match tokio::time::timeout(within, axum::body::to_bytes(body, limit)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(_)) => Err(Box::new(problem(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is over --payload-max-bytes ({limit} bytes), or broke off"),
        ))),
        Err(_) => Err(Box::new(problem(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the body did not arrive within {:.1} s",
                within.as_secs_f64()
            ),
        ))),
    }
}

pub(super) async fn answer(server: &Arc<Server>, dialect: Dialect, body: &[u8]) -> Response {
    // Straight into the event, in one pass, when it reads as one and no recording wants the
    // agent's JSON as it came; otherwise as JSON, which says what is wrong with the body (or
    // is what the recording keeps).
    let recording = server.options.record && server.audit_log.is_some();
    let read = match recording {
        false => crate::commands::bridge::read_hook_event(body).ok(),
        true => None,
    };
    let input = match read {
        Some(event) => Read::Event(event),
        None => match read_json(body) {
            Ok(input) => Read::Json(input),
            Err(response) => return *response,
        },
    };
    let event = input.name().to_string();
    // The events `install --serve` registers for this agent (`--observe`: with those recorded).
    let meaning = dialect.meaning(&event);
    if meaning == palisade::agents::Meaning::Unmapped {
        let known: Vec<&str> = dialect
            .hooked_events()
            .chain(dialect.observed_events())
            .map(|e| e.name)
            .collect();
        return problem(
            StatusCode::BAD_REQUEST,
            format!(
                "unknown hook event `{event}`: palisade serve answers {} here",
                known.join(", ")
            ),
        );
    }
    let Some(session_id) = input.session_id().map(str::to_string) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "the event has no `session_id`: every event names its agent session",
        );
    };
    match (&server.audit_log, &input) {
        (Some(log), Read::Json(input)) if recording => {
            log.record(&bridge::agent_event(dialect, input))
        }
        (Some(log), input) if meaning == palisade::agents::Meaning::Observed => {
            log.record(&bridge::observed_event(dialect, &input.named()))
        }
        _ => {}
    }
    // A permit at once when one is free (no timeout made: a clock read, the runtime's timer
    // handle), else a wait in line.
    let permit = match server.permits.try_acquire() {
        Ok(permit) => Ok(Ok(permit)),
        Err(_) => tokio::time::timeout(QUEUE_WAIT, server.permits.acquire()).await,
    };
    let Ok(Ok(_permit)) = permit else {
        return problem(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "busy: {} requests in flight for {:.0} s (--max-concurrency)",
                server.options.max_concurrency,
                QUEUE_WAIT.as_secs_f64()
            ),
        );
    };
    // The generation current now serves this request to its end, even across a reload.
    let generation = server.current();
    let Some(session) = generation.acquire(
        &session_id,
        server.options.max_sessions,
        server.options.idle_timeout,
    ) else {
        return problem(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "{} sessions live (--max-sessions), each busy or holding plugin state: no new \
                 session until one ends or idles past --idle-timeout",
                server.options.max_sessions
            ),
        );
    };
    // Released however the request ends — answered, failed, or dropped because its client
    // went away mid-request (hyper then drops this future): a session never stays busy.
    let busy = Busy {
        generation: generation.clone(),
        id: session_id,
        ended: event == "SessionEnd",
    };
    let reply = match input {
        Read::Event(input) => bridge::handle_event(&session, dialect, input).await,
        Read::Json(input) => bridge::handle_in(&session, dialect, &input).await,
    };
    drop(session);
    drop(busy);
    let (status, body) = reply.http(dialect, &event);
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match body {
        Some(body) => (status, axum::Json(body)).into_response(),
        None => status.into_response(),
    }
}

/// A request's hook event, as [`answer`] read it.
pub(super) enum Read {
    /// Straight into the event.
    Event(palisade::claude_code::HookEvent),
    /// As JSON (an object).
    Json(Value),
}

impl Read {
    /// The event's `hook_event_name` (empty if it has none).
    fn name(&self) -> &str {
        match self {
            Read::Event(event) => &event.hook_event_name,
            Read::Json(input) => input
                .get("hook_event_name")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        }
    }

    /// The fields that name the event and whose it is, as JSON
    /// ([`palisade::bridge::observed_event`] keeps them).
    fn named(&self) -> Value {
        match self {
            Read::Event(event) => json!({
                "hook_event_name": event.hook_event_name,
                "session_id": event.session_id,
                "agent_id": event.other.get("agent_id"),
                "agent_type": event.other.get("agent_type"),
            }),
            Read::Json(input) => input.clone(),
        }
    }

    /// The event's `session_id`, if it is a string.
    fn session_id(&self) -> Option<&str> {
        match self {
            Read::Event(event) => event.session_id.as_deref(),
            Read::Json(input) => input.get("session_id").and_then(Value::as_str),
        }
    }
}

/// The body as a JSON object, or the `400` that says why it is not one.
pub(super) fn read_json(body: &[u8]) -> Result<Value, Box<Response>> {
    match crate::commands::bridge::read_event(body) {
        Ok(Value::Object(map)) => Ok(Value::Object(map)),
        Ok(_) => Err(Box::new(problem(
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object: the hook event",
        ))),
        Err(err) => Err(Box::new(problem(
            StatusCode::BAD_REQUEST,
            format!("the body is not JSON ({err}): POST the hook event as Claude Code sends it"),
        ))),
    }
}

pub(super) async fn health(State(server): State<Arc<Server>>, headers: HeaderMap) -> Response {
    if let Err(refused) = admitted(&server, &headers, false) {
        return *refused;
    }
    let generation = server.current();
    let (sessions, busy) = {
        let sessions = generation
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let busy = sessions.map.values().filter(|live| live.busy > 0).count();
        (sessions.map.len(), busy)
    };
    axum::Json(json!({
        "generation": generation.number,
        "plugins": generation.plugins.iter().map(|p| p.name().to_string()).collect::<Vec<_>>(),
        "sessions": sessions,
        "busy": busy,
    }))
    .into_response()
}

/// The event counters in the Prometheus text format (token-protected like the rest).
pub(super) async fn metrics_text(
    State(server): State<Arc<Server>>,
    headers: HeaderMap,
) -> Response {
    if let Err(refused) = admitted(&server, &headers, false) {
        return *refused;
    }
    let sessions = server
        .current()
        .sessions
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .map
        .len();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        server.metrics.render(sessions),
    )
        .into_response()
}

pub(super) async fn not_found() -> Response {
    problem(
        StatusCode::NOT_FOUND,
        "palisade serve answers POST /claude-code, POST /codex and GET /health",
    )
}
