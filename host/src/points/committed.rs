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

use crate::hook::{Request, Shared};
use crate::session::Session;
use crate::types::Observation;

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
