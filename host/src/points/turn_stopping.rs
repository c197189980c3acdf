//! `turn-stopping`: at the natural stop boundary of a turn, the last chance to steer. A hook
//! granted `steer` may return content; if any does, the turn continues — the SAME turn, with
//! the content recorded as steering for its next step, not as a new prompt. Without `steer`
//! the content is not honoured (`not-granted`). A failure is only recorded: it can neither
//! stop nor continue a turn.

use crate::hook::{Answer, Request, Shared};
use crate::point::{Capability, Point};
use crate::session::{Session, Verdict};
use crate::types::{Steering, StopEvent};

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
