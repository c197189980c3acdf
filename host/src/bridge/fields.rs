//! An agent's tool event read into Palisade's tool call (the fields every agent shares, in
//! Claude Code's names; each agent's module reads its outcome).

use crate::claude_code::HookEvent;
use crate::types::ToolCall;
use serde_json::json;

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
