//! The six committed-fact points: `message-committed`, `tool-call-committed`,
//! `tool-result-committed`, `llm-response-committed`, `turn-completed`, `session-ended`.
//!
//! Observe only, always: a guard grant on them is refused at load, in either mode. The
//! session's dispatcher never joins their execution to the fact: [`Session::committed`]
//! returns at once, the hooks run in tasks the session owns (foreground hooks one after
//! another, background hooks each on its own), and nothing they return or do can alter or
//! delay the fact. They are best-effort — a crash may lose or replay one — so observers use
//! the observation's `interaction_id` as the idempotency key of their side effects. The
//! durable record of the fact is the host's fact stream, where it is queued first
//! ([`crate::facts`]).

use crate::claude_code::HookEvent;
use crate::failure::Failure;
use crate::hook::Answer;
use crate::hook::{Request, Shared};
use crate::point::Point;
use crate::point_wire::{ClaudeReply, PointWire, kind};
use crate::runtime::external::wire;
use crate::session::Session;
use crate::types::CommittedFact;
use crate::types::Observation;
use serde_json::{Value, json};

impl Session {
    /// Hands a committed fact to the hooks of its point, without waiting for them.
    pub fn committed(&self, observation: &Observation) {
        self.commit(observation.clone());
    }

    /// [`Session::committed`], given the observation (not copied again).
    pub(crate) fn commit(&self, observation: Observation) {
        let shared = Shared::new(observation);
        self.stream_fact(&shared);
        let request = Request::Committed(shared.clone());
        self.notify(shared.point(), shared.tool_name(), request);
    }
}

/// What the committed-fact points' hooks receive and answer on the wire: the observation
/// (Claude Code's `reason` at `SessionEnd`); nothing.
impl PointWire for kind::Committed {
    fn claude_event(&self, point: Point) -> &'static str {
        match point {
            Point::SessionEnded => "SessionEnd",
            Point::MessageCommitted => "MessageCommitted",
            Point::ToolCallCommitted => "ToolCallCommitted",
            Point::ToolResultCommitted => "ToolResultCommitted",
            Point::LlmResponseCommitted => "LlmResponseCommitted",
            _ => "TurnCompleted",
        }
    }

    fn claude_fields(&self, request: &Request<'_>, event: &mut HookEvent) {
        let Request::Committed(observation) = request else {
            return;
        };
        if let CommittedFact::SessionEnded { reason } = &observation.fact {
            event.reason = Some(reason.clone());
        }
        event
            .other
            .insert("observation".into(), wire::observation(observation));
    }

    fn claude_answer(&self, reply: &ClaudeReply<'_>) -> Result<Answer, Failure> {
        reply.no_permission()?;
        if reply.point == Point::SessionEnded {
            reply.no_decision()?;
        }
        Ok(Answer::Observed)
    }

    fn native_input(&self, request: &Request<'_>) -> Value {
        match request {
            Request::Committed(observation) => {
                json!({ "observation": wire::observation(observation) })
            }
            _ => Value::Null,
        }
    }

    #[cfg(any(test, feature = "fuzzing"))]
    fn sample(&self, _: Point) -> Request<'static> {
        Request::Committed(Shared::new(Observation {
            interaction_id: "i".into(),
            turn: 1,
            fact: CommittedFact::SessionEnded { reason: "x".into() },
        }))
    }
}

/// The input of [`Session::run_json`] at each committed-fact point.
pub(super) const INPUT: &str = "<committed fact>     {\"interaction_id\": \"…\", \"turn\": 1, \"fact\": {\"kind\": \"message\", \"message\": {…}}}";

pub(super) fn run_json<'a>(
    session: &'a Session,
    point: Point,
    input: &str,
) -> serde_json::Result<super::input::RunJson<'a>> {
    let observation: Observation = serde_json::from_str(input)?;
    Ok(Box::pin(async move {
        if observation.point() != point {
            return Err(format!(
                "a `{}` fact was given for `{point}`; give a fact of that kind",
                observation.point()
            ));
        }
        session.committed(&observation);
        super::input::json(json!({ "decision": "none" }))
    }))
}
