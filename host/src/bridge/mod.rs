//! Bridges: Palisade as the hook command of Claude Code, of Codex and of Gemini CLI.
//!
//! The agent runs `palisade claude-code DIR` (or `palisade codex DIR`, `palisade gemini DIR`)
//! for each hook event,
//! with the event's JSON on stdin. The bridge maps the event to its canonical point, runs the
//! plugins of `DIR` with Palisade's semantics (ordered, fail-closed, capability-checked), and
//! answers in the agent's dialect. [`handle`] is that mapping, for any embedder that receives
//! Claude Code hook events (the CLI, an HTTP hook server).
//!
//! | agent event | points run | answer |
//! |---|---|---|
//! | `SessionStart` | session-start | `additionalContext` (contexts joined) |
//! | `UserPromptSubmit` | prompt-submit, then message-committed (or, rejected, turn-completed) | `decision: "block"` + `reason`, or `additionalContext` |
//! | `PreToolUse` | tool-call-committed, pre-tool, then tool-guard | `permissionDecision` `deny` / `ask` + reason |
//! | `PreSkillShellCommand` (a skill's or slash command's inline shell command, which no `PreToolUse` sees) | the same, over the shell call | the same: `deny` or `ask` keeps the command from running |
//! | `Elicitation` (an MCP server asks the user a question) | tool-call-committed, pre-tool, then tool-guard, over a call of `elicitation/create` | `hookSpecificOutput.action: "decline"` + a message for the user; nothing otherwise (the user answers) |
//! | `ElicitationResult` (the user's answer, about to go to the server) | post-tool, tool-result, tool-result-committed, over that call's result (`action`, `content`) | `decision: "block"` + reason: the server hears `decline` |
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
//! events are Claude Code's under other names ([`crate::gemini`] maps them and its answers).

use crate::claude_code::{HookAnswer, HookEvent, HookSpecificOutput, Permission};
use crate::gemini::{self, GeminiAnswer};
use crate::lifecycle::{AgentApplies, AskPolicy, Lifecycle, ToolDecision};
use crate::plugin::Plugins;
use crate::point::Point;
use crate::types::{
    ContentBlock, Message, PreStepDecision, Provenance, SessionSource, StopEvent, ToolCall,
    ToolOutcome, TurnOutcome,
};
use serde::Deserialize;
use serde_json::{Value, json};

mod dialect;
mod fields;
mod recorded;

pub use dialect::{CLAUDE_CODE_EVENTS, CODEX_EVENTS, Dialect};
use fields::{carries_back, gemini_as_claude, outcome, tool_call};
pub use recorded::{agent_event, session_events};

/// A hook command's answer on stdout, in its agent's dialect.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Answer {
    /// Claude Code's (and Codex's) fields.
    ClaudeCode(HookAnswer),
    /// Gemini CLI's fields.
    Gemini(GeminiAnswer),
    /// An answer in any agent's fields, as another Palisade composed it: what `palisade
    /// forward` relays of `palisade serve`'s.
    Json(Value),
}

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
                let answer = match canonical(event) {
                    claude @ ("PreToolUse" | "PreSkillShellCommand") => {
                        HookAnswer::permission_at(claude, Permission::Deny, reason)
                    }
                    "PermissionRequest" => HookAnswer::permission_request_denied(reason),
                    _ => HookAnswer::block(reason),
                };
                let answer = match dialect {
                    Dialect::Gemini => Answer::Gemini(GeminiAnswer::from_claude(event, &answer)),
                    _ => Answer::ClaudeCode(answer),
                };
                (200, body(&answer))
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

/// The events whose failure to even start (the input unreadable, the plugins not loadable)
/// must block: an unguarded tool call, prompt, model request (Gemini CLI's `BeforeModel`), MCP
/// server's question or answer to one is worse than a refused one. Elsewhere a
/// blocking exit would mean "keep going" (`Stop`), so those get a non-blocking error. Gemini
/// CLI's names for the same events (`BeforeTool`, `BeforeAgent`) block too.
pub fn fails_closed(event: &str) -> bool {
    matches!(
        canonical(event),
        "PreToolUse"
            | "PreSkillShellCommand"
            | "PermissionRequest"
            | "UserPromptSubmit"
            | "Elicitation"
            | "ElicitationResult"
            | "BeforeModel"
            | "PostToolBatch"
    )
}

/// Whether the agent waits for the event's answer. Claude Code does not for `StopFailure`
/// (fire and forget): it ends the hook when it exits, which it does at once. A bridge process
/// for such an event lets nothing but its own budget end it, so that what the event commits
/// (the failed turn) is committed.
pub fn agent_waits(event: &str) -> bool {
    !matches!(canonical(event), "StopFailure")
}

/// The Claude Code name of an event: Gemini CLI's names are mapped, every other passes.
fn canonical(event: &str) -> &str {
    gemini::claude_event(event).unwrap_or(event)
}

/// The reply when the bridge cannot do its work at all (`why`): a blocking error for the
/// events that guard; at `PostToolUse` too, whose tool has run, so that the model reads that
/// the result's checks could not run (a post-tool guard is never skipped silently); a
/// non-blocking error elsewhere (a blocked `Stop` would loop the agent while Palisade is
/// down), which the agent logs with its exit status.
pub fn failure(event: &str, why: &str) -> Reply {
    let (exit_code, stderr) = if fails_closed(event) {
        (2, format!("palisade: {why}"))
    } else if matches!(canonical(event), "PostToolUse" | "PostToolUseFailure") {
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

/// The canonical points an agent event runs (none for an event with no Palisade point), by
/// its Claude Code, Codex or Gemini CLI name.
pub fn points_for(event: &str) -> &'static [Point] {
    match canonical(event) {
        "SessionStart" => &[Point::SessionStart],
        "UserPromptSubmit" => &[
            Point::PromptSubmit,
            Point::MessageCommitted,
            // A rejected prompt closes its turn, blocked.
            Point::TurnCompleted,
        ],
        "PreToolUse" | "PreSkillShellCommand" => {
            &[Point::ToolCallCommitted, Point::PreTool, Point::ToolGuard]
        }
        "PostToolUse" | "PostToolUseFailure" => &[
            Point::PostTool,
            Point::ToolResult,
            Point::ToolResultCommitted,
        ],
        "Stop" => &[Point::TurnStopping, Point::TurnCompleted],
        "SubagentStop" => &[Point::TurnStopping],
        "StopFailure" | "Interrupt" => &[Point::TurnCompleted],
        "PermissionRequest" => &[Point::ToolGuard],
        "Elicitation" => &[Point::ToolCallCommitted, Point::PreTool, Point::ToolGuard],
        "ElicitationResult" => &[
            Point::PostTool,
            Point::ToolResult,
            Point::ToolResultCommitted,
        ],
        // A continuation step's prompt-submit; its reject closes the turn, but an observer of
        // turn-completed alone needs no process per model request.
        "BeforeModel" | "PostToolBatch" => &[Point::PromptSubmit],
        "SessionEnd" => &[Point::SessionEnded],
        _ => &[],
    }
}

/// The tool a hook event is about, named as the hooks' matchers see it: the `tool_name` of a
/// `PreToolUse` or `PostToolUse` (Gemini CLI's `BeforeTool` and `AfterTool` too); `None` for
/// the other events, and for one whose `tool_name` is not a string (it fails on its own).
/// With [`points_for`], what a process that serves one event loads
/// ([`crate::LoadRequest::tool`]).
pub fn tool_of(input: &Value) -> Option<&str> {
    let event = input.get("hook_event_name")?.as_str()?;
    match canonical(event) {
        "PreToolUse"
        | "PreSkillShellCommand"
        | "PermissionRequest"
        | "PostToolUse"
        | "PostToolUseFailure" => input.get("tool_name")?.as_str(),
        "Elicitation" | "ElicitationResult" => event_tool(event),
        _ => None,
    }
}

/// The tool an agent event is always about, whatever its input says: `elicitation/create` for
/// Claude Code's `Elicitation` and `ElicitationResult`. A hook whose matcher does not take it
/// never runs there, so `install` need not register the event for it.
pub fn event_tool(event: &str) -> Option<&'static str> {
    matches!(canonical(event), "Elicitation" | "ElicitationResult").then_some(ELICITATION)
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
                event.unwrap_or(""),
                &format!("the input is not a Claude Code, Codex or Gemini CLI hook event: {e}"),
            )
        }
    }
}

/// [`handle_in`] for an event already read (a server that reads the request's body straight
/// into a [`HookEvent`]).
pub async fn handle_event(lifecycle: &Lifecycle, dialect: Dialect, mut input: HookEvent) -> Reply {
    let asked = input.hook_event_name.clone();
    if dialect == Dialect::Gemini {
        gemini_as_claude(&mut input);
    }
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
    let mut reply = crate::events::in_subagent(agent, dispatch(lifecycle, dialect, &input)).await;
    if reply.stdout.is_none() && reply.exit_code == 0 && points_for(&asked).is_empty() {
        reply.stderr = Some(format!(
            "palisade: `{asked}` has no Palisade point; nothing ran"
        ));
    }
    if let Some(Answer::ClaudeCode(answer)) = &reply.stdout
        && dialect == Dialect::Gemini
    {
        reply.stdout = Some(Answer::Gemini(GeminiAnswer::from_claude(&asked, answer)));
    }
    reply
}

/// Runs the points of `input`, a Claude Code event (Gemini's already mapped).
async fn dispatch(lifecycle: &Lifecycle, dialect: Dialect, input: &HookEvent) -> Reply {
    let event = input.hook_event_name.as_str();
    let turn = input.turn_key();
    match event {
        "SessionStart" => session_start(lifecycle, input).await,
        "UserPromptSubmit" => prompt_submit(lifecycle, turn, input).await,
        "PreToolUse" | "PreSkillShellCommand" => match tool_call(input) {
            Ok(call) => {
                lifecycle.in_turn_durably(turn).await;
                pre_tool(lifecycle, dialect, event, &call).await
            }
            Err(why) => failure(event, &why),
        },
        "PermissionRequest" => match tool_call(input) {
            Ok(call) => permission_request(lifecycle, &call).await,
            Err(why) => failure(event, &why),
        },
        "PostToolUse" | "PostToolUseFailure" => match tool_call(input) {
            Ok(call) => {
                lifecycle.in_turn_durably(turn).await;
                post_tool(lifecycle, dialect, input, &call).await
            }
            Err(why) => failure(event, &why),
        },
        "Stop" | "SubagentStop" => {
            lifecycle.in_turn_durably(turn).await;
            stop(lifecycle, event, input).await
        }
        "Elicitation" if dialect == Dialect::ClaudeCode => {
            lifecycle.in_turn_durably(turn).await;
            elicitation(lifecycle, input).await
        }
        "ElicitationResult" if dialect == Dialect::ClaudeCode => {
            lifecycle.in_turn_durably(turn).await;
            elicitation_result(lifecycle, input).await
        }
        "BeforeModel" | "PostToolBatch"
            if (event == "BeforeModel") == (dialect == Dialect::Gemini) =>
        {
            lifecycle.in_turn_durably(turn).await;
            // Gemini CLI reports every model request; Claude Code those after a tool batch.
            let step = match event {
                "BeforeModel" => lifecycle.next_step().await,
                _ => lifecycle.next_continuation().await,
            };
            match step {
                Ok(step) => model_request(lifecycle, event, step).await,
                Err(why) => failure(
                    event,
                    &format!("the turn's steps could not be counted: {why}"),
                ),
            }
        }
        "StopFailure" | "Interrupt" => {
            // The turn ended in an API error, or its user interrupted it: no `Stop` comes, and
            // nothing can steer it.
            lifecycle.in_turn_durably(turn).await;
            lifecycle.turn_completed(match event {
                "Interrupt" => TurnOutcome::Interrupted,
                _ => TurnOutcome::Failed,
            });
            Reply {
                points: vec!["turn-completed"],
                ..Reply::nothing()
            }
        }
        "SessionEnd" => {
            lifecycle.session_ended(input.reason.as_deref().unwrap_or("other"));
            Reply {
                points: vec!["session-ended"],
                ..Reply::nothing()
            }
        }
        // No canonical point: compaction is reserved (docs/semantics.md S1.66), a notification is a UI event,
        // not an agent fact. Answered with nothing, so the agent goes on.
        _ => Reply::nothing(),
    }
}

fn joined(contexts: impl IntoIterator<Item = String>) -> Option<String> {
    let texts: Vec<String> = contexts.into_iter().collect();
    (!texts.is_empty()).then(|| texts.join("\n\n"))
}

async fn session_start(lifecycle: &Lifecycle, input: &HookEvent) -> Reply {
    let source = match input.source.as_deref() {
        Some("resume") => SessionSource::Resume,
        Some("clear") => SessionSource::Clear,
        Some("compact") => SessionSource::Compact,
        _ => SessionSource::Startup,
    };
    let contexts = lifecycle.session_start(source).await;
    let mut reply = match joined(contexts.into_iter().map(|c| c.text)) {
        Some(context) => Reply::answer(HookAnswer::context("SessionStart", context)),
        None => Reply::nothing(),
    };
    reply.points = vec!["session-start"];
    reply
}

async fn prompt_submit(lifecycle: &Lifecycle, turn: Option<&str>, input: &HookEvent) -> Reply {
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
                Some(context) => Reply::answer(HookAnswer::context("UserPromptSubmit", context)),
                None => Reply::nothing(),
            }
        }
    };
    reply.points = vec!["prompt-submit"];
    reply
}

/// The tool an MCP server's question to the user is judged as, at every front door: MCP's and
/// ACP's method for it.
const ELICITATION: &str = "elicitation/create";

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
async fn elicitation_result(lifecycle: &Lifecycle, input: &HookEvent) -> Reply {
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
        "Claude Code takes no context with an answer to an MCP server",
    );
    let mut reply = match &result.blocked {
        Some(denial) => Reply::answer(HookAnswer::block(denial.message.clone())),
        None => Reply::nothing(),
    };
    reply.points = vec!["post-tool", "tool-result", "tool-result-committed"];
    reply
}

/// The model request of step `step` of the turn, which the agent is about to make: Gemini
/// CLI's `BeforeModel` (every request: the first is the prompt's step, answered at
/// `BeforeAgent`), Claude Code's `PostToolBatch` (the request after a batch of tool calls: a
/// tool continuation, step 2 on). A continuation step's pre-step (docs/semantics.md S1.9,
/// S1.11): `prompt-submit` with no claimed messages. A reject blocks the request (the model is
/// not called, the turn ends blocked); a hook that adds messages blocks it too, since neither
/// agent can add them to a request; contexts reach the model where the agent takes them
/// (Claude Code's `additionalContext`, once for the batch) and are recorded as not applied
/// where it does not (Gemini CLI).
async fn model_request(lifecycle: &Lifecycle, event: &str, step: u32) -> Reply {
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
        PreStepDecision::Enter { contexts, .. } if event == "PostToolBatch" => {
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
                "Gemini CLI cannot add context to a model request; the request went without it",
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
/// tool guard's deny wins over the ask); Codex cannot ask from a hook, so there an ask is a
/// denial.
async fn pre_tool(lifecycle: &Lifecycle, dialect: Dialect, event: &str, call: &ToolCall) -> Reply {
    let step = lifecycle.authorize(call, AskPolicy::Agent).await;
    let answer =
        |permission, reason| Reply::answer(HookAnswer::permission_at(event, permission, reason));
    let deny = |reason| answer(Permission::Deny, reason);
    let mut reply = match step.decision {
        ToolDecision::Denied(denial) => deny(denial.message),
        ToolDecision::Allowed { .. } => Reply::nothing(),
        ToolDecision::Ask(ask) => match dialect {
            Dialect::ClaudeCode | Dialect::Gemini => answer(Permission::Ask, ask.reason),
            Dialect::Codex => deny(format!(
                "{} (`{}` asks for approval, which a Codex hook cannot request, so the call is denied)",
                ask.reason, ask.hook_id
            )),
        },
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
    input: &HookEvent,
    call: &ToolCall,
) -> Reply {
    let event = canonical(&input.hook_event_name);
    let original = match dialect {
        Dialect::Gemini => gemini::outcome(input.tool_response.as_ref()),
        // A failed call: its error is the result (Claude Code sends the message alone).
        _ if event == "PostToolUseFailure" => ToolOutcome::error(
            input
                .other
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("the tool failed"),
        ),
        _ => outcome(input),
    };
    // What the agent keeps is what is committed.
    let response = input
        .tool_response
        .as_ref()
        .filter(|_| event == "PostToolUse");
    let applies = dialect.applies(response);
    let result = lifecycle.tool_reported(call, &original, applies).await.post;
    let replaced = result.blocked.is_none() && result.outcome != original;
    // A replacement Claude Code carries back, in the tool's own output shape.
    let updated = match (applies, response) {
        (AgentApplies::Replacements, Some(response)) if replaced => {
            replaced_output(response, &crate::agent::text_of(&result.outcome))
        }
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

/// `text` as Claude Code's `updatedToolOutput` for a tool whose own output was `response`: a
/// text for a text, a shell's output with `text` as its `stdout` (and no `stderr`); `None` for
/// any other shape, which Claude Code would not take.
fn replaced_output(response: &Value, text: &str) -> Option<Value> {
    match response {
        Value::String(_) => Some(Value::String(text.to_string())),
        Value::Object(fields) if carries_back(response) => {
            let mut fields = fields.clone();
            fields.insert("stdout".into(), text.into());
            fields.insert("stderr".into(), "".into());
            Some(Value::Object(fields))
        }
        _ => None,
    }
}

async fn stop(lifecycle: &Lifecycle, event: &str, input: &HookEvent) -> Reply {
    let active = input.stop_hook_active.unwrap_or(false);
    let stop = StopEvent {
        turn: lifecycle.turn(),
        step: 1,
        last_assistant_message: input.last_assistant_message.clone(),
        // The agent says only whether a stop hook already made it continue.
        continuations: u32::from(active),
    };
    let steerings = lifecycle.stopping(&stop, event == "Stop").await;
    let mut reply = match joined(steerings.into_iter().map(|s| s.content)) {
        Some(reason) => Reply::answer(HookAnswer::block(reason)),
        None => Reply::nothing(),
    };
    reply.points = if event == "Stop" {
        vec!["turn-stopping", "turn-completed"]
    } else {
        vec!["turn-stopping"]
    };
    reply
}

#[cfg(test)]
mod tests {
    use super::{Dialect, failure, tool_of};
    use serde_json::json;

    /// A refusal over HTTP (`palisade serve`, for `forward`) is the event's own: a permission
    /// denial where the event takes one, under its name; a block elsewhere.
    #[test]
    fn a_refusal_over_http_is_the_events_own() {
        let refused = |dialect, event: &str| {
            failure(event, "the plugins did not load")
                .http(dialect, event)
                .1
        };
        let http = |event: &str| refused(Dialect::ClaudeCode, event);
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
        let answer = refused(Dialect::Gemini, "BeforeTool").unwrap();
        assert_eq!(answer["decision"], "deny", "{answer}");
        assert!(answer.get("hookSpecificOutput").is_none(), "{answer}");
        assert_eq!(
            refused(Dialect::Gemini, "BeforeAgent").unwrap()["decision"],
            "block"
        );
    }

    /// The tool an event is about is the one its matchers see: a tool event's `tool_name`, in
    /// Claude Code's events and Gemini CLI's; no tool for the others, or for a `tool_name`
    /// that is not a string.
    #[test]
    fn the_tool_of_an_event_is_what_its_matchers_see() {
        let event = |name: &str, tool: serde_json::Value| json!({"hook_event_name": name, "tool_name": tool, "tool_input": {}});
        assert_eq!(tool_of(&event("PreToolUse", json!("Bash"))), Some("Bash"));
        assert_eq!(tool_of(&event("PostToolUse", json!("Read"))), Some("Read"));
        assert_eq!(
            tool_of(&event("BeforeTool", json!("run_shell_command"))),
            Some("run_shell_command")
        );
        assert_eq!(
            tool_of(&event("AfterTool", json!("read_file"))),
            Some("read_file")
        );
        assert_eq!(tool_of(&event("UserPromptSubmit", json!("Bash"))), None);
        assert_eq!(tool_of(&event("PreToolUse", json!(7))), None);
        assert_eq!(tool_of(&json!({"hook_event_name": "PreToolUse"})), None);
    }
}
