//! `bash-budget`: at most `[config] max_calls` shell commands per agent session; the next ones
//! are denied (`budget-exhausted`). The count is the per-session instance's state: it survives
//! across the events of one session, and every session has its own.

use palisade_sdk::{Deny, PreTool, PreToolDecision, ToolCall, export, log};
use std::sync::atomic::{AtomicU32, Ordering};

/// Shell commands this session has been allowed so far.
static ALLOWED: AtomicU32 = AtomicU32::new(0);

struct BashBudget;

impl PreTool for BashBudget {
    fn on_pre_tool(call: ToolCall) -> PreToolDecision {
        let max: u32 = palisade_sdk::config("max_calls").unwrap_or(50);
        let used = ALLOWED.load(Ordering::Relaxed);
        if used >= max {
            return PreToolDecision::Deny(Deny::new(
                "budget-exhausted",
                format!(
                    "Refused: this session has used its budget of {max} shell commands. Finish \
                     with what you have, or ask the user to start a new session."
                ),
            ));
        }
        ALLOWED.store(used + 1, Ordering::Relaxed);
        log::info(&format!("{} {} of {max}", call.name, used + 1));
        PreToolDecision::Allow
    }
}

export!(BashBudget: PreTool);
