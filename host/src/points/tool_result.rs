//! `tool-result`: the final, authoritative outcome of a call, after every transform. Observe
//! only: every hook sees it, each hook's failure is contained (recorded, never escalated),
//! and nothing a hook does changes the result. It is the synchronous notification of
//! docs/semantics.md: foreground observers run one after another, each under its own
//! deadline, and are done before the call's outcome is returned — never dropped under load,
//! never after a later fact. Background observers go to the session's bounded queue, as at
//! every point. [`HostBuilder::detached_tool_result`](crate::HostBuilder::detached_tool_result)
//! runs the foreground ones detached too.

use crate::claude_code::HookEvent;
use crate::failure::Failure;
use crate::hook::Answer;
use crate::hook::{Request, Shared};
use crate::point::Point;
use crate::point_wire::{ClaudeReply, PointWire, kind};
use crate::runtime::external::{native, wire};
use crate::session::Session;
use crate::types::{ToolCall, ToolOutcome};
use serde_json::{Value, json};

impl Session {
    /// Shows `outcome` of `call` to the `tool-result` hooks that match its tool, and returns
    /// when the foreground ones are done.
    pub async fn tool_result(&self, call: &ToolCall, outcome: &ToolOutcome) {
        let request = Request::ToolResult(Shared::new(call.clone()), Shared::new(outcome.clone()));
        if self.shared.plugins.host.inner.detached_tool_result {
            self.notify(Point::ToolResult, Some(&call.name), request);
        } else {
            self.observe(Point::ToolResult, Some(&call.name), request)
                .await;
        }
    }
}

/// What `tool-result` hooks receive and answer on the wire: the call and its final outcome;
/// nothing (contexts are ignored, a decision refused).
impl PointWire for kind::ToolResult {
    fn claude_event(&self, _: Point) -> &'static str {
        "PostToolUse"
    }

    fn claude_fields(&self, request: &Request<'_>, event: &mut HookEvent) {
        if let Request::ToolResult(call, outcome) = request {
            wire::call_outcome_event(event, call, outcome);
        }
    }

    fn claude_answer(&self, reply: &ClaudeReply<'_>) -> Result<Answer, Failure> {
        reply.no_permission()?;
        reply.no_decision()?;
        Ok(Answer::Observed)
    }

    fn native_input(&self, request: &Request<'_>) -> Value {
        match request {
            Request::ToolResult(call, outcome) => native::call_outcome_input(call, outcome),
            _ => Value::Null,
        }
    }

    #[cfg(any(test, feature = "fuzzing"))]
    fn sample(&self, _: Point) -> Request<'static> {
        let outcome = Shared::new(ToolOutcome::text("out"));
        Request::ToolResult(crate::point_wire::sample_call(), outcome)
    }
}

pub(super) fn run_json<'a>(
    session: &'a Session,
    input: &str,
) -> serde_json::Result<super::input::RunJson<'a>> {
    let input: super::input::CallAndOutcome = serde_json::from_str(input)?;
    Ok(Box::pin(async move {
        session.tool_result(&input.call, &input.outcome).await;
        super::input::json(json!({ "decision": "none" }))
    }))
}
