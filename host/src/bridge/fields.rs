//! An agent's hook event read into Palisade's types: a Gemini CLI event as Claude Code's, the
//! tool call, the tool's outcome as the agent reports it, and which outcome shapes Claude Code
//! takes back replaced.

use crate::claude_code::HookEvent;
use crate::gemini;
use crate::types::{ContentBlock, ToolCall, ToolOutcome};
use serde_json::{Value, json};

/// The call a tool event is about.
pub(super) fn tool_call(input: &HookEvent) -> Result<ToolCall, String> {
    let name = input
        .tool_name
        .clone()
        .ok_or("the tool event has no `tool_name`")?;
    Ok(ToolCall {
        tool_use_id: input.tool_use_id.clone().unwrap_or_default(),
        name,
        arguments: input.tool_input.clone().unwrap_or(json!({})),
        // The name is a display name (`mcp__<server>__<tool>`, where a server's name may hold
        // `__` too), and a provenance is never made up from it (docs/semantics.md). Claude
        // Code's `mcp_server` and Gemini CLI's `mcp_context` are not read yet. Hooks match on
        // the name.
        provenance: None,
    })
}

/// The tool's outcome as the agent reports it: Codex sends a string, Claude Code an object
/// (for its shell, `stdout` / `stderr`).
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

/// Whether Claude Code takes a replacement of `response`'s shape (`replaced_output`).
pub(super) fn carries_back(response: &Value) -> bool {
    match response {
        Value::String(_) => true,
        Value::Object(fields) => fields.get("stdout").is_some_and(Value::is_string),
        _ => false,
    }
}

/// A Gemini CLI event as the Claude Code event of the same meaning: its name, and the
/// `AfterAgent` answer text as the last assistant message.
pub(super) fn gemini_as_claude(input: &mut HookEvent) {
    if let Some(event) = gemini::claude_event(&input.hook_event_name) {
        input.hook_event_name = event.to_string();
    }
    if input.last_assistant_message.is_none()
        && let Some(Value::String(said)) = input.other.get("prompt_response")
    {
        input.last_assistant_message = Some(said.clone());
    }
}
