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
use crate::types::{Message, SessionSource};
use crate::types::{ToolCall, ToolOutcome};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::wire::{self, Caller};

/// The protocol's name and version, sent with every request.
pub(crate) const PROTOCOL: &str = "palisade/0.1";

/// The JSON a hook of the Palisade protocol receives for `request`.
pub(crate) fn encode(caller: &Caller<'_>, request: &Request) -> Value {
    let input = request.wire().native_input(request);
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

/// The input of a point over a call and its outcome.
pub(crate) fn call_outcome_input(call: &ToolCall, outcome: &ToolOutcome) -> Value {
    json!({ "call": call_json(call), "outcome": outcome_json(outcome) })
}

/// A tool call's JSON in the protocol.
pub(crate) fn call_json(call: &ToolCall) -> Value {
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

/// A refusal's JSON (`deny`, `reject`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DenyJson {
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

/// An ask's JSON.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AskJson {
    pub reason: String,
}

pub(crate) fn invalid(detail: impl Into<String>) -> Failure {
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
    request.wire().native_answer(point, decision)
}

/// `decision`, read as the answer of `point` it must be.
pub(crate) fn decision<T: serde::de::DeserializeOwned>(
    point: Point,
    decision: Value,
) -> Result<T, Failure> {
    serde_json::from_value(decision).map_err(|e| {
        invalid(format!(
            "`decision` is not an answer of `{point}` (see docs/runtimes.md): {e}"
        ))
    })
}

/// The answer of a hook that said nothing: allow, abstain, enter as is, accept, stop.
fn neutral(request: &Request) -> Answer {
    request.wire().neutral(Vec::new())
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
