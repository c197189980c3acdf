//! Why a hook invocation failed, as one typed reason.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Why a hook invocation failed. Every failure event and every fail-closed denial carries one.
///
/// A failure of a foreground hook fails closed (its point denies) unless the hook's
/// `on_failure` says otherwise; a failure of an observer or a background hook is recorded and
/// never changes the outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum FailureReason {
    /// The hook passed its deadline (`timeout_ms`).
    Timeout,
    /// The hook used up its fuel budget (`fuel`).
    OutOfFuel,
    /// The hook tried to grow its memory past `memory_mb` (or its tables past their cap).
    MemoryLimit,
    /// The hook trapped: a panic, an `unreachable`, an out-of-bounds access, a stack overflow.
    Trap,
    /// The hook answered something the protocol does not allow (invalid JSON where JSON is
    /// due, an oversized answer, unknown fields).
    InvalidResponse,
    /// The input was larger than the hook's payload bound.
    PayloadTooLarge,
    /// The hook returned a decision its granted capabilities do not allow.
    NotGranted,
    /// The hook could not be reached or instantiated.
    Unavailable,
    /// A background hook was dropped because its session's queue was full.
    DroppedSaturated,
    /// Background (or committed-fact) work was cut off before it finished: its session was
    /// dropped, or the process serving the event stopped waiting for it (a bridge's budget).
    Dropped,
    /// An external hook reported an error: a command exited with a status other than 0 or 2
    /// (or was killed by a signal), an HTTP endpoint answered a status other than 2xx.
    HookError,
    /// The host's state store could not do a state call the hook made (a database that cannot
    /// be written, a Redis that is down): the hook is stopped, rather than reading "no state".
    StateUnavailable,
    /// The host's fact stream has not taken the session's facts (its backend fails, or too
    /// many wait for it): the decision is refused rather than made off the record. Not a
    /// hook's failure: the denial names the stream (`palisade/fact-stream`).
    FactStreamUnavailable,
}

impl FailureReason {
    /// The stable kebab-case name used in events and reason codes (`out-of-fuel`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureReason::Timeout => "timeout",
            FailureReason::OutOfFuel => "out-of-fuel",
            FailureReason::MemoryLimit => "memory-limit",
            FailureReason::Trap => "trap",
            FailureReason::InvalidResponse => "invalid-response",
            FailureReason::PayloadTooLarge => "payload-too-large",
            FailureReason::NotGranted => "not-granted",
            FailureReason::Unavailable => "unavailable",
            FailureReason::DroppedSaturated => "dropped-saturated",
            FailureReason::Dropped => "dropped",
            FailureReason::HookError => "hook-error",
            FailureReason::StateUnavailable => "state-unavailable",
            FailureReason::FactStreamUnavailable => "fact-stream-unavailable",
        }
    }

    /// The reason code of the denial a failed guard produces when it fails closed.
    pub fn reason_code(self) -> String {
        format!("hook-failure:{}", self.as_str())
    }
}

impl fmt::Display for FailureReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed hook invocation: the typed reason and a human-readable detail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The typed reason.
    pub reason: FailureReason,
    /// What happened, for logs (the trap message, the invalid field, ...).
    pub detail: String,
}

impl Failure {
    pub(crate) fn new(reason: FailureReason, detail: impl Into<String>) -> Self {
        Failure {
            reason,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.detail)
    }
}

/// The first 500 characters of `text` (a hook's own words), for a failure's detail.
pub(crate) fn clip(text: &str) -> &str {
    match text.char_indices().nth(500) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}
