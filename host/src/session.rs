//! A session: one agent conversation's view of a plugin set. It owns the session's plugin
//! instances (for `per-session` plugins) and every background task it spawns.
//!
//! Dispatch rules, common to every point:
//! - hooks run by ascending priority, then registration order (plugins by name, hooks in
//!   manifest order);
//! - foreground hooks are awaited one after another; a background hook (observe only) is
//!   spawned when its turn comes and never delays or changes the outcome;
//! - the first honoured denial short-circuits the remaining hooks, foreground and background;
//! - a foreground failure fails closed (the point denies with `hook-failure:<reason>`) unless
//!   the hook says `on_failure = "allow"`; an observer's failure is only recorded.

use crate::events::{Event, EventKind, now_ms};
use crate::failure::{Failure, FailureReason};
use crate::instance::{Cost, Instance, Request, Response};
use crate::manifest::HookSpec;
use crate::plugin::{HookRef, Plugins, PluginsInner};
use crate::point::{InstanceLifetime, Mode, Point};
use crate::sandbox::{CallContext, MAX_LOG_LINES_PER_CALL, State, invocation_id};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// Most background invocations a session keeps in flight; more are dropped (and reported
/// as `dropped-saturated` failures).
pub const MAX_BACKGROUND_IN_FLIGHT: usize = 64;

static NEXT_INVOCATION: AtomicU64 = AtomicU64::new(1);

/// One agent session. Dropping it aborts its background work and frees its instances.
pub struct Session {
    pub(crate) shared: Arc<SessionShared>,
    background: Mutex<JoinSet<()>>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.shared.id)
            .finish_non_exhaustive()
    }
}

pub(crate) struct SessionShared {
    pub id: Arc<str>,
    pub plugins: Arc<PluginsInner>,
    /// One slot per plugin: its live instance, for `per-session` plugins.
    instances: Vec<tokio::sync::Mutex<Option<Instance>>>,
    dropped: AtomicU64,
}

impl Plugins {
    /// Opens a session with id `id` (the agent's session id).
    pub fn session(&self, id: impl Into<String>) -> Session {
        let id: String = id.into();
        Session {
            shared: Arc::new(SessionShared {
                id: id.into(),
                instances: self
                    .inner
                    .plugins
                    .iter()
                    .map(|_| tokio::sync::Mutex::new(None))
                    .collect(),
                plugins: self.inner.clone(),
                dropped: AtomicU64::new(0),
            }),
            background: Mutex::new(JoinSet::new()),
        }
    }
}

/// The outcome of one hook invocation.
pub(crate) struct Run {
    pub result: Result<Response, Failure>,
    pub duration: Duration,
    pub cost: Cost,
}

/// One dispatch of one point: its id and its hooks.
pub(crate) struct Invocation {
    pub id: u64,
    pub point: Point,
}

impl Session {
    /// The session's id.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Background invocations dropped so far because the session's queue was full.
    pub fn dropped_background(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Waits for the session's background hooks to finish.
    pub async fn drain_background(&self) {
        let mut set =
            std::mem::take(&mut *self.background.lock().unwrap_or_else(|e| e.into_inner()));
        while set.join_next().await.is_some() {}
    }

    pub(crate) fn begin(&self, point: Point) -> Invocation {
        Invocation {
            id: NEXT_INVOCATION.fetch_add(1, Ordering::Relaxed),
            point,
        }
    }

    /// The hooks of `point` for a tool named `tool` (or every hook, for `None`).
    pub(crate) fn hooks<'a>(
        &'a self,
        point: Point,
        tool: Option<&'a str>,
    ) -> impl Iterator<Item = &'a HookRef> + 'a {
        let plugins = &self.shared.plugins;
        plugins
            .by_point
            .get(&point)
            .into_iter()
            .flatten()
            .filter(move |r| tool.is_none_or(|t| plugins.spec(r).matches_tool(t)))
    }

    pub(crate) fn spec(&self, hook: &HookRef) -> &HookSpec {
        self.shared.plugins.spec(hook)
    }

    /// Spawns a background invocation. `request` builds the request from owned data.
    pub(crate) fn spawn<D, F>(&self, hook: &HookRef, inv: &Invocation, data: D, request: F)
    where
        D: Send + 'static,
        F: for<'d> Fn(&'d D) -> Request<'d> + Send + 'static,
    {
        let mut set = self.background.lock().unwrap_or_else(|e| e.into_inner());
        while set.try_join_next().is_some() {}
        let shared = self.shared.clone();
        let hook = hook.clone();
        let inv = Invocation {
            id: inv.id,
            point: inv.point,
        };
        if set.len() >= MAX_BACKGROUND_IN_FLIGHT {
            shared.dropped.fetch_add(1, Ordering::Relaxed);
            let failure = Failure::new(
                FailureReason::DroppedSaturated,
                format!("{MAX_BACKGROUND_IN_FLIGHT} background invocations already in flight"),
            );
            shared.emit(
                &hook,
                &inv,
                EventKind::HookFailed {
                    duration_us: 0,
                    fuel_consumed: 0,
                    reason: failure.reason,
                    detail: failure.detail,
                    failed_closed: false,
                },
            );
            return;
        }
        set.spawn(async move {
            let run = shared.run(&hook, &inv, &request(&data)).await;
            shared.finish_observed(&hook, &inv, &run, "");
        });
    }

    /// Runs a foreground hook.
    pub(crate) async fn run(&self, hook: &HookRef, inv: &Invocation, request: &Request<'_>) -> Run {
        self.shared.run(hook, inv, request).await
    }

    pub(crate) fn emit(&self, hook: &HookRef, inv: &Invocation, kind: EventKind) {
        self.shared.emit(hook, inv, kind);
    }

    /// Records a run whose decision is not honoured (an observer, or a point with no
    /// decision): completed, or failed without failing closed.
    pub(crate) fn finish_observed(
        &self,
        hook: &HookRef,
        inv: &Invocation,
        run: &Run,
        decision: &str,
    ) {
        self.shared.finish_observed(hook, inv, run, decision);
    }

    /// Records a run that failed; returns whether it fails closed.
    pub(crate) fn finish_failed(
        &self,
        hook: &HookRef,
        inv: &Invocation,
        run: &Run,
        failure: &Failure,
    ) -> bool {
        let spec = self.spec(hook);
        let closed = spec.mode == Mode::Foreground
            && spec.on_failure == crate::point::OnFailure::Deny
            && !spec
                .capabilities
                .iter()
                .all(|c| *c == crate::point::Capability::Observe);
        self.emit(
            hook,
            inv,
            EventKind::HookFailed {
                duration_us: micros(run.duration),
                fuel_consumed: run.cost.fuel,
                reason: failure.reason,
                detail: failure.detail.clone(),
                failed_closed: closed,
            },
        );
        closed
    }
}

pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl PluginsInner {
    pub(crate) fn spec(&self, hook: &HookRef) -> &HookSpec {
        &self.plugins[hook.plugin].manifest().hooks[hook.hook]
    }
}

impl SessionShared {
    fn emit(&self, hook: &HookRef, inv: &Invocation, kind: EventKind) {
        let Some(sink) = &self.plugins.host.inner.sink else {
            return;
        };
        sink.emit(&Event {
            kind,
            at_ms: now_ms(),
            session_id: self.id.to_string(),
            invocation_id: invocation_id(inv.id),
            hook_id: hook.id.to_string(),
            plugin: self.plugins.plugins[hook.plugin].name().to_string(),
            point: inv.point,
        });
    }

    fn finish_observed(&self, hook: &HookRef, inv: &Invocation, run: &Run, decision: &str) {
        match &run.result {
            Ok(_) => self.emit(
                hook,
                inv,
                EventKind::HookCompleted {
                    duration_us: micros(run.duration),
                    fuel_consumed: run.cost.fuel,
                    decision: if decision.is_empty() {
                        "none".into()
                    } else {
                        decision.into()
                    },
                    honoured: false,
                },
            ),
            Err(failure) => self.emit(
                hook,
                inv,
                EventKind::HookFailed {
                    duration_us: micros(run.duration),
                    fuel_consumed: run.cost.fuel,
                    reason: failure.reason,
                    detail: failure.detail.clone(),
                    failed_closed: false,
                },
            ),
        }
    }

    async fn run(&self, hook: &HookRef, inv: &Invocation, request: &Request<'_>) -> Run {
        self.emit(hook, inv, EventKind::HookStarted);
        let plugin = &self.plugins.plugins[hook.plugin];
        let spec = self.plugins.spec(hook);
        let limits = &spec.limits;
        let call = CallContext {
            session_id: self.id.clone(),
            invocation_id: inv.id,
            hook_id: hook.id.clone(),
            point: inv.point,
            deadline: Instant::now() + limits.timeout,
            logs_left: MAX_LOG_LINES_PER_CALL,
        };
        let started = Instant::now();
        let engine = &self.plugins.host.inner.engine;
        let sink = self.plugins.host.inner.sink.clone();

        let mut slot = match plugin.manifest().instance {
            InstanceLifetime::PerSession => Some(self.instances[hook.plugin].lock().await),
            InstanceLifetime::PerCall => None,
        };
        let mut fresh_cost = Cost::default();
        let mut instance = match slot.as_mut().and_then(|s| s.take()) {
            Some(mut instance) => {
                instance.begin(call, limits);
                instance
            }
            None => {
                let state = State::new(plugin.env.clone(), sink, call);
                match Instance::new(engine, plugin, state, limits).await {
                    Ok((instance, cost)) => {
                        fresh_cost = cost;
                        instance
                    }
                    Err(failure) => {
                        return Run {
                            result: Err(failure),
                            duration: started.elapsed(),
                            cost: Cost::default(),
                        };
                    }
                }
            }
        };
        // Instantiation and the call share one deadline; the timer is a second line of
        // defence for time spent outside wasm (host calls), which epochs cannot interrupt.
        let remaining = limits.timeout.saturating_sub(started.elapsed());
        let (result, cost) =
            match tokio::time::timeout(remaining, instance.call(plugin, request, limits)).await {
                Ok((result, cost)) => (result, cost),
                Err(_) => (
                    Err(Failure::new(
                        FailureReason::Timeout,
                        format!("passed its deadline of {} ms", limits.timeout.as_millis()),
                    )),
                    Cost::default(),
                ),
            };
        // A failed instance may be mid-call or dead: never reuse it.
        if result.is_ok()
            && let Some(slot) = slot.as_mut()
        {
            **slot = Some(instance);
        }
        Run {
            result,
            duration: started.elapsed(),
            cost: Cost {
                fuel: cost.fuel + fresh_cost.fuel,
            },
        }
    }
}
