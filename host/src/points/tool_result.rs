//! `tool-result`: the final, authoritative outcome of a call. Observe only: every hook sees
//! it, each hook's failure is contained (recorded, never escalated), and nothing a hook does
//! changes the result.

use crate::instance::Request;
use crate::point::{Mode, Point};
use crate::sandbox::{to_wit_call, to_wit_outcome};
use crate::session::Session;
use crate::types::{ToolCall, ToolOutcome};

impl Session {
    /// Shows `outcome` of `call` to the `tool-result` hooks that match its tool.
    pub async fn tool_result(&self, call: &ToolCall, outcome: &ToolOutcome) {
        let inv = self.begin(Point::ToolResult);
        let wit_call = to_wit_call(call);
        let wit_outcome = to_wit_outcome(outcome);
        for hook in self.hooks(Point::ToolResult, Some(&call.name)) {
            if self.spec(hook).mode == Mode::Background {
                self.spawn(
                    hook,
                    &inv,
                    (wit_call.clone(), wit_outcome.clone()),
                    |(c, o)| Request::ToolResult(c, o),
                );
                continue;
            }
            let run = self
                .run(hook, &inv, &Request::ToolResult(&wit_call, &wit_outcome))
                .await;
            self.finish_observed(hook, &inv, &run, "");
        }
    }
}
