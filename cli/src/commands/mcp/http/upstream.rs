//! The upstream MCP server over HTTP, as the pipeline's tool: a client's `tools/call` POSTed
//! in its name, the server's event stream read strictly and re-encoded for the client, and a
//! stream the server ended early resumed (`Last-Event-ID`).

use super::super::call::{Reply, Upstream};
use super::{Gateway, MAX_BODY_BYTES};
use crate::jsonrpc::strict::{self, Kind};
use axum::body::Bytes;
use axum::http::{HeaderName, Method, header};
use palisade::Signal;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// The server over HTTP, as the pipeline's upstream: the client's `tools/call`, POSTed with
/// its own id and headers.
pub(super) struct Http {
    pub(super) gateway: Arc<Gateway>,
    pub(super) headers: Vec<(HeaderName, String)>,
    pub(super) id: Value,
    /// The client's event stream for this call, when it takes one.
    pub(super) events: Option<mpsc::UnboundedSender<Value>>,
    /// Fired when the server ends the call's stream without an answer and without a way to
    /// resume it: the client gets no answer, as it would from the server.
    pub(super) lost: Signal,
    /// The judge of the server's questions on the call's stream (none for Palisade's own
    /// requests, on whose streams nothing goes to the client).
    pub(super) questions: Option<super::questions::Questions>,
}

impl Upstream for Http {
    fn call(&self, params: Value) -> palisade::BoxFuture<'_, Result<Reply, String>> {
        Box::pin(self.post("tools/call", params))
    }

    fn mirrors(&self, mirrored: &[(String, Option<Value>)]) -> Result<(), String> {
        match super::mirrored::params_mismatch(&self.headers, mirrored) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    fn request<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> palisade::BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            // Its own id; what the server sends on its stream other than the answer is not
            // the client's call's.
            let own = Http {
                gateway: self.gateway.clone(),
                headers: super::mirrored::for_own(&self.headers, method, &params),
                id: crate::jsonrpc::relay::own_id(),
                events: None,
                lost: Signal::new(),
                questions: None,
            };
            own.post(method, params).await.map(|reply| reply.message)
        })
    }
}

impl Http {
    /// POSTs the request `method` with `params` under [`Http::id`]: the server's answer, with
    /// its status. A status other than 2xx is an answer only when it carries a JSON-RPC error
    /// (MCP 2026-07-28 answers a request it refuses with 400 and the error).
    pub(super) async fn post(&self, method: &str, params: Value) -> Result<Reply, String> {
        {
            let mut cancel_on_drop = CancelOnDrop {
                upstream: Some(self),
            };
            let message =
                json!({ "jsonrpc": "2.0", "id": self.id, "method": method, "params": params });
            let answer = self
                .gateway
                .request(Method::POST, &self.headers)
                .body(strict::encode(&message))
                .send()
                .await
                .map_err(|e| format!("the MCP server did not answer: {e}"))?;
            let status = answer.status();
            let streamed = answer
                .headers()
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream"));
            let answer = if !status.is_success() {
                let body = read_bounded(answer).await.unwrap_or_default();
                match serde_json::from_slice::<Value>(&body) {
                    Ok(message) if message.get("error").is_some_and(Value::is_object) => {
                        Ok(message)
                    }
                    _ => Err(format!("the MCP server answered {status}")),
                }
            } else if streamed {
                self.response_in_stream(answer).await
            } else {
                read_bounded(answer).await.and_then(|body| {
                    serde_json::from_slice(&body)
                        .map_err(|e| format!("the MCP server's answer is not JSON: {e}"))
                })
            };
            cancel_on_drop.upstream = None;
            answer.map(|message| Reply {
                message,
                status: Some(status.as_u16()),
            })
        }
    }
}

/// A call cut off before its answer (a wrapper's time limit, the client's cancel) is
/// cancelled at the server.
struct CancelOnDrop<'a> {
    upstream: Option<&'a Http>,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        let Some(upstream) = self.upstream else {
            return;
        };
        let cancel = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": { "requestId": upstream.id, "reason": "cut off by Palisade" } });
        let headers =
            super::mirrored::for_own(&upstream.headers, "notifications/cancelled", &Value::Null);
        let request = upstream
            .gateway
            .request(Method::POST, &headers)
            .body(cancel.to_string());
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(5), request.send()).await;
        });
    }
}

pub(super) async fn read_bounded(mut answer: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = answer.chunk().await.map_err(|e| e.to_string())? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_BODY_BYTES {
            return Err(format!(
                "the MCP server's answer is over {MAX_BODY_BYTES} bytes"
            ));
        }
    }
    Ok(body)
}

/// How often the proxy resumes a call's event stream at most, and how long it waits before
/// each time at most (the server's `retry:` asks for a wait).
const RESUMPTIONS: usize = 16;
const MAX_RETRY: Duration = Duration::from_secs(10);

/// What the call's event streams left to resume with (their last event id, the wait asked),
/// and the bytes read from them in all.
#[derive(Default)]
struct Resume {
    last_event_id: Option<String>,
    retry: Option<Duration>,
    read: usize,
}

impl Http {
    /// The answer to the call in the server's event stream. The messages before it (the
    /// server's notifications and requests on the call's stream) go to the client's stream,
    /// read strictly and re-encoded; a stream that ends with a last event id is resumed (GET
    /// with `Last-Event-ID`, after the server's `retry:`) until the answer comes, at most
    /// [`RESUMPTIONS`] times.
    async fn response_in_stream(&self, answer: reqwest::Response) -> Result<Value, String> {
        let mut resume = Resume::default();
        let mut answer = answer;
        for _ in 0..=RESUMPTIONS {
            if let Some(found) = self.read_stream(answer, &mut resume).await? {
                return Ok(found);
            }
            let Some(last) = resume.last_event_id.clone() else {
                break;
            };
            tokio::time::sleep(resume.retry.unwrap_or_default().min(MAX_RETRY)).await;
            let mut headers: Vec<(HeaderName, String)> = self
                .headers
                .iter()
                .filter(|(name, _)| {
                    ["mcp-session-id", "mcp-protocol-version"].contains(&name.as_str())
                })
                .cloned()
                .collect();
            headers.push((header::ACCEPT, "text/event-stream".into()));
            headers.push((HeaderName::from_static("last-event-id"), last));
            answer = self
                .gateway
                .request(Method::GET, &headers)
                .send()
                .await
                .map_err(|e| format!("the MCP server did not answer the resumption: {e}"))?;
            if !answer.status().is_success() {
                return Err(format!(
                    "the MCP server answered {} to the resumption of the call's stream",
                    answer.status()
                ));
            }
        }
        // The server dropped the answer: the client gets none, as it would from the server,
        // rather than a failure the tool may not have had.
        self.lost.cancel();
        std::future::pending().await
    }

    /// Reads one event stream: the answer, or `None` when the stream ends without it.
    async fn read_stream(
        &self,
        mut answer: reqwest::Response,
        resume: &mut Resume,
    ) -> Result<Option<Value>, String> {
        let mut pending: Vec<u8> = Vec::new();
        while let Some(chunk) = answer.chunk().await.map_err(|e| e.to_string())? {
            resume.read += chunk.len();
            if resume.read > MAX_BODY_BYTES {
                return Err(format!(
                    "the MCP server's answer is over {MAX_BODY_BYTES} bytes"
                ));
            }
            pending.extend_from_slice(&chunk);
            while let Some(end) = event_end(&pending) {
                let event: Vec<u8> = pending.drain(..end.1).collect();
                let text = String::from_utf8_lossy(&event[..end.0]);
                if let Some(found) = self.event(&text, resume) {
                    return Ok(Some(found));
                }
            }
        }
        Ok(None)
    }

    /// One event of the server's stream: the call's answer, or `None` (any other message is
    /// passed to the client's stream).
    fn event(&self, text: &str, resume: &mut Resume) -> Option<Value> {
        let event = Event::of(text);
        if let Some(id) = event.id {
            resume.last_event_id = Some(id.to_string());
        }
        if let Some(ms) = event.retry {
            resume.retry = Some(Duration::from_millis(ms));
        }
        let data = event.data;
        if data.trim().is_empty() {
            return None;
        }
        // Read as strictly as the client's messages: what could be read two ways is dropped.
        let message = match strict::read_body(&data) {
            Ok(message) => message,
            Err(refusal) => {
                eprintln!(
                    "palisade mcp: dropped a message of the server's event stream: {}",
                    refusal.why
                );
                return None;
            }
        };
        match message.kind {
            Kind::Response if message.id() == &self.id => Some(message.value),
            // An answer to another request has no place on this stream.
            Kind::Response => None,
            _ => {
                if let Some(events) = &self.events {
                    match &self.questions {
                        // A question is judged before it goes on, in a task of its own: the
                        // stream is read on meanwhile.
                        Some(judge) if super::super::rounds::is_question(message.method()) => {
                            let (judge, events) = (judge.clone(), events.clone());
                            tokio::spawn(async move {
                                if let Some(message) = judge.passed(message.value).await {
                                    let _ = events.send(message);
                                }
                            });
                        }
                        _ => {
                            let _ = events.send(message.value);
                        }
                    }
                }
                None
            }
        }
    }
}

/// The fields of one server-sent event that MCP uses.
struct Event<'a> {
    /// Its `data:` lines, joined.
    data: String,
    /// Its `id:`, when it is a valid one (no NUL).
    id: Option<&'a str>,
    /// Its `retry:`, in milliseconds.
    retry: Option<u64>,
}

impl Event<'_> {
    fn of(text: &str) -> Event<'_> {
        let mut event = Event {
            data: String::new(),
            id: None,
            retry: None,
        };
        let mut data: Vec<&str> = Vec::new();
        for line in text.lines() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "data" => data.push(value),
                "id" if !value.contains('\0') => event.id = Some(value),
                "retry" => event.retry = value.parse().ok(),
                _ => {}
            }
        }
        event.data = data.join("\n");
        event
    }
}

/// The server's event stream as the client gets it: each event's message read strictly and
/// re-encoded, with its id and `retry:` (so the client can resume); an event whose message
/// could be read two ways is dropped, saying so; one over [`MAX_BODY_BYTES`] ends the stream.
pub(super) fn reencoded_events(
    answer: reqwest::Response,
    judge: Option<super::questions::Questions>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    let state = (answer, Vec::<u8>::new(), judge);
    futures_util::stream::unfold(state, |(mut answer, mut pending, judge)| async move {
        loop {
            if let Some(end) = event_end(&pending) {
                let event: Vec<u8> = pending.drain(..end.1).collect();
                let text = String::from_utf8_lossy(&event[..end.0]);
                let event = Event::of(&text);
                let mut out = String::new();
                if let Some(id) = event.id {
                    out.push_str(&format!("id: {id}\n"));
                }
                if let Some(ms) = event.retry {
                    out.push_str(&format!("retry: {ms}\n"));
                }
                if event.data.trim().is_empty() {
                    // A priming event (an id to resume from) keeps its empty data; a comment
                    // or keep-alive is not passed on.
                    if !out.is_empty() {
                        out.push_str("data: \n");
                    }
                } else {
                    match strict::read_body(&event.data) {
                        Ok(message) => {
                            // A question a hook denied goes no further (the server has its
                            // refusal); the event's id still does.
                            let passed = match &judge {
                                Some(judge) => judge.passed(message.value).await,
                                // A task's state in no session the proxy knows: of no task it
                                // saw made.
                                None if message.method() == "notifications/tasks" => None,
                                None => Some(message.value),
                            };
                            match passed {
                                Some(message) => {
                                    let line = strict::encode(&message);
                                    out.push_str(&format!("event: message\ndata: {line}\n"));
                                }
                                None if !out.is_empty() => out.push_str("data: \n"),
                                None => {}
                            }
                        }
                        Err(refusal) => eprintln!(
                            "palisade mcp: dropped a message of the server's event stream: {}",
                            refusal.why
                        ),
                    }
                }
                if out.is_empty() {
                    continue;
                }
                out.push('\n');
                return Some((Ok(Bytes::from(out)), (answer, pending, judge)));
            }
            if pending.len() > MAX_BODY_BYTES {
                eprintln!(
                    "palisade mcp: the server sent an event over {MAX_BODY_BYTES} bytes; its \
                     stream ends here"
                );
                return None;
            }
            match answer.chunk().await {
                Ok(Some(chunk)) => pending.extend_from_slice(&chunk),
                Ok(None) | Err(_) => return None,
            }
        }
    })
}

/// Where the first event in `buffer` ends: (its text's end, the blank line's end).
fn event_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| (i, i + 2));
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}
