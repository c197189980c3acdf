//! Write [Palisade](https://example.invalid/palisade) hooks in Rust.
//!
//! A plugin is a plain type: [`Plugin::new`] makes it from its `[config]`, once per instance,
//! and it implements one SDK trait per extension point, each method taking `&mut self`; one
//! [`export!`] line names the traits. Build the crate as a `cdylib` for `wasm32-wasip2` and the
//! result is a component the Palisade host loads. A complete guard:
//!
//! ```no_run
//! use palisade_sdk::{export, Config, Plugin, PreTool, PreToolDecision, ToolCall};
//!
//! struct NoCurl {
//!     /// `[config] tools`, read once.
//!     tools: Vec<String>,
//!     /// Calls refused by this instance so far.
//!     refused: u32,
//! }
//!
//! impl Plugin for NoCurl {
//!     fn new(config: &Config) -> Self {
//!         let tools = config.get("tools").unwrap_or_else(|| vec!["curl".to_string()]);
//!         NoCurl { tools, refused: 0 }
//!     }
//! }
//!
//! impl PreTool for NoCurl {
//!     fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
//!         match call.arg_str("command") {
//!             Some(cmd) if self.tools.iter().any(|t| cmd.contains(t.as_str())) => {
//!                 self.refused += 1;
//!                 PreToolDecision::deny("network", "no network tools here; use the fetch tool")
//!             }
//!             _ => PreToolDecision::Allow,
//!         }
//!     }
//! }
//!
//! export!(NoCurl: PreTool);
//! ```
//!
//! The value lives as long as the plugin's instance: for a `per-session` plugin (its manifest's
//! `instance`), one session — so per-session state is a field, not a static; for a `per-call`
//! one, one call.
//!
//! The component exports only the points named in `export!`; the operator's manifest decides
//! which of them run and with what capability (`guard`, `observe`, ...). Host services —
//! [`log`], [`config`], [`invocation`] and, inside `tool-execute`, [`next`] — are plain
//! functions.
#![deny(missing_docs)]

mod helpers;

#[doc(hidden)]
#[allow(missing_docs, unsafe_code, clippy::all)]
mod bindings {
    palisade_wit::wit_bindgen_generate!({
        world: "host-imports",
        generate_all,
    });
}

/// The raw WIT bindings the [`export!`] macro builds on.
#[doc(hidden)]
pub mod wit {
    pub use crate::bindings::palisade::hooks::{host, tool_dispatch, types};
}

#[doc(hidden)]
pub mod __private {
    pub use wit_bindgen;
}

/// Exports extension points: `export!(MyPlugin: PreTool + ToolResult)`.
///
/// Each named trait must be implemented by the type; the component exports exactly those
/// points, so the host can refuse a manifest that subscribes to one it lacks.
pub use palisade_sdk_macros::export;

pub use bindings::palisade::hooks::host::{Invocation, Level};
/// Every data type of the WIT contract (`palisade:hooks/types`), for the rarer ones.
pub use bindings::palisade::hooks::types;
pub use bindings::palisade::hooks::types::{
    Ask, CommittedFact, ContentBlock, Deny, GuardDecision, LlmResponse, McpTool, Message,
    Observation, PostToolAction, PostToolDecision, PreStep, PreStepDecision, PreToolDecision,
    Provenance, Role, SessionSource, StopEvent, ToolCall, ToolOutcome, TurnOutcome,
};
pub use helpers::{Config, config, invocation, log, next};

/// A plugin: the value that holds its state. [`export!`] makes one per instance, with
/// [`Plugin::new`], before the instance's first hook runs, and calls every hook on it.
pub trait Plugin: Sized + 'static {
    /// Makes the plugin from its manifest's `[config]` table: parse it here, once.
    fn new(config: &Config) -> Self;
}

/// `session-start`: once, before turn 1. Return contexts to inject (needs `transform`).
pub trait SessionStart: Plugin {
    /// Called when a session starts.
    fn on_session_start(&mut self, source: SessionSource) -> Vec<String>;
}

/// `prompt-submit` (pre-step): before every proposed step.
pub trait PromptSubmit: Plugin {
    /// Enter the step (with optional contexts) or reject it.
    fn on_prompt_submit(&mut self, step: PreStep) -> PreStepDecision;
}

/// `pre-tool`: before a tool call. Allow, deny or ask.
pub trait PreTool: Plugin {
    /// Judges a proposed call.
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision;
}

/// `tool-guard`: a final invariant after `pre-tool`. Deny or abstain, never force-allow.
pub trait ToolGuard: Plugin {
    /// Checks a call that `pre-tool` let through.
    fn on_tool_guard(&mut self, call: ToolCall) -> GuardDecision;
}

/// `tool-execute`: wraps dispatch. Call [`next`] to run the tool (zero or more times).
pub trait ToolExecute: Plugin {
    /// Runs around dispatch and returns the outcome.
    fn on_tool_execute(&mut self, call: ToolCall) -> ToolOutcome;
}

/// `post-tool`: after dispatch. Accept, block with feedback, or replace content or value.
pub trait PostTool: Plugin {
    /// Judges the outcome of a call.
    fn on_post_tool(&mut self, call: ToolCall, outcome: ToolOutcome) -> PostToolDecision;
}

/// `tool-result`: the final outcome, observe only.
pub trait ToolResult: Plugin {
    /// Sees the final outcome of a call.
    fn on_tool_result(&mut self, call: ToolCall, outcome: ToolOutcome);
}

/// `turn-stopping`: the stop boundary of a turn. Return steering to continue the same turn.
pub trait TurnStopping: Plugin {
    /// Returns steering content, or `None` to let the turn close.
    fn on_turn_stopping(&mut self, event: StopEvent) -> Option<String>;
}

/// The committed-fact points: observe only.
pub trait Committed: Plugin {
    /// Sees a committed fact.
    fn on_committed(&mut self, observation: Observation);
}
