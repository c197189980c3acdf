//! The lines a server says about itself on standard error ([`say`]), written by a thread of
//! their own: a terminal paused with Ctrl-S, or a pipe whose reader stopped reading, holds up
//! no answer. A server says a line while it holds its sessions (a session ended, one evicted)
//! and while it accepts connections; waiting there for stderr would stop it answering, and
//! an agent takes a hook that does not answer as no objection.

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How many lines may wait for standard error; past it, lines are dropped, counted, and the
/// count said once standard error takes lines again.
const MAX_WAITING: usize = 1024;

struct Said {
    lines: SyncSender<String>,
    /// Lines sent, lines written (or dropped), lines dropped not yet said.
    counts: Mutex<Counts>,
    written: Condvar,
}

#[derive(Default)]
struct Counts {
    sent: u64,
    written: u64,
    dropped: u64,
}

/// The writer, started by the first line said.
static SAID: OnceLock<Option<Said>> = OnceLock::new();

fn said() -> Option<&'static Said> {
    SAID.get_or_init(|| {
        let (lines, waiting) = sync_channel(MAX_WAITING);
        let started = std::thread::Builder::new()
            .name("palisade-stderr".into())
            .spawn(move || write(waiting));
        started.ok().map(|_| Said {
            lines,
            counts: Mutex::default(),
            written: Condvar::new(),
        })
    })
    .as_ref()
}

fn write(waiting: Receiver<String>) {
    use std::io::Write as _;
    for line in waiting {
        let Some(Some(said)) = SAID.get() else { return };
        let dropped = std::mem::take(
            &mut said
                .counts
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .dropped,
        );
        let mut stderr = std::io::stderr().lock();
        if dropped > 0 {
            let _ = writeln!(
                stderr,
                "palisade: {dropped} line(s) of this output were dropped: standard error was not \
                 read"
            );
        }
        let _ = writeln!(stderr, "{line}");
        drop(stderr);
        said.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .written += 1;
        said.written.notify_all();
    }
}

/// Writes `line` on standard error, from the thread of [`said`]: never waits for it (where no
/// such thread could start, it is written here).
pub fn say(line: String) {
    let Some(said) = said() else {
        eprintln!("{line}");
        return;
    };
    let mut counts = said.counts.lock().unwrap_or_else(|e| e.into_inner());
    match said.lines.try_send(line) {
        Ok(()) => counts.sent += 1,
        Err(TrySendError::Full(_)) => counts.dropped += 1,
        Err(TrySendError::Disconnected(line)) => {
            drop(counts);
            eprintln!("{line}");
        }
    }
}

/// Waits, `within` at most, until the lines said so far are written.
pub fn flush(within: Duration) {
    let Some(Some(said)) = SAID.get() else { return };
    let deadline = Instant::now() + within;
    let mut counts = said.counts.lock().unwrap_or_else(|e| e.into_inner());
    let target = counts.sent;
    while counts.written < target {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        counts = match said.written.wait_timeout(counts, left) {
            Ok((counts, _)) => counts,
            Err(poisoned) => poisoned.into_inner().0,
        };
    }
}
