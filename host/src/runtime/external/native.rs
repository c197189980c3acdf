//! Palisade's own wire protocol for command and HTTP hooks (`protocol = "palisade"`), seed
//! 2's: the request is the point's typed payload, and the response is only an optional
//! `decision` — the point's WIT answer written as JSON — so an external hook answers exactly
//! what a component can (a deny's `reason_code` and `payload`, a post-tool replacement), and
//! anything else is refused.
//!
//! Request:
//!
//! ```json
//! {"protocol": "palisade/0.1", "point": "pre-tool", "session_id": "…", "hook_id": "…",
//!  "invocation_id": "…", "config": {…}, "input": {"call": {"tool_use_id": "…", "name": "Bash",
//!  "arguments": {"command": "ls"}}}}
//! ```
//!
//! Answer: nothing, `{}`, or `{"decision": D}` with `D` the point's answer: a variant is
//! `"case"` or `{"case": value}`, a record an object with snake_case fields, `json` any JSON
//! value, an option `null` or the value. Unknown fields (a legacy `patches` rewrite among
//! them) make the answer `invalid-response`. Only exit status 0 (HTTP 2xx) is an answer.

use crate::failure::{Failure, FailureReason};
#[cfg(test)]
use crate::hook::Shared;
use crate::hook::{self, Answer, Request};
use crate::point::Point;
#[cfg(test)]
use crate::types::SessionSource;
use crate::types::{Message, ToolCall, ToolOutcome};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::wire::{self, Caller};

/// The protocol's name and version, sent with every request.
pub(crate) const PROTOCOL: &str = "palisade/0.1";

/// The JSON a hook of the Palisade protocol receives for `request`.
pub(crate) fn encode(caller: &Caller<'_>, request: &Request) -> Value {
    let input = match request {
        Request::SessionStart(source) => json!({ "source": wire::source_name(*source) }),
        Request::PromptSubmit(step) => json!({
            "step": {
                "messages": step.messages.iter().map(wire::message).collect::<Vec<_>>(),
                "turn": step.turn,
                "step": step.step,
            },
            // A serialize-only projection (docs/semantics.md S2.9): never read back.
            "prompt": wire::prompt_text(&step.messages),
        }),
        Request::PreTool(call) | Request::ToolGuard(call) | Request::ToolExecute(call, _) => {
            json!({ "call": call_json(call) })
        }
        Request::PostTool(call, outcome) | Request::ToolResult(call, outcome) => json!({
            "call": call_json(call),
            "outcome": outcome_json(outcome),
        }),
        Request::TurnStopping(event) => json!({ "event": {
            "turn": event.turn,
            "step": event.step,
            "last_assistant_message": event.last_assistant_message,
            "continuations": event.continuations,
        }}),
        Request::Committed(observation) => json!({ "observation": wire::observation(observation) }),
    };
    json!({
        "protocol": PROTOCOL,
        "point": caller.point.as_str(),
        "session_id": caller.session_id,
        "hook_id": caller.hook_id,
        "invocation_id": caller.invocation_id,
        "config": caller.config,
        "input": input,
    })
}

fn call_json(call: &ToolCall) -> Value {
    let mut map = Map::new();
    map.insert("tool_use_id".into(), call.tool_use_id.clone().into());
    map.insert("name".into(), call.name.clone().into());
    map.insert("arguments".into(), call.arguments.clone());
    if call.provenance.is_some() {
        map.insert("provenance".into(), wire::provenance(&call.provenance));
    }
    Value::Object(map)
}

fn outcome_json(outcome: &ToolOutcome) -> Value {
    let content = wire::content_text(&outcome.content_blocks);
    let mut json = json!({
        "content_blocks": wire::blocks(&outcome.content_blocks),
        "is_error": outcome.is_error,
        "value": outcome.value.clone().unwrap_or(Value::Null),
    });
    // Serialize-only projections (docs/semantics.md S2.9, S2.13): never read back.
    if outcome.is_error {
        json["error"] = content.clone().into();
    }
    json["content"] = content.into();
    json
}

/// The whole answer: only `decision`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AnswerJson {
    #[serde(default)]
    decision: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DenyJson {
    reason_code: String,
    message: String,
    #[serde(default)]
    payload: Option<Value>,
}

impl From<DenyJson> for hook::Deny {
    fn from(d: DenyJson) -> Self {
        hook::Deny {
            reason_code: d.reason_code,
            message: d.message,
            payload: d.payload.map(|p| p.to_string()),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AskJson {
    reason: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
enum PreToolJson {
    Allow,
    Deny(DenyJson),
    Ask(AskJson),
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
enum GuardJson {
    Abstain,
    Deny(DenyJson),
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
enum PreStepJson {
    Enter(Vec<String>),
    EnterBatch(Vec<Message>),
    Reject(DenyJson),
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
enum BlockJson {
    Text {
        text: String,
    },
    Json {
        value: Value,
    },
    Image {
        media_type: String,
        /// Standard base64.
        data: String,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
enum ActionJson {
    Accept,
    Block(String),
    ReplaceContent(Vec<BlockJson>),
    ReplaceValue(Value),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PostToolJson {
    action: ActionJson,
    #[serde(default)]
    contexts: Vec<String>,
}

fn invalid(detail: impl Into<String>) -> Failure {
    Failure::new(FailureReason::InvalidResponse, detail)
}

/// Reads the answer (stdout, or the HTTP body) of a hook of the Palisade protocol.
pub(crate) fn decode(point: Point, request: &Request, output: &[u8]) -> Result<Answer, Failure> {
    let text = std::str::from_utf8(output)
        .map_err(|_| invalid("the answer is not UTF-8"))?
        .trim();
    if text.is_empty() {
        return Ok(neutral(request));
    }
    let answer: AnswerJson = serde_json::from_str(text).map_err(|e| {
        invalid(format!(
            "the answer is not `{{\"decision\": …}}` of the palisade protocol: {e}"
        ))
    })?;
    let Some(decision) = answer.decision.filter(|d| !d.is_null()) else {
        return Ok(neutral(request));
    };
    let wrong = |e: serde_json::Error| {
        invalid(format!(
            "`decision` is not an answer of `{point}` (see docs/runtimes.md): {e}"
        ))
    };
    Ok(match request {
        Request::SessionStart(_) => {
            Answer::SessionStart(serde_json::from_value(decision).map_err(wrong)?)
        }
        Request::PromptSubmit(_) => {
            Answer::PromptSubmit(match serde_json::from_value(decision).map_err(wrong)? {
                PreStepJson::Enter(contexts) => hook::PreStepDecision::Enter(contexts),
                PreStepJson::EnterBatch(messages) => hook::PreStepDecision::EnterBatch(messages),
                PreStepJson::Reject(deny) => hook::PreStepDecision::Reject(deny.into()),
            })
        }
        Request::PreTool(_) => {
            Answer::PreTool(match serde_json::from_value(decision).map_err(wrong)? {
                PreToolJson::Allow => hook::PreToolDecision::Allow,
                PreToolJson::Deny(deny) => hook::PreToolDecision::Deny(deny.into()),
                PreToolJson::Ask(ask) => hook::PreToolDecision::Ask(ask.reason),
            })
        }
        Request::ToolGuard(_) => {
            Answer::ToolGuard(match serde_json::from_value(decision).map_err(wrong)? {
                GuardJson::Abstain => hook::GuardDecision::Abstain,
                GuardJson::Deny(deny) => hook::GuardDecision::Deny(deny.into()),
            })
        }
        Request::PostTool(..) => {
            let answer: PostToolJson = serde_json::from_value(decision).map_err(wrong)?;
            let action = match answer.action {
                ActionJson::Accept => hook::PostToolAction::Accept,
                ActionJson::Block(message) => hook::PostToolAction::Block(message),
                ActionJson::ReplaceContent(blocks) => hook::PostToolAction::ReplaceContent(
                    blocks.into_iter().map(block).collect::<Result<_, _>>()?,
                ),
                ActionJson::ReplaceValue(value) => {
                    hook::PostToolAction::ReplaceValue(value.to_string())
                }
            };
            Answer::PostTool(hook::PostToolDecision {
                action,
                contexts: answer.contexts,
            })
        }
        Request::TurnStopping(_) => {
            Answer::TurnStopping(Some(serde_json::from_value(decision).map_err(wrong)?))
        }
        Request::ToolResult(..) | Request::Committed(_) | Request::ToolExecute(..) => {
            return Err(invalid(format!(
                "`{point}` takes no decision: an observer answers nothing"
            )));
        }
    })
}

fn block(block: BlockJson) -> Result<hook::Block, Failure> {
    Ok(match block {
        BlockJson::Text { text } => hook::Block::Text(text),
        BlockJson::Json { value } => hook::Block::Json(value.to_string()),
        BlockJson::Image { media_type, data } => hook::Block::Image {
            media_type,
            data: base64::engine::general_purpose::STANDARD
                .decode(data.as_bytes())
                .map_err(|e| invalid(format!("an image block's `data` is not base64: {e}")))?,
        },
    })
}

/// The answer of a hook that said nothing: allow, abstain, enter as is, accept, stop.
fn neutral(request: &Request) -> Answer {
    match request {
        Request::SessionStart(_) => Answer::SessionStart(vec![]),
        Request::PromptSubmit(_) => Answer::PromptSubmit(hook::PreStepDecision::Enter(vec![])),
        Request::PreTool(_) => Answer::PreTool(hook::PreToolDecision::Allow),
        Request::ToolGuard(_) => Answer::ToolGuard(hook::GuardDecision::Abstain),
        Request::PostTool(..) => Answer::PostTool(hook::PostToolDecision {
            action: hook::PostToolAction::Accept,
            contexts: vec![],
        }),
        Request::TurnStopping(_) => Answer::TurnStopping(None),
        Request::ToolResult(..) | Request::Committed(_) | Request::ToolExecute(..) => {
            Answer::Observed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn call() -> Arc<Shared<ToolCall>> {
        Shared::new(ToolCall::new(
            "t1",
            "Bash",
            serde_json::json!({ "command": "ls" }),
        ))
    }

    fn outcome() -> Arc<Shared<ToolOutcome>> {
        Shared::new(ToolOutcome::text("TOKEN=secret"))
    }

    /// Command and HTTP serialization adds `prompt` and `error` text projections, in both
    /// protocols (docs/semantics.md S2.9).
    #[test]
    fn both_protocols_project_the_prompt_and_the_error_text() {
        let config = Map::new();
        let caller = |point| Caller {
            session_id: "s",
            hook_id: "p/x",
            invocation_id: "i",
            point,
            config: &config,
            guarding: false,
        };
        let step = Request::PromptSubmit(Shared::new(crate::types::PreStep {
            messages: vec![Message::user("list the files")],
            turn: 1,
            step: 1,
        }));
        let failed = Request::ToolResult(call(), Shared::new(ToolOutcome::error("no such file")));
        let native_prompt = encode(&caller(Point::PromptSubmit), &step);
        let native_error = encode(&caller(Point::ToolResult), &failed);
        assert_eq!(native_prompt["input"]["prompt"], "list the files");
        assert_eq!(native_error["input"]["outcome"]["error"], "no such file");
        let claude_prompt = wire::encode(&caller(Point::PromptSubmit), &step);
        let claude_error = wire::encode(&caller(Point::ToolResult), &failed);
        assert_eq!(claude_prompt["prompt"], "list the files");
        assert_eq!(claude_error["error"], "no such file");
        // Never accepted back as authority: an answer carrying them is invalid.
        let answer = br#"{"decision": "allow", "prompt": "rm -rf /"}"#;
        assert!(decode(Point::PreTool, &Request::PreTool(call().into()), answer).is_err());
    }

    #[test]
    fn a_deny_carries_its_reason_code_and_payload() {
        let answer = br#"{"decision": {"deny": {"reason_code": "rm-rf", "message": "no", "payload": {"rule": 7}}}}"#;
        let Answer::PreTool(hook::PreToolDecision::Deny(deny)) =
            decode(Point::PreTool, &Request::PreTool(call().into()), answer).unwrap()
        else {
            panic!("not a deny")
        };
        assert_eq!(deny.reason_code, "rm-rf");
        assert_eq!(deny.message, "no");
        assert_eq!(deny.payload.as_deref(), Some(r#"{"rule":7}"#));
    }

    #[test]
    fn every_point_decodes_its_own_answer() {
        let post = Request::PostTool(call(), outcome());
        let cases: Vec<(Point, Request, &str)> = vec![
            (
                Point::PreTool,
                Request::PreTool(call().into()),
                r#""allow""#,
            ),
            (
                Point::PreTool,
                Request::PreTool(call().into()),
                r#"{"ask": {"reason": "sure?"}}"#,
            ),
            (
                Point::ToolGuard,
                Request::ToolGuard(call().into()),
                r#""abstain""#,
            ),
            (
                Point::SessionStart,
                Request::SessionStart(SessionSource::Startup),
                r#"["a context"]"#,
            ),
            (
                Point::PostTool,
                post,
                r#"{"action": {"replace-content": [{"type": "text", "text": "TOKEN=***"}, {"type": "image", "media_type": "image/png", "data": "iVBORw=="}]}, "contexts": ["redacted"]}"#,
            ),
        ];
        for (point, request, decision) in cases {
            let answer = format!(r#"{{"decision": {decision}}}"#);
            decode(point, &request, answer.as_bytes())
                .unwrap_or_else(|e| panic!("{point} {decision}: {e}"));
        }
    }

    #[test]
    fn anything_but_a_decision_is_invalid() {
        let request = Request::PreTool(call().into());
        for answer in [
            r#"{"patches": [{"op": "replace"}]}"#,
            r#"{"decision": "allow", "extra": 1}"#,
            r#"{"decision": "abstain"}"#,
            r#"{"decision": {"deny": {"message": "no reason code"}}}"#,
            r#"{"decision": {"deny": {"reason_code": "x", "message": "m", "extra": 1}}}"#,
            r#"{"hookSpecificOutput": {"permissionDecision": "deny"}}"#,
            "looks fine",
            "{not json",
        ] {
            let failure = decode(Point::PreTool, &request, answer.as_bytes())
                .err()
                .unwrap_or_else(|| panic!("accepted: {answer}"));
            assert_eq!(failure.reason, FailureReason::InvalidResponse, "{answer}");
        }
        let observed = Request::ToolResult(call(), outcome());
        assert!(decode(Point::ToolResult, &observed, br#"{"decision": "allow"}"#).is_err());
        assert!(matches!(
            decode(Point::ToolResult, &observed, b"{}").unwrap(),
            Answer::Observed
        ));
    }

    #[test]
    fn nothing_said_is_the_points_neutral_answer() {
        for answer in ["", "  ", "{}", r#"{"decision": null}"#] {
            assert!(matches!(
                decode(
                    Point::PreTool,
                    &Request::PreTool(call().into()),
                    answer.as_bytes()
                )
                .unwrap(),
                Answer::PreTool(hook::PreToolDecision::Allow)
            ));
        }
    }
}
