//! `timeout`: a `tool-execute` wrapper that gives each tool call at most `timeout_ms`; a call
//! that takes longer is cancelled and becomes an error the model can act on.

use palisade_sdk::{Config, Plugin, ToolCall, ToolExecute, ToolOutcome, export, next};

struct Timeout {
    /// `[config] timeout_ms`.
    limit_ms: u32,
}

impl Plugin for Timeout {
    fn new(config: &Config) -> Self {
        Timeout {
            limit_ms: config.get("timeout_ms").unwrap_or(30_000),
        }
    }
}

impl ToolExecute for Timeout {
    fn on_tool_execute(&mut self, call: ToolCall) -> ToolOutcome {
        let limit = self.limit_ms;
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
