//! `turn-stopping`: at the natural stop boundary of a turn, the last chance to steer. A hook
//! granted `steer` may return content; if any does, the turn continues — the SAME turn, with
//! the content recorded as steering for its next step, not as a new prompt. Without `steer`
//! the content is not honoured (`not-granted`). A failure is only recorded: it can neither
//! stop nor continue a turn.

use crate::claude_code::HookEvent;
use crate::failure::Failure;
use crate::hook::{Answer, Request, Shared};
use crate::point::{Capability, Point};
use crate::point_wire::{ClaudeReply, PointWire, kind};
use crate::runtime::external::native;
use crate::session::{Session, Verdict};
use crate::types::{Steering, StopEvent};
use serde_json::{Value, json};

impl Session {
    /// Runs the `turn-stopping` hooks; a non-empty result continues the turn with it.
    pub async fn turn_stopping(&self, event: &StopEvent) -> Vec<Steering> {
        let request = Request::TurnStopping(Shared::new(event.clone()));
        let mut steering = Vec::new();
        self.waterfall(
            Point::TurnStopping,
            None,
            &mut steering,
            |_| request.clone(),
            |steering: &mut Vec<Steering>, hook, spec, response| {
                let Answer::TurnStopping(content) = response else {
                    unreachable!("a turn-stopping request gets a turn-stopping response")
                };
                match content {
                    None => Verdict::<()>::Completed { honoured: false },
                    Some(_) if !spec.has(Capability::Steer) => {
                        Verdict::NotGranted(Capability::Steer)
                    }
                    Some(content) => {
                        steering.push(Steering {
                            hook_id: hook.id.to_string(),
                            content,
                        });
                        Verdict::Completed { honoured: true }
                    }
                }
            },
            |_| (),
        )
        .await;
        steering
    }
}

/// What `turn-stopping` hooks receive and answer on the wire: the stop event (Claude Code's
/// `stop_hook_active` once the turn was steered); steering (`decision: "block"` and its
/// reason), or nothing; stopping the agent is no steering.
impl PointWire for kind::TurnStopping {
    fn claude_event(&self, _: Point) -> &'static str {
        "Stop"
    }

    fn claude_fields(&self, request: &Request<'_>, event: &mut HookEvent) {
        let Request::TurnStopping(stop) = request else {
            return;
        };
        // Claude Code's flag for "already continuing because a stop hook said so".
        event.stop_hook_active = Some(stop.continuations > 0);
        match &stop.last_assistant_message {
            Some(text) => event.last_assistant_message = Some(text.clone()),
            // Present, as null: a hook may index it without checking.
            None => {
                event
                    .other
                    .insert("last_assistant_message".into(), Value::Null);
            }
        }
        let ours = &mut event.other;
        ours.insert("turn".into(), stop.turn.into());
        ours.insert("step".into(), stop.step.into());
        ours.insert("continuations".into(), stop.continuations.into());
    }

    fn claude_answer(&self, reply: &ClaudeReply<'_>) -> Result<Answer, Failure> {
        reply.no_permission()?;
        if let Some(steering) = reply.blocked() {
            return Ok(Answer::TurnStopping(Some(steering)));
        }
        reply.no_contexts()?;
        Ok(Answer::TurnStopping(None))
    }

    fn native_input(&self, request: &Request<'_>) -> Value {
        match request {
            Request::TurnStopping(event) => json!({ "event": {
                "turn": event.turn,
                "step": event.step,
                "last_assistant_message": event.last_assistant_message,
                "continuations": event.continuations,
            }}),
            _ => Value::Null,
        }
    }

    fn native_answer(&self, point: Point, decision: Value) -> Result<Answer, Failure> {
        Ok(Answer::TurnStopping(Some(native::decision(
            point, decision,
        )?)))
    }

    fn neutral(&self, _: Vec<String>) -> Answer {
        Answer::TurnStopping(None)
    }

    fn veto(&self, message: String, _: &str) -> Option<Answer> {
        Some(Answer::TurnStopping(Some(message)))
    }

    fn stopped(&self, _: String) -> Answer {
        Answer::TurnStopping(None)
    }

    #[cfg(any(test, feature = "fuzzing"))]
    fn sample(&self, _: Point) -> Request<'static> {
        Request::TurnStopping(Shared::new(StopEvent {
            turn: 1,
            step: 1,
            last_assistant_message: None,
            continuations: 0,
        }))
    }
}

/// The input of [`Session::run_json`] here.
pub(super) const INPUT: &str = "turn-stopping        {\"turn\": 1, \"step\": 2, \"last_assistant_message\": \"…\", \"continuations\": 0}";

pub(super) fn run_json<'a>(
    session: &'a Session,
    input: &str,
) -> serde_json::Result<super::input::RunJson<'a>> {
    let event: StopEvent = serde_json::from_str(input)?;
    Ok(Box::pin(async move {
        let steering = session.turn_stopping(&event).await;
        super::input::json(json!({ "continue": !steering.is_empty(), "steering": steering }))
    }))
}
