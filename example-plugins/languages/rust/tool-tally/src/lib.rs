//! `tool-tally` in Rust: an observer that counts a session's tool calls and failed results
//! and logs each one. Written in Python, JavaScript and C beside this one, with the same log
//! lines (`example-plugins/languages/cases.jsonl` checks them).

use palisade_sdk::{PreTool, PreToolDecision, ToolCall, ToolOutcome, ToolResult, export, log};
use std::sync::atomic::{AtomicU32, Ordering};

// Per session: the manifest asks for a `per-session` instance.
static CALLS: AtomicU32 = AtomicU32::new(0);
static RESULTS: AtomicU32 = AtomicU32::new(0);
static FAILED: AtomicU32 = AtomicU32::new(0);

struct ToolTally;

impl PreTool for ToolTally {
    fn on_pre_tool(call: ToolCall) -> PreToolDecision {
        let n = CALLS.fetch_add(1, Ordering::Relaxed) + 1;
        log::info(&format!("call {n}: {}", call.name));
        PreToolDecision::Allow
    }
}

impl ToolResult for ToolTally {
    fn on_tool_result(call: ToolCall, outcome: ToolOutcome) {
        let n = RESULTS.fetch_add(1, Ordering::Relaxed) + 1;
        if outcome.is_error {
            FAILED.fetch_add(1, Ordering::Relaxed);
        }
        let status = if outcome.is_error { "failed" } else { "ok" };
        log::info(&format!(
            "result {n}: {} {status}, {} failed so far",
            call.name,
            FAILED.load(Ordering::Relaxed)
        ));
    }
}

export!(ToolTally: PreTool + ToolResult);
