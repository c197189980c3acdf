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

use palisade::{Event, EventKind, EventSink};
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

#[derive(Default)]
struct Counters {
    invocations: BTreeMap<(String, String, String), u64>,
    failures: BTreeMap<(String, String), u64>,
    durations: BTreeMap<String, Histogram>,
    fuel: BTreeMap<String, u64>,
}

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
            } => (decision.clone(), *duration_us, *fuel_consumed, None),
            EventKind::HookDenied {
                duration_us,
                fuel_consumed,
                ..
            } => ("deny".to_string(), *duration_us, *fuel_consumed, None),
            EventKind::HookFailed {
                duration_us,
                fuel_consumed,
                reason,
                ..
            } => (
                "failed".to_string(),
                *duration_us,
                *fuel_consumed,
                Some(reason.to_string()),
            ),
            EventKind::HookShadowed {
                decision,
                duration_us,
                fuel_consumed,
                ..
            } => (decision.clone(), *duration_us, *fuel_consumed, None),
            _ => return,
        };
        let mut counters = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let hook = event.hook_id.clone();
        *counters
            .invocations
            .entry((hook.clone(), event.point.to_string(), outcome))
            .or_default() += 1;
        if let Some(reason) = failure {
            *counters.failures.entry((hook.clone(), reason)).or_default() += 1;
        }
        *counters.fuel.entry(hook.clone()).or_default() += fuel;
        let histogram = counters.durations.entry(hook).or_default();
        let seconds = duration_us as f64 / 1e6;
        if let Some(i) = BUCKETS.iter().position(|bound| seconds <= *bound) {
            histogram.counts[i] += 1;
        }
        histogram.count += 1;
        histogram.sum_us += duration_us;
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
        for ((hook, point, outcome), n) in &counters.invocations {
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
        for ((hook, reason), n) in &counters.failures {
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
        for (hook, histogram) in &counters.durations {
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
        for (hook, fuel) in &counters.fuel {
            let _ = writeln!(lines, "{name}{{hook=\"{}\"}} {fuel}", label(hook));
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

    fn dispatched(&self, dispatch: &palisade::Dispatch) {
        self.0.dispatched(dispatch);
        if let Some(second) = &self.1 {
            second.dispatched(dispatch);
        }
    }
}
