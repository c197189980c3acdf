//! A wasm hook: its plugin's loaded component, and how one invocation runs under its one
//! deadline — waiting for the plugin's per-session instance, instantiating, calling.

use super::instance::Instance;
use super::sandbox::bindings::exports::palisade::hooks as ex;
use super::sandbox::{
    CallContext, Clock, MAX_LOG_LINES_PER_CALL, MAX_NEXT_CALLS, MAX_STATE_CALLS_PER_CALL, State,
};
use super::{Cost, Meter, Run, Site};
use crate::failure::{Failure, FailureReason};
use crate::hook::Request;
use crate::point::{InstanceLifetime, Interface, Point};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};
use wasmtime::component::{Component, InstancePre};

/// A loaded component.
pub(crate) struct Wasm {
    pub path: PathBuf,
    pub sha256: String,
    pub size: usize,
    /// The component, compiled for the host's first engine.
    pub component: Component,
    pub pre: InstancePre<State>,
    pub exports: Exports,
    /// Whether its instances are called directly, on the caller's thread: its imports are all
    /// in the direct linker ([`super::direct`]).
    pub direct: bool,
    /// Set when one of its direct calls ran long ([`super::sandbox::DIRECT_TICKS`]): its calls
    /// go on a fiber from then on, where a long call yields to the executor at every tick.
    pub ran_long: std::sync::atomic::AtomicBool,
    /// The component loaded into the on-demand engine, for the instances the pool has no
    /// slot for: at the first such instance.
    pub on_demand: OnceLock<Result<Loaded, String>>,
}

/// A component ready to instantiate in one engine.
pub(crate) struct Loaded {
    pub pre: InstancePre<State>,
    pub exports: Exports,
    /// Whether it was linked for direct calls (as [`Wasm::direct`]).
    pub direct: bool,
}

impl Wasm {
    /// The component in the host's on-demand engine (loaded at the first call).
    pub(crate) fn on_demand(&self, host: &crate::engine::HostInner) -> Result<&Loaded, String> {
        self.on_demand
            .get_or_init(|| {
                let (engine, linker) = host.on_demand()?;
                let code = self
                    .component
                    .serialize()
                    .map_err(|e| format!("cannot copy the compiled component: {e:#}"))?;
                // SAFETY: `code` is what wasmtime serialized of a component this process
                // compiled or verified, for an engine of the same configuration.
                #[expect(
                    unsafe_code,
                    reason = "loading code this process's engine just serialized"
                )]
                let component = unsafe { Component::deserialize(engine, &code) }
                    .map_err(|e| format!("cannot load into the on-demand engine: {e:#}"))?;
                let (pre, direct) = linker
                    .link(&component)
                    .map_err(|e| format!("cannot link in the on-demand engine: {e:#}"))?;
                Ok(Loaded {
                    exports: Exports::probe(&pre),
                    pre,
                    direct,
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The export indices of an instance from the pooled engine, or (`on_demand`) from the
    /// on-demand one.
    pub(crate) fn exports(&self, on_demand: bool) -> &Exports {
        match (on_demand, self.on_demand.get()) {
            (true, Some(Ok(loaded))) => &loaded.exports,
            _ => &self.exports,
        }
    }
}

/// A session's slot for one plugin's per-session instance.
pub(crate) type Slot = tokio::sync::Mutex<Option<Instance>>;

macro_rules! exports {
    (version $version:literal; $($(#[doc = $doc:literal])* $variant:ident $snake:ident $wit:literal $method:ident ($($arg:ident: $ty:ty),*) -> ($($ret:ty)?) $mdoc:literal;)*) => {
        /// The export indices of the interfaces a component has; `None` where it lacks one.
        #[derive(Default)]
        pub(crate) struct Exports {
            $(pub $snake: Option<ex::$snake::GuestIndices>,)*
        }

        impl Exports {
            pub(crate) fn probe(pre: &InstancePre<State>) -> Exports {
                // `GuestIndices::new` fails when the component lacks the interface: keep what
                // loads.
                Exports {
                    $($snake: ex::$snake::GuestIndices::new(pre).ok(),)*
                }
            }

            pub fn has(&self, interface: Interface) -> bool {
                match interface {
                    $(Interface::$variant => self.$snake.is_some(),)*
                }
            }
        }
    };
}
palisade_wit::foreach_interface!(exports);

impl Exports {
    pub(crate) fn interfaces(&self) -> Vec<Interface> {
        Point::ALL
            .iter()
            .map(|p| p.interface())
            .fold(Vec::new(), |mut acc, i| {
                if self.has(i) && !acc.contains(&i) {
                    acc.push(i);
                }
                acc
            })
    }
}

const PHASE_WAIT: u8 = 0;
const PHASE_INSTANTIATE: u8 = 1;
const PHASE_CALL: u8 = 2;

/// Runs a wasm hook under its one deadline, which covers the whole invocation: waiting for
/// the plugin's per-session instance (busy in another invocation of the same session: a
/// background observer, a concurrent call), instantiating (start functions and constructors
/// are guest code, and may block in a host call), every host call and the call itself. Epochs
/// stop wasm code; the watchdog stops everything else. At the deadline the invocation fails
/// with `timeout`, which fails closed like any failure.
///
/// A per-session plugin whose `site.slot` is `None` — its session instance is held by an
/// invocation up this call chain (a `tool-execute` wrapper whose tool makes a nested call),
/// and waiting for it would deadlock — runs in a fresh instance of its own.
pub(crate) async fn run(plugin: &Wasm, site: Site<'_>, request: &Request<'_>) -> Run {
    let limits = &site.spec.limits;
    let started = site.started;
    let call = CallContext {
        session_id: site.session_id.clone(),
        invocation_id: site.invocation,
        hook_id: site.hook_id.clone(),
        point: site.point,
        clock: Clock::new(started + limits.timeout),
        logs_left: MAX_LOG_LINES_PER_CALL,
        state_left: MAX_STATE_CALLS_PER_CALL,
        next_left: MAX_NEXT_CALLS,
        next_bytes: 0,
    };
    let clock = call.clock.clone();
    let phase = AtomicU8::new(PHASE_WAIT);

    let work = async {
        let mut slot = match (site.lifetime, site.slot) {
            // Free but for a contended slot: no waiter made.
            (InstanceLifetime::PerSession, Some(slot)) => Some(match slot.try_lock() {
                Ok(held) => held,
                Err(_) => slot.lock().await,
            }),
            _ => None,
        };
        let mut fresh_cost = Cost::default();
        let mut instance = match slot.as_mut().and_then(|s| s.take()) {
            Some(mut instance) => {
                instance.begin(call, limits);
                instance
            }
            None => {
                phase.store(PHASE_INSTANTIATE, Ordering::Relaxed);
                let state = match State::new(site.env.clone(), site.sink.clone(), call) {
                    Ok(state) => state,
                    Err(why) => {
                        return (
                            Err(Failure::new(FailureReason::Unavailable, why)),
                            Cost::default(),
                        );
                    }
                };
                // Boxed: instantiating is the rarer path, and its future the larger.
                match Box::pin(Instance::new(site.host, plugin, state, limits)).await {
                    Ok((instance, cost)) => {
                        fresh_cost = cost;
                        instance
                    }
                    Err(failure) => return (Err(failure), Cost::default()),
                }
            }
        };
        phase.store(PHASE_CALL, Ordering::Relaxed);
        let (result, cost) = instance.call(plugin, request, limits).await;
        // A failed instance may be dead (a trap) or mid-call: never reuse it.
        if result.is_ok()
            && let Some(slot) = slot.as_mut()
        {
            **slot = Some(instance);
        }
        (
            result,
            Cost {
                fuel: cost.fuel + fresh_cost.fuel,
            },
        )
    };
    let (result, cost) = tokio::select! {
        // Biased: a call that completes at its first poll never arms the watchdog's timer.
        biased;
        done = work => done,
        () = watchdog(&clock) => {
            let during = match phase.load(Ordering::Relaxed) {
                PHASE_WAIT => "while waiting for its per-session instance, busy in another \
                               invocation of this session",
                PHASE_INSTANTIATE => "during instantiation",
                _ => "in a host call",
            };
            (
                Err(Failure::new(
                    FailureReason::Timeout,
                    format!(
                        "passed its deadline of {} ms {during}",
                        limits.timeout.as_millis()
                    ),
                )),
                Cost::default(),
            )
        }
    };
    Run {
        result,
        meter: Meter {
            duration: started.elapsed(),
            cost,
        },
        logs: Vec::new(),
    }
}

/// Returns when `clock` expires; waits out pauses.
async fn watchdog(clock: &Clock) {
    loop {
        if clock.is_paused() {
            clock.resumed.notified().await;
            continue;
        }
        tokio::time::sleep_until(clock.deadline().into()).await;
        if clock.expired() {
            return;
        }
    }
}
