//! One file per extension point: what it is asked, what it may answer, and how the answers
//! of its hooks combine.

mod pre_tool;
mod tool_result;
