//! The agent loop, with the three load-bearing loop decisions of docs/semantics.md ("The agent
//! loop"), as a small loop an embedder can use or copy.
//!
//! 1. **Pre-step at every proposed step.** The turn opens before the first claim; each step
//!    submits its claimed batch to `prompt-submit` — an empty batch for a tool continuation,
//!    so context producers can still add to that request. A reject closes a durable blocked
//!    turn with no step and no model-visible message.
//! 2. **Contexts wait for the batch to settle.** Contexts from `post-tool` decisions and from
//!    execution (nested calls, [`crate::ToolContext::defer_context`]) go into the batch's FIFO
//!    and are appended after every result of the batch is recorded, so a tool call is always
//!    followed directly by its result.
//! 3. **Steering continues the same turn.** At the natural stop boundary `turn-stopping` may
//!    return steering; it is claimed at the top of the next step as steering of the SAME
//!    turn, not as a new prompt.
//!
//! Every committed fact (message, tool call, tool result, model response, turn completed,
//! session ended) is handed to the committed-fact hooks, which never delay the loop.
//!
//! Also: `session-start` runs exactly once, before turn 1 (the loop runs it if the
//! embedder did not); contexts injected from outside ([`Handle::inject`]) enter the same FIFO
//! as the batch's own; an interrupted turn ([`Handle::interrupt`]) records a result for every
//! call of its batch and flushes the FIFO before it closes; a tool that marks its result
//! terminal ([`crate::ToolContext::end_turn`]) ends the turn when its batch settles.

use crate::hook::BoxFuture;
use crate::lifecycle::Lifecycle;
use crate::pipeline::{ToolRegistry, ToolRequest};
use crate::session::Session;
use crate::signal::Signal;
use crate::types::Context;
use crate::types::{
    ContentBlock, LlmResponse, Message, PreStepDecision, Role, SessionSource, StopEvent,
    ToolOutcome, TurnOutcome,
};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Most times `turn-stopping` may continue one turn; then the turn closes regardless.
pub const MAX_CONTINUATIONS: u32 = 8;

/// One entry of the transcript, in the order the model sees it (except `TurnClosed`, which
/// is durable but not model-visible).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Entry {
    /// A context a hook contributed, as its own message.
    Context {
        /// The hook.
        source: String,
        /// The text.
        text: String,
    },
    /// A user prompt.
    User {
        /// The text.
        text: String,
    },
    /// Steering a `turn-stopping` hook returned, continuing the turn.
    Steering {
        /// The hook.
        source: String,
        /// The content.
        text: String,
    },
    /// The model's reply.
    Assistant {
        /// Its text.
        text: String,
        /// The ids and names of the tool calls it made.
        tool_calls: Vec<String>,
    },
    /// A tool result.
    ToolResult {
        /// The call it answers.
        tool_use_id: String,
        /// Whether it failed (a denial, a block, a tool error).
        is_error: bool,
        /// Its content, as text.
        content: String,
    },
    /// The end of a turn (durable, not shown to the model).
    TurnClosed {
        /// The turn.
        turn: u32,
        /// How it ended.
        outcome: TurnOutcome,
        /// Why, when blocked.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

/// What the model is asked: the transcript so far.
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    /// Everything model-visible so far.
    pub transcript: &'a [Entry],
    /// The turn.
    pub turn: u32,
    /// The step within it.
    pub step: u32,
}

/// What the model answered.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelReply {
    /// Its text.
    #[serde(default)]
    pub text: String,
    /// The tool calls it proposes.
    #[serde(default)]
    pub tool_calls: Vec<ToolRequest>,
    /// The provider's own server-tool blocks, as it sent them (Anthropic's `server_tool_use`
    /// and its `web_search_tool_result` or `code_execution_tool_result`): the committed
    /// `llm-response` carries them projected into typed kinds
    /// ([`ServerToolContent`](crate::ServerToolContent): a web search, code execution, or the
    /// block as it is).
    #[serde(default)]
    pub server_blocks: Vec<serde_json::Value>,
}

/// A model: anything that answers a transcript.
pub trait Model: Send {
    /// Answers the request.
    fn respond<'a>(&'a mut self, request: ModelRequest<'a>) -> BoxFuture<'a, ModelReply>;
    /// Its name, for committed `llm-response` facts.
    fn name(&self) -> &str {
        "model"
    }
}

/// A model that replays a script: one reply per step, in order; then it only says "done".
#[derive(Debug, Default)]
pub struct ScriptedModel {
    replies: VecDeque<ModelReply>,
}

impl ScriptedModel {
    /// A model that will answer `replies`, in order.
    pub fn new(replies: impl IntoIterator<Item = ModelReply>) -> Self {
        ScriptedModel {
            replies: replies.into_iter().collect(),
        }
    }
}

impl Model for ScriptedModel {
    fn respond<'a>(&'a mut self, _request: ModelRequest<'a>) -> BoxFuture<'a, ModelReply> {
        let reply = self.replies.pop_front().unwrap_or_else(|| ModelReply {
            text: "done".into(),
            tool_calls: Vec::new(),
            ..Default::default()
        });
        Box::pin(async move { reply })
    }

    fn name(&self) -> &str {
        "scripted"
    }
}

/// What reaches a running loop from outside it: contexts to inject and an interrupt. Cheap to
/// clone, and usable from any thread or task while a turn runs.
#[derive(Debug, Clone, Default)]
pub struct Handle {
    inner: Arc<HandleInner>,
}

#[derive(Debug, Default)]
struct HandleInner {
    /// The active batch's FIFO: contexts waiting for the batch to settle, in arrival order.
    fifo: Mutex<Vec<Context>>,
    interrupted: AtomicBool,
    /// The running turn's cancellation signal, which its pre-steps carry.
    signal: Mutex<Signal>,
}

impl Handle {
    /// Injects a context, sourced to `source`. It enters the active batch's FIFO and is
    /// appended when the batch settles (after every result of it); outside a batch, it is
    /// appended before the next model request (docs/semantics.md S1.52).
    pub fn inject(&self, source: impl Into<String>, text: impl Into<String>) {
        self.fifo().push(Context {
            hook_id: source.into(),
            text: text.into(),
        });
    }

    /// Interrupts the running turn: a pre-step being decided is cut off (no step opens);
    /// calls of its batch not yet run get an error result without running, the FIFO is
    /// flushed, and the turn closes `interrupted`. An interrupt between turns is forgotten
    /// when the next turn opens.
    pub fn interrupt(&self) {
        self.inner.interrupted.store(true, Ordering::SeqCst);
        self.signal().cancel();
    }

    fn signal(&self) -> Signal {
        self.inner
            .signal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Opens a turn: no interrupt yet, and a fresh signal for its pre-steps.
    fn open_turn(&self) {
        *self.inner.signal.lock().unwrap_or_else(|e| e.into_inner()) = Signal::new();
        self.inner.interrupted.store(false, Ordering::SeqCst);
    }

    /// Whether the running turn has been interrupted.
    pub fn is_interrupted(&self) -> bool {
        self.inner.interrupted.load(Ordering::SeqCst)
    }

    fn fifo(&self) -> std::sync::MutexGuard<'_, Vec<Context>> {
        self.inner.fifo.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take(&self) -> Vec<Context> {
        std::mem::take(&mut *self.fifo())
    }
}

/// A minimal agent: a session, its tools and a model, driven turn by turn.
pub struct Agent {
    lifecycle: Lifecycle,
    tools: ToolRegistry,
    model: Box<dyn Model>,
    transcript: Vec<Entry>,
    handle: Handle,
    /// Whether `session-start` has run; and with which source it runs if the embedder does
    /// not start the session itself.
    started: bool,
    source: SessionSource,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("session", self.lifecycle.session())
            .field("turn", &self.lifecycle.turn())
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent of `session`, with `tools` and `model`.
    pub fn new(session: Session, tools: ToolRegistry, model: impl Model + 'static) -> Agent {
        Agent::resume(session, tools, model, Vec::new())
    }

    /// An agent that goes on with a session whose transcript so far is `transcript` (a
    /// persisted session, reloaded): turns are numbered on from its last, so the facts of the
    /// new turns get ids of their own (see [`crate::Lifecycle`]). Start it with
    /// [`SessionSource::Resume`].
    pub fn resume(
        session: Session,
        tools: ToolRegistry,
        model: impl Model + 'static,
        transcript: Vec<Entry>,
    ) -> Agent {
        let turns = transcript
            .iter()
            .filter_map(|entry| match entry {
                Entry::TurnClosed { turn, .. } => Some(*turn),
                _ => None,
            })
            .max()
            .unwrap_or(0);
        let source = if transcript.is_empty() {
            SessionSource::Startup
        } else {
            SessionSource::Resume
        };
        Agent {
            lifecycle: Lifecycle::resumed(session, turns),
            tools,
            model: Box::new(model),
            transcript,
            handle: Handle::default(),
            started: false,
            source,
        }
    }

    /// The handle that injects contexts into this agent's loop and interrupts its turns.
    pub fn handle(&self) -> Handle {
        self.handle.clone()
    }

    /// Injects a context (see [`Handle::inject`]).
    pub fn inject(&self, source: impl Into<String>, text: impl Into<String>) {
        self.handle.inject(source, text);
    }

    /// The transcript so far.
    pub fn transcript(&self) -> &[Entry] {
        &self.transcript
    }

    /// The session.
    pub fn session(&self) -> &Session {
        self.lifecycle.session()
    }

    /// Starts the session: `session-start` contexts open the transcript, then what was
    /// injected so far. Runs once: a second call does nothing, and the first turn starts the
    /// session itself when this was not called (with `startup`, or `resume` for a resumed
    /// transcript): once, before turn 1 (docs/semantics.md S1.5).
    pub async fn start(&mut self, source: SessionSource) {
        if std::mem::replace(&mut self.started, true) {
            return;
        }
        for context in self.lifecycle.session_start(source).await {
            self.append_context(context.hook_id, context.text);
        }
        self.flush();
    }

    /// Runs one turn for `prompt`, to its end.
    pub async fn run_turn(&mut self, prompt: impl Into<String>) -> TurnOutcome {
        if !self.started {
            self.start(self.source).await;
        }
        // An interrupt belongs to the turn it was meant for.
        self.handle.open_turn();
        let signal = self.handle.signal();
        // The turn opens before the first claim.
        let turn = self.lifecycle.open_turn(None);
        let mut claimed = vec![Entry::User {
            text: prompt.into(),
        }];
        let mut continuations = 0;
        let mut step = 0;
        loop {
            step += 1;
            // Decision 1: pre-step at every proposed step, with the claimed batch.
            if let Err(closed) = self.open_step(turn, step, &mut claimed, &signal).await {
                return closed;
            }
            // Injected between batches: before the model is asked.
            self.flush();
            if self.handle.is_interrupted() {
                return self.close(turn, TurnOutcome::Interrupted, None);
            }

            let reply = self
                .model
                .respond(ModelRequest {
                    transcript: &self.transcript,
                    turn,
                    step,
                })
                .await;
            self.record_reply(step, &reply);

            if reply.tool_calls.is_empty() {
                if self.handle.is_interrupted() {
                    return self.close(turn, TurnOutcome::Interrupted, None);
                }
                // Decision 3: the natural stop boundary; steering continues the SAME turn.
                let event = StopEvent {
                    turn,
                    step,
                    last_assistant_message: Some(reply.text),
                    continuations,
                };
                let steering = self.lifecycle.stopping(&event, false).await;
                if steering.is_empty() || continuations >= MAX_CONTINUATIONS {
                    return self.close(turn, TurnOutcome::Completed, None);
                }
                continuations += 1;
                claimed = steering
                    .into_iter()
                    .map(|s| Entry::Steering {
                        source: s.hook_id,
                        text: s.content,
                    })
                    .collect();
                continue;
            }

            // Decision 2: run the batch; its contexts wait in the FIFO until it settles, with
            // whatever is injected meanwhile, in arrival order.
            let terminal = self.run_batch(reply.tool_calls).await;
            // The batch has settled (or was interrupted): the FIFO appends after every result.
            self.flush();
            if self.handle.is_interrupted() {
                return self.close(turn, TurnOutcome::Interrupted, None);
            }
            if terminal {
                // Monotonic: no further step, and no steering can continue the turn.
                return self.close(turn, TurnOutcome::Completed, None);
            }
            // A tool continuation: the next step claims an empty batch.
        }
    }

    /// Records the model's reply: in the transcript, and committed as the step's response.
    fn record_reply(&mut self, step: u32, reply: &ModelReply) {
        self.append(Entry::Assistant {
            text: reply.text.clone(),
            tool_calls: reply
                .tool_calls
                .iter()
                .map(|c| c.tool_use_id.clone())
                .collect(),
        });
        self.lifecycle.llm_response(
            step,
            LlmResponse {
                model: self.model.name().to_string(),
                text: reply.text.clone(),
                tool_calls: reply.tool_calls.iter().map(ToolRequest::call).collect(),
                server_tool_content: crate::types::project_server_tools(&reply.server_blocks),
                stop_reason: if reply.tool_calls.is_empty() {
                    "end_turn"
                } else {
                    "tool_use"
                }
                .into(),
            },
        );
    }

    /// Runs pre-step for `claimed` and, on enter, appends the complete batch (the claimed
    /// entries, or the batch a hook reshaped them into, then the contexts). `Err`: the turn
    /// closed instead (rejected, or cut off by an interrupt), with this outcome.
    async fn open_step(
        &mut self,
        turn: u32,
        step: u32,
        claimed: &mut Vec<Entry>,
        signal: &Signal,
    ) -> Result<(), TurnOutcome> {
        let claimed_messages: Vec<Message> = claimed
            .iter()
            .filter_map(|entry| match entry {
                Entry::User { text } | Entry::Steering { text, .. } => {
                    Some(Message::user(text.clone()))
                }
                _ => None,
            })
            .collect();
        let decision = self
            .lifecycle
            .pre_step_until(step, claimed_messages.clone(), signal)
            .await;
        let (entered, contexts) = match decision {
            // Cut off by an interrupt: no step; the lifecycle has committed the interrupted
            // turn.
            None => return Err(self.record_close(turn, TurnOutcome::Interrupted, None)),
            Some(PreStepDecision::Reject(denial)) => {
                // No step, no model-visible message; the claimed batch stays removed. The
                // lifecycle has committed the blocked turn.
                return Err(self.record_close(
                    turn,
                    TurnOutcome::Blocked,
                    Some(denial.reason_code),
                ));
            }
            Some(PreStepDecision::Enter { messages, contexts }) => (messages, contexts),
        };
        if entered == claimed_messages {
            for entry in claimed.drain(..) {
                self.append(entry);
            }
        } else {
            // A hook reshaped the batch: the step opens with the batch it returned.
            claimed.clear();
            for message in entered {
                self.append(Entry::User { text: message.text });
            }
        }
        for context in contexts {
            self.append_context(context.hook_id, context.text);
        }
        Ok(())
    }

    /// Runs a batch of calls, recording each result as it comes: a call of an interrupted
    /// turn gets an error result without running. Its contexts go into the FIFO. Returns
    /// whether a result was terminal.
    async fn run_batch(&mut self, calls: Vec<ToolRequest>) -> bool {
        let mut terminal = false;
        for request in calls {
            let (tool_use_id, outcome) = if self.handle.is_interrupted() {
                // Every call gets its result, so none is left unanswered.
                let call = request.call();
                let outcome = ToolOutcome::error(format!(
                    "{} did not run: the turn was interrupted",
                    call.name
                ));
                // Its result goes where every result goes: tool-result, then committed.
                self.lifecycle.tool_call(&call);
                self.lifecycle.tool_observed(&call, &outcome).await;
                (call.tool_use_id, outcome)
            } else {
                let execution = self.lifecycle.execute(&self.tools, request).await;
                self.handle.fifo().extend(execution.contexts);
                terminal |= execution.terminal;
                (execution.call.tool_use_id.clone(), execution.outcome)
            };
            self.append(Entry::ToolResult {
                tool_use_id,
                is_error: outcome.is_error,
                content: text_of(&outcome),
            });
        }
        terminal
    }

    /// Ends the session.
    pub fn end(&mut self, reason: impl Into<String>) {
        self.lifecycle.session_ended(reason);
    }

    /// Closes the turn: in the transcript, and committed.
    fn close(&mut self, turn: u32, outcome: TurnOutcome, reason: Option<String>) -> TurnOutcome {
        self.lifecycle.turn_completed(outcome);
        self.record_close(turn, outcome, reason)
    }

    /// Records in the transcript the end of a turn the lifecycle has already committed.
    fn record_close(
        &mut self,
        turn: u32,
        outcome: TurnOutcome,
        reason: Option<String>,
    ) -> TurnOutcome {
        self.transcript.push(Entry::TurnClosed {
            turn,
            outcome,
            reason,
        });
        outcome
    }

    /// Appends what waits in the FIFO.
    fn flush(&mut self) {
        for context in self.handle.take() {
            self.append_context(context.hook_id, context.text);
        }
    }

    fn append_context(&mut self, source: String, text: String) {
        self.append(Entry::Context { source, text });
    }

    fn append(&mut self, entry: Entry) {
        let message = match &entry {
            Entry::User { text } | Entry::Steering { text, .. } | Entry::Context { text, .. } => {
                Some(Message {
                    role: Role::User,
                    text: text.clone(),
                })
            }
            _ => None,
        };
        self.transcript.push(entry);
        self.lifecycle.messages(message);
    }
}

/// The text projection of an outcome (the `content` of external wire forms).
pub fn text_of(outcome: &ToolOutcome) -> String {
    let parts: Vec<String> = outcome
        .content_blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => text.clone(),
            ContentBlock::Json { value } => value.to_string(),
            ContentBlock::Image { media_type, data } => {
                format!("[{media_type} image, {} bytes]", data.len())
            }
        })
        .collect();
    parts.join("\n")
}
