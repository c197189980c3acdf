//! The WIT package `palisade:hooks`: the contract between the Palisade host and its plugins
//! — one interface per extension point, the shared types, the host's imports and the worlds
//! a plugin can target.
//!
//! The `.wit` files live in this crate's folder, and only here: the host binds them with
//! [`wasmtime_bindgen!`], the guest SDK with [`wit_bindgen_generate!`] and its `export!` macro
//! with [`FILES`], and `palisade new` writes [`FILES`] into every plugin it creates.

#![deny(missing_docs)]
#![no_std]

/// Every file of the package: its name and its text.
pub const FILES: &[(&str, &str)] = &[
    ("types.wit", include_str!("../types.wit")),
    ("host.wit", include_str!("../host.wit")),
    ("state.wit", include_str!("../state.wit")),
    ("worlds.wit", include_str!("../worlds.wit")),
    ("session-start.wit", include_str!("../session-start.wit")),
    ("prompt-submit.wit", include_str!("../prompt-submit.wit")),
    ("pre-tool.wit", include_str!("../pre-tool.wit")),
    ("tool-guard.wit", include_str!("../tool-guard.wit")),
    ("tool-execute.wit", include_str!("../tool-execute.wit")),
    ("post-tool.wit", include_str!("../post-tool.wit")),
    ("tool-result.wit", include_str!("../tool-result.wit")),
    ("turn-stopping.wit", include_str!("../turn-stopping.wit")),
    ("committed.wit", include_str!("../committed.wit")),
    ("prepare.wit", include_str!("../prepare.wit")),
];

/// The folder that holds the package (this crate's own), for tools that read it from disk.
pub const DIR: &str = env!("CARGO_MANIFEST_DIR");

include!(concat!(env!("OUT_DIR"), "/macros.rs"));

/// The table of extension points: one row per exported interface of the package, in
/// lifecycle order. Calls `$callback!` with the package's version (`version "0.1.0";`), then
/// every row, as `/// docs Variant snake_name "wit-name" method (param: Type, ...) -> (Result)
/// "method docs";` (the types are the package's, by their Rust names; `()` for none). The host
/// generates its interface list, the export lookups, an instance's export functions and the
/// signature checks from it, and the SDK its point traits (with these docs) and its `export!`
/// adapters; a test of this crate fails when an interface of the `.wit` files has no row, or a
/// row no interface.
#[macro_export]
macro_rules! foreach_interface {
    ($callback:ident) => {
        $callback! {
            version "0.1.0";
            /// `session-start`: once, before turn 1. Return contexts to inject (needs
            /// `transform`).
            SessionStart session_start "session-start" on_session_start
                (source: SessionSource) -> (Vec<String>)
                "Called when a session starts.";
            /// `prompt-submit` (pre-step): before every proposed step.
            PromptSubmit prompt_submit "prompt-submit" on_prompt_submit
                (step: PreStep) -> (PreStepDecision)
                "Enter the step (with optional contexts, or a reshaped batch) or reject it.";
            /// `pre-tool`: before a tool call. Allow, deny or ask.
            PreTool pre_tool "pre-tool" on_pre_tool (call: ToolCall) -> (PreToolDecision)
                "Judges a proposed call.";
            /// `tool-guard`: a final invariant after `pre-tool`. Deny or abstain, never
            /// force-allow.
            ToolGuard tool_guard "tool-guard" on_tool_guard (call: ToolCall) -> (GuardDecision)
                "Checks a call that `pre-tool` let through.";
            /// `tool-execute`: wraps dispatch. Call `next` to run the tool (zero or more
            /// times).
            ToolExecute tool_execute "tool-execute" on_tool_execute
                (call: ToolCall) -> (ToolOutcome)
                "Runs around dispatch and returns the outcome.";
            /// `post-tool`: after dispatch. Accept, block with feedback, or replace content or
            /// value.
            PostTool post_tool "post-tool" on_post_tool
                (call: ToolCall, outcome: ToolOutcome) -> (PostToolDecision)
                "Judges the outcome of a call.";
            /// `tool-result`: the final outcome, observe only.
            ToolResult tool_result "tool-result" on_tool_result
                (call: ToolCall, outcome: ToolOutcome) -> ()
                "Sees the final outcome of a call.";
            /// `turn-stopping`: the stop boundary of a turn. Return steering to continue the
            /// same turn.
            TurnStopping turn_stopping "turn-stopping" on_turn_stopping
                (event: StopEvent) -> (Option<String>)
                "Returns steering content, or `None` to let the turn close.";
            /// The committed-fact points: observe only.
            Committed committed "committed" on_committed (observation: Observation) -> ()
                "Sees a committed fact.";
        }
    };
}

macro_rules! interface_names {
    (version $version:literal; $($(#[doc = $doc:literal])* $variant:ident $snake:ident $wit:literal $method:ident ($($arg:ident: $ty:ty),*) -> ($($ret:ty)?) $mdoc:literal;)*) => {
        /// The package's version: `palisade:hooks@VERSION`.
        pub const VERSION: &str = $version;
        /// The WIT names of the extension-point interfaces, from [`foreach_interface!`].
        pub const INTERFACES: &[&str] = &[$($wit),*];
    };
}
foreach_interface!(interface_names);

#[cfg(test)]
mod tests {
    extern crate std;
    use std::vec::Vec;

    /// A `.wit` file that is not in [`super::FILES`] would be bound by the host but missing
    /// from the SDK's worlds and from every plugin `palisade new` writes.
    #[test]
    fn every_wit_file_of_the_folder_is_listed() {
        let mut on_disk: Vec<_> = std::fs::read_dir(super::DIR)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(".wit"))
            .collect();
        on_disk.sort();
        let mut listed: Vec<_> = super::FILES.iter().map(|(name, _)| *name).collect();
        listed.sort();
        assert_eq!(on_disk, listed);
    }

    /// The interfaces the `.wit` files declare, but the shared ones (`types`, the host's
    /// imports) and `prepare` (an export of any plugin, not a point): each must be a row of
    /// the table, and each row one of them.
    #[test]
    fn every_extension_point_interface_has_a_row_of_the_table() {
        let mut declared: Vec<&str> = super::FILES
            .iter()
            .flat_map(|(_, text)| text.lines())
            .filter_map(|line| line.trim().strip_prefix("interface "))
            .filter_map(|rest| rest.split_whitespace().next())
            .filter(|name| !["types", "host", "tool-dispatch", "state", "prepare"].contains(name))
            .collect();
        declared.sort();
        let mut rows = super::INTERFACES.to_vec();
        rows.sort();
        assert_eq!(declared, rows);
    }

    #[test]
    fn the_version_is_the_packages() {
        let package = std::format!("package palisade:hooks@{};", super::VERSION);
        for (name, text) in super::FILES {
            assert!(text.contains(&package), "{name} does not declare {package}");
        }
    }
}
