//! What a replay prints: each hook's runs, per-plugin latency and fuel tallies, the timeline
//! as text.

use super::Step;
use crate::output::{clip, table};
use palisade::events::{Event, EventKind};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Serialize)]
pub(super) struct HookRun {
    hook_id: String,
    event: &'static str,
    decision: String,
    duration_us: u64,
    fuel: u64,
    /// What the hook logged in this run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    logs: Vec<String>,
}

#[derive(Serialize, Default)]
pub(super) struct PluginStats {
    invocations: usize,
    p50_us: u64,
    p95_us: u64,
    p99_us: u64,
    max_us: u64,
    total_fuel: u64,
    denied: usize,
    failed: usize,
    shadowed: usize,
}

/// What each hook did in one step, from the step's events (its logs attached).
pub(super) fn hook_runs(events: &[Event]) -> Vec<HookRun> {
    let logs_of = |hook_id: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e.hook_id == hook_id)
            .filter_map(|e| match &e.kind {
                EventKind::PluginLog { message, .. } => Some(message.clone()),
                _ => None,
            })
            .collect()
    };
    events
        .iter()
        .cloned()
        .filter_map(|e| {
            let (name, decision, duration_us, fuel) = match e.kind {
                EventKind::HookCompleted {
                    duration_us,
                    fuel_consumed,
                    decision,
                    honoured,
                } => (
                    "completed",
                    if honoured {
                        decision
                    } else {
                        format!("{decision} (recorded)")
                    },
                    duration_us,
                    fuel_consumed,
                ),
                EventKind::HookDenied {
                    duration_us,
                    fuel_consumed,
                    reason_code,
                    ..
                } => ("denied", reason_code, duration_us, fuel_consumed),
                EventKind::HookFailed {
                    duration_us,
                    fuel_consumed,
                    reason,
                    ..
                } => ("failed", reason.to_string(), duration_us, fuel_consumed),
                EventKind::HookShadowed {
                    duration_us,
                    fuel_consumed,
                    decision,
                    reason_code,
                    ..
                } => (
                    "shadowed",
                    if reason_code.is_empty() {
                        decision
                    } else {
                        format!("{decision} {reason_code}")
                    },
                    duration_us,
                    fuel_consumed,
                ),
                _ => return None,
            };
            Some(HookRun {
                logs: logs_of(&e.hook_id),
                hook_id: e.hook_id,
                event: name,
                decision,
                duration_us,
                fuel,
            })
        })
        .collect()
}

/// Per plugin: invocations, fuel, denials, failures and latency percentiles.
/// What each plugin did over the replay.
pub(super) fn tallies(steps: &[Step]) -> BTreeMap<String, crate::output::Tally> {
    let mut per_plugin: BTreeMap<String, crate::output::Tally> = BTreeMap::new();
    for run in steps.iter().flat_map(|s| &s.hooks) {
        let plugin = run
            .hook_id
            .split('/')
            .next()
            .unwrap_or_default()
            .to_string();
        let tally = per_plugin.entry(plugin).or_default();
        tally.durations.push(run.duration_us);
        tally.fuel += run.fuel;
        tally.denied += usize::from(run.event == "denied");
        tally.failed += usize::from(run.event == "failed");
        tally.shadowed += usize::from(run.event == "shadowed");
    }
    per_plugin
}

pub(super) fn plugin_stats(
    tallies: &BTreeMap<String, crate::output::Tally>,
) -> BTreeMap<String, PluginStats> {
    tallies
        .iter()
        .map(|(plugin, t)| {
            let stats = PluginStats {
                invocations: t.durations.len(),
                p50_us: t.quantile(0.5),
                p95_us: t.quantile(0.95),
                p99_us: t.quantile(0.99),
                max_us: t.durations.iter().max().copied().unwrap_or(0),
                total_fuel: t.fuel,
                denied: t.denied,
                failed: t.failed,
                shadowed: t.shadowed,
            };
            (plugin.clone(), stats)
        })
        .collect()
}

pub(super) fn print_text(
    name: &str,
    steps: &[Step],
    tallies: &BTreeMap<String, crate::output::Tally>,
) {
    println!("Replay of {name}: {} events\n", steps.len());
    let mut rows = vec![
        ["#", "EVENT", "SUBJECT", "OUTCOME", "BY", "REASON", "µs"]
            .map(String::from)
            .to_vec(),
    ];
    for step in steps {
        rows.push(vec![
            step.index.to_string(),
            step.event.clone(),
            clip(&step.subject, 40),
            step.outcome.clone(),
            step.by.clone().unwrap_or_default(),
            clip(step.reason.as_deref().unwrap_or_default(), 60),
            step.micros.to_string(),
        ]);
    }
    print!("{}", table(&rows));
    println!("\nWhat each hook decided:");
    for step in steps {
        for run in &step.hooks {
            println!(
                "  #{:<3} {:<28} {:<10} {:<28} {:>7} µs {:>10} fuel",
                step.index,
                run.hook_id,
                run.event,
                clip(&run.decision, 28),
                run.duration_us,
                run.fuel
            );
        }
    }
    println!();
    print!("{}", crate::output::tally_table("PLUGIN", tallies));
}
