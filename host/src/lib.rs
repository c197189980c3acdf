//! Palisade: a WebAssembly plugin host for sandboxed agent hooks.
//!
//! An agent calls Palisade at its lifecycle points (before a tool call, after it, ...);
//! Palisade runs the hooks the operator installed — each an isolated WebAssembly component,
//! under fuel, deadline and memory limits, with the capabilities its manifest grants — and
//! hands back a typed decision.
//!
//! ```no_run
//! # async fn example() -> Result<(), palisade::Error> {
//! use palisade::{Host, PreToolDecision, ToolCall};
//!
//! let host = Host::new()?;
//! let plugins = host.load_dir("plugins")?;          // every plugin, validated, or every problem
//! let session = plugins.session("session-1");       // one per agent session
//!
//! let call = ToolCall::new("toolu_1", "Bash", serde_json::json!({"command": "rm -rf /"}));
//! match session.pre_tool(&call).await {
//!     PreToolDecision::Allow => { /* run the tool */ }
//!     PreToolDecision::Ask(ask) => { /* ask the user: {ask.reason} */ }
//!     PreToolDecision::Deny(denial) => println!("denied by {}: {}", denial.hook_id, denial.message),
//! }
//! # Ok(()) }
//! ```
//!
//! The crate root holds what an embedder uses at every call: the [`Host`], its [`Plugins`]
//! and [`Session`]s, the [`Point`]s and their [`Capability`] table, the values that cross the
//! boundary ([`ToolCall`], the decisions), the [`Lifecycle`] and the tool pipeline
//! ([`ToolRegistry`]). Each module holds one concern, its types only there: [`manifest`] (what
//! an operator grants), [`events`] (lifecycle events and sinks), [`state`] and [`facts`] (the
//! stores), [`limits`] (the sandbox's caps), [`agent`] (an agent loop), [`agents`] (one
//! module per agent whose hooks Palisade answers), [`bridge`] (their events run as points) and
//! [`claude_code`] (the hook wire's types).
//!
//! # Features
//!
//! All on by default:
//!
//! - `sqlite`: the embedded state store ([`state::StateStore::embedded`], the default store) and the
//!   embedded fact stream ([`facts::FactStream::embedded`]), on a bundled SQLite;
//! - `redis`: [`state::StateStore::redis`] and [`facts::FactStream::redis`];
//! - `http`: HTTP hooks (`url = …`) and the `wasi:http` grant of
//!   components (`http = […]`).
//!
//! Without one, its stores fail closed when opened (a state call fails `state-unavailable`,
//! the fact stream refuses decisions), and a manifest that needs `http` is refused at load.
//! With none, the library is wasmtime, WASI and the dispatch rules:
//! `cargo run -p palisade --no-default-features --example wasm_only`.
// A build without a backend (`--no-default-features`) leaves the code only it used unused.
#![cfg_attr(
    not(all(feature = "sqlite", feature = "redis", feature = "http")),
    allow(dead_code, unused_variables, unreachable_code)
)]
#![deny(missing_docs)]

pub mod agent;
pub mod agents;
pub mod bridge;
pub mod claude_code;
mod digest;
mod error;
pub mod events;
pub mod facts;
mod failure;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
mod hook;
mod host;
mod jsonl;
mod lifecycle;
mod loader;
pub mod manifest;
mod pipeline;
mod plugin;
mod point;
mod point_wire;
mod points;
mod runtime;
mod session;
mod signal;
pub mod state;
mod tool_kinds;
mod types;

pub use error::{Error, Problem};
pub use failure::{Failure, FailureReason};
pub use hook::BoxFuture;
pub use host::{
    CompileObserver, CompileProgress, DEFAULT_BACKGROUND_QUEUE, DEFAULT_MAX_COMPONENT_BYTES,
    DEFAULT_WRAPPED_EXECUTION_DEADLINE, Host, HostBuilder,
};
pub use jsonl::{AuditLoss, JsonlSink};
pub use lifecycle::{
    AgentApplies, AskPolicy, Lifecycle, NotApplied, Reported, ToolDecision, ToolStep,
};
pub use loader::LoadRequest;
#[doc(hidden)]
pub use loader::{Loads, Manifests};
pub use pipeline::{
    CallToken, Tool, ToolContext, ToolExecution, ToolInvocation, ToolRegistry, ToolRequest,
};
pub use plugin::{Plugin, Plugins};
pub use point::{Capability, InstanceLifetime, Interface, Mode, OnFailure, Point};
pub use runtime::engines::{DEFAULT_INSTANCE_POOL, EPOCH_TICK};
pub use session::{Approver, Session};
pub use signal::Signal;
pub use tool_kinds::ToolKind;
pub use types::{
    Approval, AskRequest, Authorization, CommittedFact, ContentBlock, Context, Denial,
    GuardDecision, LlmResponse, Message, Observation, PostToolResult, PreStep, PreStepDecision,
    PreToolDecision, Provenance, Role, ServerToolContent, SessionSource, Steering, StopEvent,
    ToolCall, ToolOutcome, ToolResult, TurnOutcome,
};

/// What one plugin instance may hold and do: the sandbox's caps, the same for every plugin
/// (a manifest's own bounds are in [`manifest`]).
pub mod limits {
    pub use crate::runtime::limits::{
        MAX_CORE_INSTANCES, MAX_LOG_LINE_BYTES, MAX_LOG_LINES_PER_CALL, MAX_MEMORIES,
        MAX_NEXT_CALLS, MAX_OUTPUT_BYTES_PER_CALL, MAX_STATE_CALLS_PER_CALL, MAX_TABLE_ELEMENTS,
        MAX_TABLES, MAX_WASI_RESOURCES,
    };
}
