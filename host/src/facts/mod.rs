//! The durable fact stream: every fact a host's sessions commit and every decision their
//! lifecycles make, appended in order, keyed by `interaction_id`, never dropped, and
//! replayable from an offset — the ordered, replay-aware channel that seed 2 sends durable
//! consumers to, where the committed-fact hooks are best-effort.
//!
//! A [`FactStream`] is the backend, chosen by the embedder
//! ([`crate::HostBuilder::fact_stream`]):
//!
//! - [`FactStream::embedded`]: an append-only log, `facts.jsonl` in a directory, one record per
//!   line, each batch appended under the file's lock and `fsync`ed before it is acknowledged;
//!   several processes (the process-per-event bridges) append to one log;
//! - [`FactStream::redis`]: a Redis stream (`palisade:facts`), for a fleet; its readers are
//!   consumer groups, so a consumer that restarts resumes where it left off.
//!
//! **Never duplicated.** A record whose `interaction_id` the stream already holds is not
//! appended again: a driver that re-commits a fact after a crash (an agent that re-sends its
//! event to a new process) leaves one record of it. The embedded log keeps the ids it holds in
//! an index beside it, which every writer keeps under the log's lock (so opening the log reads
//! what is new to the index, not the whole log); Redis checks an index hash in the same Lua
//! script as the `XADD`, so the check and the append are one atomic step.
//!
//! **Never dropped, and failing closed.** A commit never waits and never drops: it queues the
//! record for the stream's writer thread, which appends what is queued as one batch. What
//! waits is the session's next foreground decision (every point's waterfall checks first):
//! by default until every record queued before it is acknowledged (so
//! a tool runs only once its call is on record), or, relaxed
//! ([`FactStream::acknowledge_before_decisions`]), until fewer than the queue's bound wait.
//! When the backend fails (a full disk, a Redis that is down), or the wait passes its
//! deadline, the decision fails closed: a denial with the reason code
//! `fact-stream-unavailable` whose message names the stream and why. The queued records stay
//! queued, tried again until the backend takes them; decisions are made again once it has.
//!
//! **Acknowledged** means durable in the backend: written and `fsync`ed to the log, or
//! answered by Redis (whose own persistence settings say how durable that is).
//! [`FactStream::flush`] waits for it; a process must flush before it exits (the CLI does),
//! since a record still queued dies with it — one that was never acknowledged.

#[cfg(feature = "sqlite")]
mod file;
mod record;
#[cfg(feature = "redis")]
mod redis;

use crate::failure::FailureReason;
use crate::hook::Shared;
use crate::types::{CommittedFact, Denial, Observation};
pub use record::{Decision, Entry, FactRecord, StoredFact};
pub(crate) use record::{LOG, Line, STREAM};
use serde::Serialize;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

/// Default bound of the records that may wait for the stream when decisions do not wait for
/// every record ([`FactStream::acknowledge_before_decisions`] off).
pub const DEFAULT_FACT_QUEUE: usize = 4096;
/// Default longest a foreground decision waits for the stream before it fails closed.
pub const DEFAULT_FACT_WAIT: Duration = Duration::from_secs(5);
/// Records appended in one batch at most.
const MAX_BATCH: usize = 1024;
/// How long the writer waits, after its backend failed, before it tries again.
const RETRY: Duration = Duration::from_millis(200);

/// The stream could not do what was asked: which stream, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the fact stream {stream}: {why}")]
pub struct FactStreamError {
    /// The stream ([`FactStream::describe`]).
    pub stream: String,
    /// What went wrong, and the fix where there is one.
    pub why: String,
}

/// Where the records go.
#[derive(Debug, Clone)]
enum Spec {
    Dir(PathBuf),
    Redis(String),
}

impl Spec {
    /// Why this build cannot reach the stream: the feature it was built without.
    fn without(&self) -> String {
        let feature = match self {
            Spec::Dir(_) => "sqlite",
            Spec::Redis(_) => "redis",
        };
        format!("this build of palisade has no `{feature}` feature (rebuild with it)")
    }
}

/// An open backend.
enum Backend {
    #[cfg(feature = "sqlite")]
    File(file::Log),
    #[cfg(feature = "redis")]
    Redis(redis::Stream),
    /// A build with neither backend opens none.
    #[cfg(not(any(feature = "sqlite", feature = "redis")))]
    None(std::convert::Infallible),
}

impl Backend {
    fn open(spec: &Spec) -> Result<Backend, String> {
        match spec {
            #[cfg(feature = "sqlite")]
            Spec::Dir(dir) => Ok(Backend::File(file::Log::open(dir)?)),
            #[cfg(feature = "redis")]
            Spec::Redis(url) => Ok(Backend::Redis(redis::Stream::open(url)?)),
            #[allow(unreachable_patterns)]
            _ => Err(spec.without()),
        }
    }

    /// Appends each of `lines` whose id the stream does not hold, in order, durably; returns
    /// how many were new.
    fn append(&mut self, lines: &[Line]) -> Result<usize, String> {
        match self {
            #[cfg(feature = "sqlite")]
            Backend::File(log) => log.append(lines),
            #[cfg(feature = "redis")]
            Backend::Redis(stream) => stream.append(lines),
            #[cfg(not(any(feature = "sqlite", feature = "redis")))]
            Backend::None(never) => {
                let _ = lines;
                match *never {}
            }
        }
    }

    /// Bytes of the embedded log read since the last call ([`FactCounts::log_bytes_read`]).
    fn take_read(&mut self) -> u64 {
        match self {
            #[cfg(feature = "sqlite")]
            Backend::File(log) => std::mem::take(&mut log.read),
            #[cfg(feature = "redis")]
            Backend::Redis(_) => 0,
            #[cfg(not(any(feature = "sqlite", feature = "redis")))]
            Backend::None(never) => match *never {},
        }
    }
}

/// A record queued for the writer, serialized by it.
pub(crate) struct Pending {
    session: Arc<str>,
    at_ms: u64,
    body: Body,
}

enum Body {
    Fact(Arc<Shared<Observation>>),
    Decision {
        interaction_id: String,
        turn: u32,
        decision: Decision,
    },
}

/// A [`FactRecord`] borrowed from what was queued: serialized as the record is.
#[derive(Serialize)]
struct RecordRef<'a> {
    interaction_id: &'a str,
    session_id: &'a str,
    at_ms: u64,
    turn: u32,
    #[serde(flatten)]
    entry: EntryRef<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
enum EntryRef<'a> {
    Fact(&'a CommittedFact),
    Decision(&'a Decision),
}

impl Pending {
    fn line(&self) -> Line {
        let (interaction_id, turn, entry) = match &self.body {
            Body::Fact(observation) => (
                observation.interaction_id.as_str(),
                observation.turn,
                EntryRef::Fact(&observation.fact),
            ),
            Body::Decision {
                interaction_id,
                turn,
                decision,
            } => (interaction_id.as_str(), *turn, EntryRef::Decision(decision)),
        };
        let record = RecordRef {
            interaction_id,
            session_id: &self.session,
            at_ms: self.at_ms,
            turn,
            entry,
        };
        // Infallible: every field is a string, a number or plain data.
        let json = serde_json::to_vec(&record).unwrap_or_default();
        Line {
            id: interaction_id.to_string(),
            json,
        }
    }
}

/// Where a host's facts and decisions are appended. Cheap to clone; the writer thread starts
/// at the first record, and ends once the last handle is dropped and what was queued is
/// appended (or the backend has failed once more).
#[derive(Clone)]
pub struct FactStream {
    handle: Arc<Handle>,
}

impl std::fmt::Debug for FactStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FactStream")
            .field("at", &self.handle.shared.what)
            .finish_non_exhaustive()
    }
}

/// Held by the stream's handles, not its writer: dropping the last closes the queue.
struct Handle {
    shared: Arc<Inner>,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_one();
    }
}

struct Inner {
    spec: Spec,
    what: String,
    bound: AtomicUsize,
    wait_ms: AtomicU64,
    durable_decisions: AtomicBool,
    queue: Mutex<Queue>,
    /// The writer waits on it for records, or for the stream to close.
    work: Condvar,
    /// [`FactStream::flush`] waits on it for the writer's progress.
    progress: Condvar,
    /// Decisions waiting for room wait on it ([`FactStream::admit`]).
    room: tokio::sync::Notify,
    writer: Once,
}

#[derive(Default)]
struct Queue {
    pending: VecDeque<Pending>,
    /// Records queued since the stream was made.
    queued: u64,
    /// Of those, the records the backend acknowledged (appended, or held already).
    acknowledged: u64,
    /// Of those, the records it held already (by their interaction id).
    duplicates: u64,
    /// Bytes of the embedded log its writer read.
    log_bytes_read: u64,
    /// Why the last append failed, until one succeeds.
    failing: Option<String>,
    /// Whether the writer waits for records (and must be woken).
    idle: bool,
    /// Whether every handle is gone.
    closed: bool,
}

/// How many records a stream was given and what became of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct FactCounts {
    /// Records queued since the stream was made (in this process).
    pub queued: u64,
    /// Of those, the records the backend acknowledged.
    pub acknowledged: u64,
    /// Of the acknowledged, those whose interaction id it held already (not appended again).
    pub duplicates: u64,
    /// Bytes of the embedded log its writer read to check the records' ids (0 on Redis):
    /// what the log's index had not taken yet, not the whole log.
    pub log_bytes_read: u64,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl FactStream {
    fn new(spec: Spec, what: String) -> FactStream {
        FactStream {
            handle: Arc::new(Handle {
                shared: Arc::new(Inner {
                    spec,
                    what,
                    bound: AtomicUsize::new(DEFAULT_FACT_QUEUE),
                    wait_ms: AtomicU64::new(DEFAULT_FACT_WAIT.as_millis() as u64),
                    durable_decisions: AtomicBool::new(true),
                    queue: Mutex::default(),
                    work: Condvar::new(),
                    progress: Condvar::new(),
                    room: tokio::sync::Notify::new(),
                    writer: Once::new(),
                }),
            }),
        }
    }

    /// The embedded log: `facts.jsonl` in `dir` (created at the first use, owner-only), shared
    /// by every process that appends to it.
    pub fn embedded(dir: impl Into<PathBuf>) -> FactStream {
        let dir = dir.into();
        let what = dir.join(LOG).display().to_string();
        FactStream::new(Spec::Dir(dir), what)
    }

    /// The Redis stream `palisade:facts` at `url` (`redis://host:port/db`, `rediss://…`,
    /// `redis+unix:///path`), one stream for a fleet of hosts.
    pub fn redis(url: &str) -> FactStream {
        let what = format!("{} ({})", crate::state::redacted(url), STREAM);
        FactStream::new(Spec::Redis(url.to_string()), what)
    }

    /// Whether a foreground decision waits until every record queued before it is
    /// acknowledged (default: yes, so that no tool runs before its call is on record).
    /// Off, it waits only while [`queue_bound`](Self::queue_bound) records or more are not,
    /// and a crash may lose the records not yet acknowledged.
    pub fn acknowledge_before_decisions(self, wait: bool) -> Self {
        let inner = &self.handle.shared;
        inner.durable_decisions.store(wait, Ordering::Relaxed);
        self
    }

    /// How many unacknowledged records make a decision wait, when decisions do not wait for
    /// every record (default [`DEFAULT_FACT_QUEUE`]). Records past it are still queued,
    /// never dropped.
    pub fn queue_bound(self, bound: usize) -> Self {
        let inner = &self.handle.shared;
        inner.bound.store(bound.max(1), Ordering::Relaxed);
        self
    }

    /// The longest a decision waits for the stream before it fails closed (default
    /// [`DEFAULT_FACT_WAIT`]).
    pub fn decision_wait(self, wait: Duration) -> Self {
        let inner = &self.handle.shared;
        let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
        inner.wait_ms.store(ms, Ordering::Relaxed);
        self
    }

    /// Where the records go, for messages.
    pub fn describe(&self) -> &str {
        &self.handle.shared.what
    }

    /// How many records this stream was given and what became of them.
    pub fn counts(&self) -> FactCounts {
        let queue = self.handle.shared.lock();
        FactCounts {
            queued: queue.queued,
            acknowledged: queue.acknowledged,
            duplicates: queue.duplicates,
            log_bytes_read: queue.log_bytes_read,
        }
    }

    fn error(&self, why: impl Into<String>) -> FactStreamError {
        FactStreamError {
            stream: self.describe().to_string(),
            why: why.into(),
        }
    }

    /// Waits, `within` at most, until every record queued before the call is acknowledged.
    /// `Err` says how many are not, and why when the backend fails.
    pub fn flush(&self, within: Duration) -> Result<(), FactStreamError> {
        let inner = &self.handle.shared;
        let deadline = Instant::now() + within;
        let mut queue = inner.lock();
        let target = queue.queued;
        while queue.acknowledged < target {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            queue = match inner.progress.wait_timeout(queue, left) {
                Ok((queue, _)) => queue,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        let missing = target.saturating_sub(queue.acknowledged);
        if missing == 0 {
            return Ok(());
        }
        let why = match &queue.failing {
            Some(why) => format!(" (it fails: {why})"),
            None => String::new(),
        };
        Err(self.error(format!(
            "{missing} record(s) not acknowledged within {} ms{why}",
            within.as_millis()
        )))
    }

    /// Queues a record for the writer. Never waits, never drops.
    fn push(&self, pending: Pending) {
        let inner = &self.handle.shared;
        inner.writer.call_once(|| {
            let writer = inner.clone();
            let spawned = std::thread::Builder::new()
                .name("palisade-facts".into())
                .spawn(move || write(&writer));
            if let Err(e) = spawned {
                inner.lock().failing = Some(format!("its writer thread cannot start: {e}"));
            }
        });
        let mut queue = inner.lock();
        queue.pending.push_back(pending);
        queue.queued += 1;
        let wake = std::mem::take(&mut queue.idle);
        drop(queue);
        if wake {
            inner.work.notify_one();
        }
    }

    /// Queues `observation`, committed in session `session`.
    pub(crate) fn fact(&self, session: &Arc<str>, observation: Arc<Shared<Observation>>) {
        self.push(Pending {
            session: session.clone(),
            at_ms: crate::events::now_ms(),
            body: Body::Fact(observation),
        });
    }

    /// Queues a foreground `decision` of session `session`, in interaction `interaction_id` of
    /// turn `turn`.
    pub(crate) fn decision(
        &self,
        session: &Arc<str>,
        interaction_id: String,
        turn: u32,
        decision: Decision,
    ) {
        self.push(Pending {
            session: session.clone(),
            at_ms: crate::events::now_ms(),
            body: Body::Decision {
                interaction_id,
                turn,
                decision,
            },
        });
    }

    /// Whether a foreground decision may be made now: `Ok` once the records queued before it
    /// are acknowledged (or, decisions not waiting for each, once fewer than the bound wait);
    /// `Err`, the denial it fails closed with, when the backend fails or the wait passes
    /// [`decision_wait`](Self::decision_wait).
    pub(crate) async fn admit(&self) -> Result<(), Denial> {
        let inner = &self.handle.shared;
        let slack = if inner.durable_decisions.load(Ordering::Relaxed) {
            0
        } else {
            inner.bound.load(Ordering::Relaxed) as u64 - 1
        };
        let target = inner.lock().queued;
        // Whether the decision may be made; `Err`: why the backend fails.
        let ready = || {
            let queue = inner.lock();
            match &queue.failing {
                Some(why) => Err(format!("it fails: {why}")),
                None => Ok(queue.acknowledged + slack >= target),
            }
        };
        if ready().map_err(|why| self.refusal(why))? {
            return Ok(());
        }
        let wait = Duration::from_millis(inner.wait_ms.load(Ordering::Relaxed));
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = inner.room.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if ready().map_err(|why| self.refusal(why))? {
                return Ok(());
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let waiting = {
                    let queue = inner.lock();
                    queue.queued - queue.acknowledged
                };
                return Err(self.refusal(format!(
                    "{waiting} record(s) still wait for it after {} ms",
                    wait.as_millis()
                )));
            }
        }
    }

    /// The denial of a decision the stream cannot take the record of.
    fn refusal(&self, why: String) -> Denial {
        Denial {
            hook_id: "palisade/fact-stream".into(),
            reason_code: "fact-stream-unavailable".into(),
            message: format!(
                "the fact stream {} has not taken this session's facts ({why}), so this is \
                 refused rather than decided off the record; it is not a judgement of the \
                 request itself",
                self.describe()
            ),
            payload: None,
            failure: Some(FailureReason::FactStreamUnavailable),
        }
    }

    /// Up to `max` records from offset `from` on (`0`: the stream's start), waiting `block`
    /// at most for one when there is none yet. Each carries where the next one is
    /// ([`StoredFact::next`]): read from there to go on.
    pub fn read(
        &self,
        from: &str,
        max: usize,
        block: Duration,
    ) -> Result<Vec<StoredFact>, FactStreamError> {
        let spec = &self.handle.shared.spec;
        match spec {
            #[cfg(feature = "sqlite")]
            Spec::Dir(dir) => file::read(dir, from, max, block),
            #[cfg(feature = "redis")]
            Spec::Redis(url) => redis::Stream::open(url).and_then(|mut s| s.read(from, max, block)),
            #[allow(unreachable_patterns)]
            _ => {
                let _ = (from, max, block);
                Err(spec.without())
            }
        }
        .map_err(|e| self.error(e))
    }

    /// A reader in the consumer group `group` (created at its first read): it is given the
    /// records it was given before and did not [`acknowledge`](FactConsumer::ack) (after a
    /// restart, where it left off), then the records no consumer of the group was given.
    /// Redis shares a group's records among its consumers (`consumer` names this one); the
    /// embedded log keeps one position per group, in `groups/` beside the log.
    pub fn consumer(&self, group: &str, consumer: &str) -> Result<FactConsumer, FactStreamError> {
        let valid = !group.is_empty()
            && group
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
            && !group.starts_with('.');
        if !valid {
            return Err(self.error(format!(
                "`{group}` is not a consumer group's name: use letters, digits, `-`, `_` and \
                 `.`, not first"
            )));
        }
        let spec = &self.handle.shared.spec;
        let inner = match spec {
            #[cfg(feature = "sqlite")]
            Spec::Dir(dir) => file::Group::open(dir, group).map(Group::File),
            #[cfg(feature = "redis")]
            Spec::Redis(url) => redis::Group::open(url, group, consumer).map(Group::Redis),
            #[allow(unreachable_patterns)]
            _ => {
                let _ = consumer;
                Err(spec.without())
            }
        }
        .map_err(|e| self.error(e))?;
        Ok(FactConsumer {
            stream: self.clone(),
            inner,
        })
    }
}

/// A reader of a consumer group ([`FactStream::consumer`]).
pub struct FactConsumer {
    stream: FactStream,
    inner: Group,
}

enum Group {
    #[cfg(feature = "sqlite")]
    File(file::Group),
    #[cfg(feature = "redis")]
    Redis(redis::Group),
    /// A build with neither backend has no groups.
    #[cfg(not(any(feature = "sqlite", feature = "redis")))]
    None(std::convert::Infallible),
}

impl std::fmt::Debug for FactConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FactConsumer")
            .field("stream", &self.stream.describe())
            .finish_non_exhaustive()
    }
}

impl FactConsumer {
    /// Up to `max` records for this consumer, waiting `block` at most for one.
    pub fn next(
        &mut self,
        max: usize,
        block: Duration,
    ) -> Result<Vec<StoredFact>, FactStreamError> {
        match &mut self.inner {
            #[cfg(feature = "sqlite")]
            Group::File(group) => group.next(max, block),
            #[cfg(feature = "redis")]
            Group::Redis(group) => group.next(max, block),
            #[cfg(not(any(feature = "sqlite", feature = "redis")))]
            Group::None(never) => Err::<Vec<StoredFact>, String>(match *never {}),
        }
        .map_err(|e| self.stream.error(e))
    }

    /// Records that the group is done with `record`: it is not given again, even after a
    /// restart.
    pub fn ack(&mut self, record: &StoredFact) -> Result<(), FactStreamError> {
        match &mut self.inner {
            #[cfg(feature = "sqlite")]
            Group::File(group) => group.ack(record),
            #[cfg(feature = "redis")]
            Group::Redis(group) => group.ack(record),
            #[cfg(not(any(feature = "sqlite", feature = "redis")))]
            Group::None(never) => Err::<(), String>(match *never {}),
        }
        .map_err(|e| self.stream.error(e))
    }
}

/// The writer: appends what is queued in batches, in order, until the stream closes and
/// nothing is left; a batch the backend refuses is kept and tried again (never dropped),
/// with the failure said to every decision meanwhile.
fn write(inner: &Inner) {
    let mut backend: Option<Backend> = None;
    let mut batch: Vec<Line> = Vec::new();
    loop {
        if batch.is_empty() {
            let mut queue = inner.lock();
            while queue.pending.is_empty() {
                if queue.closed {
                    return;
                }
                queue.idle = true;
                queue = inner.work.wait(queue).unwrap_or_else(|e| e.into_inner());
            }
            queue.idle = false;
            let n = queue.pending.len().min(MAX_BATCH);
            let taken: Vec<Pending> = queue.pending.drain(..n).collect();
            drop(queue);
            batch = taken.iter().map(Pending::line).collect();
        }
        let appended = match &mut backend {
            Some(open) => open.append(&batch),
            None => Backend::open(&inner.spec).and_then(|mut open| {
                let appended = open.append(&batch);
                backend = Some(open);
                appended
            }),
        };
        let read = backend.as_mut().map_or(0, Backend::take_read);
        let mut queue = inner.lock();
        queue.log_bytes_read += read;
        let failed = match appended {
            Ok(new) => {
                let n = batch.len() as u64;
                queue.acknowledged += n;
                queue.duplicates += n - new as u64;
                queue.failing = None;
                batch.clear();
                false
            }
            Err(why) => {
                queue.failing = Some(why);
                // Opened again for the next try: a connection that broke, a file replaced.
                backend = None;
                true
            }
        };
        let closed = queue.closed;
        drop(queue);
        inner.progress.notify_all();
        inner.room.notify_waiters();
        if failed {
            if closed {
                return;
            }
            let queue = inner.lock();
            drop(inner.work.wait_timeout(queue, RETRY));
        }
    }
}

#[cfg(test)]
mod tests;
