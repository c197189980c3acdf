//! The embedded state backend ([`StateStore::embedded`](super::StateStore::embedded)):
//! SQLite in WAL mode, in a directory of the user's own. May touch: that directory.

use super::backend::{
    Backend, Bounds, Done, Namespace, Op, Outcome, Refused, StateUnavailable, Write, effect,
};
use crate::hook::BoxFuture;
use rusqlite::OptionalExtension;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// State in a SQLite file. One connection, behind a mutex, used from blocking threads; each
/// operation is one `IMMEDIATE` transaction (so a read-modify-write is atomic across
/// processes too), and the scope's key count and size are kept in a table of their own.
#[derive(Debug)]
pub(super) struct Sqlite {
    connection: Arc<Mutex<rusqlite::Connection>>,
}

/// The statements of an operation ([`Sqlite::apply_now`]). The column `plugin` holds the
/// domain; values that an earlier version kept under a plugin's name are the values of the
/// domain of that name, which `shared = "<name>"` reads.
const SELECT_VALUE: &str = "SELECT value FROM state WHERE plugin = ?1 AND scope = ?2 AND key = ?3";
const SELECT_SCOPE: &str = "SELECT keys, bytes FROM scopes WHERE plugin = ?1 AND scope = ?2";
const PUT_VALUE: &str =
    "INSERT OR REPLACE INTO state (plugin, scope, key, value) VALUES (?1, ?2, ?3, ?4)";
const REMOVE_VALUE: &str = "DELETE FROM state WHERE plugin = ?1 AND scope = ?2 AND key = ?3";
const PUT_SCOPE: &str =
    "INSERT OR REPLACE INTO scopes (plugin, scope, keys, bytes) VALUES (?1, ?2, ?3, ?4)";
const STATEMENTS: [&str; 5] = [
    SELECT_VALUE,
    SELECT_SCOPE,
    PUT_VALUE,
    REMOVE_VALUE,
    PUT_SCOPE,
];

/// How long an operation waits for another process's transaction before it is
/// `state-unavailable` (the hook's own deadline usually comes first).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

impl Sqlite {
    pub(super) fn open(dir: &Path, path: &Path) -> Result<Sqlite, String> {
        create_private(dir, path)?;
        let connection = rusqlite::Connection::open(path).map_err(|e| e.to_string())?;
        connection
            .busy_timeout(BUSY_TIMEOUT)
            .and_then(|()| {
                connection.execute_batch(
                    "PRAGMA journal_mode = WAL;
                     PRAGMA synchronous = NORMAL;
                     CREATE TABLE IF NOT EXISTS state (
                         plugin TEXT NOT NULL, scope TEXT NOT NULL, key TEXT NOT NULL,
                         value BLOB NOT NULL, PRIMARY KEY (plugin, scope, key));
                     CREATE TABLE IF NOT EXISTS scopes (
                         plugin TEXT NOT NULL, scope TEXT NOT NULL,
                         keys INTEGER NOT NULL, bytes INTEGER NOT NULL,
                         PRIMARY KEY (plugin, scope));",
                )
            })
            .map_err(|e| e.to_string())?;
        truncate_log(&connection, path);
        // Compiled now, where the store is opened ahead of its first use (off the hooks'
        // path), rather than by that use: SQLite's parser is most of a first operation.
        for statement in STATEMENTS {
            connection
                .prepare_cached(statement)
                .map_err(|e| e.to_string())?;
        }
        Ok(Sqlite {
            connection: Arc::new(Mutex::new(connection)),
        })
    }

    fn apply_now(
        connection: &mut rusqlite::Connection,
        ns: &Namespace,
        key: &str,
        op: Op,
        bounds: Bounds,
    ) -> rusqlite::Result<Result<Done, Refused>> {
        let scope = ns.scope();
        let domain: &str = &ns.domain;
        let tx = connection.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let current: Option<Vec<u8>> = tx
            .prepare_cached(SELECT_VALUE)?
            .query_row((domain, &scope, key), |row| row.get(0))
            .optional()?;
        let (keys, bytes): (u64, u64) = tx
            .prepare_cached(SELECT_SCOPE)?
            .query_row((domain, &scope), |row| Ok((row.get(0)?, row.get(1)?)))
            .optional()?
            .unwrap_or((0, 0));
        let (write, done) = match effect(current.as_deref(), op, keys, bytes, bounds) {
            Ok(effect) => effect,
            Err(refused) => return Ok(Err(refused)),
        };
        let old = current.as_ref().map_or(0, |c| c.len() as u64);
        let after = match &write {
            Write::Keep => None,
            Write::Put(value) => {
                tx.prepare_cached(PUT_VALUE)?
                    .execute((domain, &scope, key, value))?;
                Some((
                    keys + u64::from(current.is_none()),
                    bytes - old + value.len() as u64,
                ))
            }
            Write::Remove => {
                tx.prepare_cached(REMOVE_VALUE)?
                    .execute((domain, &scope, key))?;
                Some((keys - u64::from(current.is_some()), bytes - old))
            }
        };
        if let Some((keys, bytes)) = after {
            tx.prepare_cached(PUT_SCOPE)?
                .execute((domain, &scope, keys, bytes))?;
        }
        tx.commit()?;
        Ok(Ok(done))
    }
}

/// Creates the store's folder (mode 0700) and its database file (mode 0600) unless they are
/// there, and makes the database file and its log and shared-memory files 0600 if they are
/// not (an earlier version made them 0644). The file is made before SQLite opens it, since
/// SQLite would create it 0644 whatever the umask, and gives the log and shared-memory files
/// it creates the database file's mode. A folder that is there keeps its mode: it may be the
/// operator's own (`serve --state .`).
pub(crate) fn create_private(dir: &Path, path: &Path) -> Result<(), String> {
    let mut folder = std::fs::DirBuilder::new();
    folder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut folder, 0o700);
    folder
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut file = std::fs::OpenOptions::new();
    file.read(true).write(true).create(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
    let file = file
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let wide = |meta: std::io::Result<std::fs::Metadata>| {
            meta.is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o777 != 0o600)
        };
        let private = || std::fs::Permissions::from_mode(0o600);
        let refused =
            |at: &Path, e: std::io::Error| format!("cannot make {} private: {e}", at.display());
        // Through the descriptor: the file just opened. The umask may also have narrowed
        // a new file's mode past the owner's writing.
        if wide(file.metadata()) {
            file.set_permissions(private())
                .map_err(|e| refused(path, e))?;
        }
        for suffix in ["-wal", "-shm"] {
            let mut other = path.as_os_str().to_owned();
            other.push(suffix);
            let other = PathBuf::from(other);
            if wide(std::fs::symlink_metadata(&other)) {
                std::fs::set_permissions(&other, private()).map_err(|e| refused(&other, e))?;
            }
        }
    }
    #[cfg(not(unix))]
    drop(file);
    Ok(())
}

/// The size of write-ahead log past which opening the store checkpoints it and truncates it.
///
/// A process that exits without closing the store (a bridge serves one event and exits)
/// leaves the log behind. The next process rebuilds the log's index by reading all of it, and
/// cannot know how much of it was already copied into the database, so no writer ever starts
/// the log over: it grew by every write of every process, each of which read all of it.
/// Closing the store in every process would checkpoint every time (two `fsync`s, 7 ms per
/// event here); truncating once the log passes this size bounds what a process reads.
pub(crate) const WAL_TRUNCATE_BYTES: u64 = 256 * 1024;

/// Checkpoints and truncates the log of the store at `path` when it is over
/// [`WAL_TRUNCATE_BYTES`], unless another process is using it right now (then a later open
/// does it): never waits, so that a hook never does.
pub(crate) fn truncate_log(connection: &rusqlite::Connection, path: &Path) {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    if std::fs::metadata(&wal).is_ok_and(|m| m.len() > WAL_TRUNCATE_BYTES) {
        let _ = connection
            .busy_timeout(Duration::ZERO)
            .and_then(|()| connection.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())));
        let _ = connection.busy_timeout(BUSY_TIMEOUT);
    }
}

impl Backend for Sqlite {
    fn apply(&self, ns: Namespace, key: String, op: Op, bounds: Bounds) -> BoxFuture<'_, Outcome> {
        let connection = self.connection.clone();
        Box::pin(async move {
            let run = tokio::task::spawn_blocking(move || {
                let mut connection = connection.lock().unwrap_or_else(|e| e.into_inner());
                Sqlite::apply_now(&mut connection, &ns, &key, op, bounds)
            });
            match run.await {
                Ok(Ok(outcome)) => Ok(outcome),
                Ok(Err(e)) => Err(StateUnavailable(e.to_string())),
                Err(e) => Err(StateUnavailable(format!("the store's thread failed: {e}"))),
            }
        })
    }
}
