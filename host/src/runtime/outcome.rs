//! What one invocation gave back, and what it cost.

use crate::failure::Failure;
use crate::hook::Answer;
use std::time::Duration;

/// The outcome of one hook invocation.
pub(crate) struct Run {
    pub result: Result<Answer, Failure>,
    pub meter: Meter,
    /// Lines the hook logged that its runtime did not report itself (a command's stderr, a
    /// `systemMessage`).
    pub logs: Vec<(&'static str, String)>,
}

/// What one invocation cost.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Meter {
    pub duration: Duration,
    pub cost: Cost,
}

/// The cost of one invocation beyond its time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cost {
    pub fuel: u64,
}
