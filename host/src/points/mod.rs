//! One file per extension point: what its hooks are asked, what they may answer, and how the
//! answers combine; how the point crosses to command and HTTP hooks (its
//! [`PointWire`](crate::point_wire::PointWire)); and how it runs from its input as JSON
//! ([`Session::run_json`], what `palisade run` and `palisade test` take). The shared rules
//! (order, short-circuit, failures) are in [`crate::session`].

mod committed;
mod input;
mod post_tool;
mod pre_tool;
mod prompt_submit;
mod session_start;
mod tool_execute;
mod tool_guard;
mod tool_result;
mod turn_stopping;

use crate::point::Point;
use crate::session::Session;

impl Session {
    /// Runs `point` once over `input`, its payload as JSON (see [`Session::json_inputs`]):
    /// the hooks' combined answer, as JSON. `Err` when `input` is not the point's payload.
    pub fn run_json<'a>(
        &'a self,
        point: Point,
        input: &str,
    ) -> serde_json::Result<crate::BoxFuture<'a, Result<serde_json::Value, String>>> {
        match point {
            Point::SessionStart => session_start::run_json(self, input),
            Point::PromptSubmit => prompt_submit::run_json(self, input),
            Point::PreTool => pre_tool::run_json(self, input),
            Point::ToolGuard => tool_guard::run_json(self, input),
            Point::PostTool => post_tool::run_json(self, input),
            Point::ToolResult => tool_result::run_json(self, input),
            Point::TurnStopping => turn_stopping::run_json(self, input),
            Point::ToolExecute => tool_execute::run_json(self, input),
            committed => committed::run_json(self, committed, input),
        }
    }

    /// The payload [`Session::run_json`] takes at each point, one line per point.
    pub fn json_inputs() -> String {
        [
            session_start::INPUT,
            prompt_submit::INPUT,
            pre_tool::INPUT,
            post_tool::INPUT,
            turn_stopping::INPUT,
            committed::INPUT,
        ]
        .join("\n")
    }
}
