//! `bash-budget`: at most `[config] max_calls` shell commands per agent session; the next ones
//! are denied (`budget-exhausted`). The count is the per-session instance's state: it survives
//! across the events of one session, and every session has its own.

use palisade_sdk::{Config, Deny, Plugin, PreTool, PreToolDecision, ToolCall, export, log};

struct BashBudget {
    /// `[config] max_calls`.
    max: u32,
    /// Shell commands this session has been allowed so far.
    allowed: u32,
}

impl Plugin for BashBudget {
    fn new(config: &Config) -> Self {
        BashBudget {
            max: config.get("max_calls").unwrap_or(50),
            allowed: 0,
        }
    }
}

impl PreTool for BashBudget {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        let max = self.max;
        if self.allowed >= max {
            return PreToolDecision::Deny(Deny::new(
                "budget-exhausted",
                format!(
                    "Refused: this session has used its budget of {max} shell commands. Finish \
                     with what you have, or ask the user to start a new session."
                ),
            ));
        }
        self.allowed += 1;
        log::info(&format!("{} {} of {max}", call.name, self.allowed));
        PreToolDecision::Allow
    }
}

export!(BashBudget: PreTool);
