//! `tool-result`: the final, authoritative outcome of a call, after every transform. Observe
//! only: every hook sees it, each hook's failure is contained (recorded, never escalated),
//! and nothing a hook does changes the result. It is the synchronous notification of
//! docs/semantics.md: foreground observers run one after another, each under its own
//! deadline, and are done before the call's outcome is returned — never dropped under load,
//! never after a later fact. Background observers go to the session's bounded queue, as at
//! every point. [`HostBuilder::detached_tool_result`](crate::HostBuilder::detached_tool_result)
//! runs the foreground ones detached too.

use crate::hook::{Request, Shared};
use crate::point::Point;
use crate::session::Session;
use crate::types::{ToolCall, ToolOutcome};

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
