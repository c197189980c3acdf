//! A test guest that sleeps a millisecond, then allows. Its sleep is a monotonic-clock
//! subscription whose pollable waits, so the host links it to the full linker and calls it on
//! a fiber; linked directly, its sleep would fail the call.

use palisade_sdk::{Config, Plugin, PreTool, PreToolDecision, ToolCall, export};

struct Napper;

impl Plugin for Napper {
    fn new(_config: &Config) -> Self {
        Napper
    }
}

impl PreTool for Napper {
    fn on_pre_tool(&mut self, _call: ToolCall) -> PreToolDecision {
        std::thread::sleep(std::time::Duration::from_millis(1));
        PreToolDecision::Allow
    }
}

export!(Napper: PreTool);
