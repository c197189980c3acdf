//! `retry`: a `tool-execute` wrapper that runs a failed tool again, up to `attempts` times in
//! all, for the tools its matcher names (idempotent ones: reads, listings, fetches).

use palisade_sdk::{Config, Plugin, ToolCall, ToolExecute, ToolOutcome, export, log, next};

struct Retry {
    /// `[config] attempts`: runs in all, at least one.
    attempts: u32,
}

impl Plugin for Retry {
    fn new(config: &Config) -> Self {
        Retry {
            attempts: config.get("attempts").unwrap_or(3).max(1),
        }
    }
}

impl ToolExecute for Retry {
    fn on_tool_execute(&mut self, call: ToolCall) -> ToolOutcome {
        let attempts = self.attempts;
        let mut outcome = next(None);
        for attempt in 2..=attempts {
            if !outcome.is_error {
                break;
            }
            log::warn(&format!(
                "{} ({}) failed; attempt {attempt} of {attempts}: {}",
                call.name,
                call.tool_use_id,
                outcome.joined_text()
            ));
            outcome = next(None);
        }
        outcome
    }
}

export!(Retry: ToolExecute);
