//! A session's observe-only points and its background queue: observers run off the
//! critical path, bounded per session, and work cut off is reported, never lost silently.

use super::{DispatchReport, Invocation, Session, SessionShared, micros};
use crate::events::EventKind;
use crate::failure::{Failure, FailureReason};
use crate::hook::Request;
use crate::plugin::HookRef;
use crate::point::{Mode, Point};
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

impl Session {
    /// Background invocations dropped so far because the session's queue was full.
    pub fn dropped_background(&self) -> u64 {
        self.shared.dropped.load(Ordering::Relaxed)
    }

    /// Background invocations in flight.
    pub fn background_in_flight(&self) -> usize {
        self.reaped_tasks().len()
    }

    /// The session's task set, with the finished tasks reaped.
    fn reaped_tasks(&self) -> std::sync::MutexGuard<'_, JoinSet<()>> {
        let mut set = self
            .owner
            .background
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        while set.try_join_next().is_some() {}
        set
    }

    /// Waits at most `limit` for the session's background work to finish, then cuts off what
    /// is still running; each hook cut off is reported as a `hook_failed` event with reason
    /// `dropped`. Returns how many tasks were cut off. For a process that must exit in time
    /// (a bridge answering one event): observers get a bounded drain, never the answer's time.
    pub async fn drain_background_for(&self, limit: Duration) -> usize {
        let mut set = self.take_tasks();
        let deadline = tokio::time::Instant::now() + limit;
        while !set.is_empty() {
            match tokio::time::timeout_at(deadline, set.join_next()).await {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => {
                    let cut = set.len();
                    // Aborted tasks drop their futures, which report their hooks as dropped.
                    set.shutdown().await;
                    return cut;
                }
            }
        }
        0
    }

    /// Waits for the session's background work to finish.
    pub async fn drain_background(&self) {
        let mut set = self.take_tasks();
        while set.join_next().await.is_some() {}
    }

    /// The session's tasks, taken out of it (new work goes to a fresh set).
    fn take_tasks(&self) -> JoinSet<()> {
        std::mem::take(
            &mut *self
                .owner
                .background
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        )
    }

    /// Runs every hook of an observe-only point off the critical path: foreground hooks one
    /// after another in one task, background hooks each in its own. Nothing is awaited.
    pub(crate) fn notify(&self, point: Point, tool: Option<&str>, request: Request<'static>) {
        let inv = self.begin(point);
        let mut report = self.report(inv);
        let foreground = self.observers(point, tool, inv, &mut report, &request);
        if foreground.is_empty() {
            report.end("continue", None);
            return;
        }
        let (started, hooks) = (report.started.take(), report.hooks);
        drop(report);
        let shared = self.shared.clone();
        let reported = foreground.clone();
        let held = self.held.clone();
        self.spawn(&reported, inv, async move {
            // Reported when the foreground hooks are done (or as cancelled, if the task is
            // dropped first).
            let mut report = DispatchReport::new(&shared, inv);
            report.started = started;
            report.hooks = hooks;
            shared.run_in_order(&foreground, inv, &request, &held).await;
            report.end("continue", None);
        });
    }

    /// Runs every hook of an observe-only point, awaiting the foreground ones, one after
    /// another, each under its own deadline, its failure contained (recorded, never
    /// escalated); background hooks go to the session's queue, as in [`Session::notify`].
    pub(crate) async fn observe(
        &self,
        point: Point,
        tool: Option<&str>,
        request: Request<'static>,
    ) {
        let inv = self.begin(point);
        let mut report = self.report(inv);
        let foreground = self.observers(point, tool, inv, &mut report, &request);
        let shared = &self.shared;
        shared
            .run_in_order(&foreground, inv, &request, &self.held)
            .await;
        report.end("continue", None);
    }

    /// The foreground hooks of an observe-only point that match `tool`, in order; the
    /// background ones go to the session's queue. All are counted in `report`.
    fn observers(
        &self,
        point: Point,
        tool: Option<&str>,
        inv: Invocation,
        report: &mut DispatchReport<'_>,
        request: &Request<'static>,
    ) -> Vec<HookRef> {
        let mut foreground = Vec::new();
        for (hook, spec) in self.matching(point, tool) {
            report.hooks += 1;
            match spec.mode {
                Mode::Background => self.spawn_background(hook, inv, request.clone()),
                _ => foreground.push(hook.clone()),
            }
        }
        foreground
    }

    pub(super) fn spawn_background(
        &self,
        hook: &HookRef,
        inv: Invocation,
        request: Request<'static>,
    ) {
        let shared = self.shared.clone();
        let owned = hook.clone();
        let reentrant = self.holds(hook.plugin);
        self.spawn(std::slice::from_ref(hook), inv, async move {
            let run = shared
                .run(&owned, inv, &request, reentrant, Instant::now())
                .await;
            shared.record(&owned, inv, &run);
        });
    }

    /// Spawns `task` into the session's bounded queue, or drops it (counted, and reported
    /// for each of `hooks`) when the queue is full.
    fn spawn(
        &self,
        hooks: &[HookRef],
        inv: Invocation,
        task: impl Future<Output = ()> + Send + 'static,
    ) {
        // Reaped first, so the bound counts only work in flight.
        let mut set = self.reaped_tasks();
        let bound = self.shared.plugins.host.inner.background_queue;
        if set.len() >= bound {
            self.shared
                .dropped
                .fetch_add(hooks.len() as u64, Ordering::Relaxed);
            let failure = Failure::new(
                FailureReason::DroppedSaturated,
                format!("the session's background queue is full ({bound} in flight)"),
            );
            for hook in hooks {
                self.shared.emit(
                    hook,
                    inv,
                    EventKind::HookFailed {
                        duration_us: 0,
                        fuel_consumed: 0,
                        reason: failure.reason,
                        detail: failure.detail.clone(),
                        failed_closed: false,
                    },
                );
            }
            return;
        }
        let unfinished = Unfinished {
            shared: self.shared.clone(),
            hooks: hooks.to_vec(),
            inv,
            started: Instant::now(),
            done: false,
        };
        // Background hooks still serve the same sub-agent and request, in their own task.
        let caller = crate::events::current_caller();
        set.spawn(async move {
            let mut unfinished = unfinished;
            crate::events::as_caller(caller, task).await;
            unfinished.done = true;
        });
    }
}

/// Background work in flight: if its task is dropped before it finishes (aborted with its
/// session, or cut off at the end of a bridge's budget), its hooks are reported as dropped,
/// so the audit log shows the observer work that never completed.
struct Unfinished {
    shared: Arc<SessionShared>,
    hooks: Vec<HookRef>,
    inv: Invocation,
    started: Instant,
    done: bool,
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        for hook in &self.hooks {
            self.shared.emit(
                hook,
                self.inv,
                EventKind::HookFailed {
                    duration_us: micros(self.started.elapsed()),
                    fuel_consumed: 0,
                    reason: FailureReason::Dropped,
                    detail: "cut off before it finished: its session ended, or the process \
                             serving the event stopped waiting for observers"
                        .into(),
                    failed_closed: false,
                },
            );
        }
    }
}
