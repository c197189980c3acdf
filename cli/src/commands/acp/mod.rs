//! `palisade acp`: an Agent Client Protocol proxy. The editor starts Palisade as its agent;
//! Palisade starts the real agent as a child and passes every message both ways unchanged,
//! but for the ones its hooks decide:
//!
//! - `session/prompt` (editor → agent) runs `prompt-submit`. A rejection is answered to the
//!   editor as `{"stopReason": "end_turn"}` without reaching the agent, after a
//!   `session/update` message chunk naming the hook and its reason, then `end_turn`
//!   (docs/semantics.md S1.70).
//!   Contexts (and `session-start`'s, on a session's first prompt) are appended to the prompt
//!   as text blocks.
//! - The agent's answer to a prompt ends the turn: `end_turn` runs `turn-stopping`, and a
//!   hook's steering goes to the agent as a follow-up prompt of the same editor turn (at most
//!   [`palisade::agent::MAX_CONTINUATIONS`] times); the editor gets one answer, the last.
//! - `session/request_permission` (agent → editor) runs `pre-tool` then `tool-guard` over the
//!   tool call. A deny answers the agent with the request's reject option (never an allow
//!   option) and tells the editor; otherwise the editor is asked as it would have been.
//! - `fs/read_text_file`, `fs/write_text_file` and `terminal/create` (agent → editor) run
//!   `pre-tool` and `tool-guard` first (a deny is a JSON-RPC error to the agent, carrying the
//!   reason); what the editor returns passes `post-tool`, which may block it or replace the
//!   text the agent receives (a read's content, a terminal's output), then `tool-result`.
//! - `session/update` tool calls are committed as recorded; one that reaches a final status
//!   runs `tool-result` and is committed with its outcome.
//! - `session/cancel` passes through and cuts the session's hooks in flight.
//!
//! Protocol: ACP version 1 (JSON-RPC 2.0, one message per line on stdio), with the types of
//! the `agent-client-protocol-schema` crate, pinned at 1.20.0. Every message is read strictly
//! and forwarded as it was read, re-encoded: a line that parsers could read two ways is refused
//! ([`crate::jsonrpc::strict`]). Every request either side sends goes on under an id of the
//! proxy's ([`crate::jsonrpc::relay`]): a reused id in flight is refused, and an answer to no
//! request in flight is dropped, never passed on unjudged. A client-side tool call without an id
//! is dropped. The agent's exit ends the proxy: every request still open is answered with an
//! error first. A message Palisade must judge whose parameters do not match the schema is
//! refused (fail closed), never passed on unjudged.
//!
//! Without an agent of its own (`palisade acp --plugins DIR`), Palisade is one proxy of a
//! conductor chain, which starts the agent and relays its messages to Palisade wrapped
//! ([`chain`]): the same judging, on one connection.

mod chain;
mod tools;
mod turns;

use crate::jsonrpc::relay::{self, Relay};
use crate::jsonrpc::strict::Kind;
use crate::jsonrpc::{Lines, Writer, load_plugins, reap, spawn_child, until_exit};
use agent_client_protocol_schema::v1 as schema;
use palisade::{Context, Lifecycle, Plugins, SessionSource, Signal};
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use tokio::io::AsyncRead;

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
    /// The agent's command and its arguments (after `--`). Without it, Palisade is one proxy
    /// of an ACP conductor chain (`proxy/initialize`, `proxy/successor`): the conductor starts
    /// the agent, after Palisade in the chain.
    #[arg(last = true)]
    agent: Vec<String>,
}

impl AcpCommand {
    /// Runs the proxy until the editor or the agent goes away. Never returns: the process
    /// exits (0 when the editor closed the connection, 1 when the agent ended), since a read of
    /// standard input in flight would otherwise hold the runtime open.
    pub async fn execute(self) -> anyhow::Result<std::process::ExitCode> {
        let plugins = load_plugins(&self.plugins, self.audit_log.as_deref()).await?;
        if self.agent.is_empty() {
            return in_chain(plugins).await;
        }
        let mut child = spawn_child(&self.agent, "the agent")?;
        let agent = Writer::new(child.stdin.take().expect("piped"));
        let proxy = Proxy::new(plugins, Writer::new(crate::jsonrpc::stdout()), agent, false);
        let from_agent = child.stdout.take().expect("piped");
        tokio::spawn(proxy.clone().from_editor(crate::jsonrpc::stdin()));
        let ended = until_exit(&mut child, proxy.clone().from_agent(from_agent)).await;
        let status = reap(&mut child).await;
        let why = format!("the agent ended ({ended}; {status})");
        crate::jsonrpc::decide_exit(1);
        eprintln!("palisade acp: {why}");
        proxy.fail_open_requests(&why);
        proxy.editor.flush().await;
        crate::jsonrpc::exit(1);
    }
}

/// One proxy of a conductor chain, on the conductor's connection alone ([`chain`]). Exits as
/// with an editor of its own when the conductor closes the connection (`from_editor`).
async fn in_chain(plugins: Plugins) -> anyhow::Result<std::process::ExitCode> {
    let editor = Writer::new(crate::jsonrpc::stdout());
    let successor = Arc::new(chain::Successor::default());
    let wrapping = successor.clone();
    let agent = editor.through(move |message| wrapping.wrap(message));
    let conductor = editor.through(|_| None);
    let (from_editor, from_agent) = chain::split(crate::jsonrpc::stdin(), conductor, successor);
    let proxy = Proxy::new(plugins, editor, agent, true);
    tokio::spawn(proxy.clone().from_agent(from_agent));
    proxy.from_editor(from_editor).await;
    Ok(std::process::ExitCode::SUCCESS)
}

impl Proxy {
    fn new(plugins: Plugins, editor: Writer, agent: Writer, chained: bool) -> Arc<Proxy> {
        Arc::new_cyclic(|me| Proxy {
            me: me.clone(),
            plugins,
            sessions: Mutex::default(),
            editor,
            agent,
            chained,
            to_agent: Relay::default(),
            to_editor: Relay::default(),
            asks: Mutex::default(),
            pending: Mutex::default(),
            turns: Mutex::default(),
            terminals: Mutex::default(),
            endings: Mutex::default(),
        })
    }
}

/// JSON-RPC's code for parameters that do not match the method's schema.
const INVALID_PARAMS: i64 = -32602;
/// The code of Palisade's refusals (a server error, in JSON-RPC's reserved range).
const REFUSED: i64 = -32000;

/// One ACP session as Palisade sees it.
struct AcpSession {
    lifecycle: Arc<Lifecycle>,
    /// `session-start`'s source: `resume` once the editor loaded or resumed the session.
    source: SessionSource,
    /// Whether `session-start` ran (before the first prompt).
    started: bool,
    /// Its contexts, until a prompt enters: a rejected first prompt does not lose them.
    start_contexts: Vec<Context>,
    /// Fired by `session/cancel`; a new one for each prompt.
    cancel: Signal,
    /// The agent's message text of the current turn, for `turn-stopping`.
    said: String,
    /// The agent's tool calls, by id, as their updates describe them.
    tools: HashMap<String, tools::ToolState>,
}

struct Proxy {
    /// Itself, for the sessions' approvers.
    me: Weak<Proxy>,
    plugins: Plugins,
    sessions: Mutex<HashMap<String, AcpSession>>,
    editor: Writer,
    agent: Writer,
    /// One proxy of a conductor chain ([`chain`]), rather than the agent's parent.
    chained: bool,
    /// Editor requests passed to the agent and not answered yet (failed if it goes).
    to_agent: Relay,
    /// Agent requests passed to the editor and not answered yet.
    to_editor: Relay,
    /// Palisade's own permission requests to the editor (a hook's ask), by id.
    asks: Mutex<HashMap<String, tokio::sync::oneshot::Sender<Value>>>,
    /// Agent requests whose editor answer passes hooks, by the proxy's id.
    pending: Mutex<HashMap<String, tools::Pending>>,
    /// Prompts the agent is working on, by the id Palisade sent them with.
    turns: Mutex<HashMap<String, turns::Turn>>,
    /// Terminals the editor created for a guarded `terminal/create`, by terminal id.
    terminals: Mutex<HashMap<String, tools::TerminalCall>>,
    /// Sessions the editor ended, their `session-ended` observers still running: awaited
    /// before the proxy exits, never by the editor's read loop.
    endings: Mutex<tokio::task::JoinSet<()>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn id_key(id: &Value) -> String {
    relay::key(id)
}

impl Proxy {
    /// The session's lifecycle (created on first sight).
    fn lifecycle(&self, id: &str) -> Arc<Lifecycle> {
        self.with_session(id, |s| s.lifecycle.clone())
    }

    fn with_session<R>(&self, id: &str, f: impl FnOnce(&mut AcpSession) -> R) -> R {
        let mut sessions = lock(&self.sessions);
        let session = sessions
            .entry(id.to_string())
            .or_insert_with(|| AcpSession {
                lifecycle: Arc::new(Lifecycle::new(self.plugins.session(id).with_approver(
                    Arc::new(tools::AskEditor {
                        proxy: self.me.clone(),
                        session_id: id.to_string(),
                    }),
                ))),
                source: SessionSource::Startup,
                started: false,
                start_contexts: Vec::new(),
                cancel: Signal::new(),
                said: String::new(),
                tools: HashMap::new(),
            });
        f(session)
    }

    /// The editor closed or deleted `session_id` (`method`): its lifecycle ends, committed as
    /// `session-ended`, and the proxy forgets it once the hooks observing that have run (each
    /// within its deadline, in a task of its own: dropping the session would cut them off).
    fn end_session(&self, session_id: &str, method: &str) {
        let ended = lock(&self.sessions).remove(session_id);
        if let Some(session) = ended {
            let how = if method == schema::AGENT_METHOD_NAMES.session_delete {
                "deleted"
            } else {
                "closed"
            };
            session
                .lifecycle
                .session_ended(format!("the editor {how} the session"));
            lock(&self.endings).spawn(async move {
                session.lifecycle.session().drain_background().await;
            });
        }
    }

    /// Tells the editor something in the session's transcript.
    fn notice(&self, session_id: &str, text: String) {
        let update = schema::SessionUpdate::AgentMessageChunk(schema::ContentChunk::new(
            schema::ContentBlock::Text(schema::TextContent::new(text)),
        ));
        self.editor.notify(
            schema::CLIENT_METHOD_NAMES.session_update,
            schema::SessionNotification::new(session_id.to_string(), update),
        );
    }

    /// Answers every editor request the agent left open with `why`.
    fn fail_open_requests(&self, why: &str) {
        for open in self.to_agent.drain() {
            self.editor
                .error(&open.peer_id, -32603, why.to_string(), None);
        }
    }

    async fn from_editor(self: Arc<Self>, input: impl AsyncRead + Unpin + Send + 'static) {
        let mut lines = Lines::new(input);
        loop {
            // What Palisade cannot read, or could read two ways, is not passed on: the agent
            // might read a prompt in it.
            let mut message = match lines
                .next_judgeable("acp", ("editor", &self.editor), &self.agent)
                .await
            {
                Ok(message) => message,
                Err(why) => {
                    eprintln!("palisade acp: the editor's input ends: {why}");
                    break;
                }
            };
            let method = message.method().to_string();
            let id = message.id().clone();
            match message.kind {
                Kind::Request if !self.chained && chain::is_proxy_initialize(&method) => {
                    let why = "palisade acp starts its own agent (the command after `--`): in a \
                               conductor chain, leave `-- AGENT` out and let the conductor start \
                               the agent after Palisade";
                    self.editor.error(&id, REFUSED, why.to_string(), None);
                }
                Kind::Request => {
                    let Some(own) = self.to_agent.relay_or_refuse(&id, &self.editor) else {
                        continue;
                    };
                    let names = &schema::AGENT_METHOD_NAMES;
                    if (method == names.session_load || method == names.session_resume)
                        && let Some(session) = message.value["params"]["sessionId"].as_str()
                    {
                        // A session that existed before: its hooks see `resume`.
                        self.with_session(session, |s| s.source = SessionSource::Resume);
                    }
                    if method == schema::AGENT_METHOD_NAMES.session_prompt {
                        // A cancel read after the prompt is the prompt's, however soon its
                        // task runs: its signal is made before the next line is read.
                        let session = message.value["params"]["sessionId"].as_str();
                        let cancel = Signal::new();
                        if let Some(session) = session {
                            self.with_session(session, |s| s.cancel = cancel.clone());
                        }
                        let proxy = self.clone();
                        let value = message.value;
                        tokio::spawn(async move { proxy.prompt(id, own, value, cancel).await });
                        continue;
                    }
                    let ends = method == names.session_close || method == names.session_delete;
                    let ended = message.value["params"]["sessionId"]
                        .as_str()
                        .map(str::to_string);
                    message.value["id"] = own;
                    self.agent.send(&message.value);
                    if let Some(session) = ended.filter(|_| ends) {
                        self.end_session(&session, &method);
                    }
                }
                Kind::Response => {
                    // An editor's answer: to a question of Palisade's, or to an agent request.
                    if let Some(waiting) = lock(&self.asks).remove(&id_key(&id)) {
                        let _ = waiting.send(message.value);
                        continue;
                    }
                    let proxy = self.clone();
                    tokio::spawn(async move { proxy.answer_to_agent(message.value).await });
                }
                Kind::Notification => {
                    if method == schema::AGENT_METHOD_NAMES.session_cancel
                        && let Some(session) = message.value["params"]["sessionId"].as_str()
                    {
                        self.with_session(session, |s| s.cancel.cancel());
                    }
                    if method == "$/cancel_request" {
                        let params = &mut message.value["params"];
                        let Some(own) = self.to_agent.own_of(&params["requestId"]) else {
                            continue;
                        };
                        params["requestId"] = own;
                    }
                    self.agent.send(&message.value);
                }
            }
        }
        // The editor went away: what it sent reaches the agent, whose input then ends, and
        // the agent goes too, with what it started (`jsonrpc::exit`).
        self.agent.close().await;
        let mut endings = std::mem::take(&mut *lock(&self.endings));
        while endings.join_next().await.is_some() {}
        crate::jsonrpc::exit(0);
    }

    async fn from_agent(self: Arc<Self>, input: impl AsyncRead + Unpin + Send + 'static) -> String {
        let mut lines = Lines::new(input);
        loop {
            let mut message = match lines
                .next_judgeable("acp", ("agent", &self.agent), &self.editor)
                .await
            {
                Ok(message) => message,
                Err(why) => return why,
            };
            let method = message.method().to_string();
            let id = message.id().clone();
            let names = schema::CLIENT_METHOD_NAMES;
            match message.kind {
                Kind::Response => self.answer_to_editor(id, message.value),
                Kind::Request => {
                    let Some(own) = self.to_editor.relay_or_refuse(&id, &self.agent) else {
                        continue;
                    };
                    let proxy = self.clone();
                    if method == names.session_request_permission {
                        tokio::spawn(async move { proxy.permission(id, own, message.value).await });
                    } else if tools::is_client_tool(&method) {
                        tokio::spawn(
                            async move { proxy.client_tool(id, own, message.value).await },
                        );
                    } else if method == names.elicitation_create {
                        tokio::spawn(
                            async move { proxy.elicitation(id, own, message.value).await },
                        );
                    } else {
                        message.value["id"] = own;
                        self.editor.send(&message.value);
                    }
                }
                Kind::Notification if tools::is_client_tool(&method) => {
                    // Without an id its answer could not be judged: it goes nowhere.
                    eprintln!(
                        "palisade acp: dropped a {method} without an id (not judged, not sent)"
                    );
                }
                Kind::Notification => {
                    if method == names.session_update {
                        self.session_update(&message.value);
                    }
                    if method == "$/cancel_request" {
                        // The editor knows the request under the proxy's id; one it never
                        // received is nobody's to cancel.
                        let params = &mut message.value["params"];
                        let Some(own) = self.to_editor.own_of(&params["requestId"]) else {
                            continue;
                        };
                        params["requestId"] = own;
                    }
                    self.editor.send(&message.value);
                }
            }
        }
    }

    /// The agent's answer to an editor request (`own`, the proxy's id): a prompt's ends the
    /// turn (which may go on); an answer to no request in flight is dropped.
    fn answer_to_editor(self: &Arc<Self>, own: Value, mut message: Value) {
        if let Some(turn) = lock(&self.turns).remove(&id_key(&own)) {
            let proxy = self.clone();
            tokio::spawn(async move { proxy.turn_answered(turn, message).await });
            return;
        }
        if let Some(request) = self.to_agent.answered_or_drop(&own, "acp", "agent") {
            message["id"] = request.peer_id;
            self.editor.send(&message);
        }
    }
}
