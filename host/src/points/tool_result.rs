//! `tool-result`: the final, authoritative outcome of a call, after every transform. Observe
//! only: every hook sees it, each hook's failure is contained (recorded, never escalated),
//! and nothing a hook does changes the result. Foreground hooks are awaited, in order.

use crate::convert::{to_wit_call, to_wit_outcome};
use crate::instance::Request;
use crate::point::Point;
use crate::session::{Session, Verdict};
use crate::types::{ToolCall, ToolOutcome};
use std::sync::Arc;

impl Session {
    /// Shows `outcome` of `call` to the `tool-result` hooks that match its tool.
    pub async fn tool_result(&self, call: &ToolCall, outcome: &ToolOutcome) {
        let request = Request::ToolResult(
            Arc::new(to_wit_call(call)),
            Arc::new(to_wit_outcome(outcome)),
        );
        self.waterfall(
            Point::ToolResult,
            Some(&call.name),
            &mut (),
            |_| request.clone(),
            |_, _, _, _| Verdict::<()>::Completed { honoured: false },
            |_| (),
        )
        .await;
    }
}
