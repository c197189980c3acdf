//! Running one hook: instantiate (or reuse) its plugin's instance, arm its limits, call the
//! export of its point, and turn whatever went wrong into a typed [`Failure`].

use super::bindings::exports::palisade::hooks as ex;
use super::component::Code;
use super::convert::{from_wit, outcome_bytes, to_wit_source};
use super::limits::{MAX_LOG_LINES_PER_CALL, MAX_STATE_CALLS_PER_CALL};
use super::outcome::Cost;
use super::sandbox::{CallContext, State};
use crate::failure::{Failure, FailureReason};
use crate::hook::{Answer, Request};
use crate::manifest::Limits;
use std::sync::atomic::{AtomicBool, Ordering};
use wasmtime::component::{Instance as ComponentInstance, InstancePre};
use wasmtime::{PoolConcurrencyLimitError, Store, Trap, UpdateDeadline};

/// A session's slot for one plugin's per-session instance.
pub(crate) type Slot = tokio::sync::Mutex<Option<Instance>>;

/// A live plugin instance and its store.
pub(crate) struct Instance {
    store: Store<State>,
    instance: ComponentInstance,
    /// Export functions already looked up, so a reused instance skips the lookup.
    guests: Guests,
    /// Whether it came from the on-demand engine (the pool was full).
    on_demand: bool,
    /// Whether it was linked for direct calls ([`super::direct`]).
    direct: bool,
}

/// How an attempt to instantiate went.
enum Attempt {
    Done(Result<(Instance, Cost), Failure>),
    /// The pool had no slot for the component or one of its parts: here is the state back.
    /// The parts instantiated before it (whose start functions may have run) went with the
    /// failed attempt's store; the retry runs under the same deadline.
    PoolFull(Box<State>),
}

macro_rules! guests {
    (version $version:literal; $($(#[doc = $doc:literal])* $variant:ident $snake:ident $wit:literal $method:ident ($($arg:ident: $ty:ty),*) -> ($($ret:ty)?) $mdoc:literal;)*) => {
        /// An instance's export functions, one slot per extension-point interface.
        #[derive(Default)]
        struct Guests {
            $($snake: Option<ex::$snake::Guest>,)*
        }

        impl Guests {
            /// Looks up every export of `exports` not looked up yet (one that fails to load
            /// is left for its call, which reports it).
            fn load_all(
                &mut self,
                store: &mut Store<State>,
                instance: &ComponentInstance,
                exports: &super::component::Exports,
            ) {
                $(if self.$snake.is_none()
                    && let Some(indices) = &exports.$snake
                {
                    self.$snake = indices.load(&mut *store, instance).ok();
                })*
            }
        }
    };
}
palisade_wit::foreach_interface!(guests);

impl Instance {
    /// Instantiates `plugin` under `limits` (instantiation runs guest code too): in a slot of
    /// the host's pool, or, when the pool is full, from the on-demand engine.
    pub async fn new(
        engines: &super::engines::Engines,
        plugin: &Code,
        state: State,
        limits: &Limits,
    ) -> Result<(Instance, Cost), Failure> {
        let ran_long = &plugin.ran_long;
        let (pre, linked) = plugin
            .loaded
            .pre(Some(engines), ran_long.load(Ordering::Relaxed))
            .map_err(|why| Failure::new(FailureReason::Unavailable, why))?;
        let exports = &plugin.loaded.exports;
        let mut state = match Self::instantiate(pre, exports, state, limits, linked, ran_long).await
        {
            Attempt::Done(done) => return done,
            Attempt::PoolFull(state) => state,
        };
        let loaded = plugin
            .on_demand(engines)
            .map_err(|why| Failure::new(FailureReason::Unavailable, why))?;
        let (pre, linked) = loaded
            .pre(Some(engines), ran_long.load(Ordering::Relaxed))
            .map_err(|why| Failure::new(FailureReason::Unavailable, why))?;
        // What the failed attempt allocated went with its store: the caps count afresh.
        state.limiter = Default::default();
        match Self::instantiate(pre, &loaded.exports, *state, limits, linked, ran_long).await {
            Attempt::Done(done) => done.map(|(mut instance, cost)| {
                instance.on_demand = true;
                (instance, cost)
            }),
            Attempt::PoolFull(_) => Err(Failure::new(
                FailureReason::Unavailable,
                "the on-demand engine reported a full pool",
            )),
        }
    }

    /// Instantiates `pre` ahead of its call (a per-call plugin's spare, whose `state` is
    /// [`State::ahead`]): on a fiber, so that a long instantiation yields to the executor,
    /// and, in a pooled engine, only in a slot of the pool (`None`: none is free). Its calls go
    /// directly when `direct` (linked for direct calls), as an instance made for its call.
    pub async fn ahead(
        pre: &InstancePre<State>,
        exports: &super::component::Exports,
        state: State,
        limits: &Limits,
        direct: bool,
    ) -> Option<Result<(Instance, Cost), Failure>> {
        let unused = AtomicBool::new(false);
        match Self::instantiate(pre, exports, state, limits, false, &unused).await {
            Attempt::Done(done) => Some(done.map(|(mut instance, cost)| {
                instance.direct = direct;
                (instance, cost)
            })),
            Attempt::PoolFull(_) => None,
        }
    }

    /// Looks up its exports of `exports` ahead of the calls that need them.
    pub fn load_exports(&mut self, exports: &super::component::Exports) {
        self.guests
            .load_all(&mut self.store, &self.instance, exports);
    }

    /// Whether it was linked for direct calls.
    pub fn direct(&self) -> bool {
        self.direct
    }

    /// Whether, made ahead of its call, it asked for what only an invocation has.
    pub fn spoiled(&self) -> bool {
        self.store.data().spoiled()
    }

    /// Instantiates `pre` into a new store and, if it exports `prepare` (`exports`), prepares
    /// the instance, within the same limits: directly when `pre` was linked for direct calls
    /// (`linked`) and its plugin never ran long (`ran_long`, set here if it does), else on a
    /// fiber.
    async fn instantiate(
        pre: &InstancePre<State>,
        exports: &super::component::Exports,
        state: State,
        limits: &Limits,
        linked: bool,
        ran_long: &AtomicBool,
    ) -> Attempt {
        let mut store = Store::new(pre.engine(), state);
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_callback(|mut ctx| {
            let data = ctx.data_mut();
            if data.call.clock.expired() {
                Ok(UpdateDeadline::Interrupt)
            } else if data.direct_tick() {
                // On the caller's thread, which it cannot yield (if it runs long, its
                // plugin's next calls go on a fiber).
                Ok(UpdateDeadline::Continue(1))
            } else {
                // Let the executor run other tasks while a long hook computes.
                Ok(UpdateDeadline::Yield(1))
            }
        });
        arm(&mut store, limits);
        let result = if linked && !ran_long.load(Ordering::Relaxed) {
            directly(&mut store, ran_long, |store| pre.instantiate(store))
        } else {
            pre.instantiate_async(&mut store).await
        };
        let (result, phase) = match (result, &exports.prepare) {
            (Ok(instance), Some(indices)) => {
                match prepare(&mut store, &instance, indices, linked, ran_long).await {
                    Ok(Ok(())) => (Ok(instance), "prepare"),
                    Ok(Err(refused)) => {
                        return Attempt::Done(Err(Failure::new(
                            FailureReason::Unavailable,
                            format!(
                                "its `prepare` failed: {}",
                                crate::failure::clip(refused.trim())
                            ),
                        )));
                    }
                    Err(err) => (Err(err), "prepare"),
                }
            }
            (result, _) => (result, "instantiation"),
        };
        let cost = spent(&store, limits);
        Attempt::Done(match result {
            Ok(instance) => Ok((
                Instance {
                    store,
                    instance,
                    guests: Guests::default(),
                    on_demand: false,
                    direct: linked,
                },
                cost,
            )),
            Err(err) if err.downcast_ref::<PoolConcurrencyLimitError>().is_some() => {
                return Attempt::PoolFull(Box::new(store.into_data()));
            }
            Err(err) => Err(classify(err, store.data().limiter.hit, limits, phase)),
        })
    }

    /// Prepares the instance for a new invocation.
    pub fn begin(&mut self, call: CallContext, limits: &Limits) {
        self.store.data_mut().begin(call);
        arm(&mut self.store, limits);
    }

    /// Calls the export of `request`'s point.
    pub async fn call(
        &mut self,
        plugin: &Code,
        request: &Request<'_>,
        limits: &Limits,
    ) -> (Result<Answer, Failure>, Cost) {
        let Instance {
            store,
            instance,
            guests,
            on_demand,
            direct,
        } = self;
        let exports = plugin.exports(*on_demand);
        let direct = *direct && !plugin.ran_long.load(Ordering::Relaxed);
        // Looks the export's functions up (once per instance), then calls it, directly or on
        // a fiber; a component without the export (which loading already refuses) or whose
        // export fails to load is `unavailable`.
        macro_rules! call {
            ($exports:ident, $method:ident / $func:ident ( $($arg:expr),* ) => $response:expr) => {{
                if guests.$exports.is_none() {
                    let Some(indices) = &exports.$exports else {
                        return (Err(missing()), Cost::default());
                    };
                    match indices.load(&mut *store, &*instance) {
                        Ok(guest) => guests.$exports = Some(guest),
                        Err(e) => return (Err(unavailable(e)), Cost::default()),
                    }
                }
                let guest = guests.$exports.as_ref().expect("looked up above");
                if direct {
                    directly(store, &plugin.ran_long, |store| {
                        guest.$func().call(store, ($($arg,)*))
                    })
                    .map(Returned::value)
                    .map($response)
                } else {
                    guest.$method(&mut *store, $($arg),*).await.map($response)
                }
            }};
        }
        let mut given = 0;
        let result: wasmtime::Result<Answer> = match request {
            Request::SessionStart(source) => call!(
                session_start,
                call_on_session_start / func_on_session_start(to_wit_source(*source)) => Answer::SessionStart
            ),
            Request::PromptSubmit(step) => call!(
                prompt_submit,
                call_on_prompt_submit / func_on_prompt_submit(step.projected()) => |d| Answer::PromptSubmit(from_wit::step_decision(d))
            ),
            Request::PreTool(call) => call!(
                pre_tool,
                call_on_pre_tool / func_on_pre_tool(call.projected()) => |d| Answer::PreTool(from_wit::pre_tool(d))
            ),
            Request::ToolGuard(call) => call!(
                tool_guard,
                call_on_tool_guard / func_on_tool_guard(call.projected()) => |d| Answer::ToolGuard(from_wit::guard(d))
            ),
            Request::PostTool(call, outcome) => {
                let outcome = outcome.projected();
                // A hook may hand back as much as it was given: a redaction returns content
                // the size of the tool's.
                given = outcome_bytes(outcome);
                call!(
                    post_tool,
                    call_on_post_tool / func_on_post_tool(call.projected(), outcome) => |d| Answer::PostTool(from_wit::post_tool(d))
                )
            }
            Request::ToolResult(call, outcome) => call!(
                tool_result,
                call_on_tool_result / func_on_tool_result(
                    call.projected(),
                    outcome.projected()
                ) => |()| Answer::Observed
            ),
            Request::TurnStopping(event) => call!(
                turn_stopping,
                call_on_turn_stopping / func_on_turn_stopping(event.projected()) => Answer::TurnStopping
            ),
            Request::Committed(observation) => call!(
                committed,
                call_on_committed / func_on_committed(observation.projected()) => |()| Answer::Observed
            ),
            Request::ToolExecute(call, next) => {
                store.data_mut().next = Some(next.clone());
                let result = call!(
                    tool_execute,
                    call_on_tool_execute / func_on_tool_execute(call.projected()) => |o| Answer::ToolExecute(from_wit::outcome(o))
                );
                store.data_mut().next = None;
                // A wrapper may pass on what `next()` returned.
                given = store.data().call.next_bytes;
                result
            }
        };
        let result = result
            .map_err(|e| classify(e, store.data().limiter.hit, limits, "call"))
            .and_then(|answer| within_bound(answer, limits.payload_max_bytes.max(given)));
        store.data_mut().report_output();
        (result, spent(store, limits))
    }
}

/// Calls a new instance's `prepare` (`indices`): directly when it was instantiated directly
/// (`linked`, and its plugin never ran long), else on a fiber. `Ok(Err(_))`: it refused.
async fn prepare(
    store: &mut Store<State>,
    instance: &ComponentInstance,
    indices: &ex::prepare::GuestIndices,
    linked: bool,
    ran_long: &AtomicBool,
) -> wasmtime::Result<Result<(), String>> {
    let guest = indices.load(&mut *store, instance)?;
    if linked && !ran_long.load(Ordering::Relaxed) {
        directly(store, ran_long, |store| {
            guest.func_prepare().call(store, ())
        })
        .map(Returned::value)
    } else {
        guest.call_prepare(&mut *store).await
    }
}

/// Runs `run` on `store` directly, on this thread; sets `ran_long` if it ran for an epoch
/// tick or more (the plugin's calls go on a fiber from then on).
fn directly<R>(
    store: &mut Store<State>,
    ran_long: &AtomicBool,
    run: impl FnOnce(&mut Store<State>) -> R,
) -> R {
    store.data_mut().enter_direct();
    let result = run(store);
    if store.data_mut().leave_direct() {
        ran_long.store(true, Ordering::Relaxed);
    }
    result
}

/// What a typed function returns, as the generated `call_*` methods return it.
trait Returned {
    type Value;
    fn value(self) -> Self::Value;
}

impl Returned for () {
    type Value = ();
    fn value(self) {}
}

impl<R> Returned for (R,) {
    type Value = R;
    fn value(self) -> R {
        self.0
    }
}

/// Refuses an answer larger than the hook's `payload_max_bytes`, before anything parses,
/// copies or forwards it: a hook capped at 64 MiB of memory must not make the host hold
/// gigabytes of parsed JSON.
fn within_bound(answer: Answer, bound: usize) -> Result<Answer, Failure> {
    let bytes = answer.answer_bytes();
    if bytes > bound {
        return Err(Failure::new(
            FailureReason::InvalidResponse,
            format!(
                "the answer (`{}`) is {bytes} bytes, over payload_max_bytes ({})",
                answer.name(),
                bound
            ),
        ));
    }
    Ok(answer)
}

fn missing() -> Failure {
    Failure::new(FailureReason::Unavailable, "the component lacks the export")
}

fn unavailable(e: wasmtime::Error) -> Failure {
    Failure::new(FailureReason::Unavailable, format!("{e:#}"))
}

fn arm(store: &mut Store<State>, limits: &Limits) {
    let data = store.data_mut();
    data.limiter.memory_bytes = limits.memory_bytes;
    data.limiter.hit = false;
    data.call.logs_left = MAX_LOG_LINES_PER_CALL;
    data.call.state_left = MAX_STATE_CALLS_PER_CALL;
    // Fuel metering is enabled on the engine, so this cannot fail.
    let _ = store.set_fuel(limits.fuel);
    store.set_epoch_deadline(1);
}

fn spent(store: &Store<State>, limits: &Limits) -> Cost {
    Cost {
        fuel: limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0)),
    }
}

/// Turns a wasmtime error into a typed failure.
fn classify(err: wasmtime::Error, limit_hit: bool, limits: &Limits, phase: &str) -> Failure {
    if limit_hit {
        return Failure::new(
            FailureReason::MemoryLimit,
            format!(
                "exceeded its memory cap of {} MiB during {phase}",
                limits.memory_bytes / (1024 * 1024)
            ),
        );
    }
    if let Some(unavailable) = err.downcast_ref::<crate::state::StateUnavailable>() {
        return Failure::new(
            FailureReason::StateUnavailable,
            format!("stopped during {phase}: {unavailable}"),
        );
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => Failure::new(
            FailureReason::OutOfFuel,
            format!("used up its fuel ({}) during {phase}", limits.fuel),
        ),
        Some(Trap::Interrupt) => Failure::new(
            FailureReason::Timeout,
            format!(
                "passed its deadline of {} ms during {phase}",
                limits.timeout.as_millis()
            ),
        ),
        Some(trap) => Failure::new(
            FailureReason::Trap,
            format!("trapped during {phase}: {trap}"),
        ),
        None => Failure::new(
            FailureReason::Trap,
            format!("failed during {phase}: {err:#}"),
        ),
    }
}
