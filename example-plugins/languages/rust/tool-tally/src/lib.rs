//! `tool-tally` in Rust: an observer that counts a session's tool calls and failed results
//! and logs each one. Written in Python, JavaScript and C beside this one, with the same log
//! lines (`example-plugins/languages/cases.jsonl` checks them).

use palisade_sdk::{
    Config, Plugin, PreTool, PreToolDecision, ToolCall, ToolOutcome, ToolResult, export, log,
};

/// Per session: the manifest asks for a `per-session` instance.
#[derive(Default)]
struct ToolTally {
    calls: u32,
    results: u32,
    failed: u32,
}

impl Plugin for ToolTally {
    fn new(_config: &Config) -> Self {
        ToolTally::default()
    }
}

impl PreTool for ToolTally {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        self.calls += 1;
        log::info(&format!("call {}: {}", self.calls, call.name));
        PreToolDecision::Allow
    }
}

impl ToolResult for ToolTally {
    fn on_tool_result(&mut self, call: ToolCall, outcome: ToolOutcome) {
        self.results += 1;
        if outcome.is_error {
            self.failed += 1;
        }
        let status = if outcome.is_error { "failed" } else { "ok" };
        log::info(&format!(
            "result {}: {} {status}, {} failed so far",
            self.results, call.name, self.failed
        ));
    }
}

export!(ToolTally: PreTool + ToolResult);
