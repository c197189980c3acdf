//! A client's `tools/call` through Palisade's tool pipeline, whose tool body is the server's
//! own `tools/call`:
//!
//! - `pre-tool` / `tool-guard` deny: the client gets a result with `isError: true` whose text
//!   is the reason (the model reads why); the server is never asked.
//! - `ask`: the client is asked with `elicitation/create` when it declared it takes them (a
//!   2026-07-28 client in a round of Palisade's, [`super::asks`]); no answer, a refusal, or a
//!   client that cannot be asked is a denial.
//! - `tool-execute` wrappers: each `next()` is one `tools/call` to the server (a wrapper's
//!   time limit cuts a call off, and the server is told `notifications/cancelled`).
//! - `post-tool`: a block answers its feedback as an error result; a content replacement
//!   replaces `content` (the structured content, the tool's canonical value, is kept:
//!   docs/semantics.md S1.36); a value replacement replaces
//!   `structuredContent` and the content is recomputed from it. Contexts follow the content
//!   as text blocks. A result no hook changed reaches the client as the server sent it.
//! - a client's `notifications/cancelled` stops the pipeline where it is, and the call is not
//!   answered (the protocol's rule for a cancelled request).
//! - a server's task handle (MCP's tasks extension, to a client that declared it) is the
//!   call's outcome; the task's end is judged when the client reads it ([`super::tasks`]).

use super::rounds::{Questions, Rounds, result_type};
use super::schema::ToolSchemas;
use super::tasks::Tasks;
use super::{HEADER_MISMATCH, INTERNAL_ERROR, INVALID_PARAMS, Proxy, id_key, lock, request};
use crate::jsonrpc::relay::own_id;
use base64::Engine as _;
use palisade::{Approval, Approver, AskRequest, ContentBlock, Provenance, ToolCall, ToolOutcome};
use palisade::{Tool, ToolRegistry, ToolRequest};
use rmcp::model::{self as mcp, CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::oneshot;

/// What the server last answered the pipeline's call: the outcome, and the answer as sent.
type Last = Arc<Mutex<Option<(ToolOutcome, Answer)>>>;

/// The answer to a client's `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Answer {
    /// A result.
    Result(Value),
    /// The server's JSON-RPC error (`code`, `message`, `data`), as it sent it, and the HTTP
    /// status it came with (`--listen`): a refusal no hook changed reaches the client as the
    /// server's own, so that the client can tell it (an unsupported protocol version, a
    /// capability it did not declare) from a tool's failure.
    Error { error: Value, status: Option<u16> },
}

/// A server's answer to a request of the proxy's: the JSON-RPC response, and over HTTP the
/// status it came with.
pub(super) struct Reply {
    pub(super) message: Value,
    pub(super) status: Option<u16>,
}

/// Where the pipeline's calls of the tool go: the server, over the proxy's transport.
pub(super) trait Upstream: Send + Sync + 'static {
    /// Sends `tools/call` with `params` (the client's own); the server's answer (a JSON-RPC
    /// response), or why there is none. A call dropped before its answer is cancelled at the
    /// server.
    fn call(&self, params: Value) -> palisade::BoxFuture<'_, Result<Reply, String>>;

    /// Sends a request of Palisade's own (`tools/list`), under an id of the proxy's: the
    /// server's answer, or why there is none.
    fn request<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> palisade::BoxFuture<'a, Result<Value, String>>;

    /// Why what the call's transport carries beside its body says something else than the
    /// body's `arguments` mirrored into headers (`mirrored`: each header's name and the
    /// argument's value, see [`ToolSchemas::mirrored`]), if it does. Only HTTP has such headers.
    fn mirrors(&self, _mirrored: &[(String, Option<Value>)]) -> Result<(), String> {
        Ok(())
    }
}

/// A client's `tools/call` (`params`, as sent) through the pipeline in `lifecycle`, whose
/// tool is the server's own `tools/call`: the answer, `Err` with a JSON-RPC error (code,
/// message) when the parameters are not MCP's, or `Ok(None)` when `cancel` fired (the client
/// expects no answer).
pub(super) async fn call_tool(
    lifecycle: &Arc<palisade::Lifecycle>,
    upstream: Arc<dyn Upstream>,
    server: String,
    id: &Value,
    params: Value,
    seen: &Seen,
    cancel: &palisade::Signal,
) -> Result<Option<Answer>, (i64, String)> {
    let parsed: CallToolRequestParams = serde_json::from_value(params.clone()).map_err(|e| {
        (
            INVALID_PARAMS,
            format!("tools/call: the parameters are not MCP's: {e}"),
        )
    })?;
    // A client that takes tasks may have the call run as one: its result is judged when the
    // client reads it (see [`super::tasks`]).
    let takes_tasks = super::tasks::declared(&params);
    // MCP 2025-11-25's tasks (`params.task`, a task the client asks for) are not the
    // extension's: Palisade follows none of them, so the call runs as a plain one (a tool
    // that requires a task refuses it), rather than answer with a task no one judges.
    let mut params = params;
    if envelope(&params).is_none()
        && let Some(fields) = params.as_object_mut()
    {
        fields.remove("task");
    }
    let tool = parsed.name.to_string();
    let arguments = Value::Object(parsed.arguments.unwrap_or_default());
    let envelope = envelope(&params);
    let misspelled = tokio::select! {
        misspelled = seen.schemas.misspelled(upstream.as_ref(), &tool, &arguments, &envelope) => misspelled,
        () = cancel.cancelled() => return Ok(None),
    };
    match misspelled {
        Ok(None) => {
            // A server may route or authorise by the headers that mirror arguments: they
            // must say what the arguments the hooks judge say.
            let mirrored = seen.schemas.mirrored(&tool, &arguments).await;
            if let Err(why) = upstream.mirrors(&mirrored) {
                return Err((HEADER_MISMATCH, format!("tools/call: {why}")));
            }
        }
        Ok(Some(why)) => return Err((INVALID_PARAMS, format!("tools/call: {why}"))),
        Err(why) => {
            return Err((
                INTERNAL_ERROR,
                format!("tools/call refused: {why}, so its arguments cannot be judged"),
            ));
        }
    }
    // A hook's ask to a 2026-07-28 client is a round of Palisade's: a retry that answers one
    // is taken for the hook that asked (see [`super::asks`]).
    let begun = seen
        .asks
        .begin(&tool_use_id(id), (&tool, &arguments), params)?;
    let params = begun.params.clone();
    let name = format!("mcp__{server}__{tool}");
    let rounds = Rounds {
        lifecycle: lifecycle.clone(),
        server: server.clone(),
        tool: tool.clone(),
        tool_use_id: tool_use_id(id),
        questions: seen.questions.clone(),
    };
    // The caller's W3C trace context (MCP 2026-07-28's `_meta`): the audit log and the spans
    // of this call's hooks join its trace.
    let trace = trace_parent(&params).map(str::to_string);
    let last: Last = Arc::default();
    let tasks = seen.tasks.clone();
    let body = {
        let last = last.clone();
        Tool::new(name.clone(), move |invocation| {
            let (upstream, params, last) = (upstream.clone(), params.clone(), last.clone());
            let (rounds, tasks) = (rounds.clone(), tasks.clone());
            async move {
                // A retry's answers reach the server only as judged (see [`rounds`]).
                let params = match rounds.answers(&params).await {
                    Ok(params) => params,
                    Err(why) => return Ok(ToolOutcome::error(why)),
                };
                let reply = upstream.call(params).await?;
                let (outcome, sent) = answered(reply, takes_tasks)?;
                if let Answer::Result(result) = &sent {
                    match result_type(result) {
                        "input_required" => {
                            if let Err(why) = rounds.questions(result).await {
                                return Ok(ToolOutcome::error(why));
                            }
                        }
                        "task" => tasks.created(&rounds, &invocation.call, result)?,
                        _ => {}
                    }
                }
                *lock(&last) = Some((outcome.clone(), sent));
                Ok(outcome)
            }
        })
    };
    let request = ToolRequest {
        provenance: Some(Provenance::Mcp { server, tool }),
        ..ToolRequest::new(tool_use_id(id), name, arguments)
    };
    let registry = ToolRegistry::new([body]);
    let execution =
        palisade::events::in_trace(trace.as_deref(), lifecycle.execute(&registry, request));
    let execution = tokio::select! {
        execution = execution => execution,
        () = cancel.cancelled() => return Ok(None),
    };
    if let Some(round) = begun.round() {
        return Ok(Some(Answer::Result(round)));
    }
    let mut answer = match lock(&last).take() {
        Some((outcome, sent)) if outcome == execution.outcome && execution.contexts.is_empty() => {
            sent
        }
        _ => Answer::Result(result_of(
            &execution.outcome,
            execution.contexts.iter().map(|c| &c.text),
        )),
    };
    if let Answer::Result(result) = &mut answer
        && result_type(result) == "input_required"
    {
        begun.carry(result);
    }
    Ok(Some(answer))
}

/// The server's answer to `tools/call`: its outcome, and the answer as sent. A refusal (a
/// JSON-RPC error) is the error outcome hooks see. A task is an answer only to a client that
/// `takes_tasks`.
fn answered(reply: Reply, takes_tasks: bool) -> Result<(ToolOutcome, Answer), String> {
    if let Some(error) = reply.message.get("error") {
        let refused = ToolOutcome::error(format!(
            "the MCP server refused the call: {}",
            error["message"].as_str().unwrap_or("an error")
        ));
        let error = error.clone();
        let status = reply.status;
        return Ok((refused, Answer::Error { error, status }));
    }
    let sent = reply.message["result"].clone();
    match result_type(&sent) {
        "complete" => {}
        // An interim result (MCP 2026-07-28): the questions the server asks before it can
        // finish, which hooks see as the round's outcome.
        "input_required" => {
            let interim = json!({ "resultType": "input_required",
                "inputRequests": sent.get("inputRequests").cloned().unwrap_or(Value::Null) });
            return Ok((interim_outcome(interim), Answer::Result(sent)));
        }
        // The call runs as a task, whose handle hooks see as the call's outcome; its end is
        // judged when the client reads it.
        "task" if takes_tasks => return Ok((interim_outcome(sent.clone()), Answer::Result(sent))),
        other => {
            return Err(format!(
                "the MCP server answered with a result of type `{}`, which Palisade does not \
                 judge (it asked for a complete result)",
                crate::output::printable(other)
            ));
        }
    }
    let result: CallToolResult = serde_json::from_value(sent.clone())
        .map_err(|e| format!("the MCP server's answer is not a tool result: {e}"))?;
    Ok((outcome_of(&result), Answer::Result(sent)))
}

/// An interim result as the round's outcome: its JSON, as a block and as the value.
fn interim_outcome(interim: Value) -> ToolOutcome {
    ToolOutcome {
        content_blocks: vec![ContentBlock::Json {
            value: interim.clone(),
        }],
        is_error: false,
        value: Some(interim),
    }
}

/// What a session's calls share: the server's tool schemas, the questions it asked, the
/// tasks it made of calls, and the rounds Palisade asked its client in.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) schemas: ToolSchemas,
    pub(super) questions: Arc<Questions>,
    pub(super) tasks: Arc<Tasks>,
    pub(super) asks: super::asks::OwnAsks,
}

/// The per-request envelope of MCP 2026-07-28 (`params._meta`'s protocol version, client
/// capabilities and client info), which every request Palisade sends on the client's behalf
/// carries too (a `tools/list`); `None` for a request of an earlier revision.
pub(super) fn envelope(params: &Value) -> Option<Value> {
    let meta = params.get("_meta")?.as_object()?;
    meta.get(PROTOCOL_VERSION)?;
    let kept = [PROTOCOL_VERSION, CLIENT_CAPABILITIES, CLIENT_INFO]
        .into_iter()
        .filter_map(|key| Some((key.to_string(), meta.get(key)?.clone())))
        .collect();
    Some(Value::Object(kept))
}

/// The W3C `traceparent` a request carries in its `_meta` (MCP 2026-07-28; earlier clients
/// may send it too).
fn trace_parent(params: &Value) -> Option<&str> {
    params.get("_meta")?.get("traceparent")?.as_str()
}

/// `_meta`'s keys of MCP 2026-07-28's per-request envelope.
pub(super) const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
impl Proxy {
    /// A client's `tools/call` on stdio: through the pipeline, answered on stdout.
    pub(super) async fn call_tool(
        self: Arc<Self>,
        id: Value,
        message: Value,
        cancel: palisade::Signal,
    ) {
        let key = id_key(&id);
        let upstream: Arc<dyn Upstream> = Arc::new(Stdio(Arc::downgrade(&self)));
        let params = message["params"].clone();
        let decided = call_tool(
            &self.lifecycle,
            upstream,
            self.server_name(),
            &id,
            params,
            &self.seen,
            &cancel,
        )
        .await;
        lock(&self.in_flight).remove(&key);
        match decided {
            Ok(Some(Answer::Result(result))) => self.client.result(&id, result),
            Ok(Some(Answer::Error { error, .. })) => self
                .client
                .send(&json!({ "jsonrpc": "2.0", "id": id, "error": error })),
            Ok(None) => {}
            Err((code, why)) => self.client.error(&id, code, why, None),
        }
    }

    /// One request to the server on stdio, under an id of the proxy's (`tools/call` in the
    /// pipeline's name, `tools/list` in Palisade's): its answer, or why there is none.
    async fn upstream(&self, method: &str, params: Value) -> Result<Value, String> {
        let id = own_id();
        let key = id_key(&id);
        let (answered, answer) = oneshot::channel();
        match lock(&self.calls).as_mut() {
            Some(calls) => calls.insert(key.clone(), answered),
            None => return Err("the MCP server has gone".into()),
        };
        let mut pending = Pending {
            proxy: self,
            id: &id,
            key: &key,
            done: false,
        };
        self.server.send(&request(&id, method, params));
        let answer = answer.await;
        pending.done = true;
        answer.map_err(|_| "the MCP server ended before it answered".to_string())
    }
}

/// The stdio server, as the pipeline's upstream.
pub(super) struct Stdio(pub(super) Weak<Proxy>);

impl Upstream for Stdio {
    fn call(&self, params: Value) -> palisade::BoxFuture<'_, Result<Reply, String>> {
        Box::pin(async move {
            let proxy = self.0.upgrade().ok_or("the proxy is shutting down")?;
            let message = proxy.upstream("tools/call", params).await?;
            Ok(Reply {
                message,
                status: None,
            })
        })
    }

    fn request<'a>(
        &'a self,
        method: &'a str,
        params: Value,
    ) -> palisade::BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            let proxy = self.0.upgrade().ok_or("the proxy is shutting down")?;
            proxy.upstream(method, params).await
        })
    }
}

/// A call to the server in flight: cut off before its answer (a wrapper's time limit, the
/// client's cancel), it tells the server so.
struct Pending<'a> {
    proxy: &'a Proxy,
    id: &'a Value,
    key: &'a str,
    done: bool,
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(calls) = lock(&self.proxy.calls).as_mut() {
            calls.remove(self.key);
        }
        self.proxy.server.notify(
            "notifications/cancelled",
            json!({ "requestId": self.id, "reason": "cut off by Palisade (a time limit, or the client cancelled)" }),
        );
    }
}

/// A tool result as Palisade's outcome: text and images as themselves, every other block
/// (audio, resources, links) as its JSON; the structured content is the canonical value.
pub(super) fn outcome_of(result: &CallToolResult) -> ToolOutcome {
    let content_blocks = result
        .content
        .iter()
        .map(|block| match block {
            mcp::ContentBlock::Text(text) => ContentBlock::Text {
                text: text.text.clone(),
            },
            mcp::ContentBlock::Image(image) => {
                match base64::engine::general_purpose::STANDARD.decode(&image.data) {
                    Ok(data) => ContentBlock::Image {
                        media_type: image.mime_type.clone(),
                        data,
                    },
                    Err(_) => json_block(block),
                }
            }
            other => json_block(other),
        })
        .collect();
    ToolOutcome {
        content_blocks,
        is_error: result.is_error.unwrap_or(false),
        value: result.structured_content.clone(),
    }
}

fn json_block(block: &mcp::ContentBlock) -> ContentBlock {
    ContentBlock::Json {
        value: serde_json::to_value(block).unwrap_or(Value::Null),
    }
}

/// The tool result an outcome is, with `contexts` as text blocks after its content.
pub(super) fn result_of<'a>(
    outcome: &ToolOutcome,
    contexts: impl Iterator<Item = &'a String>,
) -> Value {
    let mut content: Vec<Value> = outcome
        .content_blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => json!({ "type": "text", "text": text }),
            ContentBlock::Image { media_type, data } => json!({
                "type": "image",
                "mimeType": media_type,
                "data": base64::engine::general_purpose::STANDARD.encode(data),
            }),
            // A block of the server's own kind (audio, a resource) goes back as it was;
            // other JSON as its text.
            ContentBlock::Json { value } => {
                if serde_json::from_value::<mcp::ContentBlock>(value.clone()).is_ok() {
                    value.clone()
                } else {
                    json!({ "type": "text", "text": value.to_string() })
                }
            }
        })
        .collect();
    content.extend(contexts.map(|text| json!({ "type": "text", "text": text })));
    let mut result = json!({ "content": content, "isError": outcome.is_error });
    if let Some(value) = &outcome.value {
        result["structuredContent"] = value.clone();
    }
    result
}

/// The session's approver: an `ask` becomes an `elicitation/create` to the client.
pub(super) struct Elicit(pub(super) Weak<Proxy>);

impl Approver for Elicit {
    fn approve<'a>(
        &'a self,
        call: &'a ToolCall,
        ask: &'a AskRequest,
    ) -> palisade::BoxFuture<'a, Approval> {
        Box::pin(async move {
            let Some(proxy) = self.0.upgrade() else {
                return Approval::Unavailable;
            };
            if let Some(approval) = proxy.seen.asks.approve(call, ask) {
                return approval;
            }
            if !proxy.elicits.load(std::sync::atomic::Ordering::Relaxed) {
                return Approval::Unavailable;
            }
            proxy.elicit(call, ask).await
        })
    }
}

impl Proxy {
    /// Asks the client's user whether `call` may run. Only an accepted `approve: true` lets
    /// it; the question lasts as long as the hook's caller waits (its `tools/call`).
    async fn elicit(&self, call: &ToolCall, ask: &AskRequest) -> Approval {
        let id = own_id();
        let (answered, answer) = oneshot::channel();
        lock(&self.asks).insert(id_key(&id), answered);
        self.client.send(&elicitation(&id, call, ask));
        match answer.await {
            Ok(answer) => approval(&answer),
            Err(_) => Approval::Cancelled,
        }
    }
}

/// The `elicitation/create` request `id` that asks the client's user whether `call` may run.
pub(super) fn elicitation(id: &Value, call: &ToolCall, ask: &AskRequest) -> Value {
    let params = json!({
        "message": format!(
            "Palisade: `{}` asks before {} runs: {}",
            ask.hook_id, call.name, ask.reason
        ),
        "requestedSchema": {
            "type": "object",
            "properties": { "approve": {
                "type": "boolean",
                "title": format!("Run {}?", call.name),
                "description": "Allow this one call",
            } },
            "required": ["approve"],
        },
    });
    request(id, "elicitation/create", params)
}

/// The client's answer to an elicitation: only an accepted `approve: true` lets the call run.
pub(super) fn approval(answer: &Value) -> Approval {
    let result = serde_json::from_value::<mcp::ElicitResult>(answer["result"].clone());
    match result {
        Ok(result) => match result.action {
            mcp::ElicitationAction::Accept
                if result
                    .content
                    .as_ref()
                    .is_some_and(|c| c["approve"] == true) =>
            {
                Approval::AllowedOnce
            }
            mcp::ElicitationAction::Cancel => Approval::Cancelled,
            _ => Approval::Rejected,
        },
        // An error, or an answer that is not an elicitation result.
        Err(_) => Approval::Unavailable,
    }
}

/// The id hooks see for the client's call `id`.
pub(super) fn tool_use_id(id: &Value) -> String {
    format!("mcp-{}", id_key(id).trim_matches('"'))
}
