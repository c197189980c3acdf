//! `prompt-submit` (pre-step): before every proposed step, with the batch the loop claimed
//! (empty for a tool continuation with no new input). A waterfall over the batch: each hook
//! sees the batch as the hooks before it left it.
//!
//! - `enter` opens the step; contexts (needs `transform`) join the step's batch in hook order;
//! - `enter-batch` (needs `transform`) replaces the batch with the complete batch the hook
//!   returns; every message must be the user's (a hook cannot speak as the system or the
//!   model), or the answer is invalid;
//! - `reject` (needs `guard`) opens no step: the turn closes as blocked, with no
//!   model-visible message, and the remaining hooks do not run;
//! - a guard's failure rejects (fails closed) unless `on_failure = "allow"`;
//! - the step's cancellation signal ([`Session::prompt_submit_until`]) cuts the hook in
//!   flight off (recorded as dropped) and opens no step.

use crate::failure::{Failure, FailureReason};
use crate::hook::{self, Answer, Request, Shared};
use crate::point::{Capability, Point};
use crate::session::{Session, Verdict, deny_verdict};
use crate::signal::Signal;
use crate::types::{Context, Message, PreStep, PreStepDecision, Role};
use std::sync::Arc;

struct State {
    step: Arc<Shared<PreStep>>,
    contexts: Vec<Context>,
}

impl Session {
    /// Runs the `prompt-submit` hooks for a proposed step.
    pub async fn prompt_submit(&self, step: &PreStep) -> PreStepDecision {
        self.pre_step_waterfall(step).await
    }

    /// [`Session::prompt_submit`] with the step's cancellation signal: `None` when `signal`
    /// fires before the decision (the hook in flight is cut off and recorded as dropped, no
    /// later hook runs, and the step must not open).
    pub async fn prompt_submit_until(
        &self,
        step: &PreStep,
        signal: &Signal,
    ) -> Option<PreStepDecision> {
        tokio::select! {
            biased;
            () = signal.cancelled() => None,
            decision = self.pre_step_waterfall(step) => Some(decision),
        }
    }

    async fn pre_step_waterfall(&self, step: &PreStep) -> PreStepDecision {
        let mut state = State {
            step: Shared::new(step.clone()),
            contexts: Vec::new(),
        };
        let rejected = self
            .waterfall(
                Point::PromptSubmit,
                None,
                &mut state,
                |s| Request::PromptSubmit(s.step.clone()),
                |s, hook, spec, answer| {
                    let Answer::PromptSubmit(decision) = answer else {
                        unreachable!("a prompt-submit request gets a prompt-submit answer")
                    };
                    match decision {
                        hook::PreStepDecision::Enter(texts) if texts.is_empty() => {
                            Verdict::Completed {
                                honoured: spec.has(Capability::Guard),
                            }
                        }
                        hook::PreStepDecision::Enter(_) | hook::PreStepDecision::EnterBatch(_)
                            if !spec.has(Capability::Transform) =>
                        {
                            Verdict::NotGranted(Capability::Transform)
                        }
                        hook::PreStepDecision::Enter(texts) => {
                            s.contexts.extend(texts.into_iter().map(|text| Context {
                                hook_id: hook.id.to_string(),
                                text,
                            }));
                            Verdict::Completed { honoured: true }
                        }
                        hook::PreStepDecision::EnterBatch(messages) => {
                            if let Some(m) = messages.iter().find(|m| m.role != Role::User) {
                                return Verdict::Invalid(not_the_users(m));
                            }
                            s.step = Shared::new(PreStep {
                                messages,
                                turn: s.step.turn,
                                step: s.step.step,
                            });
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
            None => PreStepDecision::Enter {
                messages: state.step.messages.clone(),
                contexts: state.contexts,
            },
        }
    }
}

fn not_the_users(message: &Message) -> Failure {
    Failure::new(
        FailureReason::InvalidResponse,
        format!(
            "`enter-batch` holds a message of role `{}`: a reshaped batch is the user's \
             messages only",
            match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::System => "system",
            }
        ),
    )
}
