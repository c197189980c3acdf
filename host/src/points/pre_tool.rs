//! `pre-tool`: before a tool call. Allow, deny or ask.
//!
//! - Deny and ask need the `guard` capability; an observer's allow is recorded only.
//! - The first honoured deny wins and short-circuits every remaining hook (foreground and
//!   background). An ask does not short-circuit: a later guard may still deny.
//! - With no deny, the first ask wins over allow; [`Session::authorize`] resolves it.

use crate::claude_code::HookEvent;
use crate::failure::Failure;
use crate::hook::{self, Answer, Lent, Payload, Request};
use crate::point::{Capability, Point};
use crate::point_wire::{ClaudeReply, PointWire, ToolPermission, deny, kind};
use crate::runtime::external::{native, wire};
use crate::session::{Session, Verdict, deny_verdict};
use crate::types::{AskRequest, PreToolDecision, ToolCall};
use serde::Deserialize;
use serde_json::{Value, json};

impl Session {
    /// Runs the `pre-tool` hooks that match `call`'s tool and returns their combined
    /// decision. [`Session::authorize`] goes on to resolve an ask and run `tool-guard`.
    pub async fn pre_tool(&self, call: &ToolCall) -> PreToolDecision {
        let lent = Lent::new(call);
        let request = Request::PreTool(Payload::Borrowed(&lent));
        let mut ask: Option<AskRequest> = None;
        let denial = self
            .waterfall(
                Point::PreTool,
                Some(&call.name),
                &mut ask,
                |_| request.clone(),
                |ask, hook, spec, response| {
                    let Answer::PreTool(decision) = response else {
                        unreachable!("a pre-tool request gets a pre-tool response")
                    };
                    match decision {
                        hook::PreToolDecision::Allow => Verdict::Completed {
                            honoured: spec.has(Capability::Guard),
                        },
                        _ if !spec.has(Capability::Guard) => Verdict::NotGranted(Capability::Guard),
                        hook::PreToolDecision::Ask(reason) => {
                            ask.get_or_insert(AskRequest {
                                hook_id: hook.id.to_string(),
                                reason,
                            });
                            Verdict::Completed { honoured: true }
                        }
                        hook::PreToolDecision::Deny(d) => deny_verdict(hook, d),
                    }
                },
                |denial| denial,
            )
            .await;
        match (denial, ask) {
            (Some(denial), _) => PreToolDecision::Deny(denial),
            (None, Some(ask)) => PreToolDecision::Ask(ask),
            (None, None) => PreToolDecision::Allow,
        }
    }
}

/// What `pre-tool` hooks receive and answer on the wire: the call; Claude Code's
/// `permissionDecision` (allow, deny, ask) or the legacy `decision`, no contexts.
impl PointWire for kind::PreTool {
    fn claude_event(&self, _: Point) -> &'static str {
        "PreToolUse"
    }

    fn claude_fields(&self, request: &Request<'_>, event: &mut HookEvent) {
        if let Request::PreTool(call) = request {
            wire::tool_call_event(event, call);
        }
    }

    fn claude_answer(&self, reply: &ClaudeReply<'_>) -> Result<Answer, Failure> {
        Ok(Answer::PreTool(match reply.tool_permission()? {
            ToolPermission::Allow => hook::PreToolDecision::Allow,
            ToolPermission::Deny(deny) => hook::PreToolDecision::Deny(deny),
            ToolPermission::Ask(reason) => hook::PreToolDecision::Ask(reason),
        }))
    }

    fn native_input(&self, request: &Request<'_>) -> Value {
        match request {
            Request::PreTool(call) => json!({ "call": native::call_json(call) }),
            _ => Value::Null,
        }
    }

    fn native_answer(&self, point: Point, decision: Value) -> Result<Answer, Failure> {
        #[derive(Deserialize)]
        #[serde(rename_all = "kebab-case", deny_unknown_fields)]
        enum PreToolJson {
            Allow,
            Deny(native::DenyJson),
            Ask(native::AskJson),
        }
        Ok(Answer::PreTool(match native::decision(point, decision)? {
            PreToolJson::Allow => hook::PreToolDecision::Allow,
            PreToolJson::Deny(deny) => hook::PreToolDecision::Deny(deny.into()),
            PreToolJson::Ask(ask) => hook::PreToolDecision::Ask(ask.reason),
        }))
    }

    fn neutral(&self, _: Vec<String>) -> Answer {
        Answer::PreTool(hook::PreToolDecision::Allow)
    }

    fn veto(&self, message: String, reason_code: &str) -> Option<Answer> {
        Some(Answer::PreTool(hook::PreToolDecision::Deny(deny(
            message,
            reason_code,
        ))))
    }

    #[cfg(any(test, feature = "fuzzing"))]
    fn sample(&self, _: Point) -> Request<'static> {
        Request::PreTool(crate::point_wire::sample_call().into())
    }
}

/// The input of [`Session::run_json`] here (and at `tool-guard`).
pub(super) const INPUT: &str =
    "pre-tool, tool-guard {\"tool_use_id\": \"…\", \"name\": \"Bash\", \"arguments\": {…}}";

pub(super) fn run_json<'a>(
    session: &'a Session,
    input: &str,
) -> serde_json::Result<super::input::RunJson<'a>> {
    let call: ToolCall = serde_json::from_str(input)?;
    Ok(Box::pin(async move {
        super::input::json(session.pre_tool(&call).await)
    }))
}
