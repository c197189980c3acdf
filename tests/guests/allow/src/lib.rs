//! A test guest: the minimal guard. It allows every tool call and makes no host call, so a
//! benchmark of it measures the host's cost of a `pre-tool` call and nothing of the guest's.

use palisade_sdk::{Config, Plugin, PreTool, PreToolDecision, ToolCall, export};

struct Allow;

impl Plugin for Allow {
    fn new(_config: &Config) -> Self {
        Allow
    }
}

impl PreTool for Allow {
    fn on_pre_tool(&mut self, _call: ToolCall) -> PreToolDecision {
        PreToolDecision::Allow
    }
}

export!(Allow: PreTool);
