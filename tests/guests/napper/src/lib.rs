//! A test guest that sleeps (`[config] ms`, default 1), then allows. Its sleep is a
//! monotonic-clock subscription whose pollable waits: called directly, it holds the thread
//! (to its deadline at most) and sends the plugin to a fiber for its later calls.

use palisade_sdk::{Config, Plugin, PreTool, PreToolDecision, ToolCall, export};

struct Napper {
    ms: u64,
}

impl Plugin for Napper {
    fn new(config: &Config) -> Self {
        Napper {
            ms: config.get("ms").unwrap_or(1),
        }
    }
}

impl PreTool for Napper {
    fn on_pre_tool(&mut self, _call: ToolCall) -> PreToolDecision {
        std::thread::sleep(std::time::Duration::from_millis(self.ms));
        PreToolDecision::Allow
    }
}

export!(Napper: PreTool);
