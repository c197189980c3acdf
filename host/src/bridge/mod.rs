//! Bridges: Palisade as the hook command of Claude Code, of Codex and of Gemini CLI — of each
//! agent of [`Dialect::ALL`].
//!
//! The agent runs `palisade claude-code DIR` (or `palisade codex DIR`, `palisade gemini DIR`)
//! for each hook event, with the event's JSON on stdin. The agent's module
//! ([`crate::agents`]) says what the event means ([`Meaning`]); the bridge runs the points that
//! meaning calls for, with the plugins of `DIR` and Palisade's semantics (ordered, fail-closed,
//! capability-checked), and answers in the agent's fields. [`handle`] is that mapping, for any
//! embedder that receives hook events (the CLI, an HTTP hook server). This module is the one
//! place each meaning's lifecycle calls are made. May touch: the lifecycle it is given.
//!
//! By Claude Code's names (each agent's table is in `docs/bridges.md`):
//!
//! | agent event | points run | answer |
//! |---|---|---|
//! | `SessionStart` | session-start | `additionalContext` (contexts joined) |
//! | `UserPromptSubmit` | prompt-submit, then message-committed (or, rejected, turn-completed) | `decision: "block"` + `reason`, or `additionalContext` |
//! | `PreToolUse` | tool-call-committed, pre-tool, then tool-guard | `permissionDecision` `deny` / `ask` + reason |
//! | `PreSkillShellCommand` (a skill's or slash command's inline shell command, which no `PreToolUse` sees) | the same, over the shell call | the same: `deny` or `ask` keeps the command from running |
//! | `Elicitation` (an MCP server asks the user a question) | tool-call-committed, pre-tool, then tool-guard, over a call of `elicitation/create` | `hookSpecificOutput.action: "decline"` + a message for the user; nothing otherwise (the user answers) |
//! | `ElicitationResult` (the user's answer, about to go to the server) | post-tool, tool-result, tool-result-committed, over that call's result (`action`, `content`) | `decision: "block"` + reason: the server hears `decline` |
//! | `ConfigChange` (a settings file changed on disk, about to load) | tool-call-committed, pre-tool, then tool-guard, over a call of `config/change` (`source`, `file_path`) | `decision: "block"` + reason: the change does not load |
//! | `PermissionRequest` (the agent is about to ask its user to approve a call) | tool-guard, over the call | `decision.behavior: "deny"` + message; nothing otherwise (never `allow`: the user decides) |
//! | `PostToolUse` | post-tool, tool-result, tool-result-committed | `decision: "block"` + `reason`, `additionalContext` |
//! | `Stop`, `SubagentStop` | turn-stopping (then turn-completed) | `decision: "block"` + `reason` (the steering) |
//! | `StopFailure` (the turn ended in an API error) | turn-completed, failed | nothing (the agent ignores it) |
//! | Codex's `Interrupt` (its user interrupted the turn) | turn-completed, interrupted | nothing |
//! | Gemini CLI's `BeforeModel` (a model request), after the turn's first; Claude Code's `PostToolBatch` (the model request after a batch of tool calls) | prompt-submit, a continuation step with no claimed messages | `decision: "block"` + `reason`: the model is not called, the turn ends; at `PostToolBatch`, `additionalContext` (contexts joined) |
//! | `SessionEnd` | session-ended | nothing |
//! | `PreCompact`, `Notification`, others | none | nothing (see `docs/bridges.md`) |
//!
//! A Palisade `allow` means "no objection", not a grant: with no objection the bridge answers
//! nothing, and the agent's own permission rules still decide. Codex honours only `deny` at
//! `PreToolUse`, so there an `ask` becomes a deny that says approval was needed. Gemini CLI's
//! events are Claude Code's under other names ([`crate::agents::gemini`] renders its answers).

use crate::agents::{AgentApplies, CONFIG_CHANGE, ELICITATION, Meaning};
pub use crate::agents::{Answer, Dialect};
use crate::claude_code::{HookAnswer, HookEvent, HookSpecificOutput, Permission};
use crate::lifecycle::{AskPolicy, Lifecycle, ToolDecision};
use crate::plugin::Plugins;
use crate::point::Point;
use crate::types::{
    ContentBlock, Message, PreStepDecision, Provenance, SessionSource, StopEvent, ToolCall,
    ToolOutcome, TurnOutcome,
};
use serde::Deserialize;
use serde_json::{Value, json};

mod fields;
mod recorded;

use fields::tool_call;
pub use recorded::{agent_event, observed_event, session_events};

/// What the hook command answers: a JSON object on stdout (or nothing), a message on stderr,
/// and the exit status.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The answer on stdout, when there is one.
    pub stdout: Option<Answer>,
    /// A message for the agent's user (or, with exit status 2, the blocking reason).
    pub stderr: Option<String>,
    /// 0: answered; 2: a blocking error (the agent blocks with `stderr` as the reason);
    /// 1: a non-blocking error.
    pub exit_code: i32,
    /// The canonical points that ran.
    pub points: Vec<&'static str>,
}

impl Reply {
    /// The same answer for an HTTP hook (Claude Code's `"type": "http"`), which has no exit
    /// status: the agent reads a 2xx body as a command's stdout (an empty body: nothing to
    /// say) and anything else as a non-blocking error. So a blocking error (exit 2) becomes
    /// the event's own blocking answer with the reason — a deny at `PreToolUse`, a block
    /// elsewhere, in `dialect`'s fields — and a non-blocking one (exit 1) a 500 with the
    /// message.
    pub fn http(&self, dialect: Dialect, event: &str) -> (u16, Option<Value>) {
        let body = |answer: &Answer| serde_json::to_value(answer).ok();
        match self.exit_code {
            0 => (200, self.stdout.as_ref().and_then(body)),
            2 => {
                let reason = self
                    .stderr
                    .clone()
                    .unwrap_or_else(|| "palisade: blocked".into());
                // The event's own refusal: what the agent reads at that event.
                let answer = match dialect.meaning(event) {
                    Meaning::ToolCall => HookAnswer::permission_at(event, Permission::Deny, reason),
                    Meaning::PermissionRequest => HookAnswer::permission_request_denied(reason),
                    _ => HookAnswer::block(reason),
                };
                (200, body(&dialect.spec().render(event, answer)))
            }
            _ => (
                500,
                Some(json!({ "error": self.stderr.clone().unwrap_or_default() })),
            ),
        }
    }

    fn nothing() -> Reply {
        Reply {
            stdout: None,
            stderr: None,
            exit_code: 0,
            points: Vec::new(),
        }
    }

    fn answer(answer: HookAnswer) -> Reply {
        Reply {
            stdout: Some(Answer::ClaudeCode(answer)),
            ..Reply::nothing()
        }
    }
}

/// The reply when the bridge cannot do its work at all (`why`) at `dialect`'s `event`: a
/// blocking error for the events that guard ([`Meaning::guards`]); at a tool's result too,
/// whose tool has run, so that the model reads that the result's checks could not run (a
/// post-tool guard is never skipped silently); a non-blocking error elsewhere (a blocked stop
/// would loop the agent while Palisade is down), which the agent logs with its exit status.
pub fn failure(dialect: Dialect, event: &str, why: &str) -> Reply {
    failure_at(dialect.meaning(event), why)
}

/// [`failure`] at an event that means `meaning`: what a bridge answers when it could not read
/// which event it has ([`Meaning::ToolCall`]: the most likely caller of a guard is a tool call,
/// so it refuses).
pub fn failure_at(meaning: Meaning, why: &str) -> Reply {
    let (exit_code, stderr) = if meaning.guards() {
        (2, format!("palisade: {why}"))
    } else if meaning.reports_a_result() {
        let said = format!(
            "palisade: the checks of this tool's result could not run, so the result is \
             unchecked: {why}"
        );
        (2, said)
    } else {
        (1, format!("palisade: {why}"))
    };
    Reply {
        stdout: None,
        stderr: Some(stderr),
        exit_code,
        points: Vec::new(),
    }
}

/// Handles one hook event of `dialect` with `plugins`, in a session of its own (the agent's
/// `session_id`) that ends with the event: what a process per event can do. `input` is the
/// JSON the agent wrote to the hook's stdin.
pub async fn handle(plugins: &Plugins, dialect: Dialect, input: &Value) -> Reply {
    let session_id = input
        .get("session_id")
        .and_then(Value::as_str)
        .unwrap_or("unknown-session");
    let lifecycle = Lifecycle::new(plugins.session(session_id));
    let reply = handle_in(&lifecycle, dialect, input).await;
    // Observers run in the session's tasks; the process must not exit before they are done.
    lifecycle.session().drain_background().await;
    reply
}

/// Handles one hook event in `lifecycle`, which the caller keeps across the events of one
/// agent session (so per-session plugin instances keep their state, and turns are numbered):
/// a long-running server. Background hooks go on after it returns, in the session's tasks.
pub async fn handle_in(lifecycle: &Lifecycle, dialect: Dialect, input: &Value) -> Reply {
    // Read from the borrowed JSON: the event (up to the input bound) is not copied first.
    match HookEvent::deserialize(input) {
        Ok(input) => handle_event(lifecycle, dialect, input).await,
        Err(e) => {
            // What the event is decides whether failing blocks: read its name alone.
            let event = input.get("hook_event_name").and_then(Value::as_str);
            failure(
                dialect,
                event.unwrap_or(""),
                &format!(
                    "the input is not a {} hook event: {e}",
                    dialect.spec().title()
                ),
            )
        }
    }
}

/// [`handle_in`] for an event already read (a server that reads the request's body straight
/// into a [`HookEvent`]).
pub async fn handle_event(lifecycle: &Lifecycle, dialect: Dialect, mut input: HookEvent) -> Reply {
    dialect.read(&mut input);
    // A sub-agent's event (Claude Code's and Codex's `agent_id`): its hooks' audit events name it.
    let agent = match &input.other.get("agent_id") {
        Some(Value::String(id)) => Some(crate::events::SubAgent {
            id: id.clone(),
            kind: input
                .other
                .get("agent_type")
                .and_then(Value::as_str)
                .map(str::to_string),
        }),
        _ => None,
    };
    let event = input.hook_event_name.as_str();
    let meaning = dialect.meaning(event);
    let mut reply =
        crate::events::in_subagent(agent, dispatch(lifecycle, dialect, meaning, &input)).await;
    if reply.stdout.is_none() && reply.exit_code == 0 && meaning.points().is_empty() {
        reply.stderr = Some(match meaning {
            Meaning::Observed => format!(
                "palisade: `{event}` has no Palisade point; nothing ran (an audit log records it)"
            ),
            _ => format!("palisade: `{event}` has no Palisade point; nothing ran"),
        });
    }
    reply.stdout = match reply.stdout.take() {
        Some(Answer::ClaudeCode(answer)) => Some(dialect.spec().render(event, answer)),
        other => other,
    };
    reply
}

/// Runs the points `meaning` calls for, over `input` (in Claude Code's fields, answered in
/// them under the event's own name).
async fn dispatch(
    lifecycle: &Lifecycle,
    dialect: Dialect,
    meaning: Meaning,
    input: &HookEvent,
) -> Reply {
    let event = input.hook_event_name.as_str();
    let turn = input.turn_key();
    match meaning {
        Meaning::SessionStart => session_start(lifecycle, event, input).await,
        Meaning::PromptSubmit => prompt_submit(lifecycle, event, turn, input).await,
        Meaning::ToolCall => match tool_call(input) {
            Ok(call) => {
                lifecycle.in_turn_durably(turn).await;
                pre_tool(lifecycle, dialect, event, &call).await
            }
            Err(why) => failure(dialect, event, &why),
        },
        Meaning::PermissionRequest => match tool_call(input) {
            Ok(call) => permission_request(lifecycle, &call).await,
            Err(why) => failure(dialect, event, &why),
        },
        Meaning::ToolResult | Meaning::ToolFailure => match tool_call(input) {
            Ok(call) => {
                lifecycle.in_turn_durably(turn).await;
                post_tool(lifecycle, dialect, meaning, input, &call).await
            }
            Err(why) => failure(dialect, event, &why),
        },
        Meaning::Stop | Meaning::SubagentStop => {
            lifecycle.in_turn_durably(turn).await;
            stop(lifecycle, meaning, input).await
        }
        Meaning::Elicitation => {
            lifecycle.in_turn_durably(turn).await;
            elicitation(lifecycle, input).await
        }
        Meaning::ElicitationResult => {
            lifecycle.in_turn_durably(turn).await;
            elicitation_result(lifecycle, dialect, input).await
        }
        Meaning::ConfigChange => config_change(lifecycle, dialect, input).await,
        Meaning::ModelRequest | Meaning::AfterToolBatch => {
            lifecycle.in_turn_durably(turn).await;
            // Every model request of the turn, or those after a tool batch.
            let step = match meaning {
                Meaning::ModelRequest => lifecycle.next_step().await,
                _ => lifecycle.next_continuation().await,
            };
            match step {
                Ok(step) => model_request(lifecycle, dialect, meaning, event, step).await,
                Err(why) => failure(
                    dialect,
                    event,
                    &format!("the turn's steps could not be counted: {why}"),
                ),
            }
        }
        Meaning::TurnFailed | Meaning::TurnInterrupted => {
            // The turn ended in an error, or its user interrupted it: no stop comes, and
            // nothing can steer it.
            lifecycle.in_turn_durably(turn).await;
            lifecycle.turn_completed(match meaning {
                Meaning::TurnInterrupted => TurnOutcome::Interrupted,
                _ => TurnOutcome::Failed,
            });
            Reply {
                points: vec!["turn-completed"],
                ..Reply::nothing()
            }
        }
        Meaning::SessionEnd => {
            lifecycle.session_ended(input.reason.as_deref().unwrap_or("other"));
            Reply {
                points: vec!["session-ended"],
                ..Reply::nothing()
            }
        }
        // No canonical point: compaction is reserved (docs/semantics.md S1.66), a
        // notification is a UI event, not an agent fact. Answered with nothing, so the agent
        // goes on; the front door records an observed one (`agent_event`).
        Meaning::Observed | Meaning::Unmapped => Reply::nothing(),
    }
}

fn joined(contexts: impl IntoIterator<Item = String>) -> Option<String> {
    let texts: Vec<String> = contexts.into_iter().collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

async fn session_start(lifecycle: &Lifecycle, event: &str, input: &HookEvent) -> Reply {
    let source = match input.source.as_deref() {
        Some("resume") => SessionSource::Resume,
        Some("clear") => SessionSource::Clear,
        Some("compact") => SessionSource::Compact,
        _ => SessionSource::Startup,
    };
    let contexts = lifecycle.session_start(source).await;
    let mut reply = match joined(contexts.into_iter().map(|c| c.text)) {
        Some(context) => Reply::answer(HookAnswer::context(event, context)),
        None => Reply::nothing(),
    };
    reply.points = vec!["session-start"];
    reply
}

async fn prompt_submit(
    lifecycle: &Lifecycle,
    event: &str,
    turn: Option<&str>,
    input: &HookEvent,
) -> Reply {
    let prompt = vec![Message::user(input.prompt.clone().unwrap_or_default())];
    lifecycle.open_turn_durably(turn).await;
    let mut reply = match lifecycle.pre_step(1, prompt.clone()).await {
        PreStepDecision::Reject(denial) => Reply::answer(HookAnswer::block(denial.message)),
        PreStepDecision::Enter { messages, .. } if messages != prompt => {
            // The agent takes the prompt as typed or not at all: sending it unchanged would
            // undo the hook's reshaping (a redaction, say), so it is blocked.
            lifecycle.turn_completed(TurnOutcome::Blocked);
            Reply::answer(HookAnswer::block(
                "a prompt-submit hook reshaped this prompt, and this agent cannot take a \
                 reshaped prompt: it is blocked rather than sent as typed",
            ))
        }
        PreStepDecision::Enter { messages, contexts } => {
            lifecycle.messages(messages);
            match joined(contexts.into_iter().map(|c| c.text)) {
                Some(context) => Reply::answer(HookAnswer::context(event, context)),
                None => Reply::nothing(),
            }
        }
    };
    reply.points = vec!["prompt-submit"];
    reply
}

/// Claude Code's `Elicitation`: an MCP server asks the user a question (a form, or a URL to
/// open) in the middle of a tool call. Judged as a call of the tool `elicitation/create` whose
/// arguments are the question (MCP's fields: `message`, `requestedSchema`, `mode`, `url`,
/// `elicitationId`), from the server named in its provenance, by the tool step: a refusal
/// declines it for the user, who never sees it; an ask or no objection leaves the question to
/// the user.
async fn elicitation(lifecycle: &Lifecycle, input: &HookEvent) -> Reply {
    let call = elicitation_call(input);
    let step = lifecycle.authorize(&call, AskPolicy::Agent).await;
    let mut reply = match step.decision {
        ToolDecision::Denied(denial) => Reply::answer(HookAnswer::elicitation_declined(format!(
            "Palisade declined the question: {}",
            denial.message
        ))),
        ToolDecision::Allowed { .. } | ToolDecision::Ask(_) => Reply::nothing(),
    };
    reply.points = step.points.iter().map(|p| p.as_str()).collect();
    reply
}

/// Claude Code's `ConfigChange`: a settings file changed on disk (the user's, the project's,
/// its local one, or a skill) and is about to load into the session. Judged as a call of the
/// tool `config/change` whose arguments are the event's `source` and `file_path`, by the tool
/// step: a refusal keeps the change from loading (`decision: "block"`: the session keeps its
/// settings; Claude Code loads a managed policy's change whatever a hook says). The agent
/// cannot ask its user here, so an ask keeps it from loading too, saying approval was needed.
async fn config_change(lifecycle: &Lifecycle, dialect: Dialect, input: &HookEvent) -> Reply {
    let mut arguments = serde_json::Map::new();
    // `source` is read into the event's own field (`SessionStart` has one of that name), not
    // kept among the others.
    if let Some(source) = &input.source {
        arguments.insert("source".to_string(), Value::String(source.clone()));
    }
    if let Some(path) = input.other.get("file_path") {
        arguments.insert("file_path".to_string(), path.clone());
    }
    let id = format!("config-change-{}", crate::lifecycle::random_key());
    let call = ToolCall::new(id, CONFIG_CHANGE, Value::Object(arguments));
    let step = lifecycle.authorize(&call, AskPolicy::Agent).await;
    let mut reply = match step.decision {
        ToolDecision::Denied(denial) => Reply::answer(HookAnswer::block(denial.message)),
        ToolDecision::Ask(ask) => Reply::answer(HookAnswer::block(format!(
            "{} (`{}` asks for approval, which {} cannot request for a settings change, so \
             the change does not load)",
            ask.reason,
            ask.hook_id,
            dialect.spec().title()
        ))),
        ToolDecision::Allowed { .. } => Reply::nothing(),
    };
    reply.points = step.points.iter().map(|p| p.as_str()).collect();
    reply
}

/// The call an `Elicitation` or `ElicitationResult` is judged as ([`elicitation`]).
fn elicitation_call(input: &HookEvent) -> ToolCall {
    let field = |name: &str| input.other.get(name).cloned();
    let mut arguments = serde_json::Map::new();
    for (theirs, mcp) in [
        ("message", "message"),
        ("requested_schema", "requestedSchema"),
        ("mode", "mode"),
        ("url", "url"),
        ("elicitation_id", "elicitationId"),
    ] {
        if let Some(value) = field(theirs) {
            arguments.insert(mcp.to_string(), value);
        }
    }
    let id = match field("elicitation_id") {
        Some(Value::String(id)) => id,
        _ => crate::lifecycle::random_key(),
    };
    let mut call = ToolCall::new(
        format!("elicitation-{id}"),
        ELICITATION,
        Value::Object(arguments),
    );
    if let Some(Value::String(server)) = field("mcp_server_name") {
        call.provenance = Some(Provenance::Mcp {
            server,
            tool: ELICITATION.to_string(),
        });
    }
    call
}

/// Claude Code's `ElicitationResult`: the user's answer to an MCP server's question, about to
/// go to the server — the result of the `elicitation/create` call ([`elicitation`]), as MCP
/// has it (`action`, and the `content` of an accept). Through `post-tool`, `tool-result` and
/// the committed result: a block declines the answer (the server hears `decline`, which is
/// what is committed); a replacement or contexts cannot be carried (recorded as not applied).
async fn elicitation_result(lifecycle: &Lifecycle, dialect: Dialect, input: &HookEvent) -> Reply {
    let call = elicitation_call(input);
    let mut answer = serde_json::Map::new();
    for field in ["action", "content"] {
        if let Some(value) = input.other.get(field) {
            answer.insert(field.to_string(), value.clone());
        }
    }
    let answer = Value::Object(answer);
    let outcome = ToolOutcome {
        content_blocks: vec![ContentBlock::Json {
            value: answer.clone(),
        }],
        is_error: false,
        value: Some(answer),
    };
    let result = lifecycle
        .tool_reported(&call, &outcome, AgentApplies::Blocks)
        .await
        .post;
    lifecycle.contexts_not_applied(
        Point::PostTool,
        Some(&call.name),
        &result.contexts,
        &format!(
            "{} takes no context with an answer to an MCP server",
            dialect.spec().title()
        ),
    );
    let mut reply = match &result.blocked {
        Some(denial) => Reply::answer(HookAnswer::block(denial.message.clone())),
        None => Reply::nothing(),
    };
    reply.points = vec!["post-tool", "tool-result", "tool-result-committed"];
    reply
}

/// The model request of step `step` of the turn, which the agent is about to make: every
/// request ([`Meaning::ModelRequest`], Gemini CLI's `BeforeModel`: the first is the prompt's
/// step, answered at the prompt), or the request after a batch of tool calls
/// ([`Meaning::AfterToolBatch`], Claude Code's `PostToolBatch`: a tool continuation, step 2
/// on). A continuation step's pre-step (docs/semantics.md S1.9,
/// S1.11): `prompt-submit` with no claimed messages. A reject blocks the request (the model is
/// not called, the turn ends blocked); a hook that adds messages blocks it too, since neither
/// agent can add them to a request; contexts reach the model after a batch
/// (`additionalContext`, once for the batch) and are recorded as not applied at a plain
/// request, which takes none.
async fn model_request(
    lifecycle: &Lifecycle,
    dialect: Dialect,
    meaning: Meaning,
    event: &str,
    step: u32,
) -> Reply {
    if step <= 1 {
        return Reply::nothing();
    }
    let mut reply = match lifecycle.pre_step(step, Vec::new()).await {
        PreStepDecision::Reject(denial) => Reply::answer(HookAnswer::block(denial.message)),
        PreStepDecision::Enter { messages, .. } if !messages.is_empty() => {
            lifecycle.turn_completed(TurnOutcome::Blocked);
            Reply::answer(HookAnswer::block(
                "a prompt-submit hook added messages to this step, and this agent cannot add \
                 messages to a model request: it is blocked rather than sent without them",
            ))
        }
        PreStepDecision::Enter { contexts, .. } if meaning == Meaning::AfterToolBatch => {
            match joined(contexts.into_iter().map(|c| c.text)) {
                Some(context) => Reply::answer(HookAnswer::context(event, context)),
                None => Reply::nothing(),
            }
        }
        PreStepDecision::Enter { contexts, .. } => {
            lifecycle.contexts_not_applied(
                Point::PromptSubmit,
                None,
                &contexts,
                &format!(
                    "{} cannot add context to a model request; the request went without it",
                    dialect.spec().title()
                ),
            );
            Reply::nothing()
        }
    };
    reply.points = vec!["prompt-submit"];
    reply
}

/// The tool step ([`Lifecycle::authorize`]) at `event` (`PreToolUse`, or Claude Code's
/// `PreSkillShellCommand`, answered in the same fields under its own name): the agent asks its
/// user itself after the hook answers, so an ask goes back to it once tool-guard abstained (a
/// tool guard's deny wins over the ask); an agent that cannot ask from a hook (Codex) gets a
/// denial instead.
async fn pre_tool(lifecycle: &Lifecycle, dialect: Dialect, event: &str, call: &ToolCall) -> Reply {
    let step = lifecycle.authorize(call, AskPolicy::Agent).await;
    let answer =
        |permission, reason| Reply::answer(HookAnswer::permission_at(event, permission, reason));
    let deny = |reason| answer(Permission::Deny, reason);
    let mut reply = match step.decision {
        ToolDecision::Denied(denial) => deny(denial.message),
        ToolDecision::Allowed { .. } => Reply::nothing(),
        ToolDecision::Ask(ask) if dialect.spec().can_ask() => answer(Permission::Ask, ask.reason),
        ToolDecision::Ask(ask) => deny(format!(
            "{} (`{}` asks for approval, which a {} hook cannot request, so the call is denied)",
            ask.reason,
            ask.hook_id,
            dialect.spec().title()
        )),
    };
    reply.points = step.points.iter().map(|p| p.as_str()).collect();
    reply
}

/// The agent is about to ask its user to approve `call` (its `PreToolUse` passed, with an ask or
/// under the agent's own rules): the call's final invariants, tool-guard, are checked again
/// just before, so that no answer of the user's can override them. A deny denies the call; an
/// abstention answers nothing and the user decides. Never an allow: Palisade's guards object
/// or abstain, and approval is the user's. The call is not committed again (it was at
/// `PreToolUse`; this event carries no `tool_use_id`).
async fn permission_request(lifecycle: &Lifecycle, call: &ToolCall) -> Reply {
    let step = lifecycle.guard_again(call).await;
    let mut reply = match step.decision {
        ToolDecision::Denied(denial) => {
            Reply::answer(HookAnswer::permission_request_denied(denial.message))
        }
        ToolDecision::Allowed { .. } | ToolDecision::Ask(_) => Reply::nothing(),
    };
    reply.points = step.points.iter().map(|p| p.as_str()).collect();
    reply
}

async fn post_tool(
    lifecycle: &Lifecycle,
    dialect: Dialect,
    meaning: Meaning,
    input: &HookEvent,
    call: &ToolCall,
) -> Reply {
    let event = input.hook_event_name.as_str();
    let original = dialect.spec().outcome(meaning, input);
    // What the agent keeps is what is committed.
    let response = input
        .tool_response
        .as_ref()
        .filter(|_| meaning == Meaning::ToolResult);
    let applies = dialect.spec().applies(response);
    let result = lifecycle.tool_reported(call, &original, applies).await.post;
    let replaced = result.blocked.is_none() && result.outcome != original;
    // A replacement the agent carries back, in the tool's own output shape.
    let updated = match (applies, response) {
        (AgentApplies::Replacements, Some(response)) if replaced => dialect
            .spec()
            .carried_back(response, &crate::agent::text_of(&result.outcome)),
        _ => None,
    };
    let context = joined(result.contexts.iter().map(|c| c.text.clone()));
    let specific = (context.is_some() || updated.is_some()).then(|| HookSpecificOutput {
        additional_context: context,
        updated_tool_output: updated,
        ..HookSpecificOutput::new(event)
    });
    let answer = HookAnswer {
        hook_specific_output: specific,
        ..result
            .blocked
            .as_ref()
            .map(|denial| HookAnswer::block(denial.message.clone()))
            .unwrap_or_default()
    };
    let mut reply = if answer == HookAnswer::default() {
        Reply::nothing()
    } else {
        Reply::answer(answer)
    };
    if replaced && applies != AgentApplies::Replacements {
        // The agent's protocol cannot carry this replacement back.
        reply.stderr = Some(
            "palisade: a post-tool hook replaced the tool's result; the agent's hook protocol \
             cannot carry a replacement back, so the agent keeps its own"
                .into(),
        );
    }
    reply.points = vec!["post-tool", "tool-result", "tool-result-committed"];
    reply
}

async fn stop(lifecycle: &Lifecycle, meaning: Meaning, input: &HookEvent) -> Reply {
    // A sub-agent's stop does not complete the turn.
    let whole = meaning == Meaning::Stop;
    let active = input.stop_hook_active.unwrap_or(false);
    let stop = StopEvent {
        turn: lifecycle.turn(),
        step: 1,
        last_assistant_message: input.last_assistant_message.clone(),
        // The agent says only whether a stop hook already made it continue.
        continuations: u32::from(active),
    };
    let steerings = lifecycle.stopping(&stop, whole).await;
    let mut reply = match joined(steerings.into_iter().map(|s| s.content)) {
        Some(reason) => Reply::answer(HookAnswer::block(reason)),
        None => Reply::nothing(),
    };
    reply.points = if whole {
        vec!["turn-stopping", "turn-completed"]
    } else {
        vec!["turn-stopping"]
    };
    reply
}

#[cfg(test)]
mod tests {
    use super::{Dialect, failure};
    use serde_json::json;

    /// A refusal over HTTP (`palisade serve`, for `forward`) is the event's own: a permission
    /// denial where the event takes one, under its name; a block elsewhere.
    #[test]
    fn a_refusal_over_http_is_the_events_own() {
        let refused = |dialect, event: &str| {
            failure(dialect, event, "the plugins did not load")
                .http(dialect, event)
                .1
        };
        let http = |event: &str| refused(Dialect::CLAUDE_CODE, event);
        for event in ["PreToolUse", "PreSkillShellCommand"] {
            let answer = http(event).unwrap();
            let specific = &answer["hookSpecificOutput"];
            assert_eq!(specific["hookEventName"], event, "{answer}");
            assert_eq!(specific["permissionDecision"], "deny", "{answer}");
        }
        let answer = http("PermissionRequest").unwrap();
        let specific = &answer["hookSpecificOutput"];
        assert_eq!(specific["hookEventName"], "PermissionRequest", "{answer}");
        assert_eq!(specific["decision"]["behavior"], "deny", "{answer}");
        assert_eq!(http("UserPromptSubmit").unwrap()["decision"], "block");
        // Gemini CLI's, in its fields.
        let answer = refused(Dialect::GEMINI, "BeforeTool").unwrap();
        assert_eq!(answer["decision"], "deny", "{answer}");
        assert!(answer.get("hookSpecificOutput").is_none(), "{answer}");
        assert_eq!(
            refused(Dialect::GEMINI, "BeforeAgent").unwrap()["decision"],
            "block"
        );
    }

    /// The tool an event is about is the one its matchers see: a tool event's `tool_name`, in
    /// Claude Code's events and Gemini CLI's; no tool for the others, or for a `tool_name`
    /// that is not a string.
    #[test]
    fn the_tool_of_an_event_is_what_its_matchers_see() {
        let event = |name: &str, tool: serde_json::Value| json!({"hook_event_name": name, "tool_name": tool, "tool_input": {}});
        let claude = |input| Dialect::CLAUDE_CODE.tool_of(&input).map(str::to_owned);
        let gemini = |input| Dialect::GEMINI.tool_of(&input).map(str::to_owned);
        assert_eq!(
            claude(event("PreToolUse", json!("Bash"))).as_deref(),
            Some("Bash")
        );
        assert_eq!(
            claude(event("PostToolUse", json!("Read"))).as_deref(),
            Some("Read")
        );
        assert_eq!(
            gemini(event("BeforeTool", json!("run_shell_command"))).as_deref(),
            Some("run_shell_command")
        );
        assert_eq!(
            gemini(event("AfterTool", json!("read_file"))).as_deref(),
            Some("read_file")
        );
        assert_eq!(
            claude(event("Elicitation", json!(null))).as_deref(),
            Some("elicitation/create")
        );
        // An event's name is its agent's: Claude Code has no `BeforeTool`.
        assert_eq!(claude(event("BeforeTool", json!("Bash"))), None);
        assert_eq!(claude(event("UserPromptSubmit", json!("Bash"))), None);
        assert_eq!(claude(event("PreToolUse", json!(7))), None);
        assert_eq!(claude(json!({"hook_event_name": "PreToolUse"})), None);
    }
}
