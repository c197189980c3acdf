//! `audit-log`: records every tool call and its result through the host's log, one line
//! each, with the session's running count. An observer: it never changes an outcome.

use palisade_sdk::{PreTool, PreToolDecision, ToolCall, ToolOutcome, ToolResult, export, log};
use std::sync::atomic::{AtomicU32, Ordering};

/// Calls seen by this instance: per session when the plugin is `per-session`.
static CALLS: AtomicU32 = AtomicU32::new(0);

/// Cuts `text` to at most `max` characters, marking the cut.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

struct AuditLog;

impl PreTool for AuditLog {
    fn on_pre_tool(call: ToolCall) -> PreToolDecision {
        let n = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
        let max: usize = palisade_sdk::config("max_chars").unwrap_or(200);
        log::info(&format!(
            "call #{n} {} ({}) {}",
            call.name,
            call.tool_use_id,
            clip(&call.arguments, max)
        ));
        PreToolDecision::Allow
    }
}

impl ToolResult for AuditLog {
    fn on_tool_result(call: ToolCall, outcome: ToolOutcome) {
        let max: usize = palisade_sdk::config("max_chars").unwrap_or(200);
        let status = if outcome.is_error { "error" } else { "ok" };
        log::info(&format!(
            "result {} ({}) {status}: {}",
            call.name,
            call.tool_use_id,
            clip(&outcome.joined_text(), max)
        ));
    }
}

export!(AuditLog: PreTool + ToolResult);
