//! `audit-log`: records every tool call and its result through the host's log, one line
//! each, with the session's running count. An observer: it never changes an outcome.

use palisade_sdk::{
    Config, Plugin, PreTool, PreToolDecision, ToolCall, ToolOutcome, ToolResult, export, log,
};

/// Cuts `text` to at most `max` characters, marking the cut.
fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

struct AuditLog {
    /// `[config] max_chars`: how much of the arguments and results to log.
    max_chars: usize,
    /// Calls seen by this instance: per session when the plugin is `per-session`.
    calls: u32,
}

impl Plugin for AuditLog {
    fn new(config: &Config) -> Self {
        AuditLog {
            max_chars: config.get("max_chars").unwrap_or(200),
            calls: 0,
        }
    }
}

impl PreTool for AuditLog {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        self.calls += 1;
        // The kind of tool, whatever the agent calls it (`@shell` for `Bash` or `exec_command`).
        let kind = call.kind().map(|k| format!(" @{}", k.name()));
        log::info(&format!(
            "call #{} {} ({}){} {}",
            self.calls,
            call.name,
            call.tool_use_id,
            kind.unwrap_or_default(),
            clip(&call.arguments, self.max_chars)
        ));
        PreToolDecision::Allow
    }
}

impl ToolResult for AuditLog {
    fn on_tool_result(&mut self, call: ToolCall, outcome: ToolOutcome) {
        let status = if outcome.is_error { "error" } else { "ok" };
        log::info(&format!(
            "result {} ({}) {status}: {}",
            call.name,
            call.tool_use_id,
            clip(&outcome.joined_text(), self.max_chars)
        ));
    }
}

export!(AuditLog: PreTool + ToolResult);
