//! The hook entries `palisade install` writes into an agent's settings file: Claude Code's
//! and Codex's (`hooks.<Event>`, a timeout in seconds) and Gemini CLI's (its own shape, a
//! named hook, a timeout in milliseconds). May touch: nothing; `install` writes them.

use serde::{Deserialize, Serialize};

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
        /// What Claude Code makes of the hook's failure (a crash, a timeout, no answer):
        /// `block` counts it as exit status 2, so the action the event guards is blocked;
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

/// The Claude Code events at which a failed hook process blocks what the event guards (the
/// tool call, the prompt, an MCP server's question) or tells the model the result's checks
/// could not run. Not `Stop` or `SubagentStop` (blocking there would keep the agent going),
/// nor the session events, which guard nothing.
pub const BLOCK_ON_FAILURE: &[&str] = &[
    "PreToolUse",
    "PreSkillShellCommand",
    "PermissionRequest",
    "PostToolUse",
    "PostToolUseFailure",
    "UserPromptSubmit",
    "Elicitation",
    "ElicitationResult",
];

/// The Claude Code events that do not run `http` hooks: only command hooks reach them.
pub const COMMAND_ONLY: &[&str] = &["SessionStart", "Setup"];

impl SettingsEntry {
    /// An entry that runs `command` on `event` (for every tool, on a tool event), with the
    /// agent's timeout `timeout_secs`; its failure blocks where [`BLOCK_ON_FAILURE`] says.
    pub fn command(event: &str, command: &str, timeout_secs: u64) -> SettingsEntry {
        SettingsEntry::of(
            event,
            Handler::Command {
                command: command.into(),
                timeout: Some(timeout_secs),
                on_failure: on_failure(event),
            },
        )
    }

    /// An entry that POSTs `event` to `url` with the bearer token of the environment
    /// variable `token_var`, as [`SettingsEntry::command`] runs a command.
    pub fn http(event: &str, url: &str, token_var: &str, timeout_secs: u64) -> SettingsEntry {
        let headers = [(
            "Authorization".to_string(),
            format!("Bearer ${{{token_var}}}"),
        )];
        SettingsEntry::of(
            event,
            Handler::Http {
                url: url.into(),
                headers: headers.into_iter().collect(),
                allowed_env_vars: vec![token_var.to_string()],
                timeout: Some(timeout_secs),
                on_failure: on_failure(event),
            },
        )
    }

    fn of(event: &str, handler: Handler) -> SettingsEntry {
        SettingsEntry {
            matcher: matches!(
                event,
                "PreToolUse"
                    | "PreSkillShellCommand"
                    | "PermissionRequest"
                    | "PostToolUse"
                    | "PostToolUseFailure"
                    | "Elicitation"
                    | "ElicitationResult"
            )
            .then(|| "*".to_string()),
            hooks: vec![handler],
        }
    }
}

fn on_failure(event: &str) -> Option<String> {
    BLOCK_ON_FAILURE
        .contains(&event)
        .then(|| "block".to_string())
}

/// One entry of Gemini's `hooks.<Event>` list in its settings.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeminiSettingsEntry {
    /// Which tools (a regex, unanchored; `*` for all); only on the tool events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// The hooks.
    pub hooks: Vec<GeminiCommandHook>,
}

/// A hook command in Gemini's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GeminiCommandHook {
    /// Always `command`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its name, shown by Gemini and used to disable it.
    pub name: String,
    /// The shell command.
    pub command: String,
    /// Gemini's timeout for it, in milliseconds.
    pub timeout: u64,
}

impl GeminiSettingsEntry {
    /// An entry that runs `command` on `event` (for every tool, on a tool event), with
    /// Gemini's timeout `timeout_ms`.
    pub fn command(event: &str, command: &str, timeout_ms: u64) -> GeminiSettingsEntry {
        GeminiSettingsEntry {
            matcher: matches!(event, "BeforeTool" | "AfterTool").then(|| "*".to_string()),
            hooks: vec![GeminiCommandHook {
                kind: "command".into(),
                name: "palisade".into(),
                command: command.into(),
                timeout: timeout_ms,
            }],
        }
    }
}
