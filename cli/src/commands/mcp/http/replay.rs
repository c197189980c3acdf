//! The event streams the proxy writes itself (the answer stream of a client's `tools/call`),
//! made resumable as MCP's transport has it: every event carries an id, and a client whose
//! connection dropped GETs the endpoint with `Last-Event-ID` to receive what came after that
//! event on that stream, the call's answer included, then what comes next.
//!
//! An id is `palisade-sse-<token>-<n>`: `token` is random per stream (so it names the stream
//! and another session cannot guess it; it is looked up only in the session that GETs), `n`
//! counts the stream's events. A client on protocol revision 2025-11-25 or later first gets a
//! priming event (an id and empty data), so it can resume even before the first message.
//!
//! Writing an event to a connection is not delivering it: the connection may be dead already.
//! So a stream's events are held until the client acknowledges them (a resume from a later
//! id), until [`LINGER`] after a reader went past the stream's last event, or [`KEEP`] after the
//! stream ended if no reader did; at most [`MAX_HELD_BYTES`] per stream (the oldest
//! notifications go first) and [`MAX_FINISHED`] ended streams per session. A resume from an id
//! no longer held is answered 400 (never 404, which would tell the client its session is gone).

use crate::jsonrpc::strict;
use axum::body::Bytes;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc, watch};

/// How long an ended stream stays resumable once a reader went past its last event.
const LINGER: Duration = Duration::from_secs(30);
/// How long an ended stream stays resumable when no reader went past its last event.
const KEEP: Duration = Duration::from_secs(600);
/// The most bytes one stream holds for a resume.
const MAX_HELD_BYTES: usize = 16 * 1024 * 1024;
/// The most ended streams a session holds for a resume.
const MAX_FINISHED: usize = 64;
/// The first protocol revision whose clients take a priming event.
const PRIMING_SINCE: &str = "2025-11-25";

/// One stream's events, held for a resume.
pub(super) struct Replay {
    token: String,
    started: Instant,
    inner: Mutex<Inner>,
    /// Bumped at every change: readers wait on it.
    changes: watch::Sender<u64>,
    /// Told when a reader went past the last event of the ended stream.
    delivered: Notify,
}

#[derive(Default)]
struct Inner {
    events: VecDeque<Held>,
    next: u64,
    held_bytes: usize,
    finished: bool,
    /// The connection that reads the stream now: an earlier one ends, so that no message goes
    /// out on two connections.
    reader: u64,
}

struct Held {
    n: u64,
    text: Bytes,
    notification: bool,
}

/// A session's resumable streams, by token.
pub(super) type Replays = Mutex<HashMap<String, Arc<Replay>>>;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Replay {
    /// A new stream of the session's `replays`, fed by `messages` until they end; primed when
    /// the client's protocol revision (`version`) takes it. Returns the body of its first
    /// connection.
    pub(super) fn start<S: HeldBy + 'static>(
        replays: &Arc<S>,
        version: &str,
        messages: mpsc::UnboundedReceiver<Value>,
    ) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + use<S> {
        let token = format!(
            "{}{}",
            super::super::random_hex(),
            super::super::random_hex()
        );
        let replay = Arc::new(Replay {
            token: token.clone(),
            started: Instant::now(),
            inner: Mutex::default(),
            changes: watch::Sender::new(0),
            delivered: Notify::new(),
        });
        if !version.is_empty() && version >= PRIMING_SINCE {
            replay.hold(None, true);
        }
        {
            let mut held = lock(replays.replays());
            if held.len() >= MAX_FINISHED {
                let mut ended: Vec<(Instant, String)> = held
                    .iter()
                    .filter(|(_, r)| lock(&r.inner).finished)
                    .map(|(token, r)| (r.started, token.clone()))
                    .collect();
                ended.sort();
                for (_, token) in ended.iter().take(held.len() + 1 - MAX_FINISHED) {
                    held.remove(token);
                }
            }
            held.insert(token.clone(), replay.clone());
        }
        let reader = replay.attach(None);
        tokio::spawn(pump(replay.clone(), messages, Arc::downgrade(replays)));
        replay.read(None, reader)
    }

    /// Holds `message` as the stream's next event.
    fn push(&self, message: &Value) {
        self.hold(Some(&strict::encode(message)), message.get("id").is_none());
    }

    /// Holds an event of `data`, the message as judged and encoded (`None`: the priming
    /// event, an id and empty data).
    fn hold(&self, data: Option<&str>, notification: bool) {
        let mut inner = lock(&self.inner);
        let n = inner.next;
        inner.next += 1;
        let id = event_id(&self.token, n);
        let text = match data {
            None => format!("id: {id}\ndata: \n\n"),
            Some(data) => format!("id: {id}\nevent: message\ndata: {data}\n\n"),
        };
        inner.held_bytes += text.len();
        inner.events.push_back(Held {
            n,
            text: Bytes::from(text),
            notification,
        });
        while inner.held_bytes > MAX_HELD_BYTES && inner.events.len() > 1 {
            // The oldest notification first (progress, a log line), else the oldest event.
            let at = inner
                .events
                .iter()
                .position(|e| e.notification)
                .unwrap_or(0);
            if let Some(dropped) = inner.events.remove(at) {
                inner.held_bytes -= dropped.text.len();
            }
        }
        drop(inner);
        self.changes.send_modify(|v| *v += 1);
    }

    /// Drops the events up to `n`, which the client has.
    fn acknowledge(&self, n: u64) {
        let mut inner = lock(&self.inner);
        while inner.events.front().is_some_and(|e| e.n <= n) {
            if let Some(dropped) = inner.events.pop_front() {
                inner.held_bytes -= dropped.text.len();
            }
        }
    }

    /// A new connection reads the stream (after the client's `Last-Event-ID`, if it sent one):
    /// the one before it ends.
    fn attach(&self, acknowledged: Option<u64>) -> u64 {
        if let Some(n) = acknowledged {
            self.acknowledge(n);
        }
        let reader = {
            let mut inner = lock(&self.inner);
            inner.reader += 1;
            inner.reader
        };
        self.changes.send_modify(|v| *v += 1);
        reader
    }

    /// The events after `after`, as they come, for connection `reader`; the body ends after
    /// the ended stream's last event, or when another connection reads the stream.
    fn read(
        self: Arc<Self>,
        after: Option<u64>,
        reader: u64,
    ) -> impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + use<> {
        let changes = self.changes.subscribe();
        futures_util::stream::unfold(
            (self, after, changes),
            move |(replay, mut after, mut changes)| async move {
                loop {
                    {
                        let inner = lock(&replay.inner);
                        if inner.reader != reader {
                            return None;
                        }
                        let next = inner
                            .events
                            .iter()
                            .find(|e| after.is_none_or(|after| e.n > after));
                        if let Some(event) = next {
                            after = Some(event.n);
                            let text = event.text.clone();
                            drop(inner);
                            return Some((Ok(text), (replay, after, changes)));
                        }
                        if inner.finished {
                            drop(inner);
                            replay.delivered.notify_one();
                            return None;
                        }
                    }
                    // A change since the check above is not lost: it is newer than what
                    // `changes` has seen.
                    if changes.changed().await.is_err() {
                        return None;
                    }
                }
            },
        )
    }
}

/// What holds a session's [`Replays`].
pub(super) trait HeldBy: Send + Sync {
    /// The session's resumable streams.
    fn replays(&self) -> &Replays;
}

/// Moves the call's messages into the stream until they end; then keeps the stream for a
/// resume ([`LINGER`], [`KEEP`]) and lets it go.
async fn pump<S: HeldBy>(
    replay: Arc<Replay>,
    mut messages: mpsc::UnboundedReceiver<Value>,
    session: Weak<S>,
) {
    while let Some(message) = messages.recv().await {
        replay.push(&message);
    }
    lock(&replay.inner).finished = true;
    replay.changes.send_modify(|v| *v += 1);
    tokio::select! {
        () = replay.delivered.notified() => tokio::time::sleep(LINGER).await,
        () = tokio::time::sleep(KEEP) => {}
    }
    if let Some(session) = session.upgrade() {
        lock(session.replays()).remove(&replay.token);
    }
}

fn event_id(token: &str, n: u64) -> String {
    format!("palisade-sse-{token}-{n}")
}

/// The stream token and event number of a `Last-Event-ID` of the proxy's, else `None` (an id
/// of the server's: its stream is the server's to resume).
pub(super) fn parse(id: &str) -> Option<(&str, u64)> {
    let rest = id.strip_prefix("palisade-sse-")?;
    let (token, n) = rest.split_once('-')?;
    if token.len() != 32 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some((token, n.parse().ok()?))
}

/// The resumed stream `token` after event `n`, in `replays`: its body, or `None` when it is no
/// longer held.
pub(super) fn resume(
    replays: &Replays,
    token: &str,
    n: u64,
) -> Option<impl futures_util::Stream<Item = Result<Bytes, std::convert::Infallible>> + use<>> {
    let replay = lock(replays).get(token)?.clone();
    let reader = replay.attach(Some(n));
    Some(replay.read(Some(n), reader))
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use serde_json::json;

    struct Session(Replays);

    impl HeldBy for Session {
        fn replays(&self) -> &Replays {
            &self.0
        }
    }

    fn ids(text: &str) -> Vec<String> {
        text.lines()
            .filter_map(|line| line.strip_prefix("id: "))
            .map(str::to_string)
            .collect()
    }

    #[tokio::test]
    async fn a_dropped_stream_resumes_after_its_last_event_and_ends_with_the_answer() {
        let session = Arc::new(Session(Mutex::default()));
        let (send, messages) = mpsc::unbounded_channel();
        let mut first = Box::pin(Replay::start(&session, "2025-11-25", messages));
        let priming = String::from_utf8(first.next().await.unwrap().unwrap().to_vec()).unwrap();
        let primed = ids(&priming).pop().unwrap();
        assert!(priming.ends_with("data: \n\n"), "{priming}");
        send.send(json!({ "jsonrpc": "2.0", "method": "notifications/progress" }))
            .unwrap();
        let progress = first.next().await.unwrap().unwrap();
        drop(first);
        send.send(json!({ "jsonrpc": "2.0", "id": 5, "result": {} }))
            .unwrap();
        drop(send);
        let (token, n) = parse(&primed).unwrap();
        assert_eq!(n, 0);
        let resumed = resume(&session.0, token, 0).expect("held");
        let text: Vec<Bytes> = resumed.map(|b| b.unwrap()).collect().await;
        let text = String::from_utf8(text.concat()).unwrap();
        assert!(
            text.starts_with(std::str::from_utf8(&progress).unwrap()),
            "{text}"
        );
        assert!(text.contains("\"id\":5"), "{text}");
        // Acknowledged events are gone; a token of another session is nobody's.
        let again: Vec<Bytes> = resume(&session.0, token, 1)
            .unwrap()
            .map(|b| b.unwrap())
            .collect()
            .await;
        assert_eq!(ids(&String::from_utf8(again.concat()).unwrap()).len(), 1);
        assert!(resume(&Mutex::default(), token, 0).is_none());
        assert!(parse("palisade-sse-xyz-1").is_none());
        assert!(parse("e1").is_none());
    }

    #[tokio::test]
    async fn a_new_connection_ends_the_one_before() {
        let session = Arc::new(Session(Mutex::default()));
        let (send, messages) = mpsc::unbounded_channel::<Value>();
        let mut first = Box::pin(Replay::start(&session, "2025-06-18", messages));
        send.send(json!({ "jsonrpc": "2.0", "method": "a" }))
            .unwrap();
        let event = String::from_utf8(first.next().await.unwrap().unwrap().to_vec()).unwrap();
        let (token, n) = parse(&ids(&event)[0])
            .map(|(t, n)| (t.to_string(), n))
            .unwrap();
        let _second = resume(&session.0, &token, n).unwrap();
        assert!(first.next().await.is_none(), "the first connection ends");
    }
}
