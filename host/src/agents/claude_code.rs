//! Claude Code (`@anthropic-ai/claude-code`, 2.1.3xx): its 34 hook events and what each runs,
//! its tools by kind, the tool outcome it reports, the replaced output it takes back, and the
//! entry of `.claude/settings.json` that runs a hook (a command, or since 2.1.63 a POST).
//! The wire types it speaks are [`crate::claude_code`]'s. May touch: nothing.

use super::dialect::{AgentApplies, Event, HookDialect, HookTarget, Meaning, Settings};
use crate::claude_code::HookEvent;
use crate::tool_kinds::ToolKind;
use crate::types::{ContentBlock, ToolOutcome};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Claude Code's dialect.
#[derive(Debug)]
pub struct ClaudeCode;

use Meaning as M;

/// Every event, those that run points first, in lifecycle order. Beyond Codex's (but
/// `Interrupt`): a failed tool call (`PostToolUseFailure`), whose result goes where every
/// result goes; the inline shell command of a skill or slash command (`PreSkillShellCommand`),
/// which runs without a `PreToolUse` and is judged as the shell call it is; a turn that ended
/// in an API error (`StopFailure`), which closes the turn as failed and is not waited for; an
/// MCP server's question to the user (`Elicitation`) and the user's answer
/// (`ElicitationResult`); the model request after a batch of tool calls (`PostToolBatch`); a
/// settings file that changed on disk, about to load (`ConfigChange`).
const EVENTS: &[Event] = &[
    Event::new("SessionStart", M::SessionStart),
    Event::new("UserPromptSubmit", M::PromptSubmit),
    Event::new("PreToolUse", M::ToolCall),
    Event::new("PreSkillShellCommand", M::ToolCall),
    Event::new("PermissionRequest", M::PermissionRequest),
    Event::new("Elicitation", M::Elicitation),
    Event::new("PostToolUse", M::ToolResult),
    Event::new("PostToolUseFailure", M::ToolFailure),
    Event::new("ElicitationResult", M::ElicitationResult),
    Event::new("PostToolBatch", M::AfterToolBatch),
    Event::new("ConfigChange", M::ConfigChange),
    Event::new("Stop", M::Stop),
    Event::new("SubagentStop", M::SubagentStop),
    Event::new("StopFailure", M::TurnFailed).unwaited(),
    Event::new("SessionEnd", M::SessionEnd),
    // No point (docs/bridges.md says why, event by event): recorded, but `WorktreeCreate`,
    // whose hook would create the worktree in Claude Code's place.
    Event::new("UserPromptExpansion", M::Observed),
    Event::new("PreModelSwitch", M::Observed),
    Event::new("SubagentStart", M::Observed),
    Event::new("PermissionDenied", M::Observed),
    Event::new("PreCompact", M::Observed),
    Event::new("PostCompact", M::Observed),
    Event::new("PostModelSwitch", M::Observed),
    Event::new("Setup", M::Observed),
    Event::new("InstructionsLoaded", M::Observed),
    Event::new("TaskCreated", M::Observed),
    Event::new("TaskCompleted", M::Observed),
    Event::new("TeammateIdle", M::Observed),
    Event::new("DirectoryAdded", M::Observed),
    Event::new("CwdChanged", M::Observed),
    Event::new("FileChanged", M::Observed),
    Event::new("WorktreeCreate", M::Unmapped),
    Event::new("WorktreeRemove", M::Observed),
    Event::new("Notification", M::Observed),
    Event::new("MessageDisplay", M::Observed),
];

const TOOLS: &[(ToolKind, &[&str])] = &[
    (ToolKind::Shell, &["Bash", "PowerShell", "Monitor"]),
    (ToolKind::FileRead, &["Read"]),
    (
        ToolKind::FileWrite,
        &["Write", "Edit", "MultiEdit", "NotebookEdit"],
    ),
    (ToolKind::Search, &["Glob", "Grep", "LS"]),
    (ToolKind::Web, &["WebFetch", "WebSearch"]),
    (ToolKind::Mcp, &["mcp__.+"]),
    (ToolKind::Subagent, &["Agent", "Task", "SendMessage"]),
];

/// The events that run no `http` hook: only command hooks reach them.
const COMMAND_ONLY: &[&str] = &["SessionStart", "Setup"];

impl HookDialect for ClaudeCode {
    fn name(&self) -> &'static str {
        "claude-code"
    }

    fn title(&self) -> &'static str {
        "Claude Code"
    }

    fn events(&self) -> &'static [Event] {
        EVENTS
    }

    fn tools(&self) -> &'static [(ToolKind, &'static [&'static str])] {
        TOOLS
    }

    /// A failed call's `error` is its result (Claude Code sends the message alone).
    fn outcome(&self, meaning: Meaning, input: &HookEvent) -> ToolOutcome {
        match meaning {
            Meaning::ToolFailure => ToolOutcome::error(
                input
                    .other
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("the tool failed"),
            ),
            _ => outcome(input),
        }
    }

    /// Only the tool's own output shape is taken back replaced: a text, or a shell's
    /// `stdout`/`stderr`.
    fn applies(&self, response: Option<&Value>) -> AgentApplies {
        match response.is_some_and(carries_back) {
            true => AgentApplies::Replacements,
            false => AgentApplies::Feedback,
        }
    }

    /// A text for a text; a shell's output with `text` as its `stdout` (and no `stderr`).
    fn carried_back(&self, response: &Value, text: &str) -> Option<Value> {
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

    fn settings(&self) -> Settings {
        Settings {
            file: ".claude/settings.json",
            mergeable: true,
            http_hooks: Some(("claude", (2, 1, 63))),
            note: None,
        }
    }

    fn hook_entry(
        &self,
        event: &Event,
        target: HookTarget<'_>,
        timeout_secs: u64,
    ) -> Option<Value> {
        let on_failure = on_failure(event.meaning);
        let handler = match target {
            HookTarget::Command(command) => Handler::Command {
                command: command.into(),
                timeout: Some(timeout_secs),
                on_failure,
            },
            HookTarget::Http { .. } if COMMAND_ONLY.contains(&event.name) => return None,
            HookTarget::Http { url, token_var } => Handler::Http {
                url: url.into(),
                headers: [(
                    "Authorization".to_string(),
                    format!("Bearer ${{{token_var}}}"),
                )]
                .into_iter()
                .collect(),
                allowed_env_vars: vec![token_var.to_string()],
                timeout: Some(timeout_secs),
                on_failure,
            },
        };
        let entry = SettingsEntry {
            matcher: every_tool(event.meaning),
            hooks: vec![handler],
        };
        serde_json::to_value(entry).ok()
    }
}

/// The matcher of an entry: every tool (`*`) on an event about a tool, none elsewhere.
/// Palisade's own matchers decide which hooks run.
pub(super) fn every_tool(meaning: Meaning) -> Option<String> {
    (meaning.names_a_tool() || meaning.tool().is_some()).then(|| "*".to_string())
}

/// What Claude Code makes of the hook's failure (a crash, a timeout, no answer): `block`
/// counts it as exit status 2, so what the event guards is blocked, or the model reads that
/// the result's checks could not run. Not at a stop (blocking there would keep the agent
/// going), nor at the session events, which guard nothing.
fn on_failure(meaning: Meaning) -> Option<String> {
    (meaning.guards() || meaning.reports_a_result()).then(|| "block".to_string())
}

/// The tool's outcome as Claude Code (or Codex) reports it: Codex sends a string, Claude Code
/// an object (for its shell, `stdout` / `stderr`, which become the text).
pub(super) fn outcome(input: &HookEvent) -> ToolOutcome {
    let response = input.tool_response.clone().unwrap_or(Value::Null);
    let content_blocks = match &response {
        Value::String(s) => vec![ContentBlock::Text { text: s.clone() }],
        Value::Object(o) if o.get("stdout").is_some_and(Value::is_string) => {
            let stdout = o["stdout"].as_str().unwrap_or_default();
            let stderr = o.get("stderr").and_then(Value::as_str).unwrap_or_default();
            let text = match (stdout.is_empty(), stderr.is_empty()) {
                (_, true) => stdout.to_string(),
                (true, false) => stderr.to_string(),
                (false, false) => format!("{stdout}\n{stderr}"),
            };
            vec![ContentBlock::Text { text }]
        }
        Value::Null => vec![],
        other => vec![ContentBlock::Json {
            value: other.clone(),
        }],
    };
    ToolOutcome {
        content_blocks,
        is_error: false,
        value: (!response.is_null()).then_some(response),
    }
}

/// Whether Claude Code takes a replacement of `response`'s shape.
fn carries_back(response: &Value) -> bool {
    match response {
        Value::String(_) => true,
        Value::Object(fields) => fields.get("stdout").is_some_and(Value::is_string),
        _ => false,
    }
}

/// One entry of a settings file's `hooks.<Event>` list: the hooks to run for the tools that
/// `matcher` matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingsEntry {
    /// Which tools (a regex; `*` for all); only on the tool events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// The hooks.
    pub hooks: Vec<Handler>,
}

/// A hook in a settings file: a command, or (Claude Code 2.1.63 and later) a POST to a URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Handler {
    /// A command the agent runs with the event on its stdin.
    Command {
        /// The shell command.
        command: String,
        /// The agent's timeout for it, in seconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout: Option<u64>,
        /// `block`: the hook's failure blocks what the event guards, or tells the model the
        /// result's checks could not run;
        /// Claude Code's default, `continue`, lets it proceed.
        #[serde(rename = "onFailure", default, skip_serializing_if = "Option::is_none")]
        on_failure: Option<String>,
    },
    /// A POST of the event to `url` (Claude Code's `http` hook): the body of a 2xx answer is
    /// read as a command's stdout; anything else is the hook's failure.
    Http {
        /// Where the event goes.
        url: String,
        /// Headers sent with it; `${VAR}` is the environment variable `VAR`, when
        /// `allowed_env_vars` names it.
        headers: std::collections::BTreeMap<String, String>,
        /// The environment variables the headers may name.
        #[serde(rename = "allowedEnvVars")]
        allowed_env_vars: Vec<String>,
        /// The agent's timeout for it, in seconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout: Option<u64>,
        /// As a command's.
        #[serde(rename = "onFailure", default, skip_serializing_if = "Option::is_none")]
        on_failure: Option<String>,
    },
}
