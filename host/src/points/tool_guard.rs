//! `tool-guard`: final invariants, after the whole `pre-tool` waterfall. A guard can only
//! deny or abstain — never force-allow — so no listener order can resurrect a call that an
//! invariant forbids.
//!
//! [`Session::authorize`] is the whole pre-dispatch policy: `pre-tool`, then an ask resolved
//! through the embedder's [`Approver`](crate::Approver) (only "allowed once" continues;
//! a rejection, a cancellation, an unavailable channel or no approver at all is a denial),
//! then `tool-guard`.

use crate::claude_code::HookEvent;
use crate::failure::Failure;
use crate::hook::{self, Answer, Lent, Payload, Request};
use crate::point::{Capability, Point};
use crate::point_wire::{ClaudeReply, PointWire, ToolPermission, deny, kind};
use crate::runtime::external::{native, wire};
use crate::session::{Session, Verdict, deny_verdict};
use crate::types::{
    Approval, AskRequest, Authorization, Denial, GuardDecision, PreToolDecision, ToolCall,
};
use serde::Deserialize;
use serde_json::{Value, json};

impl Session {
    /// Runs the `tool-guard` hooks that match `call`'s tool: the first deny vetoes the call.
    pub async fn tool_guard(&self, call: &ToolCall) -> GuardDecision {
        let lent = Lent::new(call);
        let request = Request::ToolGuard(Payload::Borrowed(&lent));
        let denial = self
            .waterfall(
                Point::ToolGuard,
                Some(&call.name),
                &mut (),
                |_| request.clone(),
                |_, hook, spec, response| {
                    let Answer::ToolGuard(decision) = response else {
                        unreachable!("a tool-guard request gets a tool-guard response")
                    };
                    match decision {
                        hook::GuardDecision::Abstain => Verdict::Completed {
                            honoured: spec.has(Capability::Guard),
                        },
                        hook::GuardDecision::Deny(_) if !spec.has(Capability::Guard) => {
                            Verdict::NotGranted(Capability::Guard)
                        }
                        hook::GuardDecision::Deny(d) => deny_verdict(hook, d),
                    }
                },
                |denial| denial,
            )
            .await;
        match denial {
            Some(denial) => GuardDecision::Deny(denial),
            None => GuardDecision::Abstain,
        }
    }

    /// The whole pre-dispatch policy of `call`: `pre-tool`; an ask resolved through the
    /// approver; then `tool-guard`, which can still veto an allowed or approved call.
    pub async fn authorize(&self, call: &ToolCall) -> Authorization {
        let approved_by = match self.pre_tool(call).await {
            PreToolDecision::Allow => None,
            PreToolDecision::Deny(denial) => return Authorization::Denied(denial),
            PreToolDecision::Ask(ask) => match self.resolve_ask(call, &ask).await {
                Ok(()) => Some(ask.hook_id),
                Err(denial) => return Authorization::Denied(denial),
            },
        };
        match self.tool_guard(call).await {
            GuardDecision::Abstain => Authorization::Allowed { approved_by },
            GuardDecision::Deny(denial) => Authorization::Denied(denial),
        }
    }

    pub(crate) async fn resolve_ask(
        &self,
        call: &ToolCall,
        ask: &AskRequest,
    ) -> Result<(), Denial> {
        let approval = match self.approver() {
            Some(approver) => Some(approver.approve(call, ask).await),
            None => None,
        };
        let (reason_code, what) = match approval {
            Some(Approval::AllowedOnce) => return Ok(()),
            Some(Approval::Rejected) => ("approval-rejected", "the approver rejected it"),
            Some(Approval::Cancelled) => ("approval-cancelled", "the approval was cancelled"),
            Some(Approval::Unavailable) => ("approval-unavailable", "no one could be asked"),
            Some(Approval::Deferred) => (
                "approval-deferred",
                "the user is asked first (it runs when the client calls again with a yes)",
            ),
            None => ("no-approver", "this session has no approver"),
        };
        Err(Denial {
            hook_id: ask.hook_id.clone(),
            reason_code: reason_code.into(),
            message: format!(
                "`{}` asked before running {} ({}), and {what}, so the call is denied",
                ask.hook_id, call.name, ask.reason
            ),
            payload: None,
            failure: None,
        })
    }
}

/// What `tool-guard` hooks receive and answer on the wire: the call; deny or abstain (an ask
/// is refused: a guard cannot ask), no contexts.
impl PointWire for kind::ToolGuard {
    fn claude_event(&self, _: Point) -> &'static str {
        "PreToolUse"
    }

    fn claude_fields(&self, request: &Request<'_>, event: &mut HookEvent) {
        if let Request::ToolGuard(call) = request {
            wire::tool_call_event(event, call);
        }
    }

    fn claude_answer(&self, reply: &ClaudeReply<'_>) -> Result<Answer, Failure> {
        Ok(Answer::ToolGuard(match reply.tool_permission()? {
            ToolPermission::Deny(deny) => hook::GuardDecision::Deny(deny),
            ToolPermission::Ask(_) => {
                return Err(crate::point_wire::invalid(
                    "`ask` at tool-guard: a tool guard can only deny or abstain",
                ));
            }
            ToolPermission::Allow => hook::GuardDecision::Abstain,
        }))
    }

    fn native_input(&self, request: &Request<'_>) -> Value {
        match request {
            Request::ToolGuard(call) => json!({ "call": native::call_json(call) }),
            _ => Value::Null,
        }
    }

    fn native_answer(&self, point: Point, decision: Value) -> Result<Answer, Failure> {
        #[derive(Deserialize)]
        #[serde(rename_all = "kebab-case", deny_unknown_fields)]
        enum GuardJson {
            Abstain,
            Deny(native::DenyJson),
        }
        Ok(Answer::ToolGuard(
            match native::decision(point, decision)? {
                GuardJson::Abstain => hook::GuardDecision::Abstain,
                GuardJson::Deny(deny) => hook::GuardDecision::Deny(deny.into()),
            },
        ))
    }

    fn neutral(&self, _: Vec<String>) -> Answer {
        Answer::ToolGuard(hook::GuardDecision::Abstain)
    }

    fn veto(&self, message: String, reason_code: &str) -> Option<Answer> {
        Some(Answer::ToolGuard(hook::GuardDecision::Deny(deny(
            message,
            reason_code,
        ))))
    }

    #[cfg(any(test, feature = "fuzzing"))]
    fn sample(&self, _: Point) -> Request<'static> {
        Request::ToolGuard(crate::point_wire::sample_call().into())
    }
}

pub(super) fn run_json<'a>(
    session: &'a Session,
    input: &str,
) -> serde_json::Result<super::input::RunJson<'a>> {
    let call: ToolCall = serde_json::from_str(input)?;
    Ok(Box::pin(async move {
        super::input::json(session.tool_guard(&call).await)
    }))
}
