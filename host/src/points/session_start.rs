//! `session-start`: once, before turn 1, with how the session started. A notification: it
//! cannot block startup (a guard grant is refused at load, and a failure is only recorded).
//! Hooks granted `transform` may return contexts to inject, collected in hook order.

use crate::hook::{Answer, Request};
use crate::point::{Capability, Point};
use crate::session::{Session, Verdict};
use crate::types::{Context, SessionSource};

impl Session {
    /// Runs the `session-start` hooks; returns the contexts to inject, in hook order.
    pub async fn session_start(&self, source: SessionSource) -> Vec<Context> {
        let request = Request::SessionStart(source);
        let mut contexts = Vec::new();
        self.waterfall(
            Point::SessionStart,
            None,
            &mut contexts,
            |_| request.clone(),
            |contexts: &mut Vec<Context>, hook, spec, response| {
                let Answer::SessionStart(texts) = response else {
                    unreachable!("a session-start request gets a session-start response")
                };
                if texts.is_empty() {
                    return Verdict::<()>::Completed { honoured: false };
                }
                if !spec.has(Capability::Transform) {
                    return Verdict::NotGranted(Capability::Transform);
                }
                contexts.extend(texts.into_iter().map(|text| Context {
                    hook_id: hook.id.to_string(),
                    text,
                }));
                Verdict::Completed { honoured: true }
            },
            |_| (),
        )
        .await;
        contexts
    }
}
