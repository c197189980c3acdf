//! The audit logs a command opened, so that it can flush them before it exits: their lines are
//! written by a thread of each log's own ([`palisade::JsonlSink`]), and a process that exits
//! without waiting would lose the last of them.

use palisade::JsonlSink;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a command that ends waits for its audit logs to take their last lines, unless it
/// has a budget of its own (a bridged event's).
pub const EXIT_FLUSH: Duration = Duration::from_secs(2);

/// The logs opened with [`open`], kept until the process ends: a log whose host is gone (an
/// event's work dropped when its budget ran out) still has lines to write, or to say it lost.
static OPEN: Mutex<Vec<Arc<JsonlSink>>> = Mutex::new(Vec::new());

/// Opens the audit log at `path` (see [`JsonlSink::open`]), for [`flush`] to flush at exit.
pub fn open(path: &Path) -> std::io::Result<Arc<JsonlSink>> {
    let sink = Arc::new(JsonlSink::open(path)?);
    OPEN.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(sink.clone());
    Ok(sink)
}

/// Waits, `within` at most in all, for every open audit log to write the lines it was given
/// (and every fact stream to acknowledge its records); says on standard error what one could
/// not write (lines that waited past the bound, or were lost), so that a log that misses lines
/// never does so unsaid.
pub fn flush(within: Duration) {
    let deadline = Instant::now() + within;
    crate::facts::flush(within);
    let open: Vec<Arc<JsonlSink>> = OPEN.lock().unwrap_or_else(|e| e.into_inner()).clone();
    for log in open {
        if let Err(loss) = log.flush(deadline.saturating_duration_since(Instant::now())) {
            eprintln!("palisade: warning: {loss}");
        }
    }
}
