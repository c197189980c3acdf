//! The JSON that crosses to a command or HTTP hook, and the answers it may give: Claude Code's
//! hook protocol, so an existing Claude Code hook runs unchanged as a Palisade plugin.
//!
//! Out: the event's fields as Claude Code names them (`hook_event_name`, `session_id`,
//! `tool_name`, `tool_input`, `tool_use_id`, `tool_response`, `prompt`, `source`, ...), plus
//! Palisade's own (`point`, `hook_id`, `invocation_id`, the plugin's `config`, the typed
//! payloads) and the
//! serialize-only projections (`prompt`, `content`, `error`; docs/semantics.md S2.9), which
//! are never read back. Back: only the protocol's fields, per point; anything else — an unknown field,
//! a field the point does not take, a legacy `patches` rewrite — is an invalid response.

use crate::claude_code::{HookAnswer, HookEvent};
use crate::failure::{Failure, FailureReason};
#[cfg(test)]
use crate::hook::{self, Shared};
use crate::hook::{Answer, Request};
use crate::point::Point;
use crate::point_wire::ClaudeReply;
use crate::types::{
    CommittedFact, ContentBlock, Message, Observation, Provenance, Role, ServerToolContent,
    SessionSource, ToolCall, ToolOutcome, TurnOutcome,
};
use serde_json::{Map, Value, json};

/// A finished exchange, before its answer is read.
pub(crate) struct Raw {
    /// The exit status (0 for an HTTP 2xx), or why there is none.
    pub status: Result<i32, String>,
    /// stdout, or the HTTP body.
    pub output: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Who is asking: the invocation's identity on the wire.
pub(crate) struct Caller<'a> {
    pub session_id: &'a str,
    pub hook_id: &'a str,
    pub invocation_id: &'a str,
    pub point: Point,
    /// The plugin's `[config]` table.
    pub config: &'a Map<String, Value>,
    /// Whether the hook holds `guard` here: its output must then be exactly one JSON object
    /// (or nothing), see [`decode`].
    pub guarding: bool,
}

/// The JSON a command or HTTP hook receives for `request`: Claude Code's event, with
/// Palisade's own fields beside the agent's.
pub(crate) fn encode(caller: &Caller<'_>, request: &Request) -> Value {
    let mut event = HookEvent {
        session_id: Some(caller.session_id.to_string()),
        ..HookEvent::new(request.wire().claude_event(caller.point))
    };
    let ours = &mut event.other;
    ours.insert("point".into(), caller.point.as_str().into());
    ours.insert("hook_id".into(), caller.hook_id.into());
    ours.insert("invocation_id".into(), caller.invocation_id.into());
    ours.insert("config".into(), Value::Object(caller.config.clone()));
    request.wire().claude_fields(request, &mut event);
    // Strings and JSON values only: serializing cannot fail.
    serde_json::to_value(event).unwrap_or(Value::Null)
}

/// The prompt's text projection: the user messages' text, a blank line between them.
pub(crate) fn prompt_text(messages: &[Message]) -> String {
    let prompt: Vec<&str> = messages
        .iter()
        .filter(|m| m.role == Role::User)
        .map(|m| m.text.as_str())
        .collect();
    prompt.join("\n\n")
}

pub(crate) fn source_name(source: SessionSource) -> &'static str {
    match source {
        SessionSource::Startup => "startup",
        SessionSource::Resume => "resume",
        SessionSource::Clear => "clear",
        SessionSource::Compact => "compact",
    }
}

pub(crate) fn message(m: &Message) -> Value {
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::System => "system",
    };
    json!({ "role": role, "text": m.text })
}

pub(crate) fn provenance(p: &Option<Provenance>) -> Value {
    match p {
        None => Value::Null,
        Some(Provenance::Builtin) => json!({ "kind": "builtin" }),
        Some(Provenance::Mcp { server, tool }) => {
            json!({ "kind": "mcp", "server": server, "tool": tool })
        }
        Some(Provenance::Plugin { name }) => json!({ "kind": "plugin", "name": name }),
    }
}

/// The call's fields on a hook event.
pub(crate) fn tool_call_event(event: &mut HookEvent, call: &ToolCall) {
    event.tool_name = Some(call.name.clone());
    event.tool_input = Some(call.arguments.clone());
    event.tool_use_id = Some(call.tool_use_id.clone());
    if call.provenance.is_some() {
        event
            .other
            .insert("provenance".into(), provenance(&call.provenance));
    }
}

/// The call's fields in a committed fact.
fn tool_call(out: &mut Map<String, Value>, call: &ToolCall) {
    out.insert("tool_name".into(), call.name.clone().into());
    out.insert("tool_input".into(), call.arguments.clone());
    out.insert("tool_use_id".into(), call.tool_use_id.clone().into());
    if call.provenance.is_some() {
        out.insert("provenance".into(), provenance(&call.provenance));
    }
}

pub(crate) fn blocks(blocks: &[ContentBlock]) -> Value {
    blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => json!({ "type": "text", "text": text }),
            ContentBlock::Json { value } => json!({ "type": "json", "value": value }),
            ContentBlock::Image { media_type, data } => json!({
                "type": "image",
                "media_type": media_type,
                "data": base64(data),
            }),
        })
        .collect::<Vec<_>>()
        .into()
}

/// The derived text projection of content: text blocks as they are, JSON blocks as JSON text,
/// images as a placeholder.
pub(crate) fn content_text(blocks: &[ContentBlock]) -> String {
    let parts: Vec<String> = blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.clone(),
            ContentBlock::Json { value } => value.to_string(),
            ContentBlock::Image { media_type, .. } => format!("[image {media_type}]"),
        })
        .collect();
    parts.join("\n")
}

/// A call's and its outcome's fields on a hook event (`tool_response` the canonical value).
pub(crate) fn call_outcome_event(event: &mut HookEvent, call: &ToolCall, outcome: &ToolOutcome) {
    tool_call_event(event, call);
    tool_outcome(&mut event.other, outcome);
    event.tool_response = event.other.remove("tool_response");
}

fn tool_outcome(out: &mut Map<String, Value>, outcome: &ToolOutcome) {
    let value = outcome.value.clone().unwrap_or(Value::Null);
    let content = content_text(&outcome.content_blocks);
    out.insert("tool_response".into(), value);
    out.insert("content_blocks".into(), blocks(&outcome.content_blocks));
    out.insert("is_error".into(), outcome.is_error.into());
    if outcome.is_error {
        out.insert("error".into(), content.clone().into());
    }
    out.insert("content".into(), content.into());
}

pub(crate) fn observation(o: &Observation) -> Value {
    let fact = match &o.fact {
        CommittedFact::Message { message: m } => {
            let mut v = message(m);
            v["kind"] = "message".into();
            v
        }
        CommittedFact::ToolCall { call } => {
            let mut map = Map::new();
            map.insert("kind".into(), "tool-call".into());
            tool_call(&mut map, call);
            Value::Object(map)
        }
        CommittedFact::ToolResult { result } => {
            let mut map = Map::new();
            map.insert("kind".into(), "tool-result".into());
            map.insert("tool_name".into(), result.name.clone().into());
            map.insert("tool_use_id".into(), result.tool_use_id.clone().into());
            if result.provenance.is_some() {
                map.insert("provenance".into(), provenance(&result.provenance));
            }
            tool_outcome(&mut map, &result.outcome);
            Value::Object(map)
        }
        CommittedFact::LlmResponse { response: r } => json!({
            "kind": "llm-response",
            "model": r.model,
            "text": r.text,
            "tool_calls": r.tool_calls.iter().map(|c| {
                let mut map = Map::new();
                tool_call(&mut map, c);
                Value::Object(map)
            }).collect::<Vec<_>>(),
            "server_tool_content": r.server_tool_content.iter().map(|s| match s {
                ServerToolContent::WebSearch { query, result_urls } =>
                    json!({ "kind": "web-search", "query": query, "result_urls": result_urls }),
                ServerToolContent::CodeExecution { code, output } =>
                    json!({ "kind": "code-execution", "code": code, "output": output }),
                ServerToolContent::Other { value } => json!({ "kind": "other", "value": value }),
            }).collect::<Vec<_>>(),
            "stop_reason": r.stop_reason,
        }),
        CommittedFact::TurnCompleted { outcome } => {
            let outcome = match outcome {
                TurnOutcome::Completed => "completed",
                TurnOutcome::Blocked => "blocked",
                TurnOutcome::Interrupted => "interrupted",
                TurnOutcome::Failed => "failed",
            };
            json!({ "kind": "turn-completed", "outcome": outcome })
        }
        CommittedFact::SessionEnded { reason } => {
            json!({ "kind": "session-ended", "reason": reason })
        }
    };
    json!({ "interaction_id": o.interaction_id, "turn": o.turn, "fact": fact })
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// How the hook's run ended, before its answer is read.
pub(crate) enum Exit {
    /// Exit status 0 (or an HTTP 2xx): the answer is the output.
    Success,
    /// Exit status 2: a blocking error; the reason is stderr.
    Block,
}

/// What a hook said besides its decision, for the log.
pub(crate) struct Notes {
    pub system_message: Option<String>,
}

fn invalid(detail: impl Into<String>) -> Failure {
    Failure::new(FailureReason::InvalidResponse, detail)
}

/// The answer of an output that is not a JSON object: a blocking exit's, or plain text's (context
/// where Claude Code makes it context, ignored elsewhere; refused from a guard). `None`: read
/// the JSON.
fn unless_json(
    request: &Request,
    hook_id: &str,
    exit: Exit,
    text: &str,
    stderr: &[u8],
    guarding: bool,
) -> Result<Option<Answer>, Failure> {
    let wire = request.wire();
    if let Exit::Block = exit {
        let reason = String::from_utf8_lossy(stderr).trim().to_string();
        let reason = if reason.is_empty() {
            format!("blocked by `{hook_id}` (exit status 2)")
        } else {
            reason
        };
        return Ok(Some(wire.refusal(reason, "exit-2")));
    }
    if guarding && !text.is_empty() && !text.starts_with('{') {
        return Err(invalid(format!(
            "a guard's answer must be exactly one JSON object (or nothing), and this starts \
             with `{}`",
            text.chars().take(40).collect::<String>()
        )));
    }
    if text.starts_with('{') {
        return Ok(None);
    }
    let contexts = if text.is_empty() || !wire.plain_text_is_context() {
        vec![]
    } else {
        vec![text.to_string()]
    };
    Ok(Some(wire.neutral(contexts)))
}

/// Reads a hook's answer: `exit`, its output (stdout, or the HTTP body) and, for a blocking
/// exit, its stderr. What every point's answer meets is checked here; what the point's answer
/// is, by its [`PointWire::claude_answer`].
///
/// `guarding`: the hook holds `guard` at this point. Its output must then be nothing or exactly
/// one JSON object: plain text — a log line printed before the JSON, say — would otherwise be
/// read as no objection, and a block would become an allow. So it is `invalid-response`, which
/// fails closed.
pub(crate) fn decode(
    point: Point,
    request: &Request,
    hook_id: &str,
    exit: Exit,
    output: &[u8],
    stderr: &[u8],
    guarding: bool,
) -> Result<(Answer, Notes), Failure> {
    let text = std::str::from_utf8(output)
        .map_err(|_| invalid("the answer is not UTF-8"))?
        .trim();
    let mut notes = Notes {
        system_message: None,
    };
    if let Some(answer) = unless_json(request, hook_id, exit, text, stderr, guarding)? {
        return Ok((answer, notes));
    }
    let mut answer: HookAnswer = serde_json::from_str(text).map_err(|e| {
        invalid(format!(
            "the answer is not a hook answer of the Claude Code protocol: {e}"
        ))
    })?;
    notes.system_message = answer.system_message.clone();
    let _ = answer.suppress_output;
    let specific = answer.hook_specific_output.take().unwrap_or_default();
    let wire = request.wire();
    let expected = wire.claude_event(point);
    if let Some(name) = &specific.hook_event_name
        && name != expected
    {
        return Err(invalid(format!(
            "`hookSpecificOutput.hookEventName` is `{name}`, but this is `{expected}`"
        )));
    }
    // `continue: false` stops the agent and wins over any decision: a veto where the point
    // has one (at turn-stopping, stopping is no steering).
    if answer.keep_going == Some(false) {
        let message = answer
            .stop_reason
            .clone()
            .unwrap_or_else(|| format!("`{hook_id}` stopped the agent"));
        return Ok((wire.stopped(message), notes));
    }
    let reply = ClaudeReply {
        point,
        hook_id,
        answer: &answer,
        specific: &specific,
        contexts: specific.additional_context.clone().into_iter().collect(),
    };
    if specific.updated_tool_output.is_some() {
        // A replacement is `protocol = "palisade"`'s `replace-content` or `replace-value`.
        return Err(reply.refuse("hookSpecificOutput.updatedToolOutput"));
    }
    if specific.decision.is_some() {
        // The answer to an agent's permission dialog, which no point asks a hook for.
        return Err(reply.refuse("hookSpecificOutput.decision"));
    }
    Ok((wire.claude_answer(&reply)?, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pre_tool() -> Request<'static> {
        Request::PreTool(
            Shared::new(ToolCall::new(
                "t1",
                "Bash",
                serde_json::json!({ "command": "ls" }),
            ))
            .into(),
        )
    }

    fn decode_pre_tool(answer: &str) -> Result<Answer, Failure> {
        decode(
            Point::PreTool,
            &pre_tool(),
            "p/pre-tool",
            Exit::Success,
            answer.as_bytes(),
            b"",
            false,
        )
        .map(|(r, _)| r)
    }

    #[test]
    fn continue_false_at_turn_stopping_lets_the_agent_stop() {
        let stop = Request::TurnStopping(Shared::new(crate::types::StopEvent {
            turn: 1,
            step: 1,
            last_assistant_message: None,
            continuations: 0,
        }));
        for answer in [
            r#"{"continue":false,"stopReason":"done for today"}"#,
            r#"{"continue":false,"decision":"block","reason":"go on"}"#,
        ] {
            let (decoded, _) = decode(
                Point::TurnStopping,
                &stop,
                "p/turn-stopping",
                Exit::Success,
                answer.as_bytes(),
                b"",
                true,
            )
            .unwrap();
            assert!(
                matches!(decoded, Answer::TurnStopping(None)),
                "{answer}: {decoded:?}"
            );
        }
    }

    #[test]
    fn a_deny_answer_denies_with_its_reason() {
        let r = decode_pre_tool(
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}"#,
        )
        .unwrap();
        let Answer::PreTool(hook::PreToolDecision::Deny(d)) = r else {
            panic!("not a deny")
        };
        assert_eq!(d.message, "no");
    }

    #[test]
    fn unknown_fields_and_rewrites_are_invalid() {
        for answer in [
            r#"{"patches":[{"op":"replace"}]}"#,
            r#"{"hookSpecificOutput":{"updatedInput":{"command":"ls"}}}"#,
            r#"{"decision":"block","extra":1}"#,
            r#"{"hookSpecificOutput":{"hookEventName":"PostToolUse"}}"#,
            r#"{"hookSpecificOutput":{"additionalContext":"x"}}"#,
            "{not json",
        ] {
            let failure = decode_pre_tool(answer)
                .err()
                .unwrap_or_else(|| panic!("{answer}"));
            assert_eq!(failure.reason, FailureReason::InvalidResponse, "{answer}");
        }
    }

    #[test]
    fn empty_and_plain_answers_allow() {
        for answer in ["", "   ", "looks fine", "{}"] {
            assert!(matches!(
                decode_pre_tool(answer).unwrap(),
                Answer::PreTool(hook::PreToolDecision::Allow)
            ));
        }
    }
}

#[cfg(test)]
mod guarding_tests {
    use super::*;

    #[test]
    fn a_guards_output_is_one_json_object_or_nothing() {
        let request = Request::PreTool(
            Shared::new(ToolCall::new("t1", "Bash", serde_json::json!({}))).into(),
        );
        let deny = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}"#;
        let decode_as = |output: &str, guarding| {
            decode(
                Point::PreTool,
                &request,
                "p/pre-tool",
                Exit::Success,
                output.as_bytes(),
                b"",
                guarding,
            )
        };
        // A log line before the JSON: a block must not become an allow.
        let logged = format!("checking the command...\n{deny}");
        let failure = decode_as(&logged, true).err().expect("refused");
        assert_eq!(failure.reason, FailureReason::InvalidResponse);
        assert!(matches!(
            decode_as(deny, true).unwrap().0,
            Answer::PreTool(hook::PreToolDecision::Deny(_))
        ));
        assert!(decode_as("  ", true).is_ok());
        // An observer's plain text is still "nothing to say", as in Claude Code.
        assert!(decode_as(&logged, false).is_ok());
    }
}
