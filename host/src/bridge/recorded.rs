//! Recorded agent sessions: the line a bridge's `--record` writes for each hook event, and a
//! recorded session read back as the session events `palisade replay` runs.

use super::fields::tool_call;
use crate::agents::{Dialect, Meaning};
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

/// The line that records that `input`, an event of `dialect` with no Palisade point
/// ([`crate::agents::Meaning::Observed`]), happened, for an audit log that does not record
/// every event's content (no `--record`): [`agent_event`]'s line, its `input` only the fields
/// that name the event and whose it is (`hook_event_name`, `session_id`, `agent_id`,
/// `agent_type`), none of what the agent said.
pub fn observed_event(dialect: Dialect, input: &Value) -> Value {
    let mut named = serde_json::Map::new();
    for field in ["hook_event_name", "session_id", "agent_id", "agent_type"] {
        if let Some(value) = input.get(field).filter(|v| !v.is_null()) {
            named.insert(field.to_string(), value.clone());
        }
    }
    agent_event(dialect, &Value::Object(named))
}

/// The recorded hook events of one agent session (in their order, each in its dialect) as
/// the session events `palisade replay` reads: `SessionStart` → `session-start`,
/// `UserPromptSubmit` → `prompt` (turns numbered from 1), a `PreToolUse` and the `PostToolUse`
/// (or `PostToolUseFailure`) of the same call → one `tool-call` with the result the tool
/// returned (none when it never ran: denied, or not recorded), `Stop` → `stop`, `SessionEnd`
/// → `session-end`; each agent's events by what they mean. Events with
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
        dialect.read(&mut input);
        let meaning = dialect.meaning(&input.hook_event_name);
        match meaning {
            Meaning::SessionStart => out.push(json!({
                "event": "session-start",
                "source": input
                    .source
                    .as_deref()
                    .filter(|s| matches!(*s, "resume" | "clear" | "compact"))
                    .unwrap_or("startup"),
            })),
            Meaning::PromptSubmit => {
                turn += 1;
                out.push(json!({
                    "event": "prompt",
                    "turn": turn,
                    "text": input.prompt.clone().unwrap_or_default(),
                }));
            }
            Meaning::ToolCall => {
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
            Meaning::ToolResult | Meaning::ToolFailure => {
                let Ok(call) = tool_call(&input) else {
                    continue;
                };
                let outcome = dialect.spec().outcome(meaning, &input);
                let result = serde_json::to_value(outcome).unwrap_or(Value::Null);
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
            Meaning::Stop => out.push(json!({
                "event": "stop",
                "turn": turn.max(1),
                "last_assistant_message": input.last_assistant_message,
            })),
            Meaning::SessionEnd => out.push(json!({
                "event": "session-end",
                "reason": input.reason.clone().unwrap_or_else(|| "other".into()),
            })),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::session_events;
    use crate::agents::Dialect;
    use serde_json::json;

    /// Each agent's tool result is read as that agent reports it: Gemini CLI's `AfterTool` is
    /// its `llmContent` (what the model read), and Claude Code's failed call its `error`.
    #[test]
    fn a_recorded_result_is_read_as_its_agent_reports_it() {
        let call = |event: &str, tool: &str| {
            json!({"hook_event_name": event, "session_id": "s", "tool_name": tool,
                   "tool_use_id": "t1", "tool_input": {}})
        };
        let mut after = call("AfterTool", "read_file");
        after["tool_response"] =
            json!({"llmContent": "the file's text", "returnDisplay": "Read 1 line."});
        let gemini = [
            (Dialect::GEMINI, call("BeforeTool", "read_file")),
            (Dialect::GEMINI, after),
        ];
        let events = session_events(&gemini);
        assert_eq!(events.len(), 1, "{events:?}");
        let blocks = &events[0]["result"]["content_blocks"];
        assert_eq!(blocks[0]["text"], "the file's text", "{events:?}");

        let mut failed = call("PostToolUseFailure", "Bash");
        failed["error"] = json!("exit 1: no such file");
        let claude = [
            (Dialect::CLAUDE_CODE, call("PreToolUse", "Bash")),
            (Dialect::CLAUDE_CODE, failed),
        ];
        let events = session_events(&claude);
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0]["result"]["is_error"], true, "{events:?}");
    }
}
