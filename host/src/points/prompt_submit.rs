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

use crate::claude_code::HookEvent;
use crate::failure::{Failure, FailureReason};
use crate::hook::{self, Answer, Request, Shared};
use crate::point::{Capability, Point};
use crate::point_wire::{ClaudeReply, PointWire, kind};
use crate::runtime::external::{native, wire};
use crate::session::{Session, Verdict, deny_verdict};
use crate::signal::Signal;
use crate::types::{Context, Message, PreStep, PreStepDecision, Role};
use serde::Deserialize;
use serde_json::{Value, json};
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

/// What `prompt-submit` hooks receive and answer on the wire: the step's batch (and its text
/// as Claude Code's `prompt`); enter with contexts (plain text too), reject (`decision:
/// "block"`), or in the palisade protocol any answer a component gives.
impl PointWire for kind::PromptSubmit {
    fn claude_event(&self, _: Point) -> &'static str {
        "UserPromptSubmit"
    }

    fn claude_fields(&self, request: &Request<'_>, event: &mut HookEvent) {
        if let Request::PromptSubmit(step) = request {
            event.prompt = Some(wire::prompt_text(&step.messages));
            let ours = &mut event.other;
            ours.insert(
                "messages".into(),
                step.messages
                    .iter()
                    .map(wire::message)
                    .collect::<Vec<_>>()
                    .into(),
            );
            ours.insert("turn".into(), step.turn.into());
            ours.insert("step".into(), step.step.into());
        }
    }

    fn plain_text_is_context(&self) -> bool {
        true
    }

    fn claude_answer(&self, reply: &ClaudeReply<'_>) -> Result<Answer, Failure> {
        reply.no_permission()?;
        Ok(match reply.blocked() {
            Some(reason) => Answer::PromptSubmit(hook::PreStepDecision::Reject(
                crate::point_wire::deny(reason, "block"),
            )),
            None => self.neutral(reply.contexts.clone()),
        })
    }

    fn native_input(&self, request: &Request<'_>) -> Value {
        let Request::PromptSubmit(step) = request else {
            return Value::Null;
        };
        json!({
            "step": {
                "messages": step.messages.iter().map(wire::message).collect::<Vec<_>>(),
                "turn": step.turn,
                "step": step.step,
            },
            // A serialize-only projection (docs/semantics.md S2.9): never read back.
            "prompt": wire::prompt_text(&step.messages),
        })
    }

    fn native_answer(&self, point: Point, decision: Value) -> Result<Answer, Failure> {
        #[derive(Deserialize)]
        #[serde(rename_all = "kebab-case", deny_unknown_fields)]
        enum PreStepJson {
            Enter(Vec<String>),
            EnterBatch(Vec<Message>),
            Reject(native::DenyJson),
        }
        Ok(Answer::PromptSubmit(
            match native::decision(point, decision)? {
                PreStepJson::Enter(contexts) => hook::PreStepDecision::Enter(contexts),
                PreStepJson::EnterBatch(messages) => hook::PreStepDecision::EnterBatch(messages),
                PreStepJson::Reject(deny) => hook::PreStepDecision::Reject(deny.into()),
            },
        ))
    }

    fn neutral(&self, contexts: Vec<String>) -> Answer {
        Answer::PromptSubmit(hook::PreStepDecision::Enter(contexts))
    }

    fn veto(&self, message: String, reason_code: &str) -> Option<Answer> {
        Some(Answer::PromptSubmit(hook::PreStepDecision::Reject(
            crate::point_wire::deny(message, reason_code),
        )))
    }

    #[cfg(any(test, feature = "fuzzing"))]
    fn sample(&self, _: Point) -> Request<'static> {
        Request::PromptSubmit(Shared::new(PreStep {
            messages: vec![],
            turn: 1,
            step: 1,
        }))
    }
}

/// The input of [`Session::run_json`] here.
pub(super) const INPUT: &str = "prompt-submit        {\"messages\": [{\"role\": \"user\", \"text\": \"…\"}], \"turn\": 1, \"step\": 1}";

pub(super) fn run_json<'a>(
    session: &'a Session,
    input: &str,
) -> serde_json::Result<super::input::RunJson<'a>> {
    let step: PreStep = serde_json::from_str(input)?;
    Ok(Box::pin(async move {
        super::input::json(session.prompt_submit(&step).await)
    }))
}
