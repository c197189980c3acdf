//! {{name}}: denies shell commands that contain a phrase of `[config] blocked`.
//! Built by `./build.sh` into {{snake}}.wasm; tested by `palisade test . cases.jsonl`.

wit_bindgen::generate!({
    path: "wit",
    world: "palisade:hooks/pre-tool-hook",
});

use exports::palisade::hooks::pre_tool::Guest;
use palisade::hooks::host::{self, Level};
use palisade::hooks::types::{Deny, PreToolDecision, ToolCall};

struct Plugin;

impl Guest for Plugin {
    fn on_pre_tool(call: ToolCall) -> PreToolDecision {
        // `[config] blocked`, as JSON (none when the key is absent).
        let blocked: Vec<String> = host::config("blocked")
            .and_then(|json| serde_json::from_str(&json).ok())
            .unwrap_or_default();
        let arguments: serde_json::Value =
            serde_json::from_str(&call.arguments).unwrap_or_default();
        let command = arguments["command"].as_str().unwrap_or_default();
        for phrase in &blocked {
            if command.contains(phrase.as_str()) {
                host::log(
                    Level::Info,
                    &format!("denied {}: contains {phrase:?}", call.name),
                );
                return PreToolDecision::Deny(Deny {
                    reason_code: "blocked-command".into(),
                    message: format!(
                        "Refused: the command contains \"{phrase}\", which this project blocks. \
                         Find another way, or ask the user."
                    ),
                    payload: None,
                });
            }
        }
        PreToolDecision::Allow
    }
}

export!(Plugin);
