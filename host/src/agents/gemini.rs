//! Gemini CLI's hook protocol (`@google/gemini-cli`, 0.6x): its 11 event names, its tools by
//! kind, the tool result it reports, the answer it reads, and the settings entry that registers
//! a hook command. May touch: nothing.
//!
//! Gemini CLI's hooks copy Claude Code's under other names, so each Gemini event means what the
//! Claude Code event of the same meaning does, runs the same points, and the answer is
//! rendered in Gemini's fields:
//!
//! | Gemini event | runs as | a decision is answered as |
//! |---|---|---|
//! | `SessionStart` | `SessionStart` | `hookSpecificOutput.additionalContext` |
//! | `BeforeAgent` | `UserPromptSubmit` | `decision: "block"` + `reason`; contexts as above |
//! | `BeforeTool` | `PreToolUse` | `decision: "deny"` / `"ask"` + `reason` |
//! | `AfterTool` | `PostToolUse` | `decision: "block"` + `reason` (the model reads the reason instead of the result) |
//! | `AfterAgent` | `Stop` | `decision: "block"` + `reason`: the steering, sent as the next user message |
//! | `SessionEnd` | `SessionEnd` | nothing |
//! | `BeforeModel` | a continuation step's `prompt-submit` (Gemini's own) | `decision: "block"` + `reason` |
//! | `AfterModel`, `BeforeToolSelection`, `PreCompress`, `Notification` | none | nothing |
//!
//! Gemini CLI lets a tool run on anything but a clear answer — a hook that times out, crashes,
//! exits 2 with an empty stderr, or prints plain text with exit 0 or 1 — so every denial is a
//! JSON answer, and the bridge's own failure at a guarding event exits 2 with its reason on
//! stderr, which Gemini reads as a denial.

use super::claude_code::every_tool;
use super::dialect::{AgentApplies, Answer, Event, HookDialect, HookTarget, Meaning, Settings};
use crate::claude_code::{Decision, HookAnswer, HookEvent, Permission};
use crate::tool_kinds::ToolKind;
use crate::types::{ContentBlock, ToolOutcome};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Gemini CLI's dialect.
#[derive(Debug)]
pub struct Gemini;

use Meaning as M;

/// Every event, those that run points first, in lifecycle order.
const EVENTS: &[Event] = &[
    Event::new("SessionStart", M::SessionStart),
    Event::new("BeforeAgent", M::PromptSubmit),
    Event::new("BeforeModel", M::ModelRequest),
    Event::new("BeforeTool", M::ToolCall),
    Event::new("AfterTool", M::ToolResult),
    Event::new("AfterAgent", M::Stop),
    Event::new("SessionEnd", M::SessionEnd),
    // No point, by design (docs/bridges.md says why): `AfterModel` comes once per streamed
    // chunk, and any answer to `BeforeToolSelection` changes the tools offered; the others
    // are recorded.
    Event::new("AfterModel", M::Unmapped),
    Event::new("BeforeToolSelection", M::Unmapped),
    Event::new("PreCompress", M::Observed),
    Event::new("Notification", M::Observed),
];

const TOOLS: &[(ToolKind, &[&str])] = &[
    (ToolKind::Shell, &["run_shell_command"]),
    (ToolKind::FileRead, &["read_file", "read_many_files"]),
    (ToolKind::FileWrite, &["write_file", "replace"]),
    (
        ToolKind::Search,
        &["glob", "grep_search", "list_directory", "list_dir"],
    ),
    (ToolKind::Web, &["web_fetch", "google_web_search"]),
    (ToolKind::Mcp, &["mcp_.+"]),
    (ToolKind::Subagent, &["invoke_agent"]),
];

impl HookDialect for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn title(&self) -> &'static str {
        "Gemini CLI"
    }

    fn events(&self) -> &'static [Event] {
        EVENTS
    }

    fn tools(&self) -> &'static [(ToolKind, &'static [&'static str])] {
        TOOLS
    }

    /// `AfterAgent`'s answer text (`prompt_response`) is the last assistant message.
    fn read(&self, input: &mut HookEvent) {
        if input.last_assistant_message.is_none()
            && let Some(Value::String(said)) = input.other.get("prompt_response")
        {
            input.last_assistant_message = Some(said.clone());
        }
    }

    fn outcome(&self, _meaning: Meaning, input: &HookEvent) -> ToolOutcome {
        outcome(input.tool_response.as_ref())
    }

    /// Its model reads a block's feedback instead of the result; a replacement is not taken.
    fn applies(&self, _response: Option<&Value>) -> AgentApplies {
        AgentApplies::Blocks
    }

    fn render(&self, event: &str, answer: HookAnswer) -> Answer {
        let answer = GeminiAnswer::from_claude(event, &answer);
        Answer::Json(serde_json::to_value(answer).unwrap_or_default())
    }

    fn settings(&self) -> Settings {
        Settings {
            file: "~/.gemini/settings.json (or a project's .gemini/settings.json)",
            mergeable: true,
            http_hooks: None,
            note: Some(
                "Gemini CLI runs hooks only in a trusted folder: trust the project when it asks \
                 (or pass --skip-trust)",
            ),
        }
    }

    /// A named command hook, with Gemini's timeout in milliseconds; Gemini runs no other kind.
    fn hook_entry(
        &self,
        event: &Event,
        target: HookTarget<'_>,
        timeout_secs: u64,
    ) -> Option<Value> {
        let HookTarget::Command(command) = target else {
            return None;
        };
        let entry = GeminiSettingsEntry {
            matcher: every_tool(event.meaning),
            hooks: vec![GeminiCommandHook {
                kind: "command".into(),
                name: "palisade".into(),
                command: command.into(),
                timeout: timeout_secs * 1000,
            }],
        };
        serde_json::to_value(entry).ok()
    }
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

/// Gemini's answer to a hook event. Only these fields: anything else is refused when read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GeminiAnswer {
    /// `deny` / `block` (equivalent), `ask`, or `allow` (no objection).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<GeminiDecision>,
    /// Why, with the decision: what the model (or, for `BeforeAgent`, the user) reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `false` stops the agent's loop.
    #[serde(rename = "continue", default, skip_serializing_if = "Option::is_none")]
    pub keep_going: Option<bool>,
    /// Why the agent stops, with `continue: false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// A message for the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_message: Option<String>,
    /// Hide the hook's output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppress_output: Option<bool>,
    /// The event's own answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_specific_output: Option<GeminiSpecificOutput>,
}

/// [`GeminiAnswer::decision`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GeminiDecision {
    /// No objection.
    Allow,
    /// Refuse the tool call.
    Deny,
    /// Refuse the prompt, the tool's result, or (at `AfterAgent`) the stop.
    Block,
    /// Have the user confirm the tool call.
    Ask,
}

/// The event-specific part of a [`GeminiAnswer`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GeminiSpecificOutput {
    /// The event answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_event_name: Option<String>,
    /// Context for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<String>,
}

impl GeminiAnswer {
    /// The answer to Gemini's `event` that means what `answer` means to Claude Code.
    pub fn from_claude(event: &str, answer: &HookAnswer) -> GeminiAnswer {
        let specific = answer.hook_specific_output.as_ref();
        let permission = specific.and_then(|s| s.permission_decision);
        let (decision, reason) = match (permission, answer.decision) {
            (Some(Permission::Deny), _) => (
                Some(GeminiDecision::Deny),
                specific.and_then(|s| s.permission_decision_reason.clone()),
            ),
            (Some(Permission::Ask), _) => (
                Some(GeminiDecision::Ask),
                specific.and_then(|s| s.permission_decision_reason.clone()),
            ),
            (_, Some(Decision::Block)) => (Some(GeminiDecision::Block), answer.reason.clone()),
            _ => (None, None),
        };
        let context = specific.and_then(|s| s.additional_context.clone());
        GeminiAnswer {
            decision,
            reason,
            keep_going: answer.keep_going,
            stop_reason: answer.stop_reason.clone(),
            system_message: answer.system_message.clone(),
            suppress_output: answer.suppress_output,
            hook_specific_output: context.map(|context| GeminiSpecificOutput {
                hook_event_name: Some(event.to_string()),
                additional_context: Some(context),
            }),
        }
    }
}

/// The outcome `AfterTool` reports: `tool_response` is `{llmContent, returnDisplay, error?}`,
/// where `llmContent` — what the model is given — is a text or a list of content parts.
fn outcome(response: Option<&Value>) -> ToolOutcome {
    let response = response.cloned().unwrap_or(Value::Null);
    let content_blocks = match response.get("llmContent") {
        Some(Value::String(text)) => vec![ContentBlock::Text { text: text.clone() }],
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|part| match part.get("text").and_then(Value::as_str) {
                Some(text) => ContentBlock::Text {
                    text: text.to_string(),
                },
                None => ContentBlock::Json {
                    value: part.clone(),
                },
            })
            .collect(),
        Some(Value::Null) | None => Vec::new(),
        Some(other) => vec![ContentBlock::Json {
            value: other.clone(),
        }],
    };
    ToolOutcome {
        content_blocks,
        is_error: response.get("error").is_some_and(|e| !e.is_null()),
        value: (!response.is_null()).then_some(response),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claude_answers_become_what_gemini_reads() {
        let deny = HookAnswer::permission(Permission::Deny, "no");
        assert_eq!(
            serde_json::to_value(GeminiAnswer::from_claude("BeforeTool", &deny)).unwrap(),
            json!({ "decision": "deny", "reason": "no" })
        );
        let block = HookAnswer::block("redacted").with_context("PostToolUse", "c");
        assert_eq!(
            serde_json::to_value(GeminiAnswer::from_claude("AfterTool", &block)).unwrap(),
            json!({ "decision": "block", "reason": "redacted", "hookSpecificOutput": {
                "hookEventName": "AfterTool", "additionalContext": "c" } })
        );
    }

    #[test]
    fn an_after_tool_response_is_its_llm_content() {
        let failed = json!({ "llmContent": "no such file", "returnDisplay": "File not found.",
            "error": { "message": "File not found", "type": "file_not_found" } });
        let outcome = outcome(Some(&failed));
        assert!(outcome.is_error);
        assert_eq!(
            outcome.content_blocks,
            vec![ContentBlock::Text {
                text: "no such file".into()
            }]
        );
        assert!(!super::outcome(Some(&json!({ "llmContent": "ok" }))).is_error);
    }
}
