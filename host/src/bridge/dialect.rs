//! Which agent's hook protocol a bridge speaks, and what each agent applies of a hook's answer.

use super::fields::carries_back;
use crate::lifecycle::AgentApplies;
use serde_json::Value;

/// Which agent's hook protocol to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Dialect {
    /// Claude Code (`@anthropic-ai/claude-code`).
    ClaudeCode,
    /// Codex (`@openai/codex`): `PreToolUse` honours only `deny`; `tool_response` is a string.
    Codex,
    /// Gemini CLI (`@google/gemini-cli`): Claude Code's events under its own names, answered
    /// in its own fields (see [`crate::gemini`]).
    Gemini,
}

impl Dialect {
    /// Its name in a recording (`agent_event`'s `dialect`): `claude-code`, `codex`, `gemini`.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::ClaudeCode => "claude-code",
            Dialect::Codex => "codex",
            Dialect::Gemini => "gemini",
        }
    }

    /// How much of `post-tool`'s answer the agent applies to its own tools: Gemini CLI's
    /// model reads a block's feedback instead of the result; Claude Code's and Codex's read it
    /// beside the result. Only Claude Code takes a replaced result (`updatedToolOutput`), and
    /// only in the tool's own output shape: a text, or a shell's `stdout`/`stderr`
    /// (`carries_back`), so `response` (the tool's own) decides.
    pub fn applies(self, response: Option<&Value>) -> AgentApplies {
        match self {
            Dialect::Gemini => AgentApplies::Blocks,
            Dialect::ClaudeCode if response.is_some_and(carries_back) => AgentApplies::Replacements,
            Dialect::ClaudeCode | Dialect::Codex => AgentApplies::Feedback,
        }
    }

    /// The agent's hook events that run points, in lifecycle order: what `install` registers
    /// (of them, those whose points the plugins have hooks on) and what `serve` answers.
    pub fn events(self) -> &'static [&'static str] {
        match self {
            Dialect::ClaudeCode => &CLAUDE_CODE_EVENTS,
            Dialect::Codex => &CODEX_EVENTS,
            Dialect::Gemini => &crate::gemini::EVENTS,
        }
    }

    /// Every dialect.
    pub const ALL: [Dialect; 3] = [Dialect::ClaudeCode, Dialect::Codex, Dialect::Gemini];

    /// The dialect a recording names.
    pub fn from_name(name: &str) -> Option<Dialect> {
        match name {
            "claude-code" => Some(Dialect::ClaudeCode),
            "codex" => Some(Dialect::Codex),
            "gemini" => Some(Dialect::Gemini),
            _ => None,
        }
    }
}

/// Claude Code's events that run points ([`Dialect::events`]), in lifecycle order: beyond
/// Codex's (but `Interrupt`), a failed tool call (`PostToolUseFailure`), whose result goes
/// where every result goes; the inline shell command of a skill or slash command
/// (`PreSkillShellCommand`), which runs without a `PreToolUse` and is judged as the shell call
/// it is; a turn that ended in an API error (`StopFailure`), which closes the turn as failed;
/// an MCP server's question to the user (`Elicitation`), judged as a call of
/// `elicitation/create`, and the user's answer (`ElicitationResult`), as that call's result;
/// the model request after a batch of tool calls (`PostToolBatch`), a tool continuation's
/// pre-step.
pub const CLAUDE_CODE_EVENTS: [&str; 14] = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PreSkillShellCommand",
    "PermissionRequest",
    "Elicitation",
    "PostToolUse",
    "PostToolUseFailure",
    "ElicitationResult",
    "PostToolBatch",
    "Stop",
    "SubagentStop",
    "StopFailure",
    "SessionEnd",
];

/// Codex's events that run points ([`Dialect::events`]), in lifecycle order: those both agents
/// have, and a turn its user interrupted (`Interrupt`), which closes the turn as interrupted.
pub const CODEX_EVENTS: [&str; 9] = [
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PermissionRequest",
    "PostToolUse",
    "Stop",
    "SubagentStop",
    "Interrupt",
    "SessionEnd",
];
