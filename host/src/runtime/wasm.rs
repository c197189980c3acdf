//! A wasm hook: its plugin's loaded component, and how one invocation runs under its one
//! deadline — waiting for the plugin's per-session instance, instantiating, calling.

use super::clock::Clock;
use super::component::{Code, Loaded};
use super::instance::Instance;
use super::limits::{MAX_LOG_LINES_PER_CALL, MAX_NEXT_CALLS, MAX_STATE_CALLS_PER_CALL};
use super::outcome::{Cost, Meter, Run};
use super::sandbox::{CallContext, PluginEnv, State};
use super::site::Site;
use crate::events::EventSink;
use crate::failure::{Failure, FailureReason};
use crate::hook::Request;
use crate::manifest::Limits;
use crate::point::InstanceLifetime;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A loaded component: its file, its code, and its per-call instances made ahead.
pub(crate) struct Wasm {
    pub path: PathBuf,
    pub sha256: String,
    pub size: usize,
    /// The component, compiled and linked.
    pub code: Code,
    /// Its next instance when it is per-call, made ahead of the call.
    pub spares: Arc<Spares>,
}

/// A per-call plugin's spare instance: made after one of its calls, ahead of the next, so
/// that the next call pays for the call only and not for instantiating. Isolation is
/// unchanged: every call still gets an instance no call has used.
///
/// An instance is made ahead only while its instantiation needs no invocation. A Palisade
/// host call other than `config`, or an HTTP request, during it spoils the spare
/// ([`State::ahead`]): it is thrown away and the plugin's instances are made for their
/// calls from then on, as is one whose instantiation fails or overruns its `timeout_ms`.
/// A spare is taken only by a call under the limits it was made under.
pub(crate) struct Spares {
    /// The plugin's component, as [`Wasm`] has it.
    loaded: Arc<Loaded>,
    ready: Mutex<Option<Spare>>,
    /// Whether one is being made.
    making: AtomicBool,
    /// Set for good when one was spoiled, failed or overran.
    off: AtomicBool,
    /// How many calls took one.
    taken: AtomicU64,
    /// Where its first instance, made ahead of the first call of a process that serves one
    /// event ([`Spares::make_first`]), stands: [`AHEAD_NONE`], [`AHEAD_QUEUED`],
    /// [`AHEAD_MAKING`] or [`AHEAD_PASSED`].
    first: AtomicU8,
    /// Told when a first instance made ahead is ready, failed or was not made.
    first_done: tokio::sync::Notify,
}

/// No first instance is being made ahead (or it was, and is ready or failed).
const AHEAD_NONE: u8 = 0;
/// One will be made ahead, unless the call comes first and makes its own.
const AHEAD_QUEUED: u8 = 1;
/// One is being made ahead: the call waits for it rather than make another.
const AHEAD_MAKING: u8 = 2;
/// A call came with none queued or being made, and made its own: none is queued after it
/// (a component that was still loading when the makings were queued, whose call came as
/// soon as it loaded).
const AHEAD_PASSED: u8 = 3;

struct Spare {
    instance: Instance,
    /// What instantiating it cost, charged to the call that takes it.
    cost: Cost,
    limits: Limits,
}

impl Spares {
    pub fn new(loaded: Arc<Loaded>) -> Arc<Spares> {
        Arc::new(Spares {
            loaded,
            ready: Mutex::new(None),
            making: AtomicBool::new(false),
            off: AtomicBool::new(false),
            taken: AtomicU64::new(0),
            first: AtomicU8::new(AHEAD_NONE),
            first_done: tokio::sync::Notify::new(),
        })
    }

    /// How many calls took a spare.
    pub fn taken(&self) -> u64 {
        self.taken.load(Ordering::Relaxed)
    }

    /// Whether one is ready.
    pub fn ready(&self) -> bool {
        self.ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Whether the plugin gets no more spares (one was spoiled, failed or overran).
    pub fn off(&self) -> bool {
        self.off.load(Ordering::Relaxed)
    }

    /// The ready spare, if it was made under `limits` (one made under others is dropped).
    fn take(&self, limits: &Limits) -> Option<(Instance, Cost)> {
        let spare = self
            .ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        if spare.limits != *limits {
            return None;
        }
        self.taken.fetch_add(1, Ordering::Relaxed);
        Some((spare.instance, spare.cost))
    }

    /// Starts making the next spare of `plugin` on the current tokio runtime, under
    /// `limits`, unless one is ready or being made, the plugin gets none, or there is no
    /// runtime. `used`, the instance of the call just made, is freed there first (its slot
    /// reset for the spare), or here when no spare is made.
    fn replenish(
        self: &Arc<Self>,
        engines: &super::engines::Engines,
        plugin: &Wasm,
        env: &Arc<PluginEnv>,
        sink: &Option<Arc<dyn EventSink>>,
        limits: Limits,
        used: Instance,
    ) {
        if self.off() || self.making.swap(true, Ordering::AcqRel) {
            return;
        }
        let runtime = match tokio::runtime::Handle::try_current() {
            Ok(runtime) if !self.ready() => runtime,
            _ => {
                self.making.store(false, Ordering::Release);
                return;
            }
        };
        let ran_long = plugin.code.ran_long.load(Ordering::Relaxed);
        // Linked again here, if it must be, where the host is at hand (the spare's task finds
        // it linked).
        if self.loaded.pre(Some(engines), ran_long).is_err() {
            self.off.store(true, Ordering::Relaxed);
            self.making.store(false, Ordering::Release);
            return;
        }
        let (spares, env, sink) = (self.clone(), env.clone(), sink.clone());
        runtime.spawn(async move {
            drop(used);
            spares.make(env, sink, limits, ran_long, Timer::Tokio).await;
            spares.making.store(false, Ordering::Release);
        });
    }

    /// Makes an instance under `limits` and keeps it as the ready spare; one that is
    /// spoiled, fails or overruns (its `timeout_ms`, kept by `timer`) turns spares off for
    /// the plugin.
    async fn make(
        &self,
        env: Arc<PluginEnv>,
        sink: Option<Arc<dyn EventSink>>,
        limits: Limits,
        ran_long: bool,
        timer: Timer,
    ) {
        let made = async {
            let state = State::ahead(env, sink, limits.timeout).map_err(|_| ())?;
            let (pre, direct) = self.loaded.pre(None, ran_long).map_err(|_| ())?;
            let exports = &self.loaded.exports;
            Ok::<_, ()>(Instance::ahead(pre, exports, state, &limits, direct).await)
        };
        let made = match timer {
            Timer::Tokio => tokio::time::timeout(limits.timeout, made).await.ok(),
            Timer::AtPolls => by(std::time::Instant::now() + limits.timeout, made).await,
        };
        match made {
            Some(Ok(Some(Ok((mut instance, cost))))) if !instance.spoiled() => {
                instance.load_exports(&self.loaded.exports);
                *self.ready.lock().unwrap_or_else(|e| e.into_inner()) = Some(Spare {
                    instance,
                    cost,
                    limits,
                });
            }
            // No slot free in the pool: the next call tries again.
            Some(Ok(None)) => {}
            // Spoiled, failed, overran, or its granted folders are gone.
            _ => self.off.store(true, Ordering::Relaxed),
        }
    }

    /// Queues the making of the plugin's first instance ahead of its first call
    /// ([`Spares::make_first`]); `false` if it gets none (spares are off for it, one is
    /// ready, queued or being made, or its first call came).
    pub fn queue_first(&self) -> bool {
        !self.off()
            && !self.ready()
            && !self.making.load(Ordering::Acquire)
            && self
                .first
                .compare_exchange(
                    AHEAD_NONE,
                    AHEAD_QUEUED,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
    }

    /// Makes the first instance queued by [`Spares::queue_first`], unless its call came
    /// first and made its own ([`Spares::first_or_own`]).
    pub async fn make_first(
        &self,
        env: Arc<PluginEnv>,
        sink: Option<Arc<dyn EventSink>>,
        limits: Limits,
    ) {
        if self
            .first
            .compare_exchange(
                AHEAD_QUEUED,
                AHEAD_MAKING,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_err()
        {
            return;
        }
        // Whatever happens to the making (a panic, or its future dropped with its thread),
        // a call waiting for it is told, and makes its own.
        struct Done<'a>(&'a Spares);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.first.store(AHEAD_NONE, Ordering::Release);
                self.0.first_done.notify_waiters();
            }
        }
        let _done = Done(self);
        self.make(env, sink, limits, false, Timer::AtPolls).await;
    }

    /// Whether its first instance is queued or being made ahead ([`Spares::first_or_own`]);
    /// if not, none will be: this call makes its own.
    fn first_pending(&self) -> bool {
        let now = match self.first.load(Ordering::Acquire) {
            AHEAD_NONE => match self.first.compare_exchange(
                AHEAD_NONE,
                AHEAD_PASSED,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return false,
                Err(now) => now,
            },
            now => now,
        };
        now == AHEAD_QUEUED || now == AHEAD_MAKING
    }

    /// At a call that would make its instance: waits for its first instance if it is being
    /// made ahead, and otherwise takes the queued making over (the call makes its own, which
    /// costs no more than waiting behind the others queued before it).
    async fn first_or_own(&self) {
        let done = self.first_done.notified();
        tokio::pin!(done);
        done.as_mut().enable();
        if self
            .first
            .compare_exchange(
                AHEAD_QUEUED,
                AHEAD_PASSED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            return;
        }
        if self.first.load(Ordering::Acquire) == AHEAD_MAKING {
            done.await;
        }
    }
}

/// How the making of an instance ahead keeps to its `timeout_ms`.
#[derive(Clone, Copy)]
enum Timer {
    /// A timer of the runtime it runs on (a spare's task).
    Tokio,
    /// Checked at each of its polls ([`by`]): for a making on a thread of its own, which its
    /// runtime's timers may have ended under (the runtime shut down while it was polled).
    AtPolls,
}

/// `future`'s output, or `None` once `deadline` has passed: checked at each of its polls,
/// with no timer. An instantiation's wasm code yields at every epoch tick, so it is polled at
/// least that often while it computes; a host call it waits in (a sleep) is not cut short.
async fn by<F: Future>(deadline: std::time::Instant, future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    std::future::poll_fn(|cx| {
        if std::time::Instant::now() >= deadline {
            return std::task::Poll::Ready(None);
        }
        future.as_mut().poll(cx).map(Some)
    })
    .await
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
        let held = slot.as_mut().and_then(|s| s.take());
        if held.is_none() {
            phase.store(PHASE_INSTANTIATE, Ordering::Relaxed);
            // Boxed: only the first calls of a process that made instances ahead get here, and
            // every call would otherwise set up and move the waiter.
            if plugin.spares.first_pending() {
                Box::pin(plugin.spares.first_or_own()).await;
            }
        }
        let mut instance = match held {
            Some(mut instance) => {
                instance.begin(call, limits);
                instance
            }
            None if let Some((mut instance, cost)) = spare(plugin, limits) => {
                instance.begin(call, limits);
                fresh_cost = cost;
                instance
            }
            None => {
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
                match Box::pin(Instance::new(site.engines, &plugin.code, state, limits)).await {
                    Ok((instance, cost)) => {
                        fresh_cost = cost;
                        instance
                    }
                    Err(failure) => return (Err(failure), Cost::default()),
                }
            }
        };
        phase.store(PHASE_CALL, Ordering::Relaxed);
        let (result, cost) = instance.call(&plugin.code, request, limits).await;
        match slot.as_mut() {
            // A failed instance may be dead (a trap) or mid-call: never reuse it.
            Some(slot) if result.is_ok() => **slot = Some(instance),
            Some(_) => {}
            // A per-call instance, used: freed with the next spare made, off the call's path.
            None if site.lifetime == InstanceLifetime::PerCall && site.engines.spares => {
                plugin.spares.replenish(
                    site.engines,
                    plugin,
                    site.env,
                    site.sink,
                    *limits,
                    instance,
                );
            }
            // Any other: freed here, when `instance` goes.
            None => {}
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

/// An instance made ahead, for a call that would make one, if one is ready: a per-call
/// plugin's spare, or a plugin's first instance made ahead of its first call
/// ([`Spares::make_first`]; a per-session plugin's goes to its session). One linked for
/// direct calls, made before its plugin ran long, is dropped: its clock waits would fail on a
/// fiber.
fn spare(plugin: &Wasm, limits: &Limits) -> Option<(Instance, Cost)> {
    plugin
        .spares
        .take(limits)
        .filter(|(instance, _)| !instance.direct() || !plugin.code.ran_long.load(Ordering::Relaxed))
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
