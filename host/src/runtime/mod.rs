//! Where a hook runs, and nothing about what its answer means (that is [`crate::session`]'s
//! and the points'). One entry, [`Runtime::call`]: a [`Request`] in, an [`Answer`] (or a
//! typed [`Failure`]) out, in the host's own types ([`crate::hook`]).
//!
//! - a wasm component: [`wasm`] runs one invocation under its one deadline (waiting for the
//!   plugin's per-session instance, instantiating, calling); [`instance`] is a live instance
//!   and its call, in the store, imports and WASI-without-authority of [`sandbox`];
//!   [`outbound`] is what its `wasi:http` requests may reach; [`convert`] maps the host's types to the WIT types at the boundary and back;
//!   [`signatures`] type-checks a component's exports at load; [`cache`] keeps compiled code
//!   on disk.
//! - a command or an HTTP endpoint: [`external`], speaking Claude Code's hook protocol or
//!   Palisade's own.

pub(crate) mod bindings;
pub(crate) mod cache;
pub(crate) mod capture;
pub(crate) mod clock;
pub(crate) mod component;
pub(crate) mod convert;
pub(crate) mod direct;
pub(crate) mod engines;
pub(crate) mod external;
#[cfg(test)]
pub(crate) mod fake;
pub(crate) mod functions;
pub(crate) mod instance;
pub(crate) mod limits;
pub(crate) mod loading;
#[cfg(feature = "http")]
pub(crate) mod outbound;
pub(crate) mod outcome;
pub(crate) mod private;
pub(crate) mod sandbox;
pub(crate) mod signatures;
pub(crate) mod site;
pub(crate) mod wasm;

use crate::failure::Failure;
use crate::hook::Request;
use crate::point::Capability;
use external::{Caller, External};
pub(crate) use instance::Slot;
pub(crate) use outcome::{Cost, Meter, Run};
use sandbox::invocation_id;
pub(crate) use site::Site;
use std::sync::Arc;
use std::time::Instant;
pub(crate) use wasm::Wasm;

/// How a loaded plugin's hooks run.
pub(crate) enum Runtime {
    Wasm(Box<Wasm>),
    /// A component still loading: its calls wait for it ([`loading`]).
    Loading(Arc<loading::Loading>),
    External(External),
    /// A hook written in Rust, for the dispatch rules' own tests.
    #[cfg(test)]
    Fake(fake::Fake),
}

impl Runtime {
    /// Runs one hook of this runtime: `request` in, its answer out.
    pub async fn call(&self, site: Site<'_>, request: &Request<'_>) -> Run {
        match self {
            Runtime::Wasm(wasm) => wasm::run(wasm, site, request).await,
            Runtime::Loading(loading) => match loading.wait().await {
                // Its time, and its deadline, count from here: the wait is the load's, which
                // the caller bounds (a bridge's budget), not the hook's.
                Ok(wasm) => {
                    let started = Instant::now();
                    wasm::run(wasm, Site { started, ..site }, request).await
                }
                // Failed closed where the hook would; a bridge refuses the whole event with
                // the load's problems in any case.
                Err(problems) => Run {
                    result: Err(Failure::new(
                        crate::failure::FailureReason::Unavailable,
                        format!("its component did not load: {problems}"),
                    )),
                    meter: Meter {
                        duration: site.started.elapsed(),
                        cost: Cost::default(),
                    },
                    logs: Vec::new(),
                },
            },
            Runtime::External(external) => {
                let started = site.started;
                let invocation = invocation_id(site.invocation);
                let caller = Caller {
                    session_id: site.session_id,
                    hook_id: site.hook_id,
                    invocation_id: &invocation,
                    point: site.point,
                    config: site.config,
                    guarding: site.spec.has(Capability::Guard),
                };
                // Boxed: a command's or an HTTP client's future is tens of KiB, which every
                // wasm call would otherwise set up and move through.
                let called = Box::pin(external.call(&caller, request, &site.spec.limits)).await;
                Run {
                    result: called.result,
                    meter: Meter {
                        duration: started.elapsed(),
                        cost: Cost::default(),
                    },
                    logs: called.logs,
                }
            }
            #[cfg(test)]
            Runtime::Fake(fake) => fake.call(site, request).await,
        }
    }

    /// The component, for a wasm plugin (once loaded, for one still loading).
    pub fn wasm(&self) -> Option<&Wasm> {
        match self {
            Runtime::Wasm(wasm) => Some(wasm),
            Runtime::Loading(loading) => loading.get(),
            _ => None,
        }
    }

    /// The component, for a wasm plugin, once it has loaded (`None`: it did not).
    pub async fn loaded(&self) -> Option<&Wasm> {
        match self {
            Runtime::Wasm(wasm) => Some(wasm),
            Runtime::Loading(loading) => loading.wait().await.ok(),
            _ => None,
        }
    }

    /// The size of the component file, for a wasm plugin (loaded or not).
    pub fn component_size(&self) -> Option<usize> {
        match self {
            Runtime::Wasm(wasm) => Some(wasm.size),
            Runtime::Loading(loading) => Some(loading.size),
            _ => None,
        }
    }
}
