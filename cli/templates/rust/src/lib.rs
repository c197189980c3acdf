//! {{name}}: denies shell commands that contain a phrase of `[config] blocked`.
//! Built by `./build.sh` into {{snake}}.wasm; tested by `palisade test . cases.jsonl`.

use palisade_sdk::{Config, Plugin, PreTool, PreToolDecision, ToolCall, export, log};

struct Guard {
    /// `[config] blocked`: phrases a shell command must not contain. Read once, when the
    /// instance makes its value.
    blocked: Vec<String>,
}

impl Plugin for Guard {
    fn new(config: &Config) -> Self {
        Guard {
            blocked: config.get("blocked").unwrap_or_default(),
        }
    }
}

impl PreTool for Guard {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        let command = call.arg_str("command").unwrap_or_default();
        for phrase in &self.blocked {
            if command.contains(phrase.as_str()) {
                log::info(&format!("denied {}: contains {phrase:?}", call.name));
                return PreToolDecision::deny(
                    "blocked-command",
                    format!(
                        "Refused: the command contains \"{phrase}\", which this project blocks. \
                         Find another way, or ask the user."
                    ),
                );
            }
        }
        PreToolDecision::Allow
    }
}

export!(Guard: PreTool);
