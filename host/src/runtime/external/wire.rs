//! The JSON that crosses to a command or HTTP hook, and the answers it may give: Claude Code's
//! hook protocol, so an existing Claude Code hook runs unchanged as a Palisade plugin.
//!
//! Out: the event's fields as Claude Code names them (`hook_event_name`, `session_id`,
//! `tool_name`, `tool_input`, `tool_use_id`, `tool_response`, `prompt`, `source`, ...), plus
//! Palisade's own (`point`, `hook_id`, `invocation_id`, the plugin's `config`, the typed
//! payloads) and the
//! serialize-only projections seed 2 names (`prompt`, `content`, `error`), which are never
//! read back. Back: only the protocol's fields, per point; anything else — an unknown field,
//! a field the point does not take, a legacy `patches` rewrite — is an invalid response.

use crate::claude_code::{Decision, HookAnswer, HookEvent, Permission};
use crate::failure::{Failure, FailureReason};
use crate::point::Point;
use crate::runtime::instance::{Request, Response};
use crate::runtime::sandbox::wit;
use serde_json::{Map, Value, json};

/// Claude Code's name for the event of `point`, where it has one; Palisade's (PascalCase)
/// otherwise. See `docs/runtimes.md` for the table.
pub(crate) fn event_name(point: Point) -> &'static str {
    match point {
        Point::SessionStart => "SessionStart",
        Point::PromptSubmit => "UserPromptSubmit",
        Point::PreTool | Point::ToolGuard => "PreToolUse",
        Point::PostTool | Point::ToolResult => "PostToolUse",
        Point::TurnStopping => "Stop",
        Point::SessionEnded => "SessionEnd",
        Point::ToolExecute => "ToolExecute",
        Point::MessageCommitted => "MessageCommitted",
        Point::ToolCallCommitted => "ToolCallCommitted",
        Point::ToolResultCommitted => "ToolResultCommitted",
        Point::LlmResponseCommitted => "LlmResponseCommitted",
        Point::TurnCompleted => "TurnCompleted",
    }
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
        ..HookEvent::new(event_name(caller.point))
    };
    let ours = &mut event.other;
    ours.insert("point".into(), caller.point.as_str().into());
    ours.insert("hook_id".into(), caller.hook_id.into());
    ours.insert("invocation_id".into(), caller.invocation_id.into());
    ours.insert("config".into(), Value::Object(caller.config.clone()));
    match request {
        Request::SessionStart(source) => event.source = Some(source_name(*source).into()),
        Request::PromptSubmit(step) => {
            let prompt: Vec<&str> = step
                .messages
                .iter()
                .filter(|m| m.role == wit::Role::User)
                .map(|m| m.text.as_str())
                .collect();
            event.prompt = Some(prompt.join("\n\n"));
            ours.insert(
                "messages".into(),
                step.messages.iter().map(message).collect::<Vec<_>>().into(),
            );
            ours.insert("turn".into(), step.turn.into());
            ours.insert("step".into(), step.step.into());
        }
        Request::PreTool(call) | Request::ToolGuard(call) | Request::ToolExecute(call, _) => {
            tool_call_event(&mut event, call);
        }
        Request::PostTool(call, outcome) | Request::ToolResult(call, outcome) => {
            tool_call_event(&mut event, call);
            tool_outcome(&mut event.other, outcome);
            event.tool_response = event.other.remove("tool_response");
        }
        Request::TurnStopping(stop) => {
            // Claude Code's flag for "already continuing because a stop hook said so".
            event.stop_hook_active = Some(stop.continuations > 0);
            match &stop.last_assistant_message {
                Some(text) => event.last_assistant_message = Some(text.clone()),
                // Present, as null: a hook may index it without checking.
                None => {
                    ours.insert("last_assistant_message".into(), Value::Null);
                }
            }
            ours.insert("turn".into(), stop.turn.into());
            ours.insert("step".into(), stop.step.into());
            ours.insert("continuations".into(), stop.continuations.into());
        }
        Request::Committed(observation) => {
            if let wit::CommittedFact::SessionEnded(reason) = &observation.fact {
                event.reason = Some(reason.clone());
            }
            ours.insert("observation".into(), self::observation(observation));
        }
    }
    // Strings and JSON values only: serializing cannot fail.
    serde_json::to_value(event).unwrap_or(Value::Null)
}

pub(crate) fn source_name(source: wit::SessionSource) -> &'static str {
    match source {
        wit::SessionSource::Startup => "startup",
        wit::SessionSource::Resume => "resume",
        wit::SessionSource::Clear => "clear",
        wit::SessionSource::Compact => "compact",
    }
}

pub(crate) fn message(m: &wit::Message) -> Value {
    let role = match m.role {
        wit::Role::User => "user",
        wit::Role::Assistant => "assistant",
        wit::Role::System => "system",
    };
    json!({ "role": role, "text": m.text })
}

/// A JSON text the host produced; kept as a string if it somehow is not JSON.
pub(crate) fn json_text(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

pub(crate) fn provenance(p: &Option<wit::Provenance>) -> Value {
    match p {
        None => Value::Null,
        Some(wit::Provenance::Builtin) => json!({ "kind": "builtin" }),
        Some(wit::Provenance::Mcp(m)) => {
            json!({ "kind": "mcp", "server": m.server, "tool": m.tool })
        }
        Some(wit::Provenance::Plugin(name)) => json!({ "kind": "plugin", "name": name }),
    }
}

/// The call's fields on a hook event.
fn tool_call_event(event: &mut HookEvent, call: &wit::ToolCall) {
    event.tool_name = Some(call.name.clone());
    event.tool_input = Some(json_text(&call.arguments));
    event.tool_use_id = Some(call.tool_use_id.clone());
    if call.provenance.is_some() {
        event
            .other
            .insert("provenance".into(), provenance(&call.provenance));
    }
}

/// The call's fields in a committed fact.
fn tool_call(out: &mut Map<String, Value>, call: &wit::ToolCall) {
    out.insert("tool_name".into(), call.name.clone().into());
    out.insert("tool_input".into(), json_text(&call.arguments));
    out.insert("tool_use_id".into(), call.tool_use_id.clone().into());
    if call.provenance.is_some() {
        out.insert("provenance".into(), provenance(&call.provenance));
    }
}

pub(crate) fn blocks(blocks: &[wit::ContentBlock]) -> Value {
    blocks
        .iter()
        .map(|b| match b {
            wit::ContentBlock::Text(text) => json!({ "type": "text", "text": text }),
            wit::ContentBlock::Json(j) => json!({ "type": "json", "value": json_text(j) }),
            wit::ContentBlock::Image(image) => json!({
                "type": "image",
                "media_type": image.media_type,
                "data": base64(&image.data),
            }),
        })
        .collect::<Vec<_>>()
        .into()
}

/// The derived text projection of content: text blocks as they are, JSON blocks as JSON text,
/// images as a placeholder.
pub(crate) fn content_text(blocks: &[wit::ContentBlock]) -> String {
    let parts: Vec<String> = blocks
        .iter()
        .map(|b| match b {
            wit::ContentBlock::Text(text) => text.clone(),
            wit::ContentBlock::Json(j) => j.clone(),
            wit::ContentBlock::Image(image) => format!("[image {}]", image.media_type),
        })
        .collect();
    parts.join("\n")
}

fn tool_outcome(out: &mut Map<String, Value>, outcome: &wit::ToolOutcome) {
    let value = outcome.value.as_deref().map_or(Value::Null, json_text);
    let content = content_text(&outcome.content_blocks);
    out.insert("tool_response".into(), value);
    out.insert("content_blocks".into(), blocks(&outcome.content_blocks));
    out.insert("is_error".into(), outcome.is_error.into());
    if outcome.is_error {
        out.insert("error".into(), content.clone().into());
    }
    out.insert("content".into(), content.into());
}

pub(crate) fn observation(o: &wit::Observation) -> Value {
    let fact = match &o.fact {
        wit::CommittedFact::Message(m) => {
            let mut v = message(m);
            v["kind"] = "message".into();
            v
        }
        wit::CommittedFact::ToolCall(call) => {
            let mut map = Map::new();
            map.insert("kind".into(), "tool-call".into());
            tool_call(&mut map, call);
            Value::Object(map)
        }
        wit::CommittedFact::ToolResult(result) => {
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
        wit::CommittedFact::LlmResponse(r) => json!({
            "kind": "llm-response",
            "model": r.model,
            "text": r.text,
            "tool_calls": r.tool_calls.iter().map(|c| {
                let mut map = Map::new();
                tool_call(&mut map, c);
                Value::Object(map)
            }).collect::<Vec<_>>(),
            "server_tool_content": r.server_tool_content.iter().map(|s| match s {
                wit::ServerToolContent::WebSearch(w) =>
                    json!({ "kind": "web-search", "query": w.query, "result_urls": w.result_urls }),
                wit::ServerToolContent::CodeExecution(c) =>
                    json!({ "kind": "code-execution", "code": c.code, "output": c.output }),
                wit::ServerToolContent::Other(j) => json!({ "kind": "other", "value": json_text(j) }),
            }).collect::<Vec<_>>(),
            "stop_reason": r.stop_reason,
        }),
        wit::CommittedFact::TurnCompleted(outcome) => {
            let outcome = match outcome {
                wit::TurnOutcome::Completed => "completed",
                wit::TurnOutcome::Blocked => "blocked",
                wit::TurnOutcome::Interrupted => "interrupted",
                wit::TurnOutcome::Failed => "failed",
            };
            json!({ "kind": "turn-completed", "outcome": outcome })
        }
        wit::CommittedFact::SessionEnded(reason) => {
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

/// Reads a hook's answer: `exit`, its output (stdout, or the HTTP body) and, for a blocking
/// exit, its stderr.
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
) -> Result<(Response, Notes), Failure> {
    let text = std::str::from_utf8(output)
        .map_err(|_| invalid("the answer is not UTF-8"))?
        .trim();
    let mut notes = Notes {
        system_message: None,
    };
    if let Exit::Block = exit {
        let reason = String::from_utf8_lossy(stderr).trim().to_string();
        let reason = if reason.is_empty() {
            format!("blocked by `{hook_id}` (exit status 2)")
        } else {
            reason
        };
        return Ok((blocking(request, reason, "exit-2"), notes));
    }
    if guarding && !text.is_empty() && !text.starts_with('{') {
        return Err(invalid(format!(
            "a guard's answer must be exactly one JSON object (or nothing), and this starts \
             with `{}`",
            text.chars().take(40).collect::<String>()
        )));
    }
    // Plain text is context where Claude Code makes it context, and ignored elsewhere.
    if !text.starts_with('{') {
        let contexts =
            if text.is_empty() || !matches!(point, Point::SessionStart | Point::PromptSubmit) {
                vec![]
            } else {
                vec![text.to_string()]
            };
        return Ok((plain(request, contexts), notes));
    }
    let answer: HookAnswer = serde_json::from_str(text).map_err(|e| {
        invalid(format!(
            "the answer is not a hook answer of the Claude Code protocol: {e}"
        ))
    })?;
    notes.system_message = answer.system_message.clone();
    let _ = answer.suppress_output;
    let specific = answer.hook_specific_output.unwrap_or_default();
    let expected = event_name(point);
    if let Some(name) = &specific.hook_event_name
        && name != expected
    {
        return Err(invalid(format!(
            "`hookSpecificOutput.hookEventName` is `{name}`, but this is `{expected}`"
        )));
    }
    let refuse = |field: &str| {
        Err(invalid(format!(
            "`{field}` is not an answer `{expected}` takes at `{point}`"
        )))
    };
    // `continue: false` stops the agent and wins over any decision: a veto where the point
    // has one.
    if answer.keep_going == Some(false) {
        let message = answer
            .stop_reason
            .clone()
            .unwrap_or_else(|| format!("`{hook_id}` stopped the agent"));
        return Ok((blocking(request, message, "stop"), notes));
    }
    let block_reason = || {
        answer
            .reason
            .clone()
            .filter(|r| !r.trim().is_empty())
            .unwrap_or_else(|| format!("blocked by `{hook_id}`"))
    };
    let contexts: Vec<String> = specific.additional_context.clone().into_iter().collect();
    let response = match point {
        Point::PreTool | Point::ToolGuard => {
            if !contexts.is_empty() {
                return refuse("hookSpecificOutput.additionalContext");
            }
            let permission = match (specific.permission_decision, answer.decision) {
                (Some(p), _) => Some(p),
                (None, Some(Decision::Block)) => Some(Permission::Deny),
                (None, Some(Decision::Approve)) => Some(Permission::Allow),
                (None, None) => None,
            };
            let reason = specific
                .permission_decision_reason
                .clone()
                .or(answer.reason.clone())
                .filter(|r| !r.trim().is_empty());
            match (point, permission) {
                (_, Some(Permission::Deny)) => blocking(
                    request,
                    reason.unwrap_or_else(|| format!("denied by `{hook_id}`")),
                    "deny",
                ),
                (Point::PreTool, Some(Permission::Ask)) => {
                    Response::PreTool(wit::PreToolDecision::Ask(wit::Ask {
                        reason: reason.unwrap_or_else(|| format!("`{hook_id}` asks")),
                    }))
                }
                (_, Some(Permission::Ask)) => {
                    return Err(invalid(
                        "`ask` at tool-guard: a tool guard can only deny or abstain",
                    ));
                }
                (Point::PreTool, _) => Response::PreTool(wit::PreToolDecision::Allow),
                _ => Response::ToolGuard(wit::GuardDecision::Abstain),
            }
        }
        _ if specific.permission_decision.is_some() => {
            return refuse("hookSpecificOutput.permissionDecision");
        }
        _ if specific.permission_decision_reason.is_some() => {
            return refuse("hookSpecificOutput.permissionDecisionReason");
        }
        _ if answer.decision == Some(Decision::Approve) => {
            return refuse("decision: \"approve\"");
        }
        Point::PromptSubmit | Point::PostTool | Point::TurnStopping
            if answer.decision == Some(Decision::Block) =>
        {
            let mut response = blocking(request, block_reason(), "block");
            if let Response::PostTool(d) = &mut response {
                d.contexts = contexts;
            }
            response
        }
        Point::TurnStopping if !contexts.is_empty() => {
            return refuse("hookSpecificOutput.additionalContext");
        }
        Point::SessionStart | Point::ToolResult | Point::SessionEnded
            if answer.decision.is_some() =>
        {
            return refuse("decision");
        }
        _ => plain(request, contexts),
    };
    Ok((response, notes))
}

/// The answer of a hook that said nothing but (maybe) context.
fn plain(request: &Request, contexts: Vec<String>) -> Response {
    match request {
        Request::SessionStart(_) => Response::SessionStart(contexts),
        Request::PromptSubmit(_) => Response::PromptSubmit(wit::PreStepDecision::Enter(contexts)),
        Request::PreTool(_) => Response::PreTool(wit::PreToolDecision::Allow),
        Request::ToolGuard(_) => Response::ToolGuard(wit::GuardDecision::Abstain),
        Request::PostTool(..) => Response::PostTool(wit::PostToolDecision {
            action: wit::PostToolAction::Accept,
            contexts,
        }),
        Request::TurnStopping(_) => Response::TurnStopping(None),
        Request::ToolResult(..) | Request::Committed(_) | Request::ToolExecute(..) => {
            Response::Observed
        }
    }
}

/// The point's veto (deny, reject, block, steer) with `message`; nothing where the point has
/// none.
fn blocking(request: &Request, message: String, code: &str) -> Response {
    let deny = || wit::Deny {
        reason_code: code.to_string(),
        message: message.clone(),
        payload: None,
    };
    match request {
        Request::PreTool(_) => Response::PreTool(wit::PreToolDecision::Deny(deny())),
        Request::ToolGuard(_) => Response::ToolGuard(wit::GuardDecision::Deny(deny())),
        Request::PromptSubmit(_) => Response::PromptSubmit(wit::PreStepDecision::Reject(deny())),
        Request::PostTool(..) => Response::PostTool(wit::PostToolDecision {
            action: wit::PostToolAction::Block(message.clone()),
            contexts: vec![],
        }),
        Request::TurnStopping(_) => Response::TurnStopping(Some(message.clone())),
        _ => plain(request, vec![]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn pre_tool() -> Request {
        Request::PreTool(Arc::new(wit::ToolCall {
            tool_use_id: "t1".into(),
            name: "Bash".into(),
            arguments: r#"{"command":"ls"}"#.into(),
            provenance: None,
        }))
    }

    fn decode_pre_tool(answer: &str) -> Result<Response, Failure> {
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
    fn a_deny_answer_denies_with_its_reason() {
        let r = decode_pre_tool(
            r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}"#,
        )
        .unwrap();
        let Response::PreTool(wit::PreToolDecision::Deny(d)) = r else {
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
                Response::PreTool(wit::PreToolDecision::Allow)
            ));
        }
    }
}

#[cfg(test)]
mod guarding_tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_guards_output_is_one_json_object_or_nothing() {
        let request = Request::PreTool(Arc::new(wit::ToolCall {
            tool_use_id: "t1".into(),
            name: "Bash".into(),
            arguments: "{}".into(),
            provenance: None,
        }));
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
            Response::PreTool(wit::PreToolDecision::Deny(_))
        ));
        assert!(decode_as("  ", true).is_ok());
        // An observer's plain text is still "nothing to say", as in Claude Code.
        assert!(decode_as(&logged, false).is_ok());
    }
}
