//! What an agent module says about its agent: the [`HookDialect`] trait, the meanings a hook
//! event can have for Palisade ([`Meaning`]), and the answer a bridge gives. May touch:
//! nothing; data and pure functions over the hook wire's types.

use crate::claude_code::{HookAnswer, HookEvent};
use crate::point::Point;
use crate::tool_kinds::ToolKind;
use crate::types::ToolOutcome;
use serde_json::Value;

/// What a hook event means to Palisade: the lifecycle call a bridge makes for it
/// (`docs/bridges.md`, "What each event runs"). Each agent's table gives every event of its
/// surface one of these; [`Meaning::Observed`] and [`Meaning::Unmapped`] run nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Meaning {
    /// The session starts (or resumes): session-start.
    SessionStart,
    /// The user submits a prompt: prompt-submit, then message-committed.
    PromptSubmit,
    /// A tool call is about to run: tool-call-committed, pre-tool, tool-guard. Also a skill's
    /// inline shell command, which comes with no tool event of its own.
    ToolCall,
    /// The agent is about to ask its user to approve a call: tool-guard again.
    PermissionRequest,
    /// A tool returned: post-tool, tool-result, tool-result-committed.
    ToolResult,
    /// A tool failed: the same points, over its error.
    ToolFailure,
    /// An MCP server asks the user a question: the tool step over a call of
    /// `elicitation/create`.
    Elicitation,
    /// The user's answer to that question: that call's result.
    ElicitationResult,
    /// A settings file changed on disk and is about to load into the session: the tool step
    /// over a call of `config/change` (its `source` and `file_path`).
    ConfigChange,
    /// Every model request of a turn: from the second on, a continuation step's prompt-submit.
    ModelRequest,
    /// The model request after a batch of tool calls: a continuation step's prompt-submit.
    AfterToolBatch,
    /// The agent would stop: turn-stopping, then turn-completed.
    Stop,
    /// A sub-agent would stop: turn-stopping.
    SubagentStop,
    /// The turn ended in an error, with no stop: turn-completed, failed.
    TurnFailed,
    /// The user interrupted the turn: turn-completed, interrupted.
    TurnInterrupted,
    /// The session ends: session-ended.
    SessionEnd,
    /// No Palisade point: the agent reports it, and the bridge records it in the audit log
    /// (an `agent_event` line) and answers nothing. `install --observe` registers it.
    Observed,
    /// No Palisade point, and never registered: a hook there would change what the agent does
    /// (Claude Code's `WorktreeCreate` takes the hook's output for the worktree), or costs a
    /// process per streamed chunk; or an event the agent's table does not know. Answered
    /// with nothing.
    Unmapped,
}

/// The tool an MCP server's question to the user is judged as, at every front door: MCP's and
/// ACP's method for it.
pub const ELICITATION: &str = "elicitation/create";

/// The tool a settings change about to load is judged as ([`Meaning::ConfigChange`]).
pub const CONFIG_CHANGE: &str = "config/change";

impl Meaning {
    /// The canonical points the event runs, in order (none for [`Meaning::Unmapped`]).
    pub fn points(self) -> &'static [Point] {
        const TOOL_STEP: &[Point] = &[Point::ToolCallCommitted, Point::PreTool, Point::ToolGuard];
        const RESULT: &[Point] = &[
            Point::PostTool,
            Point::ToolResult,
            Point::ToolResultCommitted,
        ];
        match self {
            Meaning::SessionStart => &[Point::SessionStart],
            // A rejected prompt closes its turn, blocked.
            Meaning::PromptSubmit => &[
                Point::PromptSubmit,
                Point::MessageCommitted,
                Point::TurnCompleted,
            ],
            Meaning::ToolCall | Meaning::Elicitation | Meaning::ConfigChange => TOOL_STEP,
            Meaning::ToolResult | Meaning::ToolFailure | Meaning::ElicitationResult => RESULT,
            Meaning::PermissionRequest => &[Point::ToolGuard],
            // A continuation step's prompt-submit; its reject closes the turn, but an observer
            // of turn-completed alone needs no process per model request.
            Meaning::ModelRequest | Meaning::AfterToolBatch => &[Point::PromptSubmit],
            Meaning::Stop => &[Point::TurnStopping, Point::TurnCompleted],
            Meaning::SubagentStop => &[Point::TurnStopping],
            Meaning::TurnFailed | Meaning::TurnInterrupted => &[Point::TurnCompleted],
            Meaning::SessionEnd => &[Point::SessionEnded],
            Meaning::Observed | Meaning::Unmapped => &[],
        }
    }

    /// Whether the event guards something — a tool call, a prompt, a model request, an MCP
    /// server's question or the answer to one — so that a bridge that cannot do its work
    /// refuses it: an unguarded action is worse than a refused one. Elsewhere a refusal would
    /// mean "keep going" (a stop), or guard nothing.
    pub fn guards(self) -> bool {
        matches!(
            self,
            Meaning::ToolCall
                | Meaning::PermissionRequest
                | Meaning::PromptSubmit
                | Meaning::Elicitation
                | Meaning::ElicitationResult
                | Meaning::ConfigChange
                | Meaning::ModelRequest
                | Meaning::AfterToolBatch
        )
    }

    /// Whether the event carries a tool's result, whose checks a bridge that cannot work
    /// must say did not run (a post-tool guard is never skipped silently).
    pub fn reports_a_result(self) -> bool {
        matches!(self, Meaning::ToolResult | Meaning::ToolFailure)
    }

    /// The tool the event is always about, whatever its input says: `elicitation/create`,
    /// `config/change`.
    pub fn tool(self) -> Option<&'static str> {
        match self {
            Meaning::Elicitation | Meaning::ElicitationResult => Some(ELICITATION),
            Meaning::ConfigChange => Some(CONFIG_CHANGE),
            _ => None,
        }
    }

    /// Whether the event's input names the tool it is about (`tool_name`).
    pub fn names_a_tool(self) -> bool {
        matches!(
            self,
            Meaning::ToolCall
                | Meaning::PermissionRequest
                | Meaning::ToolResult
                | Meaning::ToolFailure
        )
    }
}

/// One hook event of an agent: its name, what it means, and whether the agent waits for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// The agent's name for it (`hook_event_name`).
    pub name: &'static str,
    /// What it runs.
    pub meaning: Meaning,
    /// Whether the agent waits for the answer. One it does not wait for (fire and forget)
    /// ends the hook when it exits, so a bridge process for it lets nothing but its own
    /// budget end it, and what the event commits is committed.
    pub waited: bool,
}

impl Event {
    /// An event the agent waits for.
    pub const fn new(name: &'static str, meaning: Meaning) -> Event {
        Event {
            name,
            meaning,
            waited: true,
        }
    }

    /// The same, for an event the agent does not wait for.
    pub const fn unwaited(self) -> Event {
        Event {
            waited: false,
            ..self
        }
    }
}

/// A hook command's answer on stdout, in its agent's fields.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Answer {
    /// Claude Code's (and Codex's) fields.
    ClaudeCode(HookAnswer),
    /// An answer in an agent's own fields: as its module renders it (Gemini CLI's), or as
    /// another Palisade composed it (what `palisade forward` relays of `palisade serve`'s).
    Json(Value),
}

/// How much of `post-tool`'s answer an agent applies to a tool it ran itself
/// ([`Lifecycle::tool_reported`](crate::Lifecycle::tool_reported)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AgentApplies {
    /// Nothing changes the result its model reads: a block reaches the model as feedback
    /// beside the result, a replacement not at all (Claude Code, Codex).
    Feedback,
    /// A block replaces the result with its feedback; a replacement is not carried back
    /// (Gemini CLI).
    Blocks,
    /// A replacement reaches the model; a block reaches it as feedback beside the result
    /// (Claude Code, for a result whose shape it can carry back).
    Replacements,
}

/// What a hook entry in the agent's settings runs.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum HookTarget<'a> {
    /// A shell command, with the event on its stdin.
    Command(&'a str),
    /// A POST of the event to `url`, with the bearer token of the environment variable
    /// `token_var`.
    Http {
        /// Where the event goes.
        url: &'a str,
        /// The variable that holds the token.
        token_var: &'a str,
    },
}

/// Where an agent keeps its hooks, for `palisade install`.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// The settings file, for people (`.claude/settings.json`).
    pub file: &'static str,
    /// Whether `install` can merge into it (a JSON file with a `hooks` object); otherwise it
    /// prints the snippet ([`HookDialect::snippet`]) to add by hand.
    pub mergeable: bool,
    /// The agent's program and the first version that runs `http` hooks, if any does.
    pub http_hooks: Option<(&'static str, (u64, u64, u64))>,
    /// What the user must do besides (trust the hooks, say), if anything.
    pub note: Option<&'static str>,
}

/// One agent's hook protocol: everything a bridge, `serve`, `install` and a matcher need to
/// know about it. Its fields are Claude Code's (which Codex and Gemini CLI copy):
/// [`HookDialect::read`] brings an agent's own into them, and [`HookDialect::render`] takes
/// an answer back into the agent's.
pub trait HookDialect: Send + Sync + 'static {
    /// Its name in commands, routes and recordings (`claude-code`).
    fn name(&self) -> &'static str;

    /// Its name for people (`Claude Code`).
    fn title(&self) -> &'static str;

    /// Every hook event of its current surface, in lifecycle order.
    fn events(&self) -> &'static [Event];

    /// Its tools' names by kind (a name ending `.+` is a prefix).
    fn tools(&self) -> &'static [(ToolKind, &'static [&'static str])];

    /// Whether a hook's answer can make it ask its user (else an ask is a denial).
    fn can_ask(&self) -> bool {
        true
    }

    /// Brings an event's fields into Claude Code's, where the agent names them otherwise.
    fn read(&self, _input: &mut HookEvent) {}

    /// The outcome a tool event (of `meaning`) reports.
    fn outcome(&self, meaning: Meaning, input: &HookEvent) -> ToolOutcome;

    /// How much of `post-tool`'s answer it applies to a tool whose own output was `response`.
    fn applies(&self, response: Option<&Value>) -> AgentApplies;

    /// A replaced result, `text`, in the shape of the tool's own output `response`, where
    /// [`HookDialect::applies`] says the agent takes replacements: `None` where it takes none
    /// of that shape.
    fn carried_back(&self, _response: &Value, _text: &str) -> Option<Value> {
        None
    }

    /// The answer to its `event`, in its fields.
    fn render(&self, _event: &str, answer: HookAnswer) -> Answer {
        Answer::ClaudeCode(answer)
    }

    /// Where it keeps its hooks.
    fn settings(&self) -> Settings;

    /// Its settings' entry for `event` running `target`, with its own timeout past
    /// `timeout_secs`; `None` where it runs no such hook there.
    fn hook_entry(&self, event: &Event, target: HookTarget<'_>, timeout_secs: u64)
    -> Option<Value>;

    /// The text a user adds to its settings for `hooks` (event → list of entries), where
    /// `install` cannot merge them.
    fn snippet(&self, hooks: &serde_json::Map<String, Value>) -> String {
        let hooks = serde_json::json!({ "hooks": hooks });
        serde_json::to_string_pretty(&hooks).unwrap_or_default()
    }
}
