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
//! functions; so are [`state`] (values the host keeps, when the manifest grants `[state]`) and
//! [`http`] (requests to the origins the manifest's `http` grant lists).
//!
//! The SDK sets the plugin's global allocator (the default feature `fast-alloc`): blocks of up
//! to 4 KiB come from a free list per power-of-two size class, cut from a few regions it takes
//! from the system allocator (`dlmalloc`), larger ones (and small ones past those regions)
//! from the system allocator itself. A call's strings and small values then cost a few
//! instructions each to allocate and free instead of hundreds. A freed small block is kept for
//! its class rather than returned, so an instance holds at most its peak use of each class
//! (and, with the allocator's own state, a page more than it would otherwise). What imports
//! return is allocated by the system allocator (the SDK exports `cabi_import_realloc`), as
//! wasi-libc frees some of it itself. A plugin that sets a `#[global_allocator]` of its own
//! depends on the SDK with `default-features = false` (else rustc refuses the build: "the
//! `#[global_allocator]` in this crate conflicts with global allocator in: palisade_sdk").
#![deny(missing_docs)]

// The plugin's allocator (built natively only for its tests).
#[cfg(any(all(target_arch = "wasm32", feature = "fast-alloc"), test))]
mod alloc;
mod folder;
mod helpers;
pub mod http;

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
    pub use crate::bindings::palisade::hooks::{host, state, tool_dispatch, types};
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
    Provenance, Role, SessionSource, StopEvent, ToolCall, ToolKind, ToolOutcome, TurnOutcome,
};
pub use folder::WatchedFolder;
pub use helpers::{ArgValue, Config, config, invocation, log, next, state};

/// A plugin: the value that holds its state. [`export!`] makes one per instance, with
/// [`Plugin::new`], before the instance's first hook runs, and calls every hook on it.
pub trait Plugin: Sized + 'static {
    /// Makes the plugin from its manifest's `[config]` table: parse it here, once.
    fn new(config: &Config) -> Self;
}

/// Readies each instance before its first call. Name it in [`export!`]
/// (`export!(MyPlugin: PreTool + Prepare)`) and the component exports `prepare`, which the host
/// calls once per instance, right after instantiating it: [`Plugin::new`] runs there, then this
/// method. A per-call plugin's next instance is made ahead of its call, so both run off the
/// call's path (without it, they run in the call). Only [`config`] is certain to answer here:
/// made ahead of its call, an instance that logs, asks for the [`invocation`] or state, or sends
/// a request is discarded (`palisade:hooks/prepare`).
pub trait Prepare: Plugin {
    /// Readies the plugin's value, once, after [`Plugin::new`]. An error fails the instance:
    /// the hook it was made for fails closed with this text.
    fn prepare(&mut self) -> Result<(), String> {
        Ok(())
    }
}

// One trait per extension point, from the package's table (`palisade_wit::foreach_interface!`):
// implement the ones your plugin exports, and name them in `export!`.
macro_rules! point_traits {
    (version $version:literal; $($(#[doc = $doc:literal])* $variant:ident $snake:ident $wit:literal $method:ident ($($arg:ident: $ty:ty),*) -> ($($ret:ty)?) $mdoc:literal;)*) => {
        $(
            $(#[doc = $doc])*
            pub trait $variant: Plugin {
                #[doc = $mdoc]
                fn $method(&mut self, $($arg: $ty),*) $(-> $ret)?;
            }
        )*
    };
}
palisade_wit::foreach_interface!(point_traits);
