//! Plugin state the host keeps (the WIT `state` interface): bytes under string keys, per
//! state domain and per scope — one agent session's, or every session's — that outlive any
//! instance.
//!
//! A domain is whose values they are, decided by the operator, never by a plugin's name: a
//! plugin folder's own (`folder_domain`), or one that the manifests of several plugins name
//! to share it (`[state] shared`).
//!
//! A [`StateStore`] is the backend, chosen by the embedder ([`crate::HostBuilder::state`]):
//!
//! - [`StateStore::embedded`] (the default, in [`default_dir`]; `sqlite.rs`): SQLite, bundled,
//!   in WAL mode. SQLite rather than a pure-Rust store such as redb because the bridges run one
//!   process per agent event, and agents run hooks of parallel tool calls at once: several
//!   processes must share the file, which SQLite's locking allows and redb's single-process
//!   lock refuses;
//! - [`StateStore::redis`] (`redis.rs`): a Redis server, for a fleet of hosts;
//! - [`StateStore::memory`] (`memory.rs`): in the process, for tests and short-lived embedders.
//!
//! This module holds what they share: the store's handle, opening it (ahead, on a thread),
//! the operations and their effect on a scope; each backend applies them atomically.
//!
//! Every operation is atomic in its backend (a compare-and-swap or an increment is one
//! transaction), and checks the scope's bounds (`max_keys`, `max_bytes`: every value of the
//! scope together) in the same transaction. A backend failure is a [`StateUnavailable`] error,
//! which stops the hook with the failure `state-unavailable` (failing closed).

mod backend;
mod memory;
#[cfg(feature = "redis")]
mod redis;
#[cfg(feature = "sqlite")]
mod sqlite;

pub(crate) use backend::redacted;
use backend::{Backend, Outcome};
pub(crate) use backend::{Bounds, Done, Namespace, Op, Refused, folder_domain};
pub use backend::{MAX_KEY_BYTES, StateUnavailable};
use memory::Memory;
#[cfg(feature = "redis")]
use redis::Redis;
#[cfg(feature = "sqlite")]
use sqlite::Sqlite;
#[cfg(feature = "sqlite")]
pub(crate) use sqlite::{create_private, truncate_log};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The state domain of the lifecycle's own counters: a `#` no plugin name holds.
const LIFECYCLE_DOMAIN: &str = "#lifecycle";

/// Where plugin state is kept. Cheap to clone.
#[derive(Debug, Clone)]
pub struct StateStore {
    inner: Arc<Lazy>,
}

/// Opens a backend.
type Opener = Box<dyn Fn() -> Result<Arc<dyn Backend>, String> + Send + Sync>;
/// An open under way on a thread ([`StateStore::open_ahead`], [`StateStore::opening_on`]).
type Opening = std::thread::JoinHandle<Opened>;

/// What opening the backend came to, on the thread that opened it.
pub(crate) struct Opened(Result<Arc<dyn Backend>, String>);

impl Opened {
    /// The outcome of a thread that opened nothing (not joined as an open).
    pub(crate) fn nothing() -> Opened {
        Opened(Err("nothing opened".into()))
    }
}

/// A backend opened at its first use: a host whose plugins keep no state never touches it.
/// A failed open is not remembered: the next state call tries again (a full disk, a directory
/// not yet mounted), and meanwhile every call fails closed.
struct Lazy {
    open: Opener,
    backend: Mutex<Option<Arc<dyn Backend>>>,
    /// An open begun ahead of the first use ([`StateStore::open_ahead`]), on a thread of
    /// its own.
    ahead: Mutex<Option<Opening>>,
    what: String,
}

impl std::fmt::Debug for Lazy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateStore")
            .field("at", &self.what)
            .finish()
    }
}

impl StateStore {
    fn lazy(
        what: String,
        open: impl Fn() -> Result<Arc<dyn Backend>, String> + Send + Sync + 'static,
    ) -> StateStore {
        StateStore {
            inner: Arc::new(Lazy {
                open: Box::new(open),
                backend: Mutex::new(None),
                ahead: Mutex::new(None),
                what,
            }),
        }
    }

    /// State in this process's memory: gone when it exits.
    pub fn memory() -> StateStore {
        let backend: Arc<dyn Backend> = Arc::new(Memory::default());
        StateStore::lazy("in memory".into(), move || Ok(backend.clone()))
    }

    /// State in the SQLite file `state.sqlite3` under `dir` (created at first use), shared by
    /// every process that opens it.
    pub fn embedded(dir: impl Into<PathBuf>) -> StateStore {
        let dir = dir.into();
        let path = dir.join("state.sqlite3");
        #[cfg(feature = "sqlite")]
        return StateStore::lazy(path.display().to_string(), move || {
            Ok(Arc::new(Sqlite::open(&dir, &path)?) as Arc<dyn Backend>)
        });
        #[cfg(not(feature = "sqlite"))]
        StateStore::lazy(path.display().to_string(), || Err(without("sqlite")))
    }

    /// State in Redis at `url` (`redis://host:port/db`, `rediss://…`, `redis+unix:///path`):
    /// one store for several hosts (`palisade serve` nodes behind a load balancer). Each
    /// operation is a `WATCH`/`MULTI` transaction over the value and its scope's size, so a
    /// compare-and-swap or an increment is atomic across hosts; keys are
    /// `palisade:<domain>:g:<key>` and `palisade:<domain>:s:<length>:<session>:<key>`, so
    /// domains and sessions never meet (a domain has no `:`).
    pub fn redis(url: &str) -> StateStore {
        let url = url.to_string();
        #[cfg(feature = "redis")]
        return StateStore::lazy(redacted(&url), move || {
            let client = ::redis::Client::open(url.as_str()).map_err(|e| e.to_string())?;
            Ok(Arc::new(Redis {
                client,
                idle: Mutex::new(Vec::new()),
            }) as Arc<dyn Backend>)
        });
        #[cfg(not(feature = "redis"))]
        StateStore::lazy(redacted(&url), || Err(without("redis")))
    }

    /// Where the state is kept, for `palisade check` and errors.
    pub fn describe(&self) -> &str {
        &self.inner.what
    }

    /// Begins opening the backend now, on a thread of its own, unless it is open or being
    /// opened: for a host whose plugins are about to use it, so that its first use does not
    /// wait for it (opening the embedded store reads its write-ahead log, a millisecond or
    /// more, which a bridged event would otherwise spend on the hook's own time). Its
    /// outcome is the first use's, as if that use had opened it: a failure fails that use
    /// closed, and the next tries again.
    pub fn open_ahead(&self) {
        if self
            .inner
            .backend
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
        {
            return;
        }
        let mut ahead = self.inner.ahead.lock().unwrap_or_else(|e| e.into_inner());
        if ahead.is_some() {
            return;
        }
        *ahead = std::thread::Builder::new()
            .name("palisade-state".into())
            .spawn(self.opener())
            .ok();
    }

    /// Whether the backend is neither open nor being opened ahead.
    pub(crate) fn unopened(&self) -> bool {
        let open = self
            .inner
            .backend
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        !open
            && self
                .inner
                .ahead
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_none()
    }

    /// What opens the backend, for a thread that has the time to ([`StateStore::opening_on`]).
    pub(crate) fn opener(&self) -> impl FnOnce() -> Opened + Send + use<> {
        let inner = self.inner.clone();
        move || Opened((inner.open)())
    }

    /// Makes `thread`, which returns what [`StateStore::opener`] returned, the open begun
    /// ahead (as [`StateStore::open_ahead`] would begin it), unless one is under way.
    pub(crate) fn opening_on(&self, thread: Opening) {
        let mut ahead = self.inner.ahead.lock().unwrap_or_else(|e| e.into_inner());
        if ahead.is_none() {
            *ahead = Some(thread);
        }
    }

    /// The backend, opened now if it is not yet — on a blocking thread, since opening a file
    /// store is file I/O (or the open begun ahead, awaited). Two calls that race to open
    /// both open; the last one is kept.
    async fn backend(&self) -> Result<Arc<dyn Backend>, StateUnavailable> {
        if let Some(backend) = &*self.inner.backend.lock().unwrap_or_else(|e| e.into_inner()) {
            return Ok(backend.clone());
        }
        let inner = self.inner.clone();
        let ahead = inner.ahead.lock().unwrap_or_else(|e| e.into_inner()).take();
        let opened = tokio::task::spawn_blocking(move || match ahead {
            Some(opening) => opening
                .join()
                .map_or_else(|_| Err("the opening thread panicked".into()), |o| o.0),
            None => (inner.open)(),
        })
        .await
        .unwrap_or_else(|e| Err(format!("the opening thread failed: {e}")))
        .map_err(|why| StateUnavailable(format!("{} ({why})", self.inner.what)))?;
        *self.inner.backend.lock().unwrap_or_else(|e| e.into_inner()) = Some(opened.clone());
        Ok(opened)
    }

    /// The durable counter `key` of agent session `session`, after adding `add` (0 reads it):
    /// what a [`crate::Lifecycle`] numbers turns, steps and stops by when the agent gives them no id
    /// of its own, so that their numbers — and the interaction ids made of them — go on
    /// across processes and restarts. Kept in a domain of the host's own, which no manifest
    /// can name.
    pub(crate) async fn counter(
        &self,
        session: &str,
        key: &str,
        add: i64,
    ) -> Result<u32, StateUnavailable> {
        let ns = Namespace {
            domain: Arc::from(LIFECYCLE_DOMAIN),
            session: Some(Arc::from(session)),
        };
        // A counter per turn of the session, at most.
        let bounds = Bounds {
            max_keys: 1 << 24,
            max_bytes: 1 << 30,
        };
        match self
            .apply(ns, key.into(), Op::Increment(add), bounds)
            .await?
        {
            Ok(Done::Count(n)) => Ok(u32::try_from(n).unwrap_or(0)),
            other => Err(StateUnavailable(format!(
                "the counter `{key}` of session `{session}` is not a counter ({other:?})"
            ))),
        }
    }

    pub(crate) async fn apply(
        &self,
        ns: Namespace,
        key: String,
        op: Op,
        bounds: Bounds,
    ) -> Outcome {
        let backend = self.backend().await?;
        backend.apply(ns, key, op, bounds).await
    }
}

/// The default directory of the embedded store: `$PALISADE_STATE_DIR`, else
/// Why a store this build left out cannot open.
#[cfg(not(all(feature = "sqlite", feature = "redis")))]
fn without(feature: &str) -> String {
    format!(
        "this build of palisade has no `{feature}` feature (rebuild with it, or use another store)"
    )
}

/// `$XDG_STATE_HOME/palisade`, else `~/.local/state/palisade`.
pub fn default_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PALISADE_STATE_DIR").filter(|d| !d.is_empty()) {
        return Some(dir.into());
    }
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Some(Path::new(&dir).join("palisade"));
    }
    std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .map(|home| Path::new(&home).join(".local/state/palisade"))
}

impl Default for StateStore {
    /// The embedded store in [`default_dir`]; with no home directory to put it in, every state
    /// call fails (`state-unavailable`), so a stateful guard fails closed.
    fn default() -> StateStore {
        match default_dir() {
            Some(dir) => StateStore::embedded(dir),
            None => StateStore::lazy("no state directory".into(), || {
                Err("set PALISADE_STATE_DIR (or HOME) to keep plugin state on disk".into())
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ns(domain: &str, session: Option<&str>) -> Namespace {
        Namespace {
            domain: domain.into(),
            session: session.map(Into::into),
        }
    }

    const BOUNDS: Bounds = Bounds {
        max_keys: 2,
        max_bytes: 16,
    };

    async fn every_rule(store: StateStore) {
        let a = ns("a", Some("s1"));
        let run = |ns: &Namespace, key: &str, op: Op| {
            store.apply(ns.clone(), key.to_string(), op, BOUNDS)
        };
        assert_eq!(run(&a, "k", Op::Get).await.unwrap(), Ok(Done::Value(None)));
        assert_eq!(
            run(&a, "n", Op::Increment(2)).await.unwrap(),
            Ok(Done::Count(2))
        );
        assert_eq!(
            run(&a, "n", Op::Increment(-5)).await.unwrap(),
            Ok(Done::Count(-3))
        );
        // Another domain, another session, the global scope: none sees a's value.
        for other in [ns("b", Some("s1")), ns("a", Some("s2")), ns("a", None)] {
            assert_eq!(
                run(&other, "n", Op::Get).await.unwrap(),
                Ok(Done::Value(None))
            );
        }
        assert_eq!(
            run(&a, "k", Op::Set(b"hello".to_vec())).await.unwrap(),
            Ok(Done::Flag(true))
        );
        assert_eq!(
            run(&a, "k", Op::Increment(1)).await.unwrap(),
            Err(Refused::NotACounter)
        );
        // A third key is one too many; a value past the scope's bytes too large.
        assert_eq!(
            run(&a, "x", Op::Set(vec![1])).await.unwrap(),
            Err(Refused::TooManyKeys)
        );
        assert_eq!(
            run(&a, "k", Op::Set(vec![0; 9])).await.unwrap(),
            Err(Refused::TooLarge)
        );
        // Compare-and-swap: only from the expected value.
        let cas = |expected: Option<&[u8]>, new: Option<&[u8]>| Op::CompareAndSwap {
            expected: expected.map(<[u8]>::to_vec),
            new: new.map(<[u8]>::to_vec),
        };
        assert_eq!(
            run(&a, "k", cas(Some(b"nope"), Some(b"x"))).await.unwrap(),
            Ok(Done::Flag(false))
        );
        assert_eq!(
            run(&a, "k", cas(Some(b"hello"), None)).await.unwrap(),
            Ok(Done::Flag(true))
        );
        assert_eq!(
            run(&a, "k", Op::Delete).await.unwrap(),
            Ok(Done::Flag(false))
        );
        // The freed key makes room again.
        assert_eq!(
            run(&a, "x", Op::Set(vec![1])).await.unwrap(),
            Ok(Done::Flag(true))
        );
    }

    #[tokio::test]
    async fn the_memory_store_keeps_every_rule() {
        every_rule(StateStore::memory()).await;
    }

    #[tokio::test]
    async fn the_embedded_store_keeps_every_rule_and_outlives_its_opener() {
        let dir = tempfile::tempdir().unwrap();
        every_rule(StateStore::embedded(dir.path())).await;
        // A second store over the same file (another process, a restart) sees the values.
        let again = StateStore::embedded(dir.path());
        let count = again
            .apply(ns("a", Some("s1")), "n".into(), Op::Increment(0), BOUNDS)
            .await
            .unwrap();
        assert_eq!(count, Ok(Done::Count(-3)));
    }

    /// The embedded store is its owner's alone: the folder it creates is 0700, and its
    /// database, log and shared-memory files are 0600, whatever the umask; files an earlier
    /// version left 0644 are made 0600 when it opens them.
    #[cfg(unix)]
    #[tokio::test]
    async fn the_embedded_store_is_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        let files = |dir: &Path| {
            ["state.sqlite3", "state.sqlite3-wal", "state.sqlite3-shm"].map(|f| dir.join(f))
        };
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("palisade");
        let store = StateStore::embedded(&dir);
        let run = |store: &StateStore| {
            let store = store.clone();
            async move {
                store
                    .apply(ns("a", Some("s")), "n".into(), Op::Increment(1), BOUNDS)
                    .await
                    .unwrap()
            }
        };
        assert_eq!(run(&store).await, Ok(Done::Count(1)));
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
        for file in files(&dir) {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }

        // A store an earlier version made, still open in another process: its files 0644,
        // in a folder that keeps its mode.
        let old = root.path().join("old");
        std::fs::create_dir(&old).unwrap();
        std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).unwrap();
        let earlier = rusqlite::Connection::open(old.join("state.sqlite3")).unwrap();
        earlier
            .execute_batch(
                "PRAGMA journal_mode = WAL; CREATE TABLE t (x); INSERT INTO t VALUES (1);",
            )
            .unwrap();
        for file in files(&old) {
            assert_eq!(mode(&file), 0o644, "{}", file.display());
        }
        assert_eq!(run(&StateStore::embedded(&old)).await, Ok(Done::Count(1)));
        for file in files(&old) {
            assert_eq!(mode(&file), 0o600, "{}", file.display());
        }
        assert_eq!(mode(&old), 0o755);
    }

    #[tokio::test]
    async fn an_embedded_store_that_cannot_open_is_unavailable() {
        let file = tempfile::NamedTempFile::new().unwrap();
        // A directory path under a regular file cannot be created.
        let store = StateStore::embedded(file.path().join("sub"));
        let err = store
            .apply(ns("a", None), "k".into(), Op::Get, BOUNDS)
            .await
            .unwrap_err();
        assert!(err.0.contains("cannot create"), "{err}");
    }

    #[tokio::test]
    async fn a_store_that_failed_to_open_is_tried_again_at_the_next_call() {
        let blocker = tempfile::NamedTempFile::new().unwrap();
        let dir = blocker.path().join("state");
        let store = StateStore::embedded(&dir);
        let get = || store.apply(ns("a", None), "k".into(), Op::Get, BOUNDS);
        assert!(get().await.is_err());
        // The cause goes away (a regular file where the folder must be, removed).
        let path = blocker.path().to_path_buf();
        drop(blocker);
        assert!(!path.exists());
        assert_eq!(get().await.unwrap(), Ok(Done::Value(None)));
        assert!(dir.join("state.sqlite3").exists());
    }

    /// Begins opening `store` ahead of its first use: on a thread of its own, or (`loader`)
    /// on a thread that goes on to open it after other work, as a plugin loader does.
    fn open_before_use(store: &StateStore, loader: bool) {
        if loader {
            // As the loader does: only when nothing opened it or began to.
            if !store.unopened() {
                return;
            }
            let open = store.opener();
            store.opening_on(std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                open()
            }));
        } else {
            store.open_ahead();
        }
    }

    /// An open begun ahead (on a thread of its own, or a loader's) is the one the first use
    /// gets: the store is opened once, and before that use (its file is there while nothing
    /// has used it yet).
    #[tokio::test]
    async fn a_store_opened_ahead_is_opened_once_and_before_its_first_use() {
        for loader in [false, true] {
            let opens = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("state.sqlite3");
            let store = {
                let (opens, dir) = (opens.clone(), dir.path().to_path_buf());
                StateStore::lazy("counted".into(), move || {
                    opens.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    Ok(Arc::new(Sqlite::open(&dir, &dir.join("state.sqlite3"))?)
                        as Arc<dyn Backend>)
                })
            };
            open_before_use(&store, loader);
            open_before_use(&store, loader);
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while !path.exists() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the store never opened"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            let run = |op: Op| store.apply(ns("a", Some("s")), "n".into(), op, BOUNDS);
            assert_eq!(run(Op::Increment(1)).await.unwrap(), Ok(Done::Count(1)));
            open_before_use(&store, loader);
            assert_eq!(run(Op::Increment(1)).await.unwrap(), Ok(Done::Count(2)));
            assert_eq!(
                opens.load(std::sync::atomic::Ordering::SeqCst),
                1,
                "loader: {loader}"
            );
        }
    }

    /// An open begun ahead that fails is the first use's failure, and the next use tries
    /// again: as if that use had opened it.
    #[tokio::test]
    async fn a_store_that_failed_to_open_ahead_fails_its_first_use_and_is_tried_again() {
        for loader in [false, true] {
            let blocker = tempfile::NamedTempFile::new().unwrap();
            let dir = blocker.path().join("state");
            let store = StateStore::embedded(&dir);
            open_before_use(&store, loader);
            let get = || store.apply(ns("a", None), "k".into(), Op::Get, BOUNDS);
            let failed = get().await.unwrap_err();
            assert!(failed.0.contains("cannot create"), "{}", failed.0);
            let path = blocker.path().to_path_buf();
            drop(blocker);
            assert!(!path.exists());
            assert_eq!(get().await.unwrap(), Ok(Done::Value(None)));
        }
    }
}
