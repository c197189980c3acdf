//! What the two stdio proxies (`acp`, `mcp`) share: JSON-RPC 2.0 over stdio, one message per
//! line (the framing of ACP and of MCP's stdio transport) with a writer per side, so that
//! messages to one side never interleave; and the child process on the other side. A peer's
//! messages are read strictly ([`strict`]) and relayed under ids the proxy owns ([`relay`]).

mod child;
pub mod relay;
pub mod strict;

pub use child::{reap, spawn_child};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

/// What a writer task is sent.
enum Out {
    Line(String),
    /// Answered once every line before it is written.
    Flush(oneshot::Sender<()>),
    /// Answered once every line before it is written and the sink is closed.
    Close(oneshot::Sender<()>),
}

/// How many bytes may wait for a side that reads slowly before the proxy stops reading what
/// goes to it ([`Writer::room`]): the back-pressure that bounds a proxy's memory.
pub const MAX_QUEUED_BYTES: usize = MAX_LINE_BYTES;

/// A line writer on its own task: messages to one side never interleave.
pub struct Writer {
    send: mpsc::UnboundedSender<Out>,
    queue: std::sync::Arc<Queue>,
    /// What each message becomes on the way out ([`Writer::through`]).
    shape: Option<std::sync::Arc<Shape>>,
}

/// A writer's change to each message it sends.
type Shape = dyn Fn(&Value) -> Option<Value> + Send + Sync;

/// The bytes a writer has yet to write, and who waits for them to drain.
#[derive(Default)]
struct Queue {
    bytes: std::sync::atomic::AtomicUsize,
    drained: tokio::sync::Notify,
}

impl Writer {
    /// A writer of lines to `sink`, on a task of its own.
    pub fn new(mut sink: impl tokio::io::AsyncWrite + Unpin + Send + 'static) -> Writer {
        use std::sync::atomic::Ordering;
        let (send, mut receive) = mpsc::unbounded_channel::<Out>();
        let queue = std::sync::Arc::new(Queue::default());
        let queued = queue.clone();
        tokio::spawn(async move {
            while let Some(out) = receive.recv().await {
                match out {
                    Out::Line(mut line) => {
                        line.push('\n');
                        let written = sink.write_all(line.as_bytes()).await.is_ok()
                            && sink.flush().await.is_ok();
                        queued.bytes.fetch_sub(line.len() - 1, Ordering::SeqCst);
                        queued.drained.notify_waiters();
                        if !written {
                            // Nobody reads any more: what waits for room must not wait forever.
                            queued.bytes.store(0, Ordering::SeqCst);
                            queued.drained.notify_waiters();
                            return;
                        }
                    }
                    Out::Flush(done) => {
                        let _ = done.send(());
                    }
                    Out::Close(done) => {
                        let _ = sink.shutdown().await;
                        drop(sink);
                        let _ = done.send(());
                        return;
                    }
                }
            }
        });
        Writer {
            send,
            queue,
            shape: None,
        }
    }

    /// A writer to the same sink, in the same order, that sends each message as `shape`
    /// makes it (as it is, where `shape` says `None`): two logical peers on one connection.
    pub fn through(
        &self,
        shape: impl Fn(&Value) -> Option<Value> + Send + Sync + 'static,
    ) -> Writer {
        Writer {
            send: self.send.clone(),
            queue: self.queue.clone(),
            shape: Some(std::sync::Arc::new(shape)),
        }
    }

    /// Sends a message, as [`strict::encode`] writes it.
    pub fn send(&self, message: &Value) {
        let shaped = self.shape.as_ref().and_then(|shape| shape(message));
        let line = strict::encode(shaped.as_ref().unwrap_or(message));
        let bytes = line.len();
        self.queue
            .bytes
            .fetch_add(bytes, std::sync::atomic::Ordering::SeqCst);
        if self.send.send(Out::Line(line)).is_err() {
            self.queue
                .bytes
                .fetch_sub(bytes, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Returns once no more than [`MAX_QUEUED_BYTES`] wait to be written: a read loop waits
    /// for the side it forwards to before it reads more, so that a side that reads slowly (or
    /// not at all) slows its peer down instead of growing the proxy's memory.
    pub async fn room(&self) {
        use std::sync::atomic::Ordering;
        loop {
            let drained = self.queue.drained.notified();
            if self.queue.bytes.load(Ordering::SeqCst) <= MAX_QUEUED_BYTES {
                return;
            }
            drained.await;
        }
    }

    /// Answers a line that was refused (its id unknown: the line could not be read, or
    /// could be read two ways).
    pub fn refuse(&self, refusal: &strict::Refusal) {
        self.error(&Value::Null, refusal.code, refusal.why.clone(), None);
    }

    /// A JSON-RPC result for `id`.
    pub fn result(&self, id: &Value, result: impl serde::Serialize) {
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "result": result }));
    }

    /// A JSON-RPC error for `id`.
    pub fn error(&self, id: &Value, code: i64, message: String, data: Option<Value>) {
        let mut error = json!({ "code": code, "message": message });
        if let Some(data) = data {
            error["data"] = data;
        }
        self.send(&json!({ "jsonrpc": "2.0", "id": id, "error": error }));
    }

    /// A notification.
    pub fn notify(&self, method: &str, params: impl serde::Serialize) {
        self.send(&json!({ "jsonrpc": "2.0", "method": method, "params": params }));
    }

    /// Returns once every line sent so far is written (or the sink is gone).
    pub async fn flush(&self) {
        self.after_lines(Out::Flush).await;
    }

    /// Returns once every line sent so far is written and the sink is closed (or gone): a
    /// child reading it sees the end of its input. Lines sent after are dropped.
    pub async fn close(&self) {
        self.after_lines(Out::Close).await;
    }

    /// Sends `what`, which the writer answers once the lines before it are written, and waits
    /// for that answer, 5 s at most (a sink that stopped reading).
    async fn after_lines(&self, what: fn(oneshot::Sender<()>) -> Out) {
        let (done, answered) = oneshot::channel();
        if self.send.send(what(done)).is_ok() {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), answered).await;
        }
    }
}

pub use strict::truncate;

/// The proxy's standard input, for its [`Lines`]: read through the runtime's reactor when it is
/// a pipe (as an editor or a client starts a proxy), instead of tokio's `stdin`, which hands
/// every read to a blocking thread and back.
pub fn stdin() -> Box<dyn AsyncRead + Unpin + Send> {
    use std::os::fd::AsFd;
    let pipe = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .and_then(tokio::net::unix::pipe::Receiver::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdin()),
    }
}

/// The proxy's standard output, for its [`Writer`]: a pipe written through the runtime's
/// reactor when it is one (see [`stdin`]).
pub fn stdout() -> Box<dyn tokio::io::AsyncWrite + Unpin + Send> {
    use std::os::fd::AsFd;
    let pipe = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
    match pipe {
        Ok(pipe) => Box::new(pipe),
        Err(_) => Box::new(tokio::io::stdout()),
    }
}

/// The proxy's exit status, once a side has decided it (`i32::MIN` until then).
static EXIT_STATUS: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(i32::MIN);

/// Decides the proxy's exit status, unless a side decided it before. The side that sees its
/// peer go first decides: its last words to the other side may make that side go too, and
/// that side's [`exit`] must not turn the status into its own (an editor that closes the
/// connection on the error "the agent ended" would otherwise make a crash exit 0).
pub fn decide_exit(status: i32) {
    use std::sync::atomic::Ordering;
    let _ = EXIT_STATUS.compare_exchange(i32::MIN, status, Ordering::SeqCst, Ordering::SeqCst);
}

/// Exits the process with the status decided first (see [`decide_exit`]), `status` if none
/// was. One thread exits; another that gets here meanwhile waits for the process to end.
pub fn exit(status: i32) -> ! {
    static EXITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    decide_exit(status);
    let exiting = EXITING.lock().unwrap_or_else(|e| e.into_inner());
    std::mem::forget(exiting);
    child::end_children();
    crate::audit::flush(crate::audit::EXIT_FLUSH);
    crate::telemetry::shutdown();
    std::process::exit(EXIT_STATUS.load(std::sync::atomic::Ordering::SeqCst))
}

/// Reads the child's output with `reading` until it ends, or until the child exits: a
/// descendant that inherited its output (a process the agent or server started) may hold the
/// pipe open long after, and the other side must not wait for it. What the child wrote before
/// it went is still passed on, for a moment. Returns why the reading ended.
pub async fn until_exit(
    child: &mut tokio::process::Child,
    reading: impl Future<Output = String>,
) -> String {
    tokio::pin!(reading);
    tokio::select! {
        ended = &mut reading => ended,
        _ = child.wait() => {
            match tokio::time::timeout(std::time::Duration::from_millis(500), &mut reading).await {
                Ok(ended) => ended,
                Err(_) => "it exited".to_string(),
            }
        }
    }
}

/// The plugins of `dir`, loaded on a blocking thread (a compile may take seconds), with every
/// lifecycle event appended to `audit_log`.
pub async fn load_plugins(
    dir: &std::path::Path,
    audit_log: Option<&std::path::Path>,
) -> anyhow::Result<palisade::Plugins> {
    use anyhow::Context as _;
    let mut builder = crate::facts::appending(crate::cache::quiet_host_builder());
    let mut sink: Option<std::sync::Arc<dyn palisade::events::EventSink>> = None;
    if let Some(path) = audit_log {
        let audit = crate::audit::open(path)
            .with_context(|| format!("cannot open the audit log {}", path.display()))?;
        sink = Some(audit);
    }
    if let Some(sink) = crate::telemetry::with(sink) {
        builder = builder.event_sink(sink);
    }
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || Ok(builder.build()?.load_dir(&dir)?)).await?
}

/// The longest line (one message) read from either side: a peer cannot make the proxy hold
/// more than this of what it sends.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;

/// A reader of lines of at most [`MAX_LINE_BYTES`].
pub struct Lines<R> {
    reader: BufReader<R>,
    line: Vec<u8>,
}

/// A line a peer sent.
pub enum Line {
    /// Its text, without the line ending.
    Text(String),
    /// A line no message can be read from (over the bound, not UTF-8): what to answer.
    Refused(strict::Refusal),
}

impl<R: AsyncRead + Unpin> Lines<R> {
    /// Lines of `reader`.
    pub fn new(reader: R) -> Lines<R> {
        Lines {
            reader: BufReader::new(reader),
            line: Vec::new(),
        }
    }

    /// The next line, without its line ending; `None` at the end. A line over the bound is
    /// read to its end and refused (never read in pieces, each of which could be taken for a
    /// message); so is one that is not UTF-8.
    pub async fn next(&mut self) -> std::io::Result<Option<Line>> {
        self.line.clear();
        let limit = MAX_LINE_BYTES as u64 + 1;
        let read = (&mut self.reader)
            .take(limit)
            .read_until(b'\n', &mut self.line)
            .await?;
        if read == 0 {
            return Ok(None);
        }
        if self.line.last() == Some(&b'\n') {
            self.line.pop();
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
        } else if read > MAX_LINE_BYTES {
            self.line = Vec::new();
            self.skip_line().await?;
            return Ok(Some(Line::Refused(strict::Refusal {
                code: strict::INVALID_REQUEST,
                why: format!("a line over {MAX_LINE_BYTES} bytes"),
            })));
        }
        let line = std::mem::take(&mut self.line);
        Ok(Some(match String::from_utf8(line) {
            Ok(text) => Line::Text(text),
            Err(_) => Line::Refused(strict::Refusal {
                code: strict::PARSE_ERROR,
                why: "a line that is not UTF-8".into(),
            }),
        }))
    }

    /// Reads and drops what is left of the current line, a bounded piece at a time.
    async fn skip_line(&mut self) -> std::io::Result<()> {
        let mut piece = Vec::new();
        loop {
            piece.clear();
            let read = (&mut self.reader)
                .take(64 * 1024)
                .read_until(b'\n', &mut piece)
                .await?;
            if read == 0 || piece.last() == Some(&b'\n') {
                return Ok(());
            }
        }
    }

    /// The next message `from` sends, read strictly: a line refused ([`strict::read`]) is
    /// answered to `from` on `back`, logged as `proxy`'s, and the reading goes on. Nothing is
    /// read while the side it goes to, `onward`, has no [`Writer::room`]. `Err`: why the
    /// reading ends (the input closed or failed).
    pub async fn next_judgeable(
        &mut self,
        proxy: &str,
        (from, back): (&str, &Writer),
        onward: &Writer,
    ) -> Result<strict::Message, String> {
        loop {
            onward.room().await;
            match self.next_message().await? {
                Ok(message) => return Ok(message),
                Err(refusal) => {
                    eprintln!(
                        "palisade {proxy}: refused a message from the {from}: {}",
                        refusal.why
                    );
                    back.refuse(&refusal);
                }
            }
        }
    }

    /// The next message, read strictly ([`strict::read`]), or the refusal to answer its
    /// sender with; `Err`: why the reading ends (the input closed or failed). Blank lines are
    /// passed over.
    pub async fn next_message(
        &mut self,
    ) -> Result<Result<strict::Message, strict::Refusal>, String> {
        loop {
            return match self.next().await {
                Ok(Some(Line::Text(line))) if line.trim().is_empty() => continue,
                Ok(Some(Line::Text(line))) => Ok(strict::read(&line)),
                Ok(Some(Line::Refused(refusal))) => Ok(Err(refusal)),
                Ok(None) => Err("its output closed".into()),
                Err(e) => Err(format!("its output failed: {e}")),
            };
        }
    }
}

/// A message as JSON. A string escape of a lone UTF-16 surrogate (`"\\ud800"`), which JSON.parse
/// takes and serde_json refuses, is read as U+FFFD: a message the peer reads must never be one
/// the proxy cannot, or it would pass unjudged.
pub fn parse(line: &str) -> serde_json::Result<Value> {
    parse_as(line)
}

/// [`parse`], read straight into a `T`.
pub fn parse_as<T: serde::de::DeserializeOwned>(line: &str) -> serde_json::Result<T> {
    serde_json::from_str(line).or_else(|e| match strict::without_lone_surrogates(line) {
        Some(fixed) => serde_json::from_str(&fixed),
        None => Err(e),
    })
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn a_lone_surrogate_is_read_as_the_replacement_character() {
        let parsed =
            parse(r#"{"a":"x\ud800y","b":"\udc00","c":"\ud83d\ude00","d":"\\ud800"}"#).unwrap();
        assert_eq!(parsed["a"], "x\u{fffd}y");
        assert_eq!(parsed["b"], "\u{fffd}");
        assert_eq!(parsed["c"], "\u{1f600}");
        assert_eq!(parsed["d"], "\\ud800");
        assert!(parse("{not json").is_err());
    }
}
