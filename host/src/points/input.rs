//! What the points' `run_json` share: a point run from its input as JSON
//! ([`Session::run_json`](crate::Session::run_json)).

use crate::hook::BoxFuture;
use serde_json::Value;

/// The outcome of [`Session::run_json`](crate::Session::run_json): the answer as JSON, or why
/// the input cannot run.
pub(super) type RunJson<'a> = BoxFuture<'a, Result<Value, String>>;

/// The answer as JSON.
pub(super) fn json<T: serde::Serialize>(value: T) -> Result<Value, String> {
    serde_json::to_value(value).map_err(|e| e.to_string())
}

/// A tool call and its outcome: the input of `post-tool` and `tool-result`.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CallAndOutcome {
    pub call: crate::types::ToolCall,
    pub outcome: crate::types::ToolOutcome,
}
