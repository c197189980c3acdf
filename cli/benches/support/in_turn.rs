//! What the proxy benches (`acp`, `mcp`) share: cases measured in turn, one call of each after
//! the other, so that the VM's drift falls on every case alike, and the summary they print.

use std::time::{Duration, Instant};

/// The median and p99 of `n` rounds of `run(case)` over `cases` cases, taken in turn (each
/// round starts one case further on).
pub fn percentiles(
    cases: usize,
    n: usize,
    mut run: impl FnMut(usize),
) -> Vec<(Duration, Duration)> {
    let mut times = vec![Vec::with_capacity(n); cases];
    for round in 0..n {
        for k in 0..cases {
            let case = (round + k) % cases;
            let started = Instant::now();
            run(case);
            times[case].push(started.elapsed());
        }
    }
    times
        .into_iter()
        .map(|mut times| {
            times.sort();
            (times[n / 2], times[n * 99 / 100])
        })
        .collect()
}

/// Prints each case's median and p99 (`what`: "a prompt turn", …), the first case being the
/// direct one; with a baseline, the cases after it come in pairs (the baseline's, this
/// build's), and what each adds to the direct case is compared.
pub fn print(
    bench: &str,
    what: &str,
    n: usize,
    summary: &[(String, (Duration, Duration))],
    baseline: bool,
) {
    let direct = summary[0].1.0;
    for (name, (p50, p99)) in summary {
        println!(
            "{bench}: {what} {name}: median {:.1} µs, p99 {:.1} µs ({n} times)",
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6
        );
    }
    for pair in summary[1..].chunks(2).filter(|_| baseline) {
        let [(_, (before, _)), (name, (after, _))] = pair else {
            continue;
        };
        let added = |t: &Duration| t.saturating_sub(direct).as_secs_f64() * 1e6;
        println!(
            "{bench}: {name}: the proxy adds {:.1} µs to {what}, the baseline {:.1} µs ({:.3}×)",
            added(after),
            added(before),
            added(after) / added(before)
        );
    }
}
