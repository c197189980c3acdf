//! Codex (`@openai/codex`, 0.17x): its 12 hook events, in Claude Code's fields; its tools by
//! kind (`apply_patch` is a file write); a `PreToolUse` answer honours only `deny`, so an ask
//! cannot be carried; `tool_response` is a string; its hooks live in `config.toml`, whose
//! snippet `install` prints. May touch: nothing.

use super::dialect::{AgentApplies, Event, HookDialect, HookTarget, Meaning, Settings};
use crate::claude_code::HookEvent;
use crate::tool_kinds::ToolKind;
use crate::types::ToolOutcome;
use serde_json::{Value, json};

/// Codex's dialect.
#[derive(Debug)]
pub struct Codex;

use Meaning as M;

/// Every event, those that run points first: those Claude Code has too, and a turn its user
/// interrupted (`Interrupt`), which closes the turn as interrupted.
const EVENTS: &[Event] = &[
    Event::new("SessionStart", M::SessionStart),
    Event::new("UserPromptSubmit", M::PromptSubmit),
    Event::new("PreToolUse", M::ToolCall),
    Event::new("PermissionRequest", M::PermissionRequest),
    Event::new("PostToolUse", M::ToolResult),
    Event::new("Stop", M::Stop),
    Event::new("SubagentStop", M::SubagentStop),
    Event::new("Interrupt", M::TurnInterrupted),
    Event::new("SessionEnd", M::SessionEnd),
    // No point (docs/bridges.md says why): recorded.
    Event::new("SubagentStart", M::Observed),
    Event::new("PreCompact", M::Observed),
    Event::new("PostCompact", M::Observed),
];

/// Its hooks see a shell call as `Bash`, as Claude Code's do.
const TOOLS: &[(ToolKind, &[&str])] = &[
    (
        ToolKind::Shell,
        &[
            "Bash",
            "shell",
            "shell_command",
            "exec_command",
            "local_shell",
        ],
    ),
    (ToolKind::FileWrite, &["apply_patch"]),
    (ToolKind::Mcp, &["mcp__.+"]),
    (ToolKind::Subagent, &["spawn_agent"]),
];

impl HookDialect for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn title(&self) -> &'static str {
        "Codex"
    }

    fn events(&self) -> &'static [Event] {
        EVENTS
    }

    fn tools(&self) -> &'static [(ToolKind, &'static [&'static str])] {
        TOOLS
    }

    /// A hook's `ask` fails in Codex, and the tool runs: an ask is answered as a denial that
    /// says approval was needed.
    fn can_ask(&self) -> bool {
        false
    }

    fn outcome(&self, _meaning: Meaning, input: &HookEvent) -> ToolOutcome {
        super::claude_code::outcome(input)
    }

    /// A block is read beside the result; a replacement is refused (`updatedMCPToolOutput`).
    fn applies(&self, _response: Option<&Value>) -> AgentApplies {
        AgentApplies::Feedback
    }

    fn settings(&self) -> Settings {
        Settings {
            file: "$CODEX_HOME/config.toml",
            mergeable: false,
            http_hooks: None,
            note: Some("Codex runs only trusted hooks: trust them when it asks"),
        }
    }

    /// A command for every tool (no matcher: Palisade's own matchers decide).
    fn hook_entry(
        &self,
        _event: &Event,
        target: HookTarget<'_>,
        timeout_secs: u64,
    ) -> Option<Value> {
        let HookTarget::Command(command) = target else {
            return None;
        };
        Some(
            json!({ "hooks": [{ "type": "command", "command": command, "timeout": timeout_secs }] }),
        )
    }

    /// `config.toml`'s tables: `[[hooks.<Event>]]` with its `[[hooks.<Event>.hooks]]`.
    fn snippet(&self, hooks: &serde_json::Map<String, Value>) -> String {
        let hooks = json!({ "hooks": hooks });
        toml::to_string(&hooks).unwrap_or_default()
    }
}
