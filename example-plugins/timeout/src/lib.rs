//! `timeout`: a `tool-execute` wrapper that gives each tool call at most `timeout_ms`; a call
//! that takes longer is cancelled and becomes an error the model can act on.

use palisade_sdk::{ToolCall, ToolExecute, ToolOutcome, export, next};

struct Timeout;

impl ToolExecute for Timeout {
    fn on_tool_execute(call: ToolCall) -> ToolOutcome {
        let limit: u32 = palisade_sdk::config("timeout_ms").unwrap_or(30_000);
        let outcome = next(Some(limit));
        if outcome.is_error && outcome.joined_text().contains("timed out") {
            return ToolOutcome::error(format!(
                "{} was stopped after {limit} ms. Split the work into smaller steps, or run it \
                 in the background and poll for the result.",
                call.name
            ));
        }
        outcome
    }
}

export!(Timeout: ToolExecute);
