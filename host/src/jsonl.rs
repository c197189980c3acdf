//! [`JsonlSink`]: the audit log, written by a thread of its own.
//!
//! A dispatch never waits for the log: it queues its lines and goes on. So a reader that stops
//! reading (a FIFO whose log shipper hangs), a disk that stalls or a full file system cannot
//! hold up an answer, which the agent would otherwise take, at its own timeout, as no
//! objection. What the log cannot take is counted and said: in the log itself, as soon as it
//! takes lines again (an `audit_lines_lost` record), and to whoever asks
//! [`JsonlSink::flush`].

use crate::events::{Event, EventSink, Interest, now_ms};
use std::collections::VecDeque;
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How many bytes of lines may wait for the log to take them. Past it, lines are dropped
/// (and counted): a log that takes nothing cannot take the host's memory either.
const MAX_WAITING: usize = 8 << 20;
/// The most one write to a regular file carries: whole lines only.
const FILE_BATCH: usize = 64 << 10;
/// The most one write to a FIFO, socket or terminal carries: what a pipe writes in one piece
/// (`PIPE_BUF`), so the lines of processes appending to one FIFO do not interleave.
const PIPE_BATCH: usize = 4096;
/// How long the writer, woken by a line, waits for the lines that come with it before it
/// writes (unless a flush waits).
const LINGER: Duration = Duration::from_micros(500);
/// How long the writer waits, after a write failed, before it tries again to say how many
/// lines were lost (new lines are tried at once).
const RETRY: Duration = Duration::from_secs(1);

/// Appends every event as one JSON line to a file (creating it, or appending to it).
///
/// The lines are written in order, whole, by a thread of the sink's own: several lines go out
/// in one write (one line per write at most 4 KiB to a FIFO), so the lines of processes
/// appending to one log do not interleave, and a write cut short by an error is followed by a
/// new line, so the lines after it still read. A dispatch only queues its lines: when the log
/// does not take them (its reader stopped, its disk stalls), at most 8 MiB wait, and lines
/// past that are dropped, counted, and reported in the log as soon as it takes lines again,
/// as one `{"event": "audit_lines_lost", "lines": N, "why": "…"}` record.
///
/// Lines are on their way, not yet written, when [`EventSink::emit`] returns: call
/// [`JsonlSink::flush`] before reading the log, and before the process exits.
#[derive(Debug)]
pub struct JsonlSink {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    queue: Mutex<Queue>,
    /// The writer waits on it for lines, or for the sink to close.
    work: Condvar,
    /// [`JsonlSink::flush`] waits on it for the writer's progress.
    progress: Condvar,
}

#[derive(Debug, Default)]
struct Queue {
    lines: VecDeque<Vec<u8>>,
    /// The bytes of `lines`.
    bytes: usize,
    /// Lines queued since the log was opened.
    queued: u64,
    /// Of those, the lines the writer is done with: written, or lost to a failed write.
    done: u64,
    /// Lines lost (dropped, or a write of them failed) and not yet reported in the log.
    lost: u64,
    /// Why the last of them were lost.
    why: String,
    /// Whether the last write failed (the writer then waits [`RETRY`] before it writes only a
    /// report of lost lines).
    failing: bool,
    /// Whether the writer waits for work (and must be woken).
    idle: bool,
    /// Whether the writer waits for more lines before it writes those it has (and a flush
    /// must wake it).
    lingering: bool,
    /// How many [`JsonlSink::flush`] calls wait for progress.
    flushing: usize,
    /// Whether the sink is gone: the writer writes what is queued and stops.
    closed: bool,
}

/// What [`JsonlSink::flush`] could not write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditLoss {
    /// The log.
    pub path: PathBuf,
    /// Lines still waiting to be written when the flush gave up.
    pub unwritten: u64,
    /// Lines lost (dropped while too many waited, or their write failed) that the log does not
    /// report yet.
    pub lost: u64,
    /// Why lines were lost, when some were.
    pub why: String,
    /// How long the flush waited.
    pub waited: Duration,
}

impl fmt::Display for AuditLoss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the audit log {}: ", self.path.display())?;
        if self.unwritten > 0 {
            write!(
                f,
                "{} line(s) not written within {} ms (nothing takes them: a FIFO whose reader \
                 stopped reading, or a stalled disk)",
                self.unwritten,
                self.waited.as_millis()
            )?;
            if self.lost > 0 {
                write!(f, ", and ")?;
            }
        }
        if self.lost > 0 {
            write!(f, "{} line(s) lost ({})", self.lost, self.why)?;
        }
        Ok(())
    }
}

impl std::error::Error for AuditLoss {}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Waits on `condvar` with `queue`, `left` at most.
fn wait<'a>(
    condvar: &Condvar,
    queue: MutexGuard<'a, Queue>,
    left: Duration,
) -> MutexGuard<'a, Queue> {
    match condvar.wait_timeout(queue, left) {
        Ok((queue, _)) => queue,
        Err(poisoned) => poisoned.into_inner().0,
    }
}

impl JsonlSink {
    /// Opens (creating or appending to) the audit log at `path`, and starts its writer.
    ///
    /// Opening a FIFO waits for its reader, as opening one for writing does: open it where a
    /// wait does not matter, or under a deadline.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let batch = if file.metadata()?.is_file() {
            FILE_BATCH
        } else {
            PIPE_BATCH
        };
        let shared = Arc::new(Shared {
            path: path.to_path_buf(),
            queue: Mutex::default(),
            work: Condvar::new(),
            progress: Condvar::new(),
        });
        let writer = shared.clone();
        std::thread::Builder::new()
            .name("palisade-audit".into())
            .spawn(move || write_lines(&writer, file, batch))?;
        Ok(JsonlSink { shared })
    }

    /// Appends `record`, one JSON line, to the same log (a bridge's recording of the agent's
    /// event, `agent_event`, next to the lifecycle events it caused).
    pub fn record(&self, record: &serde_json::Value) {
        if let Ok(line) = serde_json::to_vec(record) {
            self.push(line);
        }
    }

    /// Waits, `within` at most, until every line queued before the call is written. `Err`
    /// says what is not: lines still waiting when the time ran out, and lines lost (dropped
    /// while too many waited, or their write failed) that the log does not report yet.
    pub fn flush(&self, within: Duration) -> Result<(), AuditLoss> {
        let started = Instant::now();
        let deadline = started + within;
        let mut queue = self.shared.lock();
        let target = queue.queued;
        while queue.done < target || (queue.lost > 0 && !queue.failing) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            queue.flushing += 1;
            if queue.lingering {
                self.shared.work.notify_one();
            }
            queue = wait(&self.shared.progress, queue, left);
            queue.flushing -= 1;
        }
        let unwritten = target.saturating_sub(queue.done);
        if unwritten == 0 && queue.lost == 0 {
            return Ok(());
        }
        Err(AuditLoss {
            path: self.shared.path.clone(),
            unwritten,
            lost: queue.lost,
            why: queue.why.clone(),
            waited: started.elapsed(),
        })
    }

    /// Queues one line (`line` without its newline), or counts it lost when too much waits.
    fn push(&self, mut line: Vec<u8>) {
        line.push(b'\n');
        let mut queue = self.shared.lock();
        if queue.bytes + line.len() > MAX_WAITING {
            queue.lost += 1;
            queue.why = format!(
                "dropped: more than {} MiB of lines waited for the log to take them",
                MAX_WAITING >> 20
            );
        } else {
            queue.bytes += line.len();
            queue.lines.push_back(line);
            queue.queued += 1;
        }
        let wake = std::mem::take(&mut queue.idle);
        drop(queue);
        if wake {
            self.shared.work.notify_one();
        }
    }
}

impl Drop for JsonlSink {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_one();
    }
}

impl EventSink for JsonlSink {
    fn emit(&self, event: &Event) {
        if let Ok(line) = serde_json::to_vec(event) {
            self.push(line);
        }
    }

    fn interest(&self) -> Interest {
        Interest {
            dispatches: false,
            ..Interest::ALL
        }
    }
}

/// The writer: takes the queued lines in batches of whole lines, at most `batch` bytes
/// (or one line), and writes each batch with one write call, until the sink is dropped and
/// nothing is left to write.
fn write_lines(shared: &Shared, mut file: File, batch: usize) {
    let mut buffer = Vec::with_capacity(batch);
    // Whether the last write was cut short inside a line.
    let mut torn = false;
    loop {
        let (lines, reported) = {
            let mut queue = shared.lock();
            let mut retry_at: Option<Instant> = None;
            loop {
                if !queue.lines.is_empty() {
                    break;
                }
                if queue.lost > 0 {
                    if !queue.failing {
                        break;
                    }
                    // The last write failed: the report of the loss is tried again with the
                    // next lines, or after a while.
                    let at = *retry_at.get_or_insert_with(|| Instant::now() + RETRY);
                    let left = at.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        queue.failing = false;
                        break;
                    }
                    if queue.closed {
                        return;
                    }
                    queue.idle = true;
                    queue = wait(&shared.work, queue, left);
                    continue;
                }
                if queue.closed {
                    return;
                }
                queue.idle = true;
                queue = shared.work.wait(queue).unwrap_or_else(|e| e.into_inner());
                // Woken by a first line: the lines of the moment gather for LINGER, so that a
                // busy server wakes its writer (and writes) about once per LINGER, not once
                // per line. A flush, or the sink's end, cuts it short.
                let until = Instant::now() + LINGER;
                queue.lingering = true;
                while !queue.lines.is_empty() && queue.flushing == 0 && !queue.closed {
                    let left = until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    queue = wait(&shared.work, queue, left);
                }
                queue.lingering = false;
            }
            queue.idle = false;
            buffer.clear();
            if torn {
                buffer.push(b'\n');
            }
            let reported = std::mem::take(&mut queue.lost);
            if reported > 0 {
                let record = serde_json::json!({
                    "event": "audit_lines_lost",
                    "at_ms": now_ms(),
                    "lines": reported,
                    "why": &queue.why,
                });
                if serde_json::to_writer(&mut buffer, &record).is_ok() {
                    buffer.push(b'\n');
                }
            }
            let mut lines = 0;
            while let Some(line) = queue.lines.front() {
                if lines > 0 && buffer.len() + line.len() > batch {
                    break;
                }
                let line = queue.lines.pop_front().unwrap_or_default();
                queue.bytes -= line.len();
                buffer.extend_from_slice(&line);
                lines += 1;
            }
            (lines, reported)
        };
        let written = write_whole(&mut file, &buffer);
        let mut queue = shared.lock();
        queue.done += lines;
        match written {
            Ok(()) => {
                torn = false;
                queue.failing = false;
                if queue.lost == 0 {
                    queue.why.clear();
                }
            }
            Err((wrote, e)) => {
                torn = wrote > 0 && buffer.get(wrote - 1) != Some(&b'\n');
                queue.failing = true;
                queue.lost += lines + reported;
                queue.why = format!("writing them failed: {e}");
            }
        }
        let flushing = queue.flushing > 0;
        drop(queue);
        if flushing {
            shared.progress.notify_all();
        }
    }
}

/// Writes all of `bytes`, however many calls it takes; `Err`: how many went out before the
/// error.
fn write_whole(file: &mut File, bytes: &[u8]) -> Result<(), (usize, io::Error)> {
    let mut wrote = 0;
    while wrote < bytes.len() {
        match file.write(&bytes[wrote..]) {
            Ok(0) => return Err((wrote, io::ErrorKind::WriteZero.into())),
            Ok(n) => wrote += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err((wrote, e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use std::io::Read;
    use std::sync::mpsc;

    fn lines(text: &str) -> Vec<Value> {
        text.lines()
            .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
            .collect()
    }

    /// Lines from many threads at once all arrive, whole, each thread's in its order.
    #[test]
    fn lines_from_many_threads_arrive_whole_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let sink = Arc::new(JsonlSink::open(&path).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|thread| {
                let sink = sink.clone();
                std::thread::spawn(move || {
                    for n in 0..2_000 {
                        sink.record(&json!({"thread": thread, "n": n, "pad": "x".repeat(n % 300)}));
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        sink.flush(Duration::from_secs(10)).unwrap();
        let written = lines(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(written.len(), 8_000);
        for thread in 0..4 {
            let ns: Vec<u64> = written
                .iter()
                .filter(|line| line["thread"] == thread)
                .map(|line| line["n"].as_u64().unwrap())
                .collect();
            assert_eq!(ns, (0..2_000).collect::<Vec<_>>(), "thread {thread}");
        }
    }

    /// A log whose reader stops reading (a FIFO whose log shipper hangs) holds up no emit:
    /// 8 MiB of lines wait, the rest are dropped and counted, `flush` says so within its
    /// bound, and once the reader reads again, the log has the lines that waited and a record
    /// of how many were lost. (Each emit wrote to the FIFO itself, and waited with it, for
    /// ever: the dispatch that emitted with it.)
    #[test]
    fn a_log_nobody_reads_holds_up_no_emit_and_says_what_it_lost() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("audit.fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo {}", fifo.display());
        // The reader opens the FIFO, then reads nothing until told to.
        let (read_now, start_reading) = mpsc::channel::<()>();
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || {
                let mut file = File::open(&fifo).unwrap();
                start_reading.recv().unwrap();
                let mut text = String::new();
                file.read_to_string(&mut text).unwrap();
                text
            })
        };
        let sink = JsonlSink::open(&fifo).unwrap();
        let (emitted, done) = mpsc::channel();
        let emitting = std::thread::spawn(move || {
            let pad = "y".repeat(1_000);
            for n in 0..20_000 {
                sink.record(&json!({"n": n, "pad": pad}));
            }
            emitted.send(()).unwrap();
            sink
        });
        assert!(
            done.recv_timeout(Duration::from_secs(30)).is_ok(),
            "20,000 emits did not return in 30 s: they wait for a log nobody reads"
        );
        let sink = emitting.join().unwrap();
        let loss = sink.flush(Duration::from_millis(100)).unwrap_err();
        assert!(loss.unwritten > 1_000, "{loss:?}");
        assert!(loss.lost > 1_000, "{loss:?}");
        assert_eq!(loss.path, fifo);
        assert!(loss.why.contains("more than 8 MiB"), "{loss}");
        let said = loss.to_string();
        assert!(
            said.contains("not written within") && said.contains("lost"),
            "{said}"
        );
        let lost = loss.lost;
        read_now.send(()).unwrap();
        sink.flush(Duration::from_secs(30)).unwrap();
        drop(sink);
        let written = lines(&reader.join().unwrap());
        let records: Vec<&Value> = written
            .iter()
            .filter(|line| line["event"] == "audit_lines_lost")
            .collect();
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(records[0]["lines"], lost);
        assert!(records[0]["at_ms"].as_u64().unwrap() > 0);
        let kept: Vec<u64> = written.iter().filter_map(|l| l["n"].as_u64()).collect();
        assert_eq!(kept.len() as u64 + lost, 20_000);
        assert!(kept.windows(2).all(|w| w[0] < w[1]), "out of order");
    }

    /// A log that fails every write (a full disk) loses its lines, counted, with the error.
    #[test]
    fn a_log_whose_writes_fail_counts_what_it_loses_and_why() {
        let sink = JsonlSink::open("/dev/full").unwrap();
        for n in 0..10 {
            sink.record(&json!({ "n": n }));
        }
        let loss = sink.flush(Duration::from_secs(10)).unwrap_err();
        assert_eq!(loss.unwritten, 0, "{loss:?}");
        assert_eq!(loss.lost, 10, "{loss:?}");
        assert!(loss.why.contains("writing them failed"), "{loss}");
        assert!(loss.why.contains("No space left on device"), "{loss}");
    }
}
