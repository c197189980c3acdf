//! `pre-tool`: before a tool call. Allow, deny or ask.
//!
//! - Deny and ask need the `guard` capability; an observer's allow is recorded only.
//! - The first honoured deny wins and short-circuits every remaining hook (foreground and
//!   background). An ask does not short-circuit: a later guard may still deny.
//! - With no deny, the first ask wins over allow; [`Session::authorize`] resolves it.

use crate::hook::{self, Answer, Lent, Payload, Request};
use crate::point::{Capability, Point};
use crate::session::{Session, Verdict, deny_verdict};
use crate::types::{AskRequest, PreToolDecision, ToolCall};

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
