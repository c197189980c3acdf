//! Running a session's hooks: one invocation of a hook on its runtime, the events it
//! leaves (completed, failed, shadowed), and the per-session instance slot it runs in.

use super::{Invocation, SessionShared, completed, failed, micros};
use crate::events::{Event, EventKind, now_ms};
use crate::failure::Failure;
use crate::hook::{Answer, Request};
use crate::plugin::HookRef;
use crate::point::Mode;
use crate::runtime::sandbox::invocation_id;
use crate::runtime::{Meter, Run, Site, Slot};
use std::time::Instant;

impl SessionShared {
    /// Runs `hooks` one after another, each under its own deadline, recording each run
    /// (`held`: the plugins whose session instances a caller holds).
    pub(super) async fn run_in_order(
        &self,
        hooks: &[HookRef],
        inv: Invocation,
        request: &Request<'_>,
        held: &[usize],
    ) {
        for hook in hooks {
            let reentrant = held.contains(&hook.plugin);
            let run = self
                .run(hook, inv, request, reentrant, Instant::now())
                .await;
            self.record(hook, inv, &run);
        }
    }

    pub(super) fn emit(&self, hook: &HookRef, inv: Invocation, kind: EventKind) {
        self.emit_with(hook, inv, || kind);
    }

    /// Sends the event `kind` makes, made only when there is a sink to send it to.
    pub(super) fn emit_with(
        &self,
        hook: &HookRef,
        inv: Invocation,
        kind: impl FnOnce() -> EventKind,
    ) {
        let Some(sink) = &self.plugins.host.inner.sink else {
            return;
        };
        let caller = crate::events::CallerFields::now();
        // `String::from(&*…)`, not `to_string()`: for an `Arc<str>` that goes through `Display`.
        sink.emit(&Event {
            kind: kind(),
            at_ms: now_ms(),
            session_id: String::from(&*self.id),
            invocation_id: invocation_id(inv.id),
            hook_id: String::from(&*hook.id),
            plugin: self.plugins.plugins[hook.plugin].name().to_string(),
            point: inv.point,
            agent_id: caller.agent_id,
            agent_type: caller.agent_type,
            trace_parent: caller.trace_parent,
        });
    }

    /// Records the run of a shadow hook (`enforce = false`): an answer that would change the
    /// outcome, or a failure that would fail closed, as `hook_shadowed` (`would_…`); anything
    /// else as it is, never honoured.
    pub(super) fn shadowed(
        &self,
        hook: &HookRef,
        inv: Invocation,
        meter: Meter,
        result: &Result<Answer, Failure>,
    ) {
        let shadowed = |decision: String, reason_code, message, failure| EventKind::HookShadowed {
            duration_us: micros(meter.duration),
            fuel_consumed: meter.cost.fuel,
            decision,
            reason_code,
            message,
            failure,
        };
        let kind = match result {
            Ok(answer) => match answer.effect() {
                None => completed(meter, answer.name(), false),
                Some((decision, reason_code, message)) => {
                    shadowed(decision, reason_code, message, None)
                }
            },
            Err(failure) if self.plugins.spec(hook).fails_closed() => shadowed(
                "would_deny".into(),
                format!("hook-failure:{}", failure.reason),
                failure.detail.clone(),
                Some(failure.reason),
            ),
            Err(failure) => failed(meter, failure, false),
        };
        self.emit(hook, inv, kind);
    }

    /// Records a run whose answer is not judged (an observe-only point, a background hook).
    pub(super) fn record(&self, hook: &HookRef, inv: Invocation, run: &Run) {
        match &run.result {
            Ok(response) => {
                self.emit_with(hook, inv, || completed(run.meter, response.name(), false))
            }
            Err(failure) => self.emit(hook, inv, failed(run.meter, failure, false)),
        }
    }

    /// Records a failed run; returns whether it fails closed ([`HookSpec::fails_closed`]):
    /// a foreground hook that could change the outcome, at a point with a closed answer,
    /// unless it says `on_failure = "allow"`.
    pub(super) fn fail(
        &self,
        hook: &HookRef,
        inv: Invocation,
        meter: Meter,
        failure: &Failure,
    ) -> bool {
        let closed = self.plugins.spec(hook).fails_closed();
        self.emit(hook, inv, failed(meter, failure, closed));
        closed
    }

    /// Runs one hook: emits `hook_started`, then runs it in its runtime (`reentrant`: an
    /// invocation up this call chain holds the plugin's per-session instance, see
    /// [`crate::runtime::wasm::run`]), its time counted from `started`.
    /// The per-session instance `hook` runs in. A plugin's observers — background,
    /// observe-only and shadow hooks, none of which can change an outcome — have an instance
    /// of their own, so a busy observer never holds the instance a guard of the same plugin
    /// needs: its guard's decisions and latency do not depend on what its observers do.
    pub(super) fn slot(&self, hook: &HookRef) -> &Slot {
        let spec = self.plugins.spec(hook);
        let observer = spec.mode == Mode::Background || !spec.can_change_outcome() || !spec.enforce;
        &self.instances[hook.plugin * 2 + usize::from(observer)]
    }

    pub(super) async fn run(
        &self,
        hook: &HookRef,
        inv: Invocation,
        request: &Request<'_>,
        reentrant: bool,
        started: Instant,
    ) -> Run {
        let interest = self.plugins.host.inner.interest;
        if interest.started {
            self.emit(hook, inv, EventKind::HookStarted);
        }
        let plugin = &self.plugins.plugins[hook.plugin];
        let site = Site {
            session_id: &self.id,
            hook_id: &hook.id,
            invocation: inv.id,
            point: inv.point,
            spec: self.plugins.spec(hook),
            config: &plugin.manifest().config,
            env: &plugin.env,
            lifetime: plugin.manifest().instance,
            engines: &self.plugins.host.inner.engines,
            sink: &self.plugins.host.inner.log_sink,
            slot: (!reentrant).then(|| self.slot(hook)),
            started,
        };
        let mut run = plugin.runtime.call(site, request).await;
        if interest.logs {
            for (level, message) in std::mem::take(&mut run.logs) {
                self.emit(hook, inv, EventKind::PluginLog { level, message });
            }
        }
        run
    }
}
