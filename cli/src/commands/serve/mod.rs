//! `palisade serve`: a long-running HTTP hook server. Claude Code's http hooks (`"type":
//! "http"`) POST the same JSON a command hook reads on stdin; the server answers from warm
//! plugin instances, and keeps one Palisade session per agent session, so per-session plugin
//! state (budgets, "already warned" flags) lasts across the events of a session.
//!
//! - `POST /claude-code`, `POST /codex`, `POST /gemini` — `POST /AGENT` for each agent of
//!   [`palisade::bridge::Dialect::ALL`]: one hook event each, answered exactly as `palisade
//!   AGENT` would (see [`palisade::bridge::Reply::http`]).
//! - `GET /health`: the generation of plugins, their count, the live sessions.
//!
//! Bounded: request bodies (`--payload-max-bytes`), concurrent requests
//! (`--max-concurrency`, then 503), live sessions (`--max-sessions`, the least recently used
//! idle one is evicted first; idle ones also go after `--idle-timeout`, and at `SessionEnd`).
//! Every request carries the bearer token of `--token-file` (created, owner-only, when
//! missing), on loopback too: another local user or a web page cannot talk to it.
//! `SIGHUP` (and `--watch`) reloads the plugin directory: in-flight requests finish on the old
//! set, a directory that does not load is refused and the old set stays. `SIGINT`/`SIGTERM`
//! stop accepting, finish the requests in flight, let background hooks finish, and exit.

mod handlers;
mod reload;

use crate::http_front::{AllowedHost, say, serve_connections};
use anyhow::Context;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use handlers::{health, hook_event, metrics_text, not_found};
use palisade::events::EventSink;
use palisade::{JsonlSink, Lifecycle, Plugins};
use reload::{fingerprint, reload_on_sighup, watch};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use tokio::signal::unix::Signal;
use tokio::sync::Semaphore;

/// A long-running HTTP hook server: warm plugin instances, one Palisade session per agent
/// session (per-session plugin state lasts across events). Reload with SIGHUP or --watch.
#[derive(clap::Args)]
pub struct ServeCommand {
    /// The plugin directory.
    #[arg(long)]
    plugins: PathBuf,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:8719")]
    listen: SocketAddr,
    /// The file holding the bearer token every request must send (`Authorization: Bearer
    /// ...`); created with a random token when missing, and refused if others can read it
    /// [default: $XDG_CONFIG_HOME/palisade/serve-token, else ~/.config/palisade/serve-token].
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Seconds a session may stay idle before it is evicted.
    #[arg(long, default_value_t = 1800.0)]
    idle_timeout: f64,
    /// Live sessions at most; beyond it, the least recently used idle one is evicted.
    #[arg(long, default_value_t = 1024)]
    max_sessions: usize,
    /// Requests handled at once; others wait up to 5 s, then get 503.
    #[arg(long, default_value_t = 64)]
    max_concurrency: usize,
    /// Largest request body, in bytes (a hook event); larger gets 413.
    #[arg(long, default_value_t = palisade::manifest::DEFAULT_PAYLOAD_MAX_BYTES)]
    payload_max_bytes: usize,
    /// Open connections at most; more are closed as they arrive.
    #[arg(long, default_value_t = 256)]
    max_connections: usize,
    /// Seconds a client may take to send a request's headers, and then its body (and a
    /// kept-alive connection may sit idle): a slow client cannot hold a connection.
    #[arg(long, default_value_t = 10.0)]
    read_timeout: f64,
    /// Reload when the plugin directory changes (as on SIGHUP).
    #[arg(long)]
    watch: bool,
    /// Append lifecycle events to this JSONL audit log.
    #[arg(long)]
    audit_log: Option<PathBuf>,
    /// Also record each agent event in the audit log (`agent_event` lines), so that
    /// `palisade replay` and `palisade diff` replay the sessions from it. Off by default: it
    /// writes the agents' prompts, tool inputs and tool results to the log.
    #[arg(long, requires = "audit_log")]
    record: bool,
    /// Where plugins' granted state (`[state]`) is kept: `memory` (gone when the server
    /// exits), a Redis URL (`redis://HOST:PORT/DB`, `rediss://…`, `redis+unix:///PATH`: one
    /// store for several servers), or a directory for the embedded store (SQLite, shared by
    /// every process that uses it) [default: $PALISADE_STATE_DIR, else
    /// $XDG_STATE_HOME/palisade, else ~/.local/state/palisade].
    #[arg(long, value_name = "memory|URL|DIR")]
    state: Option<String>,
}

impl ServeCommand {
    /// Serves until SIGINT or SIGTERM.
    pub async fn execute(self) -> anyhow::Result<std::process::ExitCode> {
        serve(self.into_options()?).await
    }

    fn into_options(self) -> anyhow::Result<Options> {
        let token_file = crate::token::path_or_default(self.token_file.as_deref())?;
        let (token, created) = crate::token::ensure(&token_file)?;
        if !(self.idle_timeout > 0.0 && self.idle_timeout.is_finite()) {
            anyhow::bail!("--idle-timeout must be a positive number of seconds");
        }
        let read_timeout = Duration::try_from_secs_f64(self.read_timeout)
            .ok()
            .filter(|t| !t.is_zero())
            .ok_or_else(|| {
                anyhow::anyhow!("--read-timeout must be a positive number of seconds")
            })?;
        Ok(Options {
            plugins: self.plugins,
            listen: self.listen,
            token,
            token_file,
            token_created: created,
            idle_timeout: Duration::try_from_secs_f64(self.idle_timeout)?,
            read_timeout,
            max_sessions: self.max_sessions.max(1),
            max_concurrency: self.max_concurrency.max(1),
            payload_max_bytes: self.payload_max_bytes.max(1),
            max_connections: self.max_connections.max(1),
            watch: self.watch,
            audit_log: self.audit_log,
            record: self.record,
            state: crate::cache::state_store(self.state.as_deref()),
        })
    }
}

/// The options of `palisade serve`.
#[derive(Debug, Clone)]
pub struct Options {
    pub plugins: PathBuf,
    pub listen: SocketAddr,
    /// The bearer token every request must carry.
    pub token: String,
    /// The file it was read from.
    pub token_file: PathBuf,
    /// Whether that file was created now.
    pub token_created: bool,
    pub idle_timeout: Duration,
    pub max_sessions: usize,
    pub max_concurrency: usize,
    pub payload_max_bytes: usize,
    /// Open connections at most; more are closed as they arrive.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers, and then its body; also how
    /// long a kept-alive connection may sit idle.
    pub read_timeout: Duration,
    pub watch: bool,
    pub audit_log: Option<PathBuf>,
    /// Whether agent events are recorded in the audit log too.
    pub record: bool,
    /// Where plugin state is kept: one store for the server's life, across reloads.
    pub state: palisade::state::StateStore,
}

/// One loaded plugin directory and the sessions opened on it.
struct Generation {
    number: u64,
    plugins: Plugins,
    sessions: Mutex<Sessions>,
}

/// The live sessions of a generation, by the agent's session id.
#[derive(Default)]
struct Sessions {
    map: HashMap<String, Live>,
}

struct Live {
    /// The agent session's lifecycle (its Palisade session, its turn count).
    session: Arc<Lifecycle>,
    last_used: Instant,
    /// Requests in flight on it: a busy session is never evicted.
    busy: usize,
}

struct Server {
    options: Options,
    current: RwLock<Arc<Generation>>,
    generations: AtomicU64,
    permits: Semaphore,
    /// Held by a reload, so two never interleave.
    reloading: tokio::sync::Mutex<()>,
    sink: Option<Arc<dyn EventSink>>,
    /// The counts `GET /metrics` answers (fed by `sink`).
    metrics: Arc<crate::metrics::Metrics>,
    /// The audit log: every agent event whole with `--record`, else that each event with no
    /// point happened.
    audit_log: Option<Arc<JsonlSink>>,
    /// The `Host` values requests may carry.
    hosts: Vec<AllowedHost>,
}

/// How long a request waits for a free slot before it is refused with 503.
const QUEUE_WAIT: Duration = Duration::from_secs(5);

fn load(
    plugins_dir: &Path,
    sink: Option<Arc<dyn EventSink>>,
    state: palisade::state::StateStore,
) -> anyhow::Result<Plugins> {
    let mut builder = crate::facts::appending(crate::cache::host_builder().state(state));
    if let Some(sink) = sink {
        builder = builder.event_sink(sink);
    }
    let plugins = builder.build()?.load_dir(plugins_dir)?;
    release_freed_memory();
    Ok(plugins)
}

/// Gives the heap that loading freed back to the system. glibc keeps freed memory for reuse,
/// and compiling a Python component frees about 300 MiB: without this, a server that compiled
/// at start (or at a reload) holds it for the rest of its life.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only returns free pages of the allocator's own heap; it touches no
    // memory in use.
    #[expect(unsafe_code, reason = "glibc's malloc_trim has no safe wrapper")]
    unsafe {
        libc::malloc_trim(0);
    }
}

async fn serve(options: Options) -> anyhow::Result<std::process::ExitCode> {
    let audit_log: Option<Arc<JsonlSink>> = match &options.audit_log {
        Some(path) => {
            Some(crate::audit::open(path).with_context(|| format!("opening {}", path.display()))?)
        }
        None => None,
    };
    let agent_events = audit_log.clone();
    let audit = audit_log.map(|log| log as Arc<dyn EventSink>);
    let metrics = Arc::new(crate::metrics::Metrics::default());
    let sink: Option<Arc<dyn EventSink>> = Some(Arc::new(crate::metrics::Tee(
        metrics.clone(),
        crate::telemetry::with(audit),
    )));
    let plugins_dir = options.plugins.clone();
    // What `--watch` compares against: the directory as it was before the first load, so a
    // change made while loading, or before the watcher's first poll, still reloads.
    let loaded_from = options.watch.then(|| fingerprint(&plugins_dir));
    let first_sink = sink.clone();
    let state = options.state.clone();
    let plugins =
        tokio::task::spawn_blocking(move || load(&plugins_dir, first_sink, state)).await??;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    let address = listener.local_addr()?;
    // Before saying where it listens: a signal sent right after must find its handler.
    use tokio::signal::unix::{SignalKind, signal};
    let hup = signal(SignalKind::hangup()).context("cannot listen for SIGHUP")?;
    let term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
    let int = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
    let count = plugins.iter().count();
    let server = Arc::new(Server {
        current: RwLock::new(Arc::new(Generation {
            number: 1,
            plugins,
            sessions: Mutex::new(Sessions::default()),
        })),
        generations: AtomicU64::new(1),
        permits: Semaphore::new(options.max_concurrency.max(1)),
        reloading: tokio::sync::Mutex::new(()),
        sink,
        metrics,
        audit_log: agent_events,
        hosts: AllowedHost::of(address),
        options,
    });
    say(format!(
        "bearer token: {} ({}; a request without it gets 401)",
        server.options.token_file.display(),
        if server.options.token_created {
            "created now, readable by you only"
        } else {
            "readable by you only"
        }
    ));
    let routes: Vec<String> = palisade::bridge::Dialect::ALL
        .iter()
        .map(|dialect| format!("POST /{}", dialect.name()))
        .collect();
    say(format!(
        "palisade serve: {count} plugin(s) from {}, listening on http://{address} ({}; GET /health, /metrics)",
        server.options.plugins.display(),
        routes.join(", ")
    ));

    // One route per agent, each answering its events.
    let app = palisade::bridge::Dialect::ALL
        .into_iter()
        .fold(Router::new(), |app, dialect| {
            let answer = move |state: axum::extract::State<Arc<Server>>,
                               headers: http::HeaderMap,
                               body: axum::body::Body| {
                hook_event(state, headers, body, dialect)
            };
            app.route(&format!("/{}", dialect.name()), post(answer))
        })
        .route("/health", get(health))
        .route("/metrics", get(metrics_text))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(server.options.payload_max_bytes))
        .with_state(server.clone());

    tokio::spawn(sweep(server.clone()));
    tokio::spawn(reload_on_sighup(server.clone(), hup));
    if let Some(loaded_from) = loaded_from {
        tokio::spawn(watch(server.clone(), loaded_from));
    }
    let limits = (server.options.max_connections, server.options.read_timeout);
    let token = server.options.token.clone();
    let stop = shutdown_signal(term, int);
    serve_connections("palisade serve", listener, app, limits, token, stop).await;
    // In flight: done. Background hooks of every live session: let them finish, so the audit
    // log has them.
    let closed = server.current().close_all().await;
    say(format!(
        "palisade serve: stopped; {closed} session(s) closed"
    ));
    Ok(std::process::ExitCode::SUCCESS)
}

async fn shutdown_signal(mut term: Signal, mut int: Signal) {
    let which = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    say(format!(
        "palisade serve: {which}: finishing the requests in flight, then stopping"
    ));
}

impl Server {
    fn current(&self) -> Arc<Generation> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Reloads the plugin directory; on failure the current set stays.
    async fn reload(self: &Arc<Self>, why: &str) {
        let _one_at_a_time = self.reloading.lock().await;
        let dir = self.options.plugins.clone();
        let sink = self.sink.clone();
        let state = self.options.state.clone();
        let loaded = tokio::task::spawn_blocking(move || load(&dir, sink, state)).await;
        match loaded {
            Ok(Ok(plugins)) => {
                let number = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
                let count = plugins.iter().count();
                let old = std::mem::replace(
                    &mut *self.current.write().unwrap_or_else(|e| e.into_inner()),
                    Arc::new(Generation {
                        number,
                        plugins,
                        sessions: Mutex::new(Sessions::default()),
                    }),
                );
                say(format!(
                    "reloaded ({why}): generation {number}, {count} plugin(s); generation {}'s sessions end as their requests finish",
                    old.number
                ));
                // Its sessions close when the last request holding it ends (its `Drop`).
                drop(old);
            }
            Ok(Err(err)) => say(format!(
                "reload refused ({why}): {err:#}\nstill serving generation {}",
                self.current().number
            )),
            Err(err) => say(format!("reload refused ({why}): {err}")),
        }
    }
}

impl Generation {
    /// Closes every session, letting their background hooks finish; returns how many.
    async fn close_all(&self) -> usize {
        let sessions: Vec<Arc<Lifecycle>> = self
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .map
            .drain()
            .map(|(_, live)| live.session)
            .collect();
        for session in &sessions {
            session.session().drain_background().await;
        }
        sessions.len()
    }

    /// The session of `id`, opened if new; marks it busy. When the table is full, the least
    /// recently used idle session that holds no plugin state (or has been idle past
    /// `idle_timeout`) is evicted; if there is none, no session is opened: a flood of new
    /// session ids can never evict a live session's state (a stateful guard's budget would
    /// start over).
    fn acquire(&self, id: &str, max: usize, idle_timeout: Duration) -> Option<Arc<Lifecycle>> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(live) = sessions.map.get_mut(id) {
            live.busy += 1;
            live.last_used = Instant::now();
            return Some(live.session.clone());
        }
        if sessions.map.len() >= max {
            let oldest = sessions
                .map
                .iter()
                .filter(|(_, live)| {
                    live.busy == 0
                        && (live.last_used.elapsed() >= idle_timeout
                            || !live.session.session().holds_state())
                })
                .min_by_key(|(_, live)| live.last_used)
                .map(|(id, _)| id.clone())?;
            if let Some(live) = sessions.map.remove(&oldest) {
                say(format!(
                    "evicted session {oldest} (idle {:.1} s, no plugin state kept): {max} \
                     sessions live, the limit",
                    live.last_used.elapsed().as_secs_f64()
                ));
                close(live.session);
            }
        }
        let session = Arc::new(Lifecycle::new(self.plugins.session(id)));
        sessions.map.insert(
            id.to_string(),
            Live {
                session: session.clone(),
                last_used: Instant::now(),
                busy: 1,
            },
        );
        Some(session)
    }

    /// The request on `id` is done; at `SessionEnd` the session goes.
    fn release(&self, id: &str, ended: bool) {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let Some(live) = sessions.map.get_mut(id) else {
            return;
        };
        live.busy = live.busy.saturating_sub(1);
        live.last_used = Instant::now();
        if ended
            && live.busy == 0
            && let Some(live) = sessions.map.remove(id)
        {
            say(format!("session {id} ended"));
            close(live.session);
        }
    }
}

/// A request in flight on a session: dropping it releases the session.
struct Busy {
    generation: Arc<Generation>,
    id: String,
    ended: bool,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.generation.release(&self.id, self.ended);
    }
}

/// A generation goes when nothing holds it any more: replaced by a reload, once its last
/// request has ended. Its sessions' background hooks then finish before their instances go.
impl Drop for Generation {
    fn drop(&mut self) {
        let sessions = std::mem::take(
            &mut self
                .sessions
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .map,
        );
        for (_, live) in sessions {
            close(live.session);
        }
    }
}

/// Lets a dropped session's background hooks finish before its instances go (when the runtime
/// is gone, dropping the session cuts them off, and they are recorded as dropped).
fn close(session: Arc<Lifecycle>) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move { session.session().drain_background().await });
    }
}

/// Evicts sessions idle longer than the timeout.
async fn sweep(server: Arc<Server>) {
    let timeout = server.options.idle_timeout;
    let every = (timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
    loop {
        tokio::time::sleep(every).await;
        let generation = server.current();
        let mut sessions = generation
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let idle: Vec<String> = sessions
            .map
            .iter()
            .filter(|(_, live)| live.busy == 0 && live.last_used.elapsed() >= timeout)
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            if let Some(live) = sessions.map.remove(&id) {
                say(format!(
                    "evicted session {id} (idle {:.1} s, the timeout is {:.1} s)",
                    live.last_used.elapsed().as_secs_f64(),
                    timeout.as_secs_f64()
                ));
                close(live.session);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::reload::{Fingerprint, watch_dir};
    use super::*;

    /// Whether `watch_dir` over `dir` from `known` reloads within a few polls.
    async fn reloads(dir: &Path, known: Fingerprint) -> bool {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let watching = watch_dir(dir, known, || {
            let _ = tx.send(());
            async {}
        });
        tokio::select! {
            () = watching => unreachable!("the watch loop never ends"),
            reloaded = tokio::time::timeout(Duration::from_secs(3), rx.recv()) => reloaded.is_ok(),
        }
    }

    #[tokio::test]
    async fn a_change_made_before_the_watcher_starts_reloads() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("guard")).unwrap();
        std::fs::write(dir.path().join("guard/plugin.toml"), "name = \"guard\"\n").unwrap();
        let loaded_from = fingerprint(dir.path());
        // Between the load and the watcher's first poll (the server printing where it
        // listens, a test or an operator writing at once).
        std::fs::create_dir(dir.path().join("budget")).unwrap();
        std::fs::write(dir.path().join("budget/plugin.toml"), "name = \"budget\"\n").unwrap();
        assert!(reloads(dir.path(), loaded_from).await);
    }

    #[tokio::test]
    async fn an_unchanged_directory_does_not_reload() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("plugin.toml"), "name = \"guard\"\n").unwrap();
        let loaded_from = fingerprint(dir.path());
        assert!(!reloads(dir.path(), loaded_from).await);
    }
}
