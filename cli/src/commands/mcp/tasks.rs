//! MCP's tasks extension (`io.modelcontextprotocol/tasks`, beside MCP 2026-07-28) through the
//! proxy. A server may answer a client's `tools/call` with a task (`resultType: "task"` and a
//! `taskId`) instead of its result; the client then polls `tasks/get` for the task's state,
//! answers the questions of a task in `input_required` with `tasks/update`, and may
//! `tasks/cancel` it. The result, the questions and the answers pass there, after the call's
//! pipeline has run, so each is judged where it passes:
//!
//! - the task handle is the call's outcome in its pipeline, as an `input_required` round is;
//!   the task is remembered with the call it runs, committed as the call `ID/task`;
//! - a task's questions (the `inputRequests` of a `tasks/get` answer) go through the tool
//!   step as a round's do, each once: one denied, the proxy cancels the task at the server
//!   and the client reads it `failed`, with the reason;
//! - the answers of a `tasks/update` are judged as a retry's ([`Rounds::answers`]): one
//!   blocked, the update is refused (`-32602`) before the server hears it; one to no question
//!   of the task that Palisade let through is left out;
//! - the task's end (`completed`'s result, `failed`'s error, `cancelled`) is the result of the
//!   call `ID/task`: through `post-tool`, `tool-result` and the committed result, once. The
//!   client reads what `post-tool` left, and every later `tasks/get` reads the same;
//! - a `tasks/*` request that does not declare the extension is refused as a server refuses
//!   it (`-32021`), and one about a task the proxy did not see created in the session is
//!   refused (`-32602`): its result would pass unjudged. Other `tasks/*` methods (2025-11-25's
//!   `tasks/result`, `tasks/list`) are unknown (`-32601`);
//! - a `notifications/tasks` that carries a task's questions, result or error is not passed
//!   on (the client reads them from `tasks/get`, judged), nor one of a task the proxy does not
//!   know.

use super::call::{Upstream, envelope, outcome_of, result_of};
use super::rounds::Rounds;
use super::{INVALID_PARAMS, METHOD_NOT_FOUND, lock};
use palisade::{ToolCall, ToolOutcome};
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// The extension's identifier, under which a client declares it takes tasks.
pub(super) const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// JSON-RPC's code, in MCP 2026-07-28, for a request that needs a capability the client did
/// not declare.
const MISSING_CAPABILITY: i64 = -32021;
/// The tasks a session remembers at most; the oldest go first.
const REMEMBERED: usize = 1024;

const GET: &str = "tasks/get";
const UPDATE: &str = "tasks/update";
const CANCEL: &str = "tasks/cancel";
const RESULT: &str = "result";
const ERROR: &str = "error";
const QUESTIONS: &str = "inputRequests";

/// The tasks servers made of one session's calls.
#[derive(Default)]
pub(super) struct Tasks(Mutex<Table>);

#[derive(Default)]
struct Table {
    tasks: HashMap<String, Arc<Task>>,
    /// Oldest first.
    order: VecDeque<String>,
}

struct Task {
    /// The call the task runs, whose result its end is: `ID/task`.
    call: ToolCall,
    /// The judge of its questions and of their answers.
    rounds: Rounds,
    /// Its questions judged and let through, by key: each is judged once, unless the server
    /// asks something else under the same key.
    asked: Mutex<HashMap<String, Value>>,
    /// Its end as judged, once it has one: the fields every later `tasks/get` reads.
    settled: tokio::sync::Mutex<Option<Map<String, Value>>>,
}

/// A `tasks/get` answer as judged: what the client reads, and the `tasks/cancel` to send the
/// server when a hook denied one of the task's questions.
pub(super) struct Got {
    pub(super) task: Value,
    cancel: bool,
}

/// Whether a request's parameters declare the tasks extension among the client's
/// capabilities (MCP 2026-07-28's per-request `_meta`).
pub(super) fn declared(params: &Value) -> bool {
    params
        .pointer("/_meta/io.modelcontextprotocol~1clientCapabilities/extensions")
        .and_then(|extensions| extensions.get(EXTENSION))
        .is_some()
}

impl Tasks {
    /// The call `call`, judged in `rounds`' session, answered with the task handle `result`:
    /// the task is remembered, and committed as the call `ID/task`. Why the handle is no
    /// task's, when it is not.
    pub(super) fn created(
        &self,
        rounds: &Rounds,
        call: &ToolCall,
        result: &Value,
    ) -> Result<(), String> {
        let Some(id) = result.get("taskId").and_then(Value::as_str) else {
            return Err("the MCP server answered with a task that has no taskId".into());
        };
        let call = ToolCall {
            tool_use_id: format!("{}/task", call.tool_use_id),
            ..call.clone()
        };
        rounds.lifecycle.tool_call(&call);
        let rounds = Rounds {
            tool: format!("task {id}"),
            tool_use_id: call.tool_use_id.clone(),
            ..rounds.clone()
        };
        let task = Arc::new(Task {
            call,
            rounds,
            asked: Mutex::default(),
            settled: tokio::sync::Mutex::default(),
        });
        let mut table = lock(&self.0);
        if table.tasks.insert(id.to_string(), task).is_none() {
            if table.order.len() == REMEMBERED
                && let Some(oldest) = table.order.pop_front()
            {
                table.tasks.remove(&oldest);
            }
            table.order.push_back(id.to_string());
        }
        Ok(())
    }

    fn task(&self, id: &str) -> Option<Arc<Task>> {
        lock(&self.0).tasks.get(id).cloned()
    }

    /// The JSON-RPC error a client's `method` request (a `tasks/*` one) with `params` is
    /// answered with instead of being sent, if it is refused.
    pub(super) fn refusal(&self, method: &str, params: &Value) -> Option<Value> {
        if ![GET, UPDATE, CANCEL].contains(&method) {
            return Some(json!({ "code": METHOD_NOT_FOUND, "message": format!(
                "`{}` is not a method of MCP's tasks extension, which Palisade serves \
                 (tasks/get, tasks/update, tasks/cancel)",
                crate::output::printable(method)
            ) }));
        }
        if !declared(params) {
            return Some(json!({
                "code": MISSING_CAPABILITY,
                "message": format!("{method} needs the client capability {EXTENSION}"),
                "data": { "requiredCapabilities": { "extensions": { EXTENSION: {} } } },
            }));
        }
        let id = params.get("taskId").and_then(Value::as_str);
        match id.map(|id| self.task(id)) {
            Some(Some(_)) => None,
            Some(None) => Some(json!({ "code": INVALID_PARAMS, "message": format!(
                "{method}: no task `{}` was made through Palisade in this session: the result \
                 of a task it did not see made would reach the client unjudged",
                crate::output::printable(id.unwrap_or_default())
            ) })),
            None => Some(json!({ "code": INVALID_PARAMS,
                "message": format!("{method}: the parameters have no taskId") })),
        }
    }

    /// A `tasks/update`'s parameters, its answers judged as a retry's: the parameters to
    /// send (the answers as `post-tool` left them), or why the update is refused. An answer
    /// to no question the task asked and Palisade let through is left out: nothing would
    /// judge it, and the extension has the server ignore it.
    pub(super) async fn update(&self, params: &Value) -> Result<Value, String> {
        let id = params["taskId"].as_str().unwrap_or_default();
        let task = self
            .task(id)
            .ok_or("tasks/update: the task is no longer known")?;
        let mut params = params.clone();
        if let Some(Value::Object(answers)) = params.get_mut("inputResponses") {
            let asked = lock(&task.asked);
            answers.retain(|key, _| asked.contains_key(key));
        }
        task.rounds.answers(&params).await
    }

    /// The server's answer `result` to a client's `tasks/get` (sent with `params`), judged;
    /// a task whose question a hook denied is cancelled at `upstream`. The result the client
    /// reads, or why it is refused.
    pub(super) async fn got(
        &self,
        upstream: Arc<dyn Upstream>,
        params: &Value,
        result: Value,
    ) -> Result<Value, String> {
        let id = params["taskId"].as_str().unwrap_or_default().to_string();
        if result["taskId"].as_str() != Some(id.as_str()) {
            return Err(format!(
                "the MCP server answered tasks/get of task `{}` with another task's state",
                crate::output::printable(&id)
            ));
        }
        let got = self.judged(&id, result).await?;
        if got.cancel {
            let mut cancel = json!({ "taskId": id });
            if let Some(envelope) = envelope(params) {
                cancel["_meta"] = envelope;
            }
            tokio::spawn(async move {
                if let Err(why) = upstream.request(CANCEL, cancel).await {
                    eprintln!("palisade mcp: a task whose question was denied runs on: {why}");
                }
            });
        }
        Ok(got.task)
    }

    /// The state `detailed` of task `id` (a `tasks/get` result), as the client reads it.
    async fn judged(&self, id: &str, mut detailed: Value) -> Result<Got, String> {
        let task = self
            .task(id)
            .ok_or("tasks/get: the task is no longer known")?;
        let mut settled = task.settled.lock().await;
        let Some(fields) = detailed.as_object_mut() else {
            return Err("the MCP server's tasks/get answer is not an object".into());
        };
        if let Some(end) = settled.as_ref() {
            settle(fields, end);
            return Ok(Got {
                task: detailed,
                cancel: false,
            });
        }
        let status = fields
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let (end, cancel) = match status.as_str() {
            "working" => {
                strip(fields, &[RESULT, ERROR, QUESTIONS]);
                (None, false)
            }
            "input_required" => {
                strip(fields, &[RESULT, ERROR]);
                let questions = fields.get(QUESTIONS).cloned().unwrap_or(Value::Null);
                match task.questions(&questions).await {
                    Ok(()) => (None, false),
                    Err(why) => {
                        let outcome = ToolOutcome::error(why.clone());
                        task.rounds
                            .lifecycle
                            .tool_observed(&task.call, &outcome)
                            .await;
                        (Some(failed(&why)), true)
                    }
                }
            }
            "completed" => {
                let sent = fields.remove(RESULT).unwrap_or(Value::Null);
                (Some(task.completed(sent).await), false)
            }
            "failed" => {
                let error = fields.remove(ERROR).unwrap_or(Value::Null);
                (Some(task.failed(error).await), false)
            }
            "cancelled" => {
                let outcome = ToolOutcome::error("the task was cancelled");
                task.rounds
                    .lifecycle
                    .tool_observed(&task.call, &outcome)
                    .await;
                (
                    Some(Map::from_iter([("status".into(), json!("cancelled"))])),
                    false,
                )
            }
            other => {
                return Err(format!(
                    "the MCP server's task is in a state Palisade does not know (`{}`), which \
                     it cannot judge",
                    crate::output::printable(other)
                ));
            }
        };
        if let Some(end) = end {
            settle(fields, &end);
            *settled = Some(end);
        }
        Ok(Got {
            task: detailed,
            cancel,
        })
    }

    /// A `notifications/tasks`'s `params`, on its way to the client: whether it goes on. Only
    /// a state without payload does (`working`, `cancelled`), of a task the proxy knows.
    pub(super) fn notified(&self, params: &mut Value) -> bool {
        let known = params["taskId"]
            .as_str()
            .is_some_and(|id| self.task(id).is_some());
        let bare = matches!(params["status"].as_str(), Some("working" | "cancelled"));
        if let (true, true, Some(fields)) = (known, bare, params.as_object_mut()) {
            strip(fields, &[RESULT, ERROR, QUESTIONS]);
            return true;
        }
        false
    }
}

impl Task {
    /// The task's questions (`inputRequests`), each through the tool step unless it was let
    /// through before as it is: why the task is refused, when a hook denies one.
    async fn questions(&self, questions: &Value) -> Result<(), String> {
        let Value::Object(questions) = questions else {
            return Err("the MCP server's task needs input but asks no question".into());
        };
        for (key, request) in questions {
            if lock(&self.asked).get(key) == Some(request) {
                continue;
            }
            let method = request["method"].as_str().unwrap_or_default();
            let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
            self.rounds.question(None, key, method, params).await?;
            lock(&self.asked).insert(key.clone(), request.clone());
        }
        Ok(())
    }

    /// A completed task's `result` as the call's result, past `post-tool`: the fields the
    /// client reads.
    async fn completed(&self, sent: Value) -> Map<String, Value> {
        let result: CallToolResult = match serde_json::from_value(sent.clone()) {
            Ok(result) => result,
            Err(e) => {
                let why = format!("the MCP server's task result is not a tool result: {e}");
                let outcome = ToolOutcome::error(why.clone());
                self.rounds
                    .lifecycle
                    .tool_observed(&self.call, &outcome)
                    .await;
                return failed(&why);
            }
        };
        let outcome = outcome_of(&result);
        let post = self
            .rounds
            .lifecycle
            .tool_finished(&self.call, &outcome)
            .await;
        let result = if post.outcome == outcome && post.contexts.is_empty() {
            sent
        } else {
            result_of(&post.outcome, post.contexts.iter().map(|c| &c.text))
        };
        Map::from_iter([
            ("status".into(), json!("completed")),
            (RESULT.into(), result),
        ])
    }

    /// A failed task's `error` (a JSON-RPC error) as the call's error outcome, past
    /// `post-tool`: the fields the client reads. The error as sent, unless a hook changed it.
    async fn failed(&self, error: Value) -> Map<String, Value> {
        let outcome = ToolOutcome::error(format!(
            "the MCP server's task failed: {}",
            error["message"].as_str().unwrap_or("an error")
        ));
        let post = self
            .rounds
            .lifecycle
            .tool_finished(&self.call, &outcome)
            .await;
        if post.outcome == outcome && post.contexts.is_empty() {
            return Map::from_iter([("status".into(), json!("failed")), (ERROR.into(), error)]);
        }
        let result = result_of(&post.outcome, post.contexts.iter().map(|c| &c.text));
        Map::from_iter([
            ("status".into(), json!("completed")),
            (RESULT.into(), result),
        ])
    }
}

/// A task's end that Palisade decided: failed, with `why`.
fn failed(why: &str) -> Map<String, Value> {
    Map::from_iter([
        ("status".into(), json!("failed")),
        ("statusMessage".into(), json!(why)),
        (
            ERROR.into(),
            json!({ "code": crate::jsonrpc::strict::INVALID_REQUEST, "message": why }),
        ),
    ])
}

/// A task's state with its settled `end` in place of what the server said of its end.
fn settle(fields: &mut Map<String, Value>, end: &Map<String, Value>) {
    strip(fields, &[RESULT, ERROR, QUESTIONS]);
    fields.extend(end.iter().map(|(k, v)| (k.clone(), v.clone())));
}

/// `fields` without the payloads that do not belong to its state.
fn strip(fields: &mut Map<String, Value>, payloads: &[&str]) {
    for payload in payloads {
        fields.remove(*payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_declares_the_extension_in_its_client_capabilities() {
        let params = json!({ "_meta": { "io.modelcontextprotocol/clientCapabilities":
            { "extensions": { EXTENSION: {} } } } });
        assert!(declared(&params));
        assert!(!declared(&json!({ "taskId": "t" })));
    }

    #[test]
    fn tasks_requests_about_no_task_of_the_session_are_refused() {
        let tasks = Tasks::default();
        let declaring = |id: &str| {
            json!({ "taskId": id, "_meta": { "io.modelcontextprotocol/clientCapabilities":
                { "extensions": { EXTENSION: {} } } } })
        };
        let code =
            |method, params: &Value| tasks.refusal(method, params).map(|e| e["code"].clone());
        assert_eq!(code(GET, &declaring("t")), Some(json!(INVALID_PARAMS)));
        assert_eq!(
            code(CANCEL, &json!({ "taskId": "t" })),
            Some(json!(MISSING_CAPABILITY))
        );
        assert_eq!(
            code("tasks/result", &declaring("t")),
            Some(json!(METHOD_NOT_FOUND))
        );
        assert_eq!(
            code("tasks/list", &json!({})),
            Some(json!(METHOD_NOT_FOUND))
        );
    }

    #[test]
    fn a_notification_goes_on_only_bare_and_of_a_known_task() {
        let tasks = Tasks::default();
        let mut unknown = json!({ "taskId": "t", "status": "working" });
        assert!(!tasks.notified(&mut unknown));
        let mut settled = json!({ "taskId": "t", "status": "completed", "result": {} });
        assert!(!tasks.notified(&mut settled));
    }
}
