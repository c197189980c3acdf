//! `palisade acp` as one proxy of a conductor chain (ACP's proxy-chains RFD): started with no
//! agent of its own, it talks to the conductor alone, on its standard input and output. The
//! conductor sends `proxy/initialize` where it would send an editor's `initialize`, passes
//! the editor's messages as they are, and wraps the messages of the chain's next component
//! (Palisade's successor: the agent, or another proxy) in `proxy/successor` — and unwraps what
//! Palisade wraps so. Earlier conductors (Rust SDK before 5.0) spell the two `_proxy/…`; the
//! spelling of the `proxy/initialize` received is the one sent.
//!
//! This module turns that one connection into the two the proxy has with an editor and an
//! agent of its own: [`split`] reads the conductor and hands each message, read strictly and
//! unwrapped, to the editor's side or the agent's ([`super::Proxy`] judges it there, as it
//! would from a process of its own); [`Successor::wrap`] is how the agent's side writes. May
//! touch: the proxy's standard input and output, nothing else.
//!
//! Routing: a response goes to the side that sent its request (the proxy's own ids say which);
//! a `$/cancel_request`, which is local to the connection and never wrapped, to the side whose
//! request it names; a `proxy/successor` to the agent's side, unwrapped, its id (the
//! conductor's) kept; everything else to the editor's side. A `proxy/successor` of another
//! shape than `{method, params?, _meta?}` is refused, and so is a plain `initialize`: with no
//! agent of its own, Palisade cannot be a chain's last component.

use crate::jsonrpc::strict::{self, Kind};
use crate::jsonrpc::{Lines, Writer};
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};
use tokio::io::{AsyncRead, AsyncWriteExt, DuplexStream};

/// The two spellings of the initialize and successor methods: ACP schema 1.15 and later, and
/// the Rust SDK's before 5.0.
const SPELLINGS: [(&str, &str); 2] = [
    ("proxy/initialize", "proxy/successor"),
    ("_proxy/initialize", "_proxy/successor"),
];

/// Whether `method` asks its receiver to be a proxy of a chain.
pub(super) fn is_proxy_initialize(method: &str) -> bool {
    SPELLINGS
        .iter()
        .any(|(initialize, _)| *initialize == method)
}

/// How much of one side's messages may wait for it to read them.
const PIPE_BYTES: usize = 1 << 20;

/// What the proxy has sent its successor and received from it, by id: how the conductor's
/// responses and cancellations find their side.
#[derive(Default)]
pub(super) struct Successor {
    /// The method that wraps a message for the successor, once the conductor has said it.
    successor: OnceLock<&'static str>,
    /// Ids of requests sent to the successor and not answered yet.
    sent: Mutex<HashSet<String>>,
    /// Ids (the conductor's) of the successor's requests, not answered yet.
    received: Mutex<HashSet<String>>,
}

fn key(id: &Value) -> String {
    crate::jsonrpc::relay::key(id)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Successor {
    fn successor(&self) -> &'static str {
        self.successor.get().copied().unwrap_or(SPELLINGS[0].1)
    }

    /// A message of the agent's side as the conductor takes it: a request or notification
    /// wrapped in `proxy/successor` (a request keeps its id: the answer comes under it); an
    /// answer to the successor's request as it is (the id is the conductor's); a
    /// `$/cancel_request` as it is (it names a request on this connection).
    pub(super) fn wrap(&self, message: &Value) -> Option<Value> {
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            lock(&self.received).remove(&key(&message["id"]));
            return None;
        };
        if method == "$/cancel_request" {
            return None;
        }
        let mut inner = Map::new();
        inner.insert("method".into(), Value::from(method));
        if let Some(params) = message.get("params") {
            inner.insert("params".into(), params.clone());
        }
        let mut wrapped = json!({
            "jsonrpc": "2.0",
            "method": self.successor(),
            "params": inner,
        });
        if let Some(id) = message.get("id") {
            lock(&self.sent).insert(key(id));
            wrapped["id"] = id.clone();
        }
        Some(wrapped)
    }

    /// Which side a message of the conductor's is for, and as what.
    fn route(&self, mut message: strict::Message) -> Result<(Side, Value), Refused> {
        let method = message.method().to_string();
        match message.kind {
            Kind::Response => {
                let side = match lock(&self.sent).remove(&key(message.id())) {
                    true => Side::Agent,
                    false => Side::Editor,
                };
                Ok((side, message.value))
            }
            Kind::Notification if method == "$/cancel_request" => {
                let named = key(&message.value["params"]["requestId"]);
                let side = match lock(&self.received).contains(&named) {
                    true => Side::Agent,
                    false => Side::Editor,
                };
                Ok((side, message.value))
            }
            _ if SPELLINGS.iter().any(|(_, successor)| *successor == method) => {
                let inner = unwrapped(&message.value).map_err(|why| Refused {
                    id: message.id().clone(),
                    code: strict::INVALID_REQUEST,
                    why,
                })?;
                if message.kind == Kind::Request {
                    lock(&self.received).insert(key(message.id()));
                }
                Ok((Side::Agent, inner))
            }
            Kind::Request if is_proxy_initialize(&method) => {
                let (_, successor) = SPELLINGS
                    .iter()
                    .find(|(initialize, _)| *initialize == method)
                    .expect("a proxy initialize");
                let _ = self.successor.set(successor);
                // The editor's `initialize`, as the proxy passes it on to its successor.
                message.value["method"] = Value::from("initialize");
                Ok((Side::Editor, message.value))
            }
            Kind::Request if method == "initialize" => Err(Refused {
                id: message.id().clone(),
                code: strict::INVALID_REQUEST,
                why: "palisade acp has no agent of its own: give it one after `--`, or run it \
                      as a proxy before the agent in a conductor chain (which sends \
                      `proxy/initialize`)"
                    .into(),
            }),
            _ => Ok((Side::Editor, message.value)),
        }
    }
}

/// The message a `proxy/successor` carries, with the envelope's id (a request's): only
/// `method`, `params` and the envelope's own `_meta` (which is the hop's, and not passed on).
fn unwrapped(envelope: &Value) -> Result<Value, String> {
    let Some(params) = envelope.get("params").and_then(Value::as_object) else {
        return Err(
            "a proxy/successor message carries its message as an object in `params`".into(),
        );
    };
    if let Some(other) = params
        .keys()
        .find(|k| !matches!(k.as_str(), "method" | "params" | "_meta"))
    {
        return Err(format!(
            "a proxy/successor message carries `method`, `params` and `_meta`, not `{other}`"
        ));
    }
    let Some(method) = params.get("method").and_then(Value::as_str) else {
        return Err("a proxy/successor message names its message's `method`".into());
    };
    let mut inner = json!({ "jsonrpc": "2.0", "method": method });
    if let Some(inner_params) = params.get("params") {
        inner["params"] = inner_params.clone();
    }
    if let Some(id) = envelope.get("id") {
        inner["id"] = id.clone();
    }
    Ok(inner)
}

enum Side {
    Editor,
    Agent,
}

/// A message refused at the envelope: the error to answer the conductor with.
struct Refused {
    id: Value,
    code: i64,
    why: String,
}

/// Reads the conductor on `input` in a task of its own, and returns what the editor's side
/// and the agent's side each read. A line that cannot be read, or could be read two ways, is
/// answered on `out` (plain: the conductor's) and goes to neither side. Both end when the
/// conductor's input does.
pub(super) fn split(
    input: impl AsyncRead + Unpin + Send + 'static,
    out: Writer,
    successor: Arc<Successor>,
) -> (DuplexStream, DuplexStream) {
    let (mut editor, editor_side) = tokio::io::duplex(PIPE_BYTES);
    let (mut agent, agent_side) = tokio::io::duplex(PIPE_BYTES);
    tokio::spawn(async move {
        let mut lines = Lines::new(input);
        loop {
            let message = match lines.next_message().await {
                Ok(Ok(message)) => message,
                Ok(Err(refusal)) => {
                    eprintln!(
                        "palisade acp: refused a message from the conductor: {}",
                        refusal.why
                    );
                    out.refuse(&refusal);
                    continue;
                }
                Err(why) => {
                    eprintln!("palisade acp: the conductor's input ends: {why}");
                    break;
                }
            };
            let (side, value) = match successor.route(message) {
                Ok(routed) => routed,
                Err(refused) => {
                    eprintln!(
                        "palisade acp: refused a message from the conductor: {}",
                        refused.why
                    );
                    if !refused.id.is_null() {
                        out.error(&refused.id, refused.code, refused.why, None);
                    }
                    continue;
                }
            };
            let mut line = strict::encode(&value);
            line.push('\n');
            let pipe = match side {
                Side::Editor => &mut editor,
                Side::Agent => &mut agent,
            };
            if pipe.write_all(line.as_bytes()).await.is_err() {
                break;
            }
        }
        let _ = editor.shutdown().await;
        let _ = agent.shutdown().await;
    });
    (editor_side, agent_side)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(value: Value) -> strict::Message {
        strict::read(&value.to_string()).unwrap()
    }

    #[test]
    fn a_successors_message_is_unwrapped_and_the_answer_goes_back_as_it_is() {
        let successor = Successor::default();
        let (side, inner) = successor
            .route(read(
                json!({ "jsonrpc": "2.0", "id": 9, "method": "proxy/successor",
                "params": { "method": "session/request_permission", "params": { "sessionId": "s" },
                    "_meta": { "hop": true } } }),
            ))
            .ok()
            .unwrap();
        assert!(matches!(side, Side::Agent));
        assert_eq!(
            inner,
            json!({ "jsonrpc": "2.0", "id": 9, "method": "session/request_permission",
                "params": { "sessionId": "s" } })
        );
        // Its cancellation goes to the agent's side; the answer is sent as it is.
        let cancel = json!({ "jsonrpc": "2.0", "method": "$/cancel_request",
            "params": { "requestId": 9 } });
        assert!(matches!(
            successor.route(read(cancel.clone())).ok().unwrap().0,
            Side::Agent
        ));
        assert_eq!(
            successor.wrap(&json!({ "jsonrpc": "2.0", "id": 9, "result": {} })),
            None
        );
        assert!(matches!(
            successor.route(read(cancel)).ok().unwrap().0,
            Side::Editor
        ));
    }

    #[test]
    fn the_agents_sides_requests_are_wrapped_in_the_conductors_spelling() {
        let successor = Successor::default();
        let init = read(
            json!({ "jsonrpc": "2.0", "id": 1, "method": "_proxy/initialize",
            "params": { "protocolVersion": 1 } }),
        );
        let (side, value) = successor.route(init).ok().unwrap();
        assert!(matches!(side, Side::Editor));
        assert_eq!(value["method"], "initialize");
        let wrapped = successor
            .wrap(
                &json!({ "jsonrpc": "2.0", "id": "p-1", "method": "initialize",
                "params": { "protocolVersion": 1 } }),
            )
            .unwrap();
        assert_eq!(
            wrapped,
            json!({ "jsonrpc": "2.0", "id": "p-1", "method": "_proxy/successor",
                "params": { "method": "initialize", "params": { "protocolVersion": 1 } } })
        );
        let answer = read(json!({ "jsonrpc": "2.0", "id": "p-1", "result": {} }));
        assert!(matches!(
            successor.route(answer).ok().unwrap().0,
            Side::Agent
        ));
        // An answer to a request of the editor's side goes there.
        let answer = read(json!({ "jsonrpc": "2.0", "id": "p-2", "result": {} }));
        assert!(matches!(
            successor.route(answer).ok().unwrap().0,
            Side::Editor
        ));
    }

    #[test]
    fn an_envelope_of_another_shape_and_a_plain_initialize_are_refused() {
        let successor = Successor::default();
        for message in [
            json!({ "jsonrpc": "2.0", "id": 3, "method": "proxy/successor",
                "params": { "method": "session/update", "sessionId": "s" } }),
            json!({ "jsonrpc": "2.0", "id": 3, "method": "proxy/successor", "params": [] }),
            json!({ "jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {} }),
        ] {
            let refused = successor.route(read(message.clone())).err().unwrap();
            assert_eq!(refused.id, json!(3), "{message}");
        }
    }
}
