//! `bash-budget`: at most `[config] max_calls` shell commands per agent session; the next ones
//! are denied (`budget-exhausted`). The count is host-kept session state (`[state]`), so the
//! limit holds whatever happens to the instance — eviction, reload, a trapped call, a restart
//! of the host — and, with a shared state backend, across hosts; every session has its own.

use palisade_sdk::{Config, Deny, Plugin, PreTool, PreToolDecision, ToolCall, export, log, state};

struct BashBudget {
    /// `[config] max_calls`.
    max: i64,
}

impl Plugin for BashBudget {
    fn new(config: &Config) -> Self {
        BashBudget {
            max: config.get("max_calls").unwrap_or(50),
        }
    }
}

impl PreTool for BashBudget {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        let max = self.max;
        // Counted atomically by the host: two calls at once cannot both take the last slot.
        let n = match state::session().increment("shell-commands", 1) {
            Ok(n) => n,
            Err(refused) => {
                return PreToolDecision::Deny(Deny::new(
                    "budget-unknown",
                    format!("Refused: the session's command count is unavailable ({refused:?})."),
                ));
            }
        };
        if n > max {
            return PreToolDecision::Deny(Deny::new(
                "budget-exhausted",
                format!(
                    "Refused: this session has used its budget of {max} shell commands. Finish \
                     with what you have, or ask the user to start a new session."
                ),
            ));
        }
        log::info(&format!("{} {n} of {max}", call.name));
        PreToolDecision::Allow
    }
}

export!(BashBudget: PreTool);
