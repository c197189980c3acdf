//! `palisade acp`: an Agent Client Protocol proxy. The editor starts Palisade as its agent;
//! Palisade starts the real agent as a child and passes every message both ways unchanged,
//! but for the ones its hooks decide:
//!
//! - `session/prompt` (editor → agent) runs `prompt-submit`. A rejection is answered to the
//!   editor as `{"stopReason": "end_turn"}` without reaching the agent, after a
//!   `session/update` message chunk naming the hook and its reason (seed 1: the ACP bridge
//!   settles an initial pre-step rejection from its blocked no-step turn as `end_turn`).
//!   Contexts (and `session-start`'s, on a session's first prompt) are appended to the prompt
//!   as text blocks.
//! - `session/request_permission` (agent → editor) runs `pre-tool` then `tool-guard` over the
//!   tool call. A deny answers the agent with the request's reject option (never an allow
//!   option) and tells the editor; otherwise the editor is asked as it would have been.
//! - `fs/read_text_file`, `fs/write_text_file` and `terminal/create` (agent → editor) run
//!   `pre-tool` and `tool-guard` first (a deny is a JSON-RPC error to the agent, carrying the
//!   reason); what the editor returns for a read passes `post-tool`, which may block it or
//!   replace the text the agent receives.
//! - `session/cancel` passes through and cuts the session's `prompt-submit` in flight.
//!
//! Protocol: ACP version 1 (JSON-RPC 2.0, one message per line on stdio), the schema of the
//! `agent-client-protocol-schema` crate 1.x. The agent's exit, or a line that is not a JSON-RPC
//! message, ends the proxy: every request still open is answered with an error first.

use anyhow::Context as _;
use palisade::{
    ContentBlock, GuardDecision, Lifecycle, Message, Plugins, PreStepDecision, PreToolDecision,
    SessionSource, Signal, ToolCall, ToolOutcome,
};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Guard an ACP agent: `palisade acp --plugins DIR -- AGENT [ARGS…]`, registered in the
/// editor as the agent's command.
#[derive(clap::Args)]
pub struct AcpCommand {
    /// The plugin directory.
    #[arg(long)]
    plugins: PathBuf,
    /// Append every lifecycle event to this JSON Lines file.
    #[arg(long)]
    audit_log: Option<PathBuf>,
    /// The agent's command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    agent: Vec<String>,
}

impl AcpCommand {
    /// Runs the proxy until the editor or the agent goes away.
    pub async fn execute(self) -> anyhow::Result<ExitCode> {
        let mut builder = crate::cache::quiet_host_builder();
        if let Some(path) = &self.audit_log {
            let sink = palisade::JsonlSink::open(path)
                .with_context(|| format!("cannot open the audit log {}", path.display()))?;
            builder = builder.event_sink(Arc::new(sink));
        }
        let dir = self.plugins.clone();
        let plugins = tokio::task::spawn_blocking(move || -> anyhow::Result<Plugins> {
            Ok(builder.build()?.load_dir(&dir)?)
        })
        .await??;
        let mut child = tokio::process::Command::new(&self.agent[0])
            .args(&self.agent[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start the agent `{}`", self.agent[0]))?;
        let proxy = Arc::new(Proxy {
            plugins,
            sessions: Mutex::default(),
            to_editor: writer(tokio::io::stdout()),
            to_agent: writer(child.stdin.take().expect("piped")),
            open: Mutex::default(),
            pending: Mutex::default(),
        });
        let from_agent = child.stdout.take().expect("piped");
        let editor = tokio::spawn(proxy.clone().from_editor());
        let ended = proxy.clone().from_agent(from_agent).await;
        editor.abort();
        let status = match child.try_wait() {
            Ok(Some(status)) => status.to_string(),
            _ => {
                let _ = child.kill().await;
                "killed".to_string()
            }
        };
        let why = format!("the agent ended ({ended}; {status})");
        proxy.fail_open_requests(&why);
        // Let the writer send the last answers.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        eprintln!("palisade acp: {why}");
        Ok(ExitCode::FAILURE)
    }
}

/// A line writer on its own task: messages of both directions never interleave.
fn writer(
    mut sink: impl tokio::io::AsyncWrite + Unpin + Send + 'static,
) -> mpsc::UnboundedSender<String> {
    let (send, mut receive) = mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Some(mut line) = receive.recv().await {
            line.push('\n');
            if sink.write_all(line.as_bytes()).await.is_err() || sink.flush().await.is_err() {
                return;
            }
        }
    });
    send
}

/// One ACP session as Palisade sees it.
struct AcpSession {
    lifecycle: Arc<Lifecycle>,
    /// Whether `session-start` ran (on the first prompt).
    started: bool,
    /// Fired by `session/cancel`.
    cancel: Signal,
}

/// What an agent → editor request is waiting for, when its answer must pass a hook.
struct Pending {
    session: Arc<Lifecycle>,
    call: ToolCall,
}

struct Proxy {
    plugins: Plugins,
    sessions: Mutex<HashMap<String, AcpSession>>,
    to_editor: mpsc::UnboundedSender<String>,
    to_agent: mpsc::UnboundedSender<String>,
    /// Editor requests the agent has not answered yet (to fail them if it goes).
    open: Mutex<HashMap<String, Value>>,
    /// Agent requests whose editor answer passes `post-tool`, by id.
    pending: Mutex<HashMap<String, Pending>>,
}

fn send(to: &mpsc::UnboundedSender<String>, message: &Value) {
    let _ = to.send(message.to_string());
}

fn id_key(id: &Value) -> String {
    id.to_string()
}

impl Proxy {
    fn session(&self, id: &str) -> (Arc<Lifecycle>, Signal, bool) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let session = sessions
            .entry(id.to_string())
            .or_insert_with(|| AcpSession {
                lifecycle: Arc::new(Lifecycle::new(self.plugins.session(id))),
                started: false,
                cancel: Signal::new(),
            });
        let first = !session.started;
        session.started = true;
        (session.lifecycle.clone(), session.cancel.clone(), first)
    }

    /// Tells the editor something in the session's transcript.
    fn notice(&self, session_id: &str, text: String) {
        send(
            &self.to_editor,
            &json!({
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": session_id,
                    "update": {
                        "sessionUpdate": "agent_message_chunk",
                        "content": { "type": "text", "text": text },
                    },
                },
            }),
        );
    }

    /// Answers every editor request the agent left open with `why`.
    fn fail_open_requests(&self, why: &str) {
        let open: Vec<Value> = self
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .map(|(_, id)| id)
            .collect();
        for id in open {
            send(
                &self.to_editor,
                &json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32603, "message": why } }),
            );
        }
    }

    async fn from_editor(self: Arc<Self>) {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                // Not ours to judge: the agent answers a malformed request.
                let _ = self.to_agent.send(line);
                continue;
            };
            let method = message["method"].as_str().unwrap_or_default().to_string();
            let id = message.get("id").cloned();
            match (method.as_str(), id) {
                ("session/prompt", Some(id)) => {
                    let proxy = self.clone();
                    tokio::spawn(async move { proxy.prompt(id, message).await });
                }
                ("session/cancel", None) => {
                    if let Some(session) = message["params"]["sessionId"].as_str() {
                        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
                        if let Some(session) = sessions.get(session) {
                            session.cancel.cancel();
                        }
                    }
                    let _ = self.to_agent.send(line);
                }
                ("", Some(_)) => {
                    // An editor's answer to an agent request.
                    let proxy = self.clone();
                    tokio::spawn(async move { proxy.answer_to_agent(message, line).await });
                }
                (_, id) => {
                    if let Some(id) = id {
                        self.open
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(id_key(&id), id);
                    }
                    let _ = self.to_agent.send(line);
                }
            }
        }
        // The editor went away: so does the agent (its stdin closes with us).
        std::process::exit(0);
    }

    /// `session/prompt`: `prompt-submit` decides whether it reaches the agent.
    async fn prompt(self: Arc<Self>, id: Value, mut message: Value) {
        let session_id = message["params"]["sessionId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let (lifecycle, cancel, first) = self.session(&session_id);
        let mut contexts = Vec::new();
        if first {
            contexts.extend(lifecycle.session_start(SessionSource::Startup).await);
        }
        let blocks = message["params"]["prompt"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let text: Vec<&str> = blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect();
        let claimed = vec![Message::user(text.join("\n"))];
        lifecycle.open_turn(None);
        let decision = lifecycle.pre_step_until(1, claimed.clone(), &cancel).await;
        let stop = |reason: &str| json!({ "jsonrpc": "2.0", "id": id, "result": { "stopReason": reason } });
        match decision {
            None => send(&self.to_editor, &stop("cancelled")),
            Some(PreStepDecision::Reject(denial)) => {
                self.notice(
                    &session_id,
                    format!(
                        "Palisade: `{}` rejected this prompt ({}): {}",
                        denial.hook_id, denial.reason_code, denial.message
                    ),
                );
                send(&self.to_editor, &stop("end_turn"));
            }
            Some(PreStepDecision::Enter {
                messages,
                contexts: more,
            }) => {
                lifecycle.messages(messages.clone());
                contexts.extend(more);
                let mut prompt = if messages == claimed {
                    blocks
                } else {
                    // A transform reshaped the batch: its messages replace the prompt's text.
                    let mut kept: Vec<Value> =
                        blocks.into_iter().filter(|b| b["type"] != "text").collect();
                    kept.extend(
                        messages
                            .iter()
                            .map(|m| json!({ "type": "text", "text": m.text })),
                    );
                    kept
                };
                prompt.extend(
                    contexts
                        .iter()
                        .map(|c| json!({ "type": "text", "text": c.text })),
                );
                message["params"]["prompt"] = Value::Array(prompt);
                self.open
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(id_key(&id), id);
                send(&self.to_agent, &message);
            }
        }
    }

    async fn from_agent(self: Arc<Self>, stdout: tokio::process::ChildStdout) -> String {
        let mut lines = BufReader::new(stdout).lines();
        loop {
            let line = match lines.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => return "its output closed".into(),
                Err(e) => return format!("its output failed: {e}"),
            };
            if line.trim().is_empty() {
                continue;
            }
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                return format!("it wrote a line that is not JSON-RPC: {}", truncate(&line));
            };
            let method = message["method"].as_str().unwrap_or_default().to_string();
            match (method.as_str(), message.get("id").cloned()) {
                ("", Some(id)) => {
                    // The agent's answer to an editor request.
                    self.open
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&id_key(&id));
                    let _ = self.to_editor.send(line);
                }
                ("session/request_permission", Some(id)) => {
                    let proxy = self.clone();
                    tokio::spawn(async move { proxy.permission(id, message, line).await });
                }
                ("fs/read_text_file" | "fs/write_text_file" | "terminal/create", Some(id)) => {
                    let proxy = self.clone();
                    tokio::spawn(async move { proxy.client_tool(id, message, line).await });
                }
                _ => {
                    let _ = self.to_editor.send(line);
                }
            }
        }
    }

    /// `pre-tool`, then `tool-guard`: the denial, if any.
    async fn authorize(&self, lifecycle: &Lifecycle, call: &ToolCall) -> Option<palisade::Denial> {
        lifecycle.tool_call(call);
        let session = lifecycle.session();
        if let PreToolDecision::Deny(denial) = session.pre_tool(call).await {
            return Some(denial);
        }
        match session.tool_guard(call).await {
            GuardDecision::Deny(denial) => Some(denial),
            GuardDecision::Abstain => None,
        }
    }

    /// `session/request_permission`: a deny picks the request's reject option for the agent.
    async fn permission(self: Arc<Self>, id: Value, message: Value, line: String) {
        let params = &message["params"];
        let session_id = params["sessionId"].as_str().unwrap_or_default().to_string();
        let (lifecycle, _, _) = self.session(&session_id);
        let tool = &params["toolCall"];
        let call = ToolCall::new(
            tool["toolCallId"].as_str().unwrap_or_default(),
            tool_name(tool),
            tool_arguments(tool),
        );
        let Some(denial) = self.authorize(&lifecycle, &call).await else {
            // The user still decides: Palisade never grants what the editor would not.
            let _ = self.to_editor.send(line);
            return;
        };
        let options = params["options"].as_array().cloned().unwrap_or_default();
        let reject = ["reject_once", "reject_always"].iter().find_map(|kind| {
            options
                .iter()
                .find(|o| o["kind"] == *kind)
                .and_then(|o| o["optionId"].as_str())
        });
        let outcome = match reject {
            Some(option) => json!({ "outcome": "selected", "optionId": option }),
            None => json!({ "outcome": "cancelled" }),
        };
        send(
            &self.to_agent,
            &json!({ "jsonrpc": "2.0", "id": id, "result": { "outcome": outcome } }),
        );
        self.notice(
            &session_id,
            format!(
                "Palisade: `{}` denied {} ({}): {}",
                denial.hook_id,
                tool["title"].as_str().unwrap_or(&call.name),
                denial.reason_code,
                denial.message
            ),
        );
    }

    /// A tool the agent asks the editor to run: guarded before, and a read's text after.
    async fn client_tool(self: Arc<Self>, id: Value, message: Value, line: String) {
        let params = &message["params"];
        let session_id = params["sessionId"].as_str().unwrap_or_default().to_string();
        let (lifecycle, _, _) = self.session(&session_id);
        let method = message["method"].as_str().unwrap_or_default();
        let call = ToolCall::new(format!("acp-{}", id_key(&id)), method, params.clone());
        if let Some(denial) = self.authorize(&lifecycle, &call).await {
            send(
                &self.to_agent,
                &json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": {
                        "code": -32000,
                        "message": format!("Refused by Palisade (`{}`, {}): {}", denial.hook_id, denial.reason_code, denial.message),
                        "data": { "hookId": denial.hook_id, "reasonCode": denial.reason_code },
                    },
                }),
            );
            return;
        }
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(
                id_key(&id),
                Pending {
                    session: lifecycle,
                    call,
                },
            );
        let _ = self.to_editor.send(line);
    }

    /// The editor's answer to an agent request: through `post-tool` when it is a guarded
    /// tool's, as it is otherwise.
    async fn answer_to_agent(self: Arc<Self>, mut message: Value, line: String) {
        let pending = message.get("id").and_then(|id| {
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id_key(id))
        });
        let Some(Pending { session, call }) = pending else {
            let _ = self.to_agent.send(line);
            return;
        };
        let outcome = match (&message["result"], &message["error"]) {
            (Value::Object(result), _) => match result.get("content").and_then(Value::as_str) {
                Some(text) => ToolOutcome::text(text),
                None => ToolOutcome {
                    content_blocks: Vec::new(),
                    is_error: false,
                    value: Some(Value::Object(result.clone())),
                },
            },
            (_, error) => ToolOutcome::error(error["message"].as_str().unwrap_or("failed")),
        };
        let after = session.tool_finished(&call, &outcome).await;
        if let Some(denial) = after.blocked {
            message = json!({
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {
                    "code": -32000,
                    "message": format!("Blocked by Palisade (`{}`, {}): {}", denial.hook_id, denial.reason_code, denial.message),
                },
            });
        } else if call.name == "fs/read_text_file" && after.outcome != outcome {
            let text: Vec<&str> = after
                .outcome
                .content_blocks
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            message["result"]["content"] = Value::String(text.join(""));
        }
        send(&self.to_agent, &message);
    }
}

/// The tool's name as hooks match it: the agent's own when it says (`name`, or
/// `_meta.claudeCode.toolName`; e.g. `Bash`), else the ACP kind (`execute`, `read`, `edit`, …).
fn tool_name(tool: &Value) -> String {
    tool["name"]
        .as_str()
        .or_else(|| tool["_meta"]["claudeCode"]["toolName"].as_str())
        .or_else(|| tool["kind"].as_str())
        .unwrap_or("other")
        .to_string()
}

/// The tool's arguments: its raw input, with its title, kind and locations.
fn tool_arguments(tool: &Value) -> Value {
    let mut arguments = match &tool["rawInput"] {
        Value::Object(input) => input.clone(),
        _ => serde_json::Map::new(),
    };
    for field in ["title", "kind", "locations"] {
        if let Some(value) = tool.get(field)
            && !arguments.contains_key(field)
        {
            arguments.insert(field.to_string(), value.clone());
        }
    }
    Value::Object(arguments)
}

fn truncate(line: &str) -> String {
    let mut end = line.len().min(200);
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    line[..end].to_string()
}
