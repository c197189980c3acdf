//! Tools: the agent's own (reported by `session/update`, asked about by
//! `session/request_permission`) and the client-side ones it asks the editor to run
//! (`fs/*`, `terminal/*`).

use super::{INVALID_PARAMS, Proxy, REFUSED, id_key, lock, schema};
use palisade::{
    Approval, Approver, AskPolicy, AskRequest, ContentBlock, Denial, Lifecycle, ToolCall,
    ToolDecision, ToolOutcome,
};
use serde_json::{Value, json};
use std::sync::{Arc, Weak};

/// What Palisade knows of one of the agent's tool calls, merged from its updates.
#[derive(Default)]
pub(super) struct ToolState {
    name: Option<String>,
    kind: Option<schema::ToolKind>,
    title: Option<String>,
    raw_input: Option<Value>,
    locations: Vec<schema::ToolCallLocation>,
    /// Committed as recorded.
    recorded: bool,
    /// Its final result observed.
    finished: bool,
}

impl ToolState {
    fn merge(&mut self, fields: &schema::ToolCallUpdateFields, meta: Option<&schema::Meta>) {
        let agent_name = meta
            .and_then(|m| m.get("claudeCode"))
            .and_then(|c| c.get("toolName"))
            .and_then(Value::as_str);
        if let Some(name) = fields.name.as_deref().or(agent_name) {
            self.name = Some(name.to_string());
        }
        if fields.kind.is_some() {
            self.kind = fields.kind;
        }
        if let Some(title) = &fields.title {
            self.title = Some(title.clone());
        }
        if let Some(input) = &fields.raw_input {
            self.raw_input = Some(input.clone());
        }
        if let Some(locations) = &fields.locations {
            self.locations = locations.clone();
        }
    }

    fn merge_call(&mut self, call: &schema::ToolCall) {
        let fields = schema::ToolCallUpdateFields::new()
            .kind(call.kind)
            .title(call.title.clone())
            .name(call.name.clone())
            .raw_input(call.raw_input.clone())
            .locations(call.locations.clone());
        self.merge(&fields, call.meta.as_ref());
    }

    /// The call as hooks see it. Its name is the agent's own when it says (`name`, or
    /// `_meta.claudeCode.toolName`; e.g. `Bash`), else the ACP kind (`execute`, `read`, …);
    /// its arguments are the raw input, with the title, kind and locations.
    fn call(&self, id: &str) -> ToolCall {
        let kind = self.kind.and_then(|k| serde_json::to_value(k).ok());
        let name = self
            .name
            .clone()
            .or_else(|| kind.as_ref().and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| "other".to_string());
        let mut arguments = match &self.raw_input {
            Some(Value::Object(input)) => input.clone(),
            _ => serde_json::Map::new(),
        };
        let extra = [
            ("title", self.title.clone().map(Value::String)),
            ("kind", kind),
            (
                "locations",
                (!self.locations.is_empty())
                    .then(|| serde_json::to_value(&self.locations).ok())
                    .flatten(),
            ),
        ];
        for (field, value) in extra {
            if let Some(value) = value
                && !arguments.contains_key(field)
            {
                arguments.insert(field.to_string(), value);
            }
        }
        ToolCall::new(id, name, Value::Object(arguments))
    }
}

/// An agent → editor request whose answer passes hooks.
pub(super) struct Pending {
    lifecycle: Arc<Lifecycle>,
    call: ToolCall,
    method: String,
    /// The terminal a terminal call is about.
    terminal: Option<String>,
}

/// A terminal the editor created for a guarded `terminal/create`.
pub(super) struct TerminalCall {
    lifecycle: Arc<Lifecycle>,
    call: ToolCall,
    /// The output the agent last received.
    output: String,
    /// Its result observed (an exit status seen).
    finished: bool,
}

/// The client-side methods Palisade guards (the terminal calls after `create` are answered
/// through [`Proxy::answer_to_agent`]).
pub(super) fn is_client_tool(method: &str) -> bool {
    let names = schema::CLIENT_METHOD_NAMES;
    [
        names.fs_read_text_file,
        names.fs_write_text_file,
        names.terminal_create,
        names.terminal_output,
        names.terminal_wait_for_exit,
    ]
    .contains(&method)
}

fn refusal(what: &str, denial: &Denial) -> (String, Option<Value>) {
    (
        format!(
            "{what} by Palisade (`{}`, {}): {}",
            denial.hook_id, denial.reason_code, denial.message
        ),
        Some(json!({ "hookId": denial.hook_id, "reasonCode": denial.reason_code })),
    )
}

fn text_of(outcome: &ToolOutcome) -> String {
    outcome
        .content_blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// A session's approver: a hook's ask about a client-side tool becomes a
/// `session/request_permission` of Palisade's own to the editor, which asks its user; only
/// the allow option lets the call run.
pub(super) struct AskEditor {
    pub(super) proxy: Weak<Proxy>,
    pub(super) session_id: String,
}

/// The options of Palisade's own permission requests.
const ALLOW: &str = "palisade-allow-once";
const REJECT: &str = "palisade-reject-once";

impl Approver for AskEditor {
    fn approve<'a>(
        &'a self,
        call: &'a ToolCall,
        ask: &'a AskRequest,
    ) -> palisade::BoxFuture<'a, Approval> {
        Box::pin(async move {
            let Some(proxy) = self.proxy.upgrade() else {
                return Approval::Unavailable;
            };
            let id = crate::jsonrpc::relay::own_id();
            let (answered, answer) = tokio::sync::oneshot::channel();
            lock(&proxy.asks).insert(id_key(&id), answered);
            let title = format!("Palisade: `{}` asks: {}", ask.hook_id, ask.reason);
            proxy.editor.send(&json!({
                "jsonrpc": "2.0",
                "id": id,
                "method": schema::CLIENT_METHOD_NAMES.session_request_permission,
                "params": {
                    "sessionId": self.session_id,
                    "toolCall": {
                        "toolCallId": call.tool_use_id,
                        "title": title,
                        "rawInput": call.arguments,
                        "status": "pending",
                    },
                    "options": [
                        { "optionId": ALLOW, "name": "Allow once", "kind": "allow_once" },
                        { "optionId": REJECT, "name": "Reject", "kind": "reject_once" },
                    ],
                },
            }));
            let answer = match answer.await {
                Ok(answer) => answer,
                Err(_) => return Approval::Cancelled,
            };
            match serde_json::from_value::<schema::RequestPermissionResponse>(
                answer["result"].clone(),
            ) {
                Ok(response) => match response.outcome {
                    schema::RequestPermissionOutcome::Selected(selected)
                        if &*selected.option_id.0 == ALLOW =>
                    {
                        Approval::AllowedOnce
                    }
                    schema::RequestPermissionOutcome::Cancelled => Approval::Cancelled,
                    _ => Approval::Rejected,
                },
                Err(_) => Approval::Unavailable,
            }
        })
    }
}

impl Proxy {
    /// The tool step ([`Lifecycle::authorize`]): the denial, if any.
    async fn authorize(
        &self,
        lifecycle: &Lifecycle,
        call: &ToolCall,
        asks: AskPolicy,
    ) -> Option<Denial> {
        match lifecycle.authorize(call, asks).await.decision {
            ToolDecision::Denied(denial) => Some(denial),
            // The user is asked either way: by Palisade (through the editor) before it
            // reaches here, or by the editor the request goes to.
            _ => None,
        }
    }

    /// A `session/update` from the agent: its text is kept for `turn-stopping`; a tool call
    /// is committed as recorded, and one with a final status runs `tool-result`.
    pub(super) fn session_update(self: &Arc<Self>, message: &Value) {
        let Ok(notification) =
            serde_json::from_value::<schema::SessionNotification>(message["params"].clone())
        else {
            // Display only: the editor judges what it cannot show.
            return;
        };
        let session_id = notification.session_id.0.to_string();
        let (id, status) = match &notification.update {
            schema::SessionUpdate::AgentMessageChunk(chunk) => {
                if let schema::ContentBlock::Text(text) = &chunk.content {
                    self.with_session(&session_id, |s| s.said.push_str(&text.text));
                }
                return;
            }
            schema::SessionUpdate::ToolCall(call) => {
                let id = call.tool_call_id.0.to_string();
                self.with_session(&session_id, |s| {
                    s.tools.entry(id.clone()).or_default().merge_call(call)
                });
                (id, Some(call.status))
            }
            schema::SessionUpdate::ToolCallUpdate(update) => {
                let id = update.tool_call_id.0.to_string();
                self.with_session(&session_id, |s| {
                    let state = s.tools.entry(id.clone()).or_default();
                    state.merge(&update.fields, update.meta.as_ref());
                });
                (id, update.fields.status)
            }
            _ => return,
        };
        let finished = matches!(
            status,
            Some(schema::ToolCallStatus::Completed | schema::ToolCallStatus::Failed)
        );
        let (lifecycle, call, record, finish) = self.with_session(&session_id, |s| {
            let state = s.tools.get_mut(&id).expect("merged above");
            let record = !std::mem::replace(&mut state.recorded, true);
            let finish = finished && !std::mem::replace(&mut state.finished, true);
            (s.lifecycle.clone(), state.call(&id), record, finish)
        });
        if record {
            lifecycle.tool_call(&call);
        }
        if finish {
            let outcome = update_outcome(&notification.update, status);
            tokio::spawn(async move { lifecycle.tool_observed(&call, &outcome).await });
        }
    }

    /// `session/request_permission`: a deny picks the request's reject option for the agent.
    /// A request the editor's cancel overtook is answered as cancelled, never passed on late.
    pub(super) async fn permission(self: Arc<Self>, id: Value, own: Value, mut message: Value) {
        let request: schema::RequestPermissionRequest =
            match serde_json::from_value(message["params"].clone()) {
                Ok(request) => request,
                Err(e) => {
                    // Unjudged, the request is not passed on: the agent hears "cancelled".
                    let session_id = message["params"]["sessionId"].as_str().unwrap_or_default();
                    self.notice(
                        session_id,
                        format!(
                            "Palisade: a permission request that is not ACP v1 was refused: {e}"
                        ),
                    );
                    self.to_editor.answered(&own);
                    let cancelled = schema::RequestPermissionOutcome::Cancelled;
                    return self
                        .agent
                        .result(&id, schema::RequestPermissionResponse::new(cancelled));
                }
            };
        let session_id = request.session_id.0.to_string();
        let tool_id = request.tool_call.tool_call_id.0.to_string();
        let (lifecycle, call, cancel) = self.with_session(&session_id, |s| {
            let state = s.tools.entry(tool_id.clone()).or_default();
            state.merge(&request.tool_call.fields, request.tool_call.meta.as_ref());
            state.recorded = true;
            (s.lifecycle.clone(), state.call(&tool_id), s.cancel.clone())
        });
        // The editor asks its user about the request: a hook's ask is that same question.
        let denial = self.authorize(&lifecycle, &call, AskPolicy::Agent).await;
        if cancel.is_cancelled() {
            self.to_editor.answered(&own);
            let cancelled = schema::RequestPermissionOutcome::Cancelled;
            return self
                .agent
                .result(&id, schema::RequestPermissionResponse::new(cancelled));
        }
        let Some(denial) = denial else {
            // The user still decides: Palisade never grants what the editor would not.
            message["id"] = own;
            return self.editor.send(&message);
        };
        self.to_editor.answered(&own);
        let reject = [
            schema::PermissionOptionKind::RejectOnce,
            schema::PermissionOptionKind::RejectAlways,
        ]
        .iter()
        .find_map(|kind| request.options.iter().find(|o| o.kind == *kind));
        let outcome = match reject {
            Some(option) => schema::RequestPermissionOutcome::Selected(
                schema::SelectedPermissionOutcome::new(option.option_id.clone()),
            ),
            None => schema::RequestPermissionOutcome::Cancelled,
        };
        self.agent
            .result(&id, schema::RequestPermissionResponse::new(outcome));
        let title = request
            .tool_call
            .fields
            .title
            .as_deref()
            .unwrap_or(&call.name);
        self.notice(
            &session_id,
            format!(
                "Palisade: `{}` denied {title} ({}): {}",
                denial.hook_id, denial.reason_code, denial.message
            ),
        );
    }

    /// A tool the agent asks the editor to run: guarded before, its answer judged after.
    /// `own` is the proxy's id for the agent's request `id`.
    pub(super) async fn client_tool(self: Arc<Self>, id: Value, own: Value, message: Value) {
        let method = message["method"].as_str().unwrap_or_default().to_string();
        let params = &message["params"];
        let names = schema::CLIENT_METHOD_NAMES;
        let checked = if method == names.fs_read_text_file {
            serde_json::from_value::<schema::ReadTextFileRequest>(params.clone()).map(|_| ())
        } else if method == names.fs_write_text_file {
            serde_json::from_value::<schema::WriteTextFileRequest>(params.clone()).map(|_| ())
        } else if method == names.terminal_create {
            serde_json::from_value::<schema::CreateTerminalRequest>(params.clone()).map(|_| ())
        } else {
            // The calls on a terminal: judged with the terminal's answer.
            serde_json::from_value::<schema::TerminalOutputRequest>(params.clone()).map(|_| ())
        };
        if let Err(e) = checked {
            self.to_editor.answered(&own);
            let why = format!("{method}: the parameters do not match ACP v1: {e}");
            return self.agent.error(&id, INVALID_PARAMS, why, None);
        }
        let session_id = params["sessionId"].as_str().unwrap_or_default().to_string();
        let lifecycle = self.lifecycle(&session_id);
        if method == names.terminal_output || method == names.terminal_wait_for_exit {
            let terminal = params["terminalId"].as_str().map(str::to_string);
            let call = ToolCall::new("", &method, Value::Null);
            return self.forward_pending(own, message, (lifecycle, call, terminal), method);
        }
        let call = ToolCall::new(
            format!("acp-{}", id_key(&own).trim_matches('"')),
            &method,
            client_tool_arguments(&method, params),
        );
        if let Some(denial) = self.authorize(&lifecycle, &call, AskPolicy::Approver).await {
            self.to_editor.answered(&own);
            let (why, data) = refusal("Refused", &denial);
            // The user hears it too: an agent may not pass an editor's error on to its model
            // (Gemini CLI 0.61 shows it "[object Object]").
            self.notice(&session_id, format!("Palisade: {method}: {why}"));
            return self.agent.error(&id, REFUSED, why, data);
        }
        self.forward_pending(own, message, (lifecycle, call, None), method);
    }

    /// The agent asks the editor's user for input (`elicitation/create`, ACP 1.7): judged as a
    /// call of the tool `elicitation/create`, its parameters as arguments, by pre-tool and
    /// tool-guard. Refused, it is declined for the user (`{"action": "decline"}`): the editor
    /// never shows it, and its user hears why in a message chunk. A request-scoped one names an
    /// editor request by the id the agent received (the proxy's): it goes on under the
    /// editor's own, and one naming no request in flight is refused.
    pub(super) async fn elicitation(self: Arc<Self>, id: Value, own: Value, mut message: Value) {
        let params = &message["params"];
        if let Err(e) = serde_json::from_value::<schema::CreateElicitationRequest>(params.clone()) {
            self.to_editor.answered(&own);
            let why = format!("elicitation/create: the parameters do not match ACP v1: {e}");
            return self.agent.error(&id, INVALID_PARAMS, why, None);
        }
        let request = params.get("requestId").cloned();
        let editors = match &request {
            Some(request) => match self.to_agent.peer_of(request) {
                Some(editors) => Some(editors),
                None => {
                    self.to_editor.answered(&own);
                    let why = "elicitation/create: `requestId` names no editor request in flight";
                    return self.agent.error(&id, INVALID_PARAMS, why.to_string(), None);
                }
            },
            None => None,
        };
        let session_id = params["sessionId"].as_str().unwrap_or_default().to_string();
        let lifecycle = self.lifecycle(&session_id);
        let method = schema::CLIENT_METHOD_NAMES.elicitation_create;
        let call = ToolCall::new(
            format!("acp-{}", id_key(&own).trim_matches('"')),
            method,
            params.clone(),
        );
        if let Some(denial) = self.authorize(&lifecycle, &call, AskPolicy::Approver).await {
            self.to_editor.answered(&own);
            let (why, _) = refusal("Declined", &denial);
            if !session_id.is_empty() {
                self.notice(&session_id, format!("Palisade: {method}: {why}"));
            }
            return self
                .agent
                .result(&id, serde_json::json!({ "action": "decline" }));
        }
        if let Some(editors) = editors {
            message["params"]["requestId"] = editors;
        }
        message["id"] = own;
        self.editor.send(&message);
    }

    /// Passes the request to the editor under the proxy's id `own`, its answer to be judged.
    fn forward_pending(
        &self,
        own: Value,
        mut message: Value,
        (lifecycle, call, terminal): (Arc<Lifecycle>, ToolCall, Option<String>),
        method: String,
    ) {
        lock(&self.pending).insert(
            id_key(&own),
            Pending {
                lifecycle,
                call,
                method,
                terminal,
            },
        );
        message["id"] = own;
        self.editor.send(&message);
    }

    /// The editor's answer to an agent request: through `post-tool` and `tool-result` when
    /// it is a guarded tool's, as it is otherwise.
    /// An answer to no request in flight is dropped, never passed on unjudged.
    pub(super) async fn answer_to_agent(self: Arc<Self>, mut message: Value) {
        let own = message["id"].clone();
        let Some(request) = self.to_editor.answered_or_drop(&own, "acp", "editor") else {
            return;
        };
        message["id"] = request.peer_id;
        let pending = lock(&self.pending).remove(&id_key(&own));
        let Some(pending) = pending else {
            return self.agent.send(&message);
        };
        let names = schema::CLIENT_METHOD_NAMES;
        if pending.method == names.terminal_create {
            if let Some(terminal) = message["result"]["terminalId"].as_str() {
                lock(&self.terminals).insert(
                    terminal.to_string(),
                    TerminalCall {
                        lifecycle: pending.lifecycle,
                        call: pending.call,
                        output: String::new(),
                        finished: false,
                    },
                );
            }
            return self.agent.send(&message);
        }
        if let Some(terminal) = &pending.terminal {
            self.terminal_answer(terminal, &pending.method, &mut message)
                .await;
            return self.agent.send(&message);
        }
        let outcome = match (&message["result"], &message["error"]) {
            (Value::Object(result), _) => match result.get("content").and_then(Value::as_str) {
                Some(text) => ToolOutcome::text(text),
                None => ToolOutcome {
                    content_blocks: Vec::new(),
                    is_error: false,
                    value: Some(Value::Object(result.clone())),
                },
            },
            (Value::Null, Value::Null) => ToolOutcome::text(""),
            (_, error) => ToolOutcome::error(error["message"].as_str().unwrap_or("failed")),
        };
        let after = pending
            .lifecycle
            .tool_finished(&pending.call, &outcome)
            .await;
        if let Some(denial) = after.blocked {
            let (why, data) = refusal("Blocked", &denial);
            return self.agent.error(&message["id"], REFUSED, why, data);
        }
        if pending.method == names.fs_read_text_file && after.outcome != outcome {
            message["result"]["content"] = Value::String(text_of(&after.outcome));
        }
        self.agent.send(&message);
    }

    /// A terminal's output on its way to the agent: `post-tool` may block or replace it; once
    /// an exit status shows, `tool-result` observes the command's outcome.
    async fn terminal_answer(&self, terminal: &str, method: &str, message: &mut Value) {
        let Some((lifecycle, call, last)) = lock(&self.terminals)
            .get(terminal)
            .map(|t| (t.lifecycle.clone(), t.call.clone(), t.output.clone()))
        else {
            return;
        };
        let result = &message["result"];
        if !result.is_object() {
            return;
        }
        let (output, status) = if method == schema::CLIENT_METHOD_NAMES.terminal_output {
            let output = result["output"].as_str().unwrap_or_default().to_string();
            (
                output,
                result.get("exitStatus").filter(|s| !s.is_null()).cloned(),
            )
        } else {
            (last, Some(result.clone()))
        };
        let failed = status
            .as_ref()
            .is_some_and(|s| s["exitCode"].as_u64() != Some(0) || !s["signal"].is_null());
        let outcome = ToolOutcome {
            is_error: failed,
            value: status.clone(),
            ..ToolOutcome::text(output)
        };
        let after = if method == schema::CLIENT_METHOD_NAMES.terminal_output {
            let after = lifecycle.session().post_tool(&call, &outcome).await;
            if let Some(denial) = after.blocked {
                let (why, data) = refusal("Blocked", &denial);
                *message = json!({
                    "jsonrpc": "2.0",
                    "id": message["id"],
                    "error": { "code": REFUSED, "message": why, "data": data },
                });
                return;
            }
            if after.outcome != outcome {
                message["result"]["output"] = Value::String(text_of(&after.outcome));
            }
            after.outcome
        } else {
            outcome
        };
        let finish = status.is_some() && {
            let mut terminals = lock(&self.terminals);
            let state = terminals.get_mut(terminal).expect("looked up above");
            state.output = text_of(&after);
            !std::mem::replace(&mut state.finished, true)
        };
        if finish {
            lifecycle.tool_observed(&call, &after).await;
        }
    }
}

/// The outcome a tool update reports: its text content, its raw output as the value.
fn update_outcome(
    update: &schema::SessionUpdate,
    status: Option<schema::ToolCallStatus>,
) -> ToolOutcome {
    let (content, raw_output) = match update {
        schema::SessionUpdate::ToolCall(call) => (Some(&call.content), call.raw_output.as_ref()),
        schema::SessionUpdate::ToolCallUpdate(update) => (
            update.fields.content.as_ref(),
            update.fields.raw_output.as_ref(),
        ),
        _ => (None, None),
    };
    let content_blocks = content
        .into_iter()
        .flatten()
        .filter_map(|c| match c {
            schema::ToolCallContent::Content(content) => match &content.content {
                schema::ContentBlock::Text(text) => Some(ContentBlock::Text {
                    text: text.text.clone(),
                }),
                _ => None,
            },
            schema::ToolCallContent::Diff(diff) => Some(ContentBlock::Text {
                text: format!("{}: {}", diff.path.display(), diff.new_text),
            }),
            _ => None,
        })
        .collect();
    ToolOutcome {
        content_blocks,
        is_error: status == Some(schema::ToolCallStatus::Failed),
        value: raw_output.cloned(),
    }
}

/// A client-side tool's arguments as hooks see them: its parameters; for `terminal/create`,
/// `command` is the whole command line (the program and its arguments, as a shell guard
/// reads a command) and `program` the program alone.
fn client_tool_arguments(method: &str, params: &Value) -> Value {
    let mut arguments = params.clone();
    if method == schema::CLIENT_METHOD_NAMES.terminal_create
        && let Some(program) = params["command"].as_str()
    {
        let mut line = program.to_string();
        for arg in params["args"].as_array().into_iter().flatten() {
            line.push(' ');
            line.push_str(arg.as_str().unwrap_or_default());
        }
        arguments["program"] = Value::String(program.to_string());
        arguments["command"] = Value::String(line);
    }
    arguments
}
