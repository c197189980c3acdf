//! Recorded agent sessions: the line a bridge's `--record` writes for each hook event, and a
//! recorded session read back as the session events `palisade replay` runs.

use super::dialect::Dialect;
use super::fields::{gemini_as_claude, outcome, tool_call};
use crate::claude_code::HookEvent;
use crate::types::ToolOutcome;
use serde::Deserialize;
use serde_json::{Value, json};

/// The line that records `input`, a hook event in `dialect`, in an audit log (what a bridge's
/// `--record` writes): `{"event": "agent_event", "at_ms", "dialect", "session_id", "input"}`.
/// [`session_events`] reads such lines back.
pub fn agent_event(dialect: Dialect, input: &Value) -> Value {
    json!({
        "event": "agent_event",
        "at_ms": crate::events::now_ms(),
        "dialect": dialect.name(),
        "session_id": input.get("session_id"),
        "input": input,
    })
}

/// The recorded hook events of one agent session (in their order, each in its dialect) as
/// the session events `palisade replay` reads: `SessionStart` → `session-start`,
/// `UserPromptSubmit` → `prompt` (turns numbered from 1), a `PreToolUse` and the `PostToolUse`
/// of the same call → one `tool-call` with the result the tool returned (none when it never
/// ran: denied, or not recorded), `Stop` → `stop`, `SessionEnd` → `session-end`. Events with
/// no point, or that cannot be read, are left out.
pub fn session_events(events: &[(Dialect, Value)]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    // The `tool-call` of each call id, by its place in `out`.
    let mut calls: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut turn = 0u32;
    for (dialect, raw) in events {
        let Ok(mut input) = HookEvent::deserialize(raw) else {
            continue;
        };
        if *dialect == Dialect::Gemini {
            gemini_as_claude(&mut input);
        }
        match input.hook_event_name.as_str() {
            "SessionStart" => out.push(json!({
                "event": "session-start",
                "source": input
                    .source
                    .as_deref()
                    .filter(|s| matches!(*s, "resume" | "clear" | "compact"))
                    .unwrap_or("startup"),
            })),
            "UserPromptSubmit" => {
                turn += 1;
                out.push(json!({
                    "event": "prompt",
                    "turn": turn,
                    "text": input.prompt.clone().unwrap_or_default(),
                }));
            }
            "PreToolUse" | "PreSkillShellCommand" => {
                let Ok(call) = tool_call(&input) else {
                    continue;
                };
                calls.insert(call.tool_use_id.clone(), out.len());
                out.push(json!({
                    "event": "tool-call",
                    "call": call,
                    "result": ToolOutcome { content_blocks: vec![], is_error: false, value: None },
                    "agent": dialect.name(),
                }));
            }
            "PostToolUse" => {
                let Ok(call) = tool_call(&input) else {
                    continue;
                };
                let result = serde_json::to_value(outcome(&input)).unwrap_or(Value::Null);
                match calls.get(&call.tool_use_id) {
                    Some(&at) if !call.tool_use_id.is_empty() => out[at]["result"] = result,
                    _ => out.push(json!({
                        "event": "tool-call",
                        "call": call,
                        "result": result,
                        "agent": dialect.name(),
                    })),
                }
            }
            "Stop" => out.push(json!({
                "event": "stop",
                "turn": turn.max(1),
                "last_assistant_message": input.last_assistant_message,
            })),
            "SessionEnd" => out.push(json!({
                "event": "session-end",
                "reason": input.reason.clone().unwrap_or_else(|| "other".into()),
            })),
            _ => {}
        }
    }
    out
}
