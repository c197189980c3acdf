//! `tool-execute`: what its wrappers receive and answer on the wire. The point's rule (the
//! wrappers around dispatch, each `next()` the rest of the chain) is the tool pipeline's
//! ([`crate::pipeline`]); a wrapper is a component, never a command or HTTP hook (refused at
//! load), so these projections serve the decoders' tests and fuzzing.

use crate::claude_code::HookEvent;
use crate::failure::Failure;
use crate::hook::{Answer, Request};
use crate::point::Point;
use crate::point_wire::{ClaudeReply, PointWire, kind};
use crate::runtime::external::{native, wire};
use serde_json::{Value, json};

/// The call; nothing comes back over the wire (an outcome only from a component).
impl PointWire for kind::ToolExecute {
    fn claude_event(&self, _: Point) -> &'static str {
        "ToolExecute"
    }

    fn claude_fields(&self, request: &Request<'_>, event: &mut HookEvent) {
        if let Request::ToolExecute(call, _) = request {
            wire::tool_call_event(event, call);
        }
    }

    fn claude_answer(&self, reply: &ClaudeReply<'_>) -> Result<Answer, Failure> {
        reply.no_permission()?;
        Ok(Answer::Observed)
    }

    fn native_input(&self, request: &Request<'_>) -> Value {
        match request {
            Request::ToolExecute(call, _) => json!({ "call": native::call_json(call) }),
            _ => Value::Null,
        }
    }

    #[cfg(any(test, feature = "fuzzing"))]
    fn sample(&self, _: Point) -> Request<'static> {
        let next: crate::hook::NextLayer = std::sync::Arc::new(|_| {
            Box::pin(async { crate::types::ToolOutcome::error("not run: a sample") })
        });
        Request::ToolExecute(crate::point_wire::sample_call().into(), next)
    }
}

/// `tool-execute` does not run on its own: its wrappers run around a tool, through the tool
/// pipeline.
pub(super) fn run_json<'a>(
    _: &'a crate::session::Session,
    _: &str,
) -> serde_json::Result<super::input::RunJson<'a>> {
    Ok(Box::pin(async {
        Err(
            "`tool-execute` runs around a tool: run the tool through the pipeline \
             (`palisade serve`, an agent) instead"
                .to_string(),
        )
    }))
}
