//! `tool-tally` in Rust: an observer that counts a session's tool calls and failed results
//! and logs each one. The counts are host-kept session state (`[state]`), so they survive the
//! instance. Written in Python, JavaScript and C beside this one, with the same log
//! lines (`example-plugins/languages/cases.jsonl` checks them).

use palisade_sdk::{
    Config, Plugin, PreTool, PreToolDecision, ToolCall, ToolOutcome, ToolResult, export, log, state,
};

struct ToolTally;

impl Plugin for ToolTally {
    fn new(_config: &Config) -> Self {
        ToolTally
    }
}

/// Adds `by` to this session's counter `key`; the new count. An observer cannot deny, so a
/// refused count is logged as -1.
fn count(key: &str, by: i64) -> i64 {
    state::session().increment(key, by).unwrap_or(-1)
}

impl PreTool for ToolTally {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        let calls = count("calls", 1);
        log::info(&format!("call {calls}: {}", call.name));
        PreToolDecision::Allow
    }
}

impl ToolResult for ToolTally {
    fn on_tool_result(&mut self, call: ToolCall, outcome: ToolOutcome) {
        let results = count("results", 1);
        let failed = count("failed", i64::from(outcome.is_error));
        let status = if outcome.is_error { "failed" } else { "ok" };
        log::info(&format!(
            "result {results}: {} {status}, {failed} failed so far",
            call.name
        ));
    }
}

export!(ToolTally: PreTool + ToolResult);
