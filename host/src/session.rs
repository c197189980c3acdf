//! A session: one agent conversation's view of a plugin set. It owns the session's plugin
//! instances (for `per-session` plugins) and every background task it spawns; dropping it
//! aborts that work.
//!
//! The dispatch rules every point shares live here ([`Session::waterfall`]); each point's file
//! under `points/` says what its hooks may answer and how the answers combine. The rules are
//! stated once, with the seed sentences they implement, in `docs/semantics.md`.

use crate::events::{Dispatch, EventKind};
use crate::failure::{Failure, FailureReason};
use crate::hook::{self, Answer, BoxFuture, Request};
use crate::manifest::HookSpec;
use crate::plugin::{HookRef, Plugins, PluginsInner};
use crate::point::{Capability, Mode, Point};
use crate::runtime::sandbox::invocation_id;
use crate::runtime::{Meter, Slot};
use crate::types::{Approval, AskRequest, Denial, ToolCall};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::task::JoinSet;

mod background;
mod run;

static NEXT_INVOCATION: AtomicU64 = AtomicU64::new(1);

/// The embedder's approval channel: resolves a `pre-tool` ask, typically by asking the user.
///
/// Only [`Approval::AllowedOnce`] lets the call continue; every other answer — and a session
/// with no approver at all — becomes a normalized denial.
pub trait Approver: Send + Sync {
    /// Asks whether `call` may run, for the reason in `ask`.
    fn approve<'a>(&'a self, call: &'a ToolCall, ask: &'a AskRequest) -> BoxFuture<'a, Approval>;
}

/// One agent session. Cheap to clone (a tool body holds one to run nested calls); when the
/// last clone is dropped, the session aborts its background work and frees its instances.
#[derive(Clone)]
pub struct Session {
    pub(crate) shared: Arc<SessionShared>,
    owner: Arc<SessionOwner>,
    /// Plugins whose per-session instance an invocation up this call chain holds (the
    /// `tool-execute` wrappers around a tool that makes nested calls): their hooks in this
    /// chain run in fresh instances instead of waiting for a lock that will not be released.
    held: Arc<[usize]>,
}

/// What only the session's handles hold, not its tasks: dropping the last handle drops the
/// task set, which aborts every task in it.
struct SessionOwner {
    background: Mutex<JoinSet<()>>,
    approver: std::sync::RwLock<Option<Arc<dyn Approver>>>,
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
    /// Two slots per plugin, for `per-session` plugins: the live instance its foreground
    /// hooks run in, and the one its observers run in (see [`SessionShared::slot`]).
    instances: Vec<Slot>,
    dropped: AtomicU64,
}

impl Drop for SessionShared {
    fn drop(&mut self) {
        self.plugins.live_sessions.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Plugins {
    /// Opens a session with id `id` (the agent's session id).
    pub fn session(&self, id: impl Into<String>) -> Session {
        let id: String = id.into();
        self.inner.live_sessions.fetch_add(1, Ordering::Relaxed);
        Session {
            shared: Arc::new(SessionShared {
                id: id.into(),
                instances: self
                    .inner
                    .plugins
                    .iter()
                    .flat_map(|_| [tokio::sync::Mutex::new(None), tokio::sync::Mutex::new(None)])
                    .collect(),
                plugins: self.inner.clone(),
                dropped: AtomicU64::new(0),
            }),
            owner: Arc::new(SessionOwner {
                background: Mutex::new(JoinSet::new()),
                approver: std::sync::RwLock::new(None),
            }),
            held: Arc::new([]),
        }
    }

    /// Sessions (and their background tasks) still alive: a dropped session's count goes
    /// once its aborted tasks have unwound.
    pub fn live_sessions(&self) -> usize {
        self.inner.live_sessions.load(Ordering::Relaxed)
    }
}

/// One dispatch of one point.
#[derive(Clone, Copy)]
pub(crate) struct Invocation {
    pub id: u64,
    pub point: Point,
}

/// What a point makes of one hook's answer.
pub(crate) enum Verdict<T> {
    /// Recorded; `honoured` says whether it counted.
    Completed { honoured: bool },
    /// An honoured denial: the waterfall stops with `then`.
    Denied {
        reason_code: String,
        message: String,
        then: T,
    },
    /// The answer needs a capability the hook was not granted: not honoured, reported as a
    /// `not-granted` failure.
    NotGranted(Capability),
    /// The answer is invalid: a failure, which fails closed like any other.
    Invalid(Failure),
    /// The answer is final and honoured (a wrapper's outcome): stop with `T`.
    Final(T),
}

/// The verdict on a hook's deny: honoured, or an invalid answer if its payload is not JSON.
pub(crate) fn deny_verdict(hook: &HookRef, deny: hook::Deny) -> Verdict<Denial> {
    match deny.parse(&hook.id) {
        Ok(denial) => Verdict::Denied {
            reason_code: denial.reason_code.clone(),
            message: denial.message.clone(),
            then: denial,
        },
        Err(failure) => Verdict::Invalid(failure),
    }
}

/// The denial a hook's failure produces when it fails closed.
pub(crate) fn failed_closed(hook_id: &str, failure: &Failure) -> Denial {
    Denial {
        hook_id: hook_id.to_string(),
        reason_code: failure.reason.reason_code(),
        message: format!(
            "the policy hook `{hook_id}` failed ({failure}), so this is refused; \
             it is not a judgement of the request itself"
        ),
        payload: None,
        failure: Some(failure.reason),
    }
}

/// The end of one hook's turn in a waterfall.
pub(crate) enum Judged<T> {
    /// Go on with the next hook.
    Continue,
    /// An honoured denial, or a final answer.
    Stop(T),
    /// A failure that fails closed, as its denial.
    FailedClosed(Denial),
}

impl Session {
    /// The session's id.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Whether an invocation up this call chain holds `plugin`'s session instance.
    pub(crate) fn holds(&self, plugin: usize) -> bool {
        self.held.contains(&plugin)
    }

    /// This session, for calls nested inside invocations of `plugins`' hooks (which hold
    /// those plugins' session instances while the nested calls run).
    pub(crate) fn holding(&self, plugins: impl IntoIterator<Item = usize>) -> Session {
        let mut held: Vec<usize> = self.held.to_vec();
        held.extend(plugins);
        held.sort_unstable();
        held.dedup();
        Session {
            shared: self.shared.clone(),
            owner: self.owner.clone(),
            held: held.into(),
        }
    }

    /// Resolves `pre-tool` asks through `approver` (see [`Session::authorize`]).
    pub fn with_approver(self, approver: Arc<dyn Approver>) -> Session {
        *self
            .owner
            .approver
            .write()
            .unwrap_or_else(|e| e.into_inner()) = Some(approver);
        self
    }

    pub(crate) fn approver(&self) -> Option<Arc<dyn Approver>> {
        self.owner
            .approver
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether the session holds plugin state: a per-session instance is alive (or in use),
    /// so dropping the session would reset what its plugins remember (a budget, a count).
    pub fn holds_state(&self) -> bool {
        self.shared
            .instances
            .iter()
            .any(|slot| slot.try_lock().map_or(true, |instance| instance.is_some()))
    }

    pub(crate) fn begin(&self, point: Point) -> Invocation {
        Invocation {
            id: NEXT_INVOCATION.fetch_add(1, Ordering::Relaxed),
            point,
        }
    }

    /// The hooks of `point` in dispatch order, those whose matcher takes `tool` (all, for
    /// `None`).
    pub(crate) fn matching<'a>(
        &'a self,
        point: Point,
        tool: Option<&'a str>,
    ) -> impl Iterator<Item = (&'a HookRef, &'a HookSpec)> + 'a {
        let plugins = &self.shared.plugins;
        plugins
            .by_point
            .get(point)
            .iter()
            .map(|hook| (hook, plugins.spec(hook)))
            .filter(move |(_, spec)| tool.is_none_or(|t| spec.matches_tool(t)))
    }

    /// Runs the hooks of `point` (for a tool named `tool`, where the point has one) in
    /// dispatch order.
    ///
    /// Foreground hooks are awaited and their answers judged by `judge`; background hooks
    /// are spawned with the request of the moment. The first honoured denial stops the
    /// waterfall (remaining foreground and background hooks do not run) and is returned; a
    /// foreground failure of a hook that could have denied fails closed through
    /// `fail_closed`, unless its `on_failure` is `allow`.
    pub(crate) async fn waterfall<'r, S, T>(
        &self,
        point: Point,
        tool: Option<&str>,
        state: &mut S,
        request: impl Fn(&S) -> Request<'r>,
        mut judge: impl FnMut(&mut S, &HookRef, &HookSpec, Answer) -> Verdict<T>,
        fail_closed: impl Fn(Denial) -> T,
    ) -> Option<T> {
        // No decision off the record: the facts before it are on the fact stream first, or
        // it fails closed (`crate::facts`).
        if let Err(denial) = self.admitted().await {
            return Some(fail_closed(denial));
        }
        let inv = self.begin(point);
        let mut report = self.report(inv);
        for (hook, spec) in self.matching(point, tool) {
            report.hooks += 1;
            if spec.mode == Mode::Background {
                self.spawn_background(hook, inv, request(state).to_owned());
                continue;
            }
            let request = request(state);
            let judged = self
                .judge_one(hook, inv, &request, |hook, spec, response| {
                    judge(state, hook, spec, response)
                })
                .await;
            match judged {
                Judged::Continue => {}
                Judged::Stop(then) => {
                    report.end("deny", Some(hook));
                    return Some(then);
                }
                Judged::FailedClosed(denial) => {
                    report.end("fail-closed", Some(hook));
                    return Some(fail_closed(denial));
                }
            }
        }
        report.end("continue", None);
        None
    }

    /// The report of dispatch `inv`, sent to the sink when it ends (see [`DispatchReport`]).
    pub(crate) fn report(&self, inv: Invocation) -> DispatchReport<'_> {
        DispatchReport::new(&self.shared, inv)
    }

    /// Runs one foreground hook and judges its answer (see [`Session::waterfall`]).
    pub(crate) async fn judge_one<T>(
        &self,
        hook: &HookRef,
        inv: Invocation,
        request: &Request<'_>,
        judge: impl FnOnce(&HookRef, &HookSpec, Answer) -> Verdict<T>,
    ) -> Judged<T> {
        let spec = self.shared.plugins.spec(hook);
        // Recorded as dropped if this future is dropped before the hook answers: its
        // request was cancelled (a pre-step's signal), or whoever awaited it gave up (a
        // bridge's budget).
        let mut in_flight = InFlight {
            shared: &self.shared,
            hook,
            inv,
            started: Instant::now(),
            done: false,
        };
        let run = self
            .shared
            .run(
                hook,
                inv,
                request,
                self.holds(hook.plugin),
                in_flight.started,
            )
            .await;
        in_flight.done = true;
        let meter = run.meter;
        if !spec.enforce {
            // A shadow hook: recorded, never judged — nothing it says reaches the outcome,
            // and the next hook sees what it would have seen without it.
            self.shared.shadowed(hook, inv, meter, &run.result);
            return Judged::Continue;
        }
        let response = match run.result {
            Ok(response) => response,
            Err(ref failure) => {
                if self.shared.fail(hook, inv, meter, failure) {
                    return Judged::FailedClosed(failed_closed(&hook.id, failure));
                }
                return Judged::Continue;
            }
        };
        let decision = response.name();
        match judge(hook, spec, response) {
            Verdict::Completed { honoured } => {
                self.shared
                    .emit_with(hook, inv, || completed(meter, decision, honoured));
            }
            Verdict::Denied {
                reason_code,
                message,
                then,
            } => {
                self.shared.emit(
                    hook,
                    inv,
                    EventKind::HookDenied {
                        duration_us: micros(meter.duration),
                        fuel_consumed: meter.cost.fuel,
                        reason_code,
                        message,
                    },
                );
                return Judged::Stop(then);
            }
            Verdict::NotGranted(needed) => {
                let held: Vec<_> = spec.capabilities.iter().map(|c| c.as_str()).collect();
                let failure = Failure::new(
                    FailureReason::NotGranted,
                    format!(
                        "answered `{decision}`, which needs the `{needed}` capability; \
                         it holds: {}",
                        held.join(", ")
                    ),
                );
                self.shared.emit(hook, inv, failed(meter, &failure, false));
            }
            Verdict::Invalid(failure) => {
                if self.shared.fail(hook, inv, meter, &failure) {
                    return Judged::FailedClosed(failed_closed(&hook.id, &failure));
                }
            }
            Verdict::Final(then) => {
                self.shared
                    .emit_with(hook, inv, || completed(meter, decision, true));
                return Judged::Stop(then);
            }
        }
        Judged::Continue
    }

    /// Records that the agent did not apply what the `post-tool` hook `hook_id` decided on
    /// `call` (`decision`: `block`, `replace`), and what it did instead (`hook_not_applied`).
    pub(crate) fn not_applied(
        &self,
        call: &ToolCall,
        hook_id: &str,
        decision: &str,
        instead: &str,
    ) {
        self.not_applied_at(
            Point::PostTool,
            Some(&call.name),
            hook_id,
            decision,
            instead,
        );
    }

    /// [`Session::not_applied`] at any `point` (`tool`: the call's name, for its matchers).
    pub(crate) fn not_applied_at(
        &self,
        point: Point,
        tool: Option<&str>,
        hook_id: &str,
        decision: &str,
        instead: &str,
    ) {
        let inv = self.begin(point);
        let hook = self
            .matching(point, tool)
            .find(|(hook, _)| &*hook.id == hook_id)
            .map(|(hook, _)| hook.clone());
        if let Some(hook) = hook {
            self.shared.emit(
                &hook,
                inv,
                EventKind::HookNotApplied {
                    decision: decision.to_string(),
                    message: instead.to_string(),
                },
            );
        }
    }
}

/// One dispatch's report to the sink ([`crate::events::EventSink::dispatched`]): sent when it is
/// dropped, with the outcome [`DispatchReport::end`] gave it, or `cancelled` if the dispatch's
/// future was dropped first; not sent when no hook ran, nor without a sink that wants it
/// ([`crate::events::Interest::dispatches`]).
pub(crate) struct DispatchReport<'a> {
    shared: &'a SessionShared,
    inv: Invocation,
    /// When the dispatch began; `None` without a sink that wants it (nothing is reported).
    started: Option<(SystemTime, Instant)>,
    /// The hooks it started.
    pub hooks: u32,
    outcome: &'static str,
    decided_by: Option<String>,
}

impl<'a> DispatchReport<'a> {
    fn new(shared: &'a SessionShared, inv: Invocation) -> Self {
        let started = shared
            .plugins
            .host
            .inner
            .interest
            .dispatches
            .then(|| (SystemTime::now(), Instant::now()));
        DispatchReport {
            shared,
            inv,
            started,
            hooks: 0,
            outcome: "cancelled",
            decided_by: None,
        }
    }

    /// The dispatch ended with `outcome`, decided by `hook` (see [`Dispatch::outcome`]).
    pub fn end(mut self, outcome: &'static str, hook: Option<&HookRef>) {
        self.outcome = outcome;
        self.decided_by = hook.map(|hook| String::from(&*hook.id));
    }
}

impl Drop for DispatchReport<'_> {
    fn drop(&mut self) {
        let (Some(sink), Some((at, started))) =
            (&self.shared.plugins.host.inner.sink, self.started)
        else {
            return;
        };
        if self.hooks == 0 {
            return;
        }
        sink.dispatched(&Dispatch {
            session_id: String::from(&*self.shared.id),
            invocation_id: invocation_id(self.inv.id),
            point: self.inv.point,
            started: at,
            duration_us: micros(started.elapsed()),
            outcome: self.outcome,
            decided_by: self.decided_by.take(),
            hooks: self.hooks,
            trace_parent: crate::events::current_trace_parent(),
        });
    }
}

/// A foreground hook awaited by [`Session::judge_one`]: if that future is dropped before the
/// hook answers — its request was cancelled (a pre-step's signal), or whoever asked stopped
/// waiting (a bridge's budget) — the hook is reported as dropped, so no started hook goes
/// unaccounted for in the audit log.
struct InFlight<'a> {
    shared: &'a SessionShared,
    hook: &'a HookRef,
    inv: Invocation,
    started: Instant,
    done: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.shared.emit(
                self.hook,
                self.inv,
                EventKind::HookFailed {
                    duration_us: micros(self.started.elapsed()),
                    fuel_consumed: 0,
                    reason: FailureReason::Dropped,
                    detail: "cut off before it answered: the request it was deciding was \
                             cancelled, or whoever asked stopped waiting"
                        .into(),
                    failed_closed: false,
                },
            );
        }
    }
}

fn completed(meter: Meter, decision: &str, honoured: bool) -> EventKind {
    EventKind::HookCompleted {
        duration_us: micros(meter.duration),
        fuel_consumed: meter.cost.fuel,
        decision: decision.into(),
        honoured,
    }
}

fn failed(meter: Meter, failure: &Failure, closed: bool) -> EventKind {
    EventKind::HookFailed {
        duration_us: micros(meter.duration),
        fuel_consumed: meter.cost.fuel,
        reason: failure.reason,
        detail: failure.detail.clone(),
        failed_closed: closed,
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

/// The session's share of the host's fact stream ([`crate::facts`]).
impl Session {
    /// Queues a committed fact for the host's fact stream, if it has one.
    pub(crate) fn stream_fact(&self, observation: &Arc<hook::Shared<crate::types::Observation>>) {
        if let Some(stream) = &self.shared.plugins.host.inner.facts {
            stream.fact(&self.shared.id, observation.clone());
        }
    }

    /// Queues a foreground decision for the host's fact stream, if it has one: `make` gives
    /// its interaction id, its turn and the decision (made only for a stream).
    pub(crate) fn stream_decision(
        &self,
        make: impl FnOnce() -> (String, u32, crate::facts::Decision),
    ) {
        if let Some(stream) = &self.shared.plugins.host.inner.facts {
            let (interaction_id, turn, decision) = make();
            let interaction_id = crate::events::scoped_to_subagent(&self.shared.id, interaction_id);
            stream.decision(&self.shared.id, interaction_id, turn, decision);
        }
    }

    /// Whether the session may make a foreground decision ([`FactStream::admit`]): always,
    /// without a fact stream.
    pub(crate) async fn admitted(&self) -> Result<(), Denial> {
        match &self.shared.plugins.host.inner.facts {
            Some(stream) => stream.admit().await,
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests;
