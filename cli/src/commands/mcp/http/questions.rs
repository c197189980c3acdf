//! Over `--listen`, the server's questions to the client (MCP 2025-11-25's `elicitation/create`,
//! `sampling/createMessage` and `roots/list` requests, on a call's event stream or the
//! session's own) and the client's answers, judged as on stdio (see [`super::super::rounds`]):
//! a question a hook denies never reaches the client, and the server has the client's refusal
//! in its place; an answer a hook blocks never reaches the server, which has the refusal
//! instead.

use super::super::rounds::{Rounds, is_question};
use super::{Gateway, McpSession, lock};
use axum::http::{HeaderName, Method};
use serde_json::{Value, json};
use std::sync::Arc;

/// The judge of one MCP session's questions and answers, with the headers that reach its
/// server (its session id).
#[derive(Clone)]
pub(super) struct Questions {
    pub(super) gateway: Arc<Gateway>,
    pub(super) session: Arc<McpSession>,
    pub(super) headers: Vec<(HeaderName, String)>,
}

impl Questions {
    fn rounds(&self) -> Rounds {
        let server = self.gateway.name.clone();
        Rounds::of_server_requests(
            &self.session.lifecycle,
            server,
            &self.session.seen.questions,
        )
    }

    /// A message of the server's on its way to the client: itself, unless it is a question a
    /// hook denied (`None`: the server has been answered in the client's place) or a task's
    /// state that does not go on (see [`super::super::tasks`]).
    pub(super) async fn passed(&self, mut message: Value) -> Option<Value> {
        let method = message["method"].as_str().unwrap_or_default().to_string();
        if method == "notifications/tasks" {
            let tasks = &self.session.seen.tasks;
            return tasks.notified(&mut message["params"]).then_some(message);
        }
        let id = message.get("id").cloned();
        let (Some(id), true) = (id, is_question(&method)) else {
            return Some(message);
        };
        let key = super::id_key(&id);
        let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
        match self.rounds().question(None, &key, &method, params).await {
            Ok(()) => {
                lock(&self.session.questions_out).insert(key, method);
                Some(message)
            }
            Err(why) => {
                self.post(super::super::refused(&id, &method, &why)).await;
                None
            }
        }
    }

    /// The client's answer `message` to one of the server's questions, if it is one: judged,
    /// and sent to the server as `post-tool` left it or refused in the client's place. `None`
    /// when it answers no question of the session (it goes on as any message).
    pub(super) async fn answered(&self, message: &Value) -> Option<()> {
        let key = super::id_key(&message["id"]);
        let method = lock(&self.session.questions_out).remove(&key)?;
        let mut message = message.clone();
        let Some(result) = message.get("result").cloned() else {
            self.post(message).await;
            return Some(());
        };
        match self.rounds().answer(None, &key, &result).await {
            Ok(kept) => {
                message["result"] = kept;
                self.post(message).await;
            }
            Err(why) => {
                let id = message["id"].clone();
                self.post(super::super::refused(&id, &method, &why)).await;
            }
        }
        Some(())
    }

    /// POSTs `message` to the server in the session's name.
    async fn post(&self, message: Value) {
        let request = self
            .gateway
            .request(Method::POST, &self.headers)
            .body(crate::jsonrpc::strict::encode(&message));
        if let Err(e) = request.send().await {
            eprintln!("palisade mcp: an answer to the MCP server's question was lost: {e}");
        }
    }
}
