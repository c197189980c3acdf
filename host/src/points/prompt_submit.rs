//! `prompt-submit` (pre-step): before every proposed step, with the batch the loop claimed
//! (empty for a tool continuation with no new input).
//!
//! - `enter` opens the step; contexts (needs `transform`) join the step's batch in hook order;
//! - `reject` (needs `guard`) opens no step: the turn closes as blocked, with no
//!   model-visible message, and the remaining hooks do not run;
//! - a guard's failure rejects (fails closed) unless `on_failure = "allow"`.

use crate::hook::{self, Answer, Request, Shared};
use crate::point::{Capability, Point};
use crate::session::{Session, Verdict, deny_verdict};
use crate::types::{Context, PreStep, PreStepDecision};

impl Session {
    /// Runs the `prompt-submit` hooks for a proposed step.
    pub async fn prompt_submit(&self, step: &PreStep) -> PreStepDecision {
        let request = Request::PromptSubmit(Shared::new(step.clone()));
        let mut contexts = Vec::new();
        let rejected = self
            .waterfall(
                Point::PromptSubmit,
                None,
                &mut contexts,
                |_| request.clone(),
                |contexts: &mut Vec<Context>, hook, spec, response| {
                    let Answer::PromptSubmit(decision) = response else {
                        unreachable!("a prompt-submit request gets a prompt-submit response")
                    };
                    match decision {
                        hook::PreStepDecision::Enter(texts) if texts.is_empty() => {
                            Verdict::Completed {
                                honoured: spec.has(Capability::Guard),
                            }
                        }
                        hook::PreStepDecision::Enter(_) if !spec.has(Capability::Transform) => {
                            Verdict::NotGranted(Capability::Transform)
                        }
                        hook::PreStepDecision::Enter(texts) => {
                            contexts.extend(texts.into_iter().map(|text| Context {
                                hook_id: hook.id.to_string(),
                                text,
                            }));
                            Verdict::Completed { honoured: true }
                        }
                        hook::PreStepDecision::Reject(_) if !spec.has(Capability::Guard) => {
                            Verdict::NotGranted(Capability::Guard)
                        }
                        hook::PreStepDecision::Reject(d) => deny_verdict(hook, d),
                    }
                },
                |denial| denial,
            )
            .await;
        match rejected {
            Some(denial) => PreStepDecision::Reject(denial),
            None => PreStepDecision::Enter { contexts },
        }
    }
}
