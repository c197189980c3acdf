//! One file per extension point: what its hooks are asked, what they may answer, and how the
//! answers combine. The shared rules (order, short-circuit, failures) are in
//! [`crate::session`].

mod committed;
mod post_tool;
mod pre_tool;
mod prompt_submit;
mod session_start;
mod tool_guard;
mod tool_result;
mod turn_stopping;
