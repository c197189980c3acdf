//! The records of the fact stream, as every backend writes and reads them.

use crate::point::Point;
use crate::types::{CommittedFact, Denial, PreStepDecision, Steering};
use serde::{Deserialize, Serialize};

/// The embedded log's file name in its folder.
pub(crate) const LOG: &str = "facts.jsonl";
/// The Redis stream's key.
pub(crate) const STREAM: &str = "palisade:facts";

/// One record of the stream: a committed fact or a decision, keyed by its interaction id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FactRecord {
    /// The record's idempotency key: the stream holds one record per id.
    pub interaction_id: String,
    /// The agent session it belongs to.
    pub session_id: String,
    /// When it was committed, in milliseconds since the epoch.
    pub at_ms: u64,
    /// The turn (0 outside a turn).
    #[serde(default)]
    pub turn: u32,
    /// The fact or the decision.
    #[serde(flatten)]
    pub entry: Entry,
}

/// What a [`FactRecord`] records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Entry {
    /// A committed fact (the observation its committed-fact point is given).
    Fact(CommittedFact),
    /// A foreground decision of the lifecycle.
    Decision(Decision),
}

/// A foreground decision, as the stream records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The point that decided: `pre-tool` or `tool-guard` for a tool call's step (the last
    /// that ran), `prompt-submit` for a step, `turn-stopping` for a turn's stop.
    pub point: Point,
    /// `allow`, `ask` or `deny` (a tool call); `enter` or `reject` (a step); `stop` or
    /// `steer` (a turn's stop).
    pub outcome: String,
    /// The hook that decided (the steering hooks, comma-separated), when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_id: Option<String>,
    /// The denial's reason code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason_code: Option<String>,
    /// The denial's message, the ask's reason, or the steering.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Decision {
    pub(crate) fn new(point: Point, outcome: &str) -> Decision {
        Decision {
            point,
            outcome: outcome.to_string(),
            hook_id: None,
            reason_code: None,
            message: None,
        }
    }

    pub(crate) fn denied(point: Point, outcome: &str, denial: &Denial) -> Decision {
        Decision {
            hook_id: Some(denial.hook_id.clone()),
            reason_code: Some(denial.reason_code.clone()),
            message: Some(denial.message.clone()),
            ..Decision::new(point, outcome)
        }
    }

    /// A proposed step's `prompt-submit`.
    pub(crate) fn of_pre_step(decision: &PreStepDecision) -> Decision {
        match decision {
            PreStepDecision::Enter { .. } => Decision::new(Point::PromptSubmit, "enter"),
            PreStepDecision::Reject(denial) => {
                Decision::denied(Point::PromptSubmit, "reject", denial)
            }
        }
    }

    /// A turn's stop: `stop`, or `steer` with the steering.
    pub(crate) fn of_stop(steering: &[Steering]) -> Decision {
        if steering.is_empty() {
            return Decision::new(Point::TurnStopping, "stop");
        }
        let join = |f: fn(&Steering) -> &str| steering.iter().map(f).collect::<Vec<_>>().join(", ");
        Decision {
            hook_id: Some(join(|s| &s.hook_id)),
            message: Some(join(|s| &s.content)),
            ..Decision::new(Point::TurnStopping, "steer")
        }
    }
}

/// A record read back from the stream, with where it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredFact {
    /// Where the record is: its byte offset in the embedded log, its entry id in Redis.
    pub offset: String,
    /// Where the record after it would be: what to read from to go on after it.
    pub next: String,
    /// The record.
    #[serde(flatten)]
    pub record: FactRecord,
}

/// One record, serialized for its backend.
pub(crate) struct Line {
    pub id: String,
    pub json: Vec<u8>,
}
