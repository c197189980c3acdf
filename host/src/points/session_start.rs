//! `session-start`: once, before turn 1, with how the session started. A notification: it
//! cannot block startup (a guard grant is refused at load, and a failure is only recorded).
//! Hooks granted `transform` may return contexts to inject, collected in hook order.

use crate::claude_code::HookEvent;
use crate::failure::Failure;
use crate::hook::{Answer, Request};
use crate::point::{Capability, Point};
use crate::point_wire::{ClaudeReply, PointWire, kind};
use crate::runtime::external::{native, wire};
use crate::session::{Session, Verdict};
use crate::types::{Context, SessionSource};
use serde_json::{Value, json};

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

/// What `session-start` hooks receive and answer on the wire: the source; contexts (plain text
/// too, as Claude Code takes it).
impl PointWire for kind::SessionStart {
    fn claude_event(&self, _: Point) -> &'static str {
        "SessionStart"
    }

    fn claude_fields(&self, request: &Request<'_>, event: &mut HookEvent) {
        if let Request::SessionStart(source) = request {
            event.source = Some(wire::source_name(*source).into());
        }
    }

    fn plain_text_is_context(&self) -> bool {
        true
    }

    fn claude_answer(&self, reply: &ClaudeReply<'_>) -> Result<Answer, Failure> {
        reply.no_permission()?;
        reply.no_decision()?;
        Ok(self.neutral(reply.contexts.clone()))
    }

    fn native_input(&self, request: &Request<'_>) -> Value {
        match request {
            Request::SessionStart(source) => json!({ "source": wire::source_name(*source) }),
            _ => Value::Null,
        }
    }

    fn native_answer(&self, point: Point, decision: Value) -> Result<Answer, Failure> {
        Ok(Answer::SessionStart(native::decision(point, decision)?))
    }

    fn neutral(&self, contexts: Vec<String>) -> Answer {
        Answer::SessionStart(contexts)
    }

    #[cfg(any(test, feature = "fuzzing"))]
    fn sample(&self, _: Point) -> Request<'static> {
        Request::SessionStart(SessionSource::Startup)
    }
}

/// The input of [`Session::run_json`] here.
pub(super) const INPUT: &str =
    "session-start        {\"source\": \"startup\"|\"resume\"|\"clear\"|\"compact\"}";

pub(super) fn run_json<'a>(
    session: &'a Session,
    input: &str,
) -> serde_json::Result<super::input::RunJson<'a>> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Input {
        source: SessionSource,
    }
    let input: Input = serde_json::from_str(input)?;
    Ok(Box::pin(async move {
        let contexts = session.session_start(input.source).await;
        super::input::json(json!({ "contexts": contexts }))
    }))
}
