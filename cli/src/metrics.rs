//! Counters of the lifecycle events, in the Prometheus text exposition format: what
//! `palisade serve` answers on `GET /metrics`.
//!
//! - `palisade_hook_invocations_total{hook, point, outcome}`: every finished invocation, by
//!   its outcome — the decision (`allow`, `deny`, `ask`, …), `failed`, or a shadow hook's
//!   `would_…`;
//! - `palisade_hook_failures_total{hook, reason}`: failures by reason (`timeout`, `trap`, …;
//!   `dropped-saturated` is background work dropped because its session's queue was full);
//! - `palisade_hook_duration_seconds{hook}`: a histogram of invocation wall time;
//! - `palisade_hook_fuel_consumed_total{hook}`: fuel spent.

use palisade::events::{Event, EventKind, EventSink, Interest};
use palisade::{FailureReason, Point};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};

/// The upper bounds of the duration histogram's buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.000_01, 0.000_05, 0.000_1, 0.000_5, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0,
];

#[derive(Default)]
struct Histogram {
    /// Per bucket, the observations at most its bound (not cumulative).
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum_us: u64,
}

/// The counts of one hook. Its invocations and failures are few kinds each (a point or two,
/// a handful of outcomes and reasons): a short list found by comparing, so that counting an
/// event allocates nothing once its kind has been seen.
#[derive(Default)]
struct HookCounters {
    /// By point and outcome.
    invocations: Vec<(Point, String, u64)>,
    /// By reason.
    failures: Vec<(FailureReason, u64)>,
    duration: Histogram,
    fuel: u64,
}

/// The counts by hook id (sorted: `/metrics` lists hooks in order).
#[derive(Default)]
struct Counters(BTreeMap<String, HookCounters>);

/// An event sink that counts; [`Metrics::render`] writes the counts out.
#[derive(Default)]
pub struct Metrics(Mutex<Counters>);

impl EventSink for Metrics {
    fn emit(&self, event: &Event) {
        let (outcome, duration_us, fuel, failure) = match &event.kind {
            EventKind::HookCompleted {
                decision,
                duration_us,
                fuel_consumed,
                ..
            } => (decision.as_str(), *duration_us, *fuel_consumed, None),
            EventKind::HookDenied {
                duration_us,
                fuel_consumed,
                ..
            } => ("deny", *duration_us, *fuel_consumed, None),
            EventKind::HookFailed {
                duration_us,
                fuel_consumed,
                reason,
                ..
            } => ("failed", *duration_us, *fuel_consumed, Some(*reason)),
            EventKind::HookShadowed {
                decision,
                duration_us,
                fuel_consumed,
                ..
            } => (decision.as_str(), *duration_us, *fuel_consumed, None),
            _ => return,
        };
        let mut counters = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let hook = match counters.0.get_mut(event.hook_id.as_str()) {
            Some(hook) => hook,
            None => counters.0.entry(event.hook_id.clone()).or_default(),
        };
        match hook
            .invocations
            .iter_mut()
            .find(|(point, seen, _)| *point == event.point && seen == outcome)
        {
            Some((_, _, n)) => *n += 1,
            None => hook.invocations.push((event.point, outcome.to_string(), 1)),
        }
        if let Some(reason) = failure {
            match hook.failures.iter_mut().find(|(seen, _)| *seen == reason) {
                Some((_, n)) => *n += 1,
                None => hook.failures.push((reason, 1)),
            }
        }
        hook.fuel += fuel;
        let histogram = &mut hook.duration;
        let seconds = duration_us as f64 / 1e6;
        if let Some(i) = BUCKETS.iter().position(|bound| seconds <= *bound) {
            histogram.counts[i] += 1;
        }
        histogram.count += 1;
        histogram.sum_us += duration_us;
    }

    fn interest(&self) -> Interest {
        Interest::ENDS
    }
}

/// Writes the `# HELP` and `# TYPE` lines of metric `name`; returns the name.
fn family(out: &mut String, name: &str, kind: &str, help: &str) -> String {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    name.to_string()
}

/// A label value, escaped as the text format wants it.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    /// The counts in the Prometheus text format (version 0.0.4), with `sessions` as the
    /// live-session gauge.
    pub fn render(&self, sessions: usize) -> String {
        let counters = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        let name = family(
            &mut out,
            "palisade_hook_invocations_total",
            "counter",
            "Finished hook invocations by hook, point and outcome (a decision, failed, or a shadow hook's would_...).",
        );
        let mut lines = String::new();
        let mut invocations: Vec<(&str, &str, &str, u64)> = counters
            .0
            .iter()
            .flat_map(|(hook, counts)| {
                counts.invocations.iter().map(|(point, outcome, n)| {
                    (hook.as_str(), point.as_str(), outcome.as_str(), *n)
                })
            })
            .collect();
        invocations.sort_unstable();
        for (hook, point, outcome, n) in invocations {
            let _ = writeln!(
                lines,
                "{name}{{hook=\"{}\",point=\"{}\",outcome=\"{}\"}} {n}",
                label(hook),
                label(point),
                label(outcome)
            );
        }
        out.push_str(&lines);
        let name = family(
            &mut out,
            "palisade_hook_failures_total",
            "counter",
            "Hook failures by hook and reason (dropped-saturated: background work dropped, its session's queue full).",
        );
        let mut lines = String::new();
        let mut failures: Vec<(&str, &str, u64)> = counters
            .0
            .iter()
            .flat_map(|(hook, counts)| {
                counts
                    .failures
                    .iter()
                    .map(|(reason, n)| (hook.as_str(), reason.as_str(), *n))
            })
            .collect();
        failures.sort_unstable();
        for (hook, reason, n) in failures {
            let _ = writeln!(
                lines,
                "{name}{{hook=\"{}\",reason=\"{}\"}} {n}",
                label(hook),
                label(reason)
            );
        }
        out.push_str(&lines);
        let name = family(
            &mut out,
            "palisade_hook_duration_seconds",
            "histogram",
            "Wall time of hook invocations.",
        );
        let mut lines = String::new();
        for (hook, counts) in &counters.0 {
            let histogram = &counts.duration;
            let hook = label(hook);
            let mut cumulative = 0;
            for (bound, n) in BUCKETS.iter().zip(histogram.counts) {
                cumulative += n;
                let _ = writeln!(
                    lines,
                    "{name}_bucket{{hook=\"{hook}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            let _ = writeln!(
                lines,
                "{name}_bucket{{hook=\"{hook}\",le=\"+Inf\"}} {}\n{name}_sum{{hook=\"{hook}\"}} {}\n{name}_count{{hook=\"{hook}\"}} {}",
                histogram.count,
                histogram.sum_us as f64 / 1e6,
                histogram.count
            );
        }
        out.push_str(&lines);
        let name = family(
            &mut out,
            "palisade_hook_fuel_consumed_total",
            "counter",
            "Fuel spent by wasm hooks.",
        );
        let mut lines = String::new();
        for (hook, counts) in &counters.0 {
            let _ = writeln!(lines, "{name}{{hook=\"{}\"}} {}", label(hook), counts.fuel);
        }
        out.push_str(&lines);
        let name = family(
            &mut out,
            "palisade_sessions",
            "gauge",
            "Live sessions of the current plugin generation.",
        );
        let _ = writeln!(out, "{name} {sessions}");
        out
    }
}

/// Hands every event to each of two sinks.
pub struct Tee(pub Arc<dyn EventSink>, pub Option<Arc<dyn EventSink>>);

impl EventSink for Tee {
    fn emit(&self, event: &Event) {
        self.0.emit(event);
        if let Some(second) = &self.1 {
            second.emit(event);
        }
    }

    fn dispatched(&self, dispatch: &palisade::events::Dispatch) {
        self.0.dispatched(dispatch);
        if let Some(second) = &self.1 {
            second.dispatched(dispatch);
        }
    }

    fn interest(&self) -> Interest {
        match &self.1 {
            Some(second) => self.0.interest().or(second.interest()),
            None => self.0.interest(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(hook: &str, point: Point, kind: EventKind) -> Event {
        Event {
            kind,
            at_ms: 0,
            session_id: "s".into(),
            invocation_id: "inv-00000001".into(),
            hook_id: hook.into(),
            plugin: hook.split('/').next().unwrap().into(),
            point,
            agent_id: None,
            agent_type: None,
            trace_parent: None,
        }
    }

    fn completed(decision: &str, duration_us: u64) -> EventKind {
        EventKind::HookCompleted {
            duration_us,
            fuel_consumed: 10,
            decision: decision.into(),
            honoured: true,
        }
    }

    fn failed(reason: FailureReason) -> EventKind {
        EventKind::HookFailed {
            duration_us: 2_000,
            fuel_consumed: 1,
            reason,
            detail: String::new(),
            failed_closed: true,
        }
    }

    /// Counted by hook, point and outcome (and failures by reason), listed in order whatever
    /// order the events came in; events that are not an invocation's end are not counted.
    #[test]
    fn counts_are_by_hook_point_and_outcome_in_order() {
        let metrics = Metrics::default();
        for (hook, point, kind) in [
            ("z/pre-tool", Point::PreTool, completed("allow", 5)),
            (
                "a/post-tool",
                Point::PostTool,
                failed(FailureReason::Timeout),
            ),
            ("z/pre-tool", Point::PreTool, completed("deny", 70)),
            ("z/pre-tool", Point::PreTool, completed("allow", 5)),
            ("a/post-tool", Point::PostTool, failed(FailureReason::Trap)),
            (
                "a/post-tool",
                Point::PostTool,
                failed(FailureReason::Timeout),
            ),
            ("z/pre-tool", Point::PreTool, EventKind::HookStarted),
        ] {
            metrics.emit(&event(hook, point, kind));
        }
        let text = metrics.render(3);
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| {
                !l.starts_with('#')
                    && (l.starts_with("palisade_hook_invocations_total")
                        || l.starts_with("palisade_hook_failures_total")
                        || l.starts_with("palisade_hook_fuel")
                        || l.contains("_count")
                        || l.starts_with("palisade_sessions"))
            })
            .collect();
        assert_eq!(
            lines,
            [
                r#"palisade_hook_invocations_total{hook="a/post-tool",point="post-tool",outcome="failed"} 3"#,
                r#"palisade_hook_invocations_total{hook="z/pre-tool",point="pre-tool",outcome="allow"} 2"#,
                r#"palisade_hook_invocations_total{hook="z/pre-tool",point="pre-tool",outcome="deny"} 1"#,
                r#"palisade_hook_failures_total{hook="a/post-tool",reason="timeout"} 2"#,
                r#"palisade_hook_failures_total{hook="a/post-tool",reason="trap"} 1"#,
                r#"palisade_hook_duration_seconds_count{hook="a/post-tool"} 3"#,
                r#"palisade_hook_duration_seconds_count{hook="z/pre-tool"} 3"#,
                r#"palisade_hook_fuel_consumed_total{hook="a/post-tool"} 3"#,
                r#"palisade_hook_fuel_consumed_total{hook="z/pre-tool"} 30"#,
                "palisade_sessions 3",
            ],
            "{text}"
        );
        // The bucket of a 70 µs call: ≤ 100 µs and up, not ≤ 50 µs.
        assert!(
            text.contains(
                r#"palisade_hook_duration_seconds_bucket{hook="z/pre-tool",le="0.00005"} 2"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"palisade_hook_duration_seconds_bucket{hook="z/pre-tool",le="0.0001"} 3"#
            ),
            "{text}"
        );
    }
}
