//! `tool-result`: the final, authoritative outcome of a call, after every transform. Observe
//! only: every hook sees it, each hook's failure is contained (recorded, never escalated),
//! and nothing a hook does changes the result — nor delays it: the hooks run in a task the
//! session owns (foreground ones in order, one after the other), so a slow observer cannot
//! add its timeout to the call's latency (seed 1: "the synchronous contained notification";
//! "observer failures are contained per listener and cannot change or reject … the returned
//! outcome").

use crate::hook::{Request, Shared};
use crate::point::Point;
use crate::session::Session;
use crate::types::{ToolCall, ToolOutcome};

impl Session {
    /// Shows `outcome` of `call` to the `tool-result` hooks that match its tool, and returns at
    /// once: the hooks run in the session's own tasks (awaited by
    /// [`Session::drain_background`], aborted when the session is dropped).
    pub async fn tool_result(&self, call: &ToolCall, outcome: &ToolOutcome) {
        let request = Request::ToolResult(Shared::new(call.clone()), Shared::new(outcome.clone()));
        self.notify(Point::ToolResult, Some(&call.name), request);
    }
}
