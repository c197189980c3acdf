//! Where a hook runs, and nothing about what its answer means (that is [`crate::session`]'s
//! and the points'):
//!
//! - a wasm component: [`instance`] runs one hook — its plugin's instance, its limits, the
//!   call — in the store, imports and WASI-without-authority of [`sandbox`]; [`convert`] maps
//!   the host's types to the WIT types at the boundary; [`signatures`] type-checks a
//!   component's exports at load; [`cache`] keeps compiled code on disk.
//! - a command or an HTTP endpoint: [`external`], speaking Claude Code's hook protocol or
//!   Palisade's own.

pub(crate) mod cache;
pub(crate) mod convert;
pub(crate) mod external;
pub(crate) mod instance;
pub(crate) mod sandbox;
pub(crate) mod signatures;
