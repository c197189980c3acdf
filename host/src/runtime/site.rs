//! Where one invocation runs: the session, the hook and the plugin it is of, and what of
//! its host it may use.

use super::engines::Engines;
use super::instance::Slot;
use super::sandbox::PluginEnv;
use crate::events::EventSink;
use crate::manifest::HookSpec;
use crate::point::{InstanceLifetime, Point};
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Instant;

/// Where one invocation runs: whose it is, and what of its plugin it may use.
pub(crate) struct Site<'a> {
    pub session_id: &'a Arc<str>,
    pub hook_id: &'a Arc<str>,
    pub invocation: u64,
    pub point: Point,
    pub spec: &'a HookSpec,
    /// The plugin's `[config]` table.
    pub config: &'a Map<String, Value>,
    pub env: &'a Arc<PluginEnv>,
    pub lifetime: InstanceLifetime,
    /// The host's engines (the pooled one and the on-demand one behind it).
    pub engines: &'a Engines,
    /// Where the plugin's logs go: none when no sink wants them.
    pub sink: &'a Option<Arc<dyn EventSink>>,
    /// The plugin's per-session instance slot in this session; `None` when an invocation up
    /// this call chain holds it (see [`super::wasm::run`]).
    pub slot: Option<&'a Slot>,
    /// When the invocation began: its duration, and its deadline, count from here.
    pub started: Instant,
}
