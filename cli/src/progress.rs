//! Progress while components compile (only on cache misses: a Python or JavaScript component
//! takes seconds): a live bar on a terminal, one line per component otherwise. On stderr.

use palisade::{CompileObserver, CompileProgress};
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const MIB: f64 = 1024.0 * 1024.0;

/// The observer to give the host.
pub fn observer() -> CompileObserver {
    let progress = Arc::new(Progress {
        tty: std::io::stderr().is_terminal(),
        state: Mutex::new(State::default()),
    });
    Arc::new(move |event| progress.clone().report(event))
}

struct Progress {
    tty: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Compiling now: plugin, size, since.
    active: Vec<(String, u64, Instant)>,
    /// Since the first of this batch started.
    since: Option<Instant>,
    /// Counts and bytes of this batch.
    started: usize,
    done: usize,
    bytes_started: u64,
    bytes_done: u64,
    ticking: bool,
}

impl Progress {
    fn report(self: Arc<Self>, event: &CompileProgress) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match event {
            CompileProgress::Started { plugin, bytes } => {
                state.since.get_or_insert_with(Instant::now);
                state.started += 1;
                state.bytes_started += bytes;
                state.active.push((plugin.clone(), *bytes, Instant::now()));
                if !self.tty {
                    eprintln!(
                        "compiling {plugin} ({:.1} MiB); the next loads come from the cache",
                        *bytes as f64 / MIB
                    );
                } else if !state.ticking {
                    state.ticking = true;
                    let me = self.clone();
                    // Without the thread, only the bar stops moving.
                    let _ = std::thread::Builder::new()
                        .name("palisade-progress".into())
                        .spawn(move || me.tick());
                }
            }
            CompileProgress::Finished {
                plugin,
                bytes,
                took,
                ok,
            } => {
                state.active.retain(|(p, _, _)| p != plugin);
                state.done += 1;
                state.bytes_done += bytes;
                if !self.tty {
                    let what = if *ok { "compiled" } else { "could not compile" };
                    eprintln!("{what} {plugin} in {:.1} s", took.as_secs_f64());
                } else if state.active.is_empty() {
                    // The last one: the summary replaces the bar before loading returns (and
                    // before anything else is printed).
                    let took = state.since.map(|s| s.elapsed()).unwrap_or_default();
                    let mut err = std::io::stderr().lock();
                    let _ = writeln!(
                        err,
                        "\r\x1b[2Kcompiled {} component{} ({:.1} MiB) in {:.1} s; the next loads come from the cache",
                        state.done,
                        if state.done == 1 { "" } else { "s" },
                        state.bytes_done as f64 / MIB,
                        took.as_secs_f64()
                    );
                    let ticking = state.ticking;
                    *state = State::default();
                    state.ticking = ticking;
                }
            }
            _ => {}
        }
    }

    /// Redraws the bar ten times a second while anything compiles.
    fn tick(&self) {
        loop {
            std::thread::sleep(Duration::from_millis(100));
            let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if state.active.is_empty() {
                state.ticking = false;
                return;
            }
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{}", line(&state));
            let _ = err.flush();
        }
    }
}

/// `[#######-------] 1 of 3 compiled, 17.7 of 48.1 MiB · url-guard 3.2 s, …`
fn line(state: &State) -> String {
    const WIDTH: usize = 24;
    let fraction = if state.bytes_started == 0 {
        0.0
    } else {
        state.bytes_done as f64 / state.bytes_started as f64
    };
    let filled = ((fraction * WIDTH as f64) as usize).min(WIDTH);
    let active: Vec<String> = state
        .active
        .iter()
        .map(|(plugin, _, since)| format!("{plugin} {:.1} s", since.elapsed().as_secs_f64()))
        .collect();
    format!(
        "compiling [{}{}] {} of {} done, {:.1} of {:.1} MiB · {}",
        "#".repeat(filled),
        "-".repeat(WIDTH - filled),
        state.done,
        state.started,
        state.bytes_done as f64 / MIB,
        state.bytes_started as f64 / MIB,
        active.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_with_the_bytes_compiled() {
        let mut state = State {
            started: 2,
            done: 1,
            bytes_started: 4 * 1024 * 1024,
            bytes_done: 1024 * 1024,
            ..State::default()
        };
        state
            .active
            .push(("url-guard".into(), 3 * 1024 * 1024, Instant::now()));
        let line = line(&state);
        assert!(
            line.starts_with(
                "compiling [######------------------] 1 of 2 done, 1.0 of 4.0 MiB · url-guard 0.0 s"
            ),
            "{line}"
        );
    }
}
