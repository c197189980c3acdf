//! `pre-tool`: before a tool call. Allow, deny or ask.
//!
//! - Only a hook granted `guard` is honoured; an observer's answer is recorded only.
//! - The first honoured deny wins and short-circuits every remaining hook (foreground and
//!   background). An ask does not short-circuit: a later guard may still deny.
//! - With no deny, the first ask wins over allow.
//! - A guard's runtime failure denies (`hook-failure:<reason>`) unless `on_failure = "allow"`.

use crate::events::EventKind;
use crate::failure::{Failure, FailureReason};
use crate::instance::{Request, Response};
use crate::point::{Capability, Mode, Point};
use crate::sandbox::{to_wit_call, wit};
use crate::session::{Session, micros};
use crate::types::{AskRequest, Denial, PreToolDecision, ToolCall};

impl Session {
    /// Runs the `pre-tool` hooks that match `call`'s tool and returns their combined decision.
    pub async fn pre_tool(&self, call: &ToolCall) -> PreToolDecision {
        let inv = self.begin(Point::PreTool);
        let wit_call = to_wit_call(call);
        let mut ask: Option<AskRequest> = None;
        for hook in self.hooks(Point::PreTool, Some(&call.name)) {
            let spec = self.spec(hook);
            if spec.mode == Mode::Background {
                self.spawn(hook, &inv, wit_call.clone(), |c| Request::PreTool(c));
                continue;
            }
            let run = self.run(hook, &inv, &Request::PreTool(&wit_call)).await;
            let decision = match &run.result {
                Ok(Response::PreTool(decision)) => decision,
                Ok(_) => unreachable!("a pre-tool request gets a pre-tool response"),
                Err(failure) => {
                    if self.finish_failed(hook, &inv, &run, failure) {
                        return PreToolDecision::Deny(failed_closed(&hook.id, failure));
                    }
                    continue;
                }
            };
            let name = match decision {
                wit::PreToolDecision::Allow => "allow",
                wit::PreToolDecision::Deny(_) => "deny",
                wit::PreToolDecision::Ask(_) => "ask",
            };
            if !spec.has(Capability::Guard) {
                self.finish_observed(hook, &inv, &run, name);
                continue;
            }
            match decision {
                wit::PreToolDecision::Allow => self.emit(hook, &inv, completed(&run, name)),
                wit::PreToolDecision::Ask(a) => {
                    self.emit(hook, &inv, completed(&run, name));
                    ask.get_or_insert(AskRequest {
                        hook_id: hook.id.to_string(),
                        reason: a.reason.clone(),
                    });
                }
                wit::PreToolDecision::Deny(d) => {
                    let denial = match denial(&hook.id, d) {
                        Ok(denial) => {
                            self.emit(
                                hook,
                                &inv,
                                EventKind::HookDenied {
                                    duration_us: micros(run.duration),
                                    fuel_consumed: run.cost.fuel,
                                    reason_code: denial.reason_code.clone(),
                                    message: denial.message.clone(),
                                },
                            );
                            denial
                        }
                        Err(failure) => {
                            // A deny with an unparsable payload still denies, as a failure.
                            self.finish_failed(hook, &inv, &run, &failure);
                            failed_closed(&hook.id, &failure)
                        }
                    };
                    return PreToolDecision::Deny(denial);
                }
            }
        }
        match ask {
            Some(ask) => PreToolDecision::Ask(ask),
            None => PreToolDecision::Allow,
        }
    }
}

fn completed(run: &crate::session::Run, decision: &str) -> EventKind {
    EventKind::HookCompleted {
        duration_us: micros(run.duration),
        fuel_consumed: run.cost.fuel,
        decision: decision.into(),
        honoured: true,
    }
}

/// A guest's deny, with its payload parsed.
pub(crate) fn denial(hook_id: &str, deny: &wit::Deny) -> Result<Denial, Failure> {
    let payload = match &deny.payload {
        None => None,
        Some(text) => Some(serde_json::from_str(text).map_err(|e| {
            Failure::new(
                FailureReason::InvalidResponse,
                format!("deny payload is not valid JSON: {e}"),
            )
        })?),
    };
    Ok(Denial {
        hook_id: hook_id.to_string(),
        reason_code: deny.reason_code.clone(),
        message: deny.message.clone(),
        payload,
        failure: None,
    })
}

/// The denial a guard's failure produces when it fails closed.
pub(crate) fn failed_closed(hook_id: &str, failure: &Failure) -> Denial {
    Denial {
        hook_id: hook_id.to_string(),
        reason_code: failure.reason.reason_code(),
        message: format!(
            "the policy hook `{hook_id}` failed ({failure}), so the call is denied; \
             this is not a judgement of the call itself"
        ),
        payload: None,
        failure: Some(failure.reason),
    }
}
