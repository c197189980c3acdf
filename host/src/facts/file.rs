//! The embedded fact log: `facts.jsonl` in a directory of its owner's (0700, the log 0600),
//! one [`FactRecord`](super::FactRecord) per line, its offset the byte where its line starts;
//! beside it, its index `facts.index.sqlite3` (SQLite, 0600): the interaction ids of the
//! log's records up to an offset, so that appending costs what the new records cost, not
//! what the log holds.
//!
//! Every batch is appended under the log's exclusive lock, in one write, then `fsync`ed
//! before it is acknowledged, so the process-per-event bridges and a server can append to one
//! log and its lines never interleave. Under the lock, in one transaction of the index, a
//! writer first indexes what the log holds past the offset the index keeps (what a writer
//! that died between its `fsync` and its commit appended) and cuts off a torn last line — one
//! a writer that died mid-write left, never acknowledged — so a record is whole or absent; it
//! appends the records whose ids the index does not hold, `fsync`s the log, then commits
//! their ids with the new offset. The log is the truth: an index that is missing, unreadable,
//! or not of this log (the log cut short or replaced) is built again from the whole log, said
//! once on standard error. Consumer groups keep their position in
//! `groups/<name>`, written anew (and renamed into place) at each acknowledgement. May touch:
//! that directory only.

use super::record::{FactRecord, Line, StoredFact};
use rusqlite::{Connection, ErrorCode, OptionalExtension, Transaction, TransactionBehavior};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The log's file name in its directory.
pub(crate) use super::record::LOG;
/// Its index's file name, beside it.
pub(crate) const INDEX: &str = "facts.index.sqlite3";
/// Bytes read at once when scanning the log.
const CHUNK: usize = 1 << 20;
/// How often a reader waiting for records looks again.
const POLL: Duration = Duration::from_millis(50);
/// How every record's line begins: the id comes first, so the index reads it alone.
pub(super) const ID_PREFIX: &[u8] = b"{\"interaction_id\":";
/// How many first bytes of the last line it read the index keeps, to tell it is the same log.
const HEAD: usize = 256;
/// How long a writer waits for the index (held only by a writer holding the log's lock).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

const INSERT_ID: &str = "INSERT OR IGNORE INTO ids (id) VALUES (?1)";
const SELECT_MARK: &str = "SELECT known, last, head FROM mark";
const PUT_MARK: &str =
    "INSERT OR REPLACE INTO mark (one, known, last, head) VALUES (1, ?1, ?2, ?3)";

/// The log, open for appending.
pub(crate) struct Log {
    dir: PathBuf,
    path: PathBuf,
    file: File,
    /// The index, opened at the first append (under the lock).
    index: Option<Connection>,
    /// Bytes read from the log, for [`super::FactCounts::log_bytes_read`].
    pub(super) read: u64,
}

/// How far the index has read the log: up to `known`, the end of the line that starts at
/// `last` and begins with `head`.
#[derive(Default)]
struct Mark {
    known: u64,
    last: u64,
    head: Vec<u8>,
}

/// Why an append failed: the log (said), or its index.
enum Failed {
    Log(String),
    Index(rusqlite::Error),
}

impl From<rusqlite::Error> for Failed {
    fn from(e: rusqlite::Error) -> Failed {
        Failed::Index(e)
    }
}

/// Creates `dir` (owner-only) if it is missing.
fn create_dir(dir: &Path) -> Result<(), String> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|e| format!("cannot create the directory {}: {e}", dir.display()))
}

/// Says `what` on standard error, the first time a process has something to say.
fn say(what: impl FnOnce() -> String) {
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        eprintln!("palisade: {}", what());
    }
}

/// The interaction id of one record's line; `None` for a line that is not a record.
fn id_of(line: &[u8]) -> Option<String> {
    if let Some(rest) = line.strip_prefix(ID_PREFIX) {
        let mut de = serde_json::Deserializer::from_slice(rest);
        return serde::Deserialize::deserialize(&mut de).ok();
    }
    #[derive(serde::Deserialize)]
    struct Id {
        interaction_id: String,
    }
    serde_json::from_slice::<Id>(line)
        .ok()
        .map(|id| id.interaction_id)
}

/// Calls `each` with every whole line of `file` from `from` on (and the offset where it
/// starts), until it returns `false`; returns the offset after the last whole line read.
fn lines(file: &File, from: u64, mut each: impl FnMut(u64, &[u8]) -> bool) -> std::io::Result<u64> {
    let mut chunk = vec![0; CHUNK];
    let mut buffer: Vec<u8> = Vec::new();
    // The offset of `buffer[0]`, and of the next byte to read.
    let (mut start, mut read) = (from, from);
    loop {
        let n = file.read_at(&mut chunk, read)?;
        if n == 0 {
            return Ok(start);
        }
        read += n as u64;
        buffer.extend_from_slice(&chunk[..n]);
        let mut used = 0;
        while let Some(end) = buffer[used..].iter().position(|&b| b == b'\n') {
            let line = &buffer[used..used + end];
            if !each(start + used as u64, line) {
                return Ok(start + used as u64);
            }
            used += end + 1;
        }
        buffer.drain(..used);
        start += used as u64;
    }
}

/// Opens (creating, 0600) the index in `dir`. Write-ahead logged, a commit waits for no
/// `fsync` (the log's own was before it), and a power loss loses whole transactions at most:
/// records the next writer indexes again from the log.
fn open_index(dir: &Path) -> Result<Connection, Failed> {
    let path = dir.join(INDEX);
    crate::state::create_private(dir, &path).map_err(Failed::Log)?;
    let connection = Connection::open(&path)?;
    connection.busy_timeout(BUSY_TIMEOUT)?;
    // A process that exits does not pay a checkpoint: `truncate_log` bounds what is left.
    connection.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    )?;
    connection.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = NORMAL;
         CREATE TABLE IF NOT EXISTS ids (id TEXT PRIMARY KEY) WITHOUT ROWID;
         CREATE TABLE IF NOT EXISTS mark (
             one INTEGER PRIMARY KEY CHECK (one = 1),
             known INTEGER NOT NULL, last INTEGER NOT NULL, head BLOB NOT NULL);",
    )?;
    crate::state::truncate_log(&connection, &path);
    Ok(connection)
}

/// Whether `e` says the index is not a database, or a damaged one.
fn unreadable(e: &Failed) -> bool {
    matches!(
        e,
        Failed::Index(e) if matches!(
            e.sqlite_error_code(),
            Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
        )
    )
}

impl Log {
    /// Opens (creating) the log in `dir`; its index is read at the first append.
    pub fn open(dir: &Path) -> Result<Log, String> {
        create_dir(dir)?;
        let path = dir.join(LOG);
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        Ok(Log {
            dir: dir.to_path_buf(),
            path,
            file,
            index: None,
            read: 0,
        })
    }

    /// Runs `f` holding the log's exclusive lock.
    fn locked<T>(&mut self, f: impl FnOnce(&mut Log) -> Result<T, String>) -> Result<T, String> {
        self.file
            .lock()
            .map_err(|e| format!("cannot lock {}: {e}", self.path.display()))?;
        let done = f(self);
        let _ = self.file.unlock();
        done
    }

    /// Appends each of `lines` whose id the log does not hold, in one write, and `fsync`s it;
    /// returns how many were new. A write that fails is cut off again, so it leaves no torn
    /// line, and the batch can be tried again. An unreadable index is built again.
    pub fn append(&mut self, lines: &[Line]) -> Result<usize, String> {
        self.locked(|log| {
            let mut done = log.append_indexed(lines);
            if let Err(e) = &done
                && unreadable(e)
            {
                log.forget_index(e)?;
                done = log.append_indexed(lines);
            }
            done.map_err(|e| match e {
                Failed::Log(why) => why,
                Failed::Index(e) => format!(
                    "cannot use the index {} of the log: {e}",
                    log.dir.join(INDEX).display()
                ),
            })
        })
    }

    /// Under the lock: [`Log::append`], in one transaction of the index.
    fn append_indexed(&mut self, lines: &[Line]) -> Result<usize, Failed> {
        let index = match &mut self.index {
            Some(index) => index,
            None => self.index.insert(open_index(&self.dir)?),
        };
        let tx = index.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let (kept, changed) = catch_up(&self.file, &self.path, &tx, &mut self.read)?;
        let mut buffer = Vec::new();
        // Where the last new line starts in `buffer`, and how many are new.
        let (mut last, mut added) = (0, 0);
        {
            let mut insert = tx.prepare_cached(INSERT_ID)?;
            for line in lines {
                if insert.execute([&line.id])? == 1 {
                    last = buffer.len();
                    added += 1;
                    buffer.extend_from_slice(&line.json);
                    buffer.push(b'\n');
                }
            }
        }
        let at = kept.known;
        if added > 0 {
            let written = (&self.file)
                .write_all(&buffer)
                .and_then(|()| self.file.sync_data());
            if let Err(e) = written {
                // The transaction is rolled back with it.
                let _ = self.file.set_len(at);
                let why = format!("cannot append to {}: {e}", self.path.display());
                return Err(Failed::Log(why));
            }
        }
        let mark = match added {
            0 if !changed => return Ok(0),
            0 => kept,
            _ => Mark {
                known: at + buffer.len() as u64,
                last: at + last as u64,
                head: buffer[last..(last + HEAD).min(buffer.len() - 1)].to_vec(),
            },
        };
        // Acknowledged once the log has it: an index that fails to keep up now is caught up
        // from the log by the next writer.
        let _ = tx
            .prepare_cached(PUT_MARK)
            .and_then(|mut put| put.execute((mark.known, mark.last, &mark.head)))
            .and_then(|_| tx.commit());
        Ok(added)
    }

    /// Closes the index and removes its files, to be built again from the log.
    fn forget_index(&mut self, e: &Failed) -> Result<(), String> {
        self.index = None;
        let path = self.dir.join(INDEX);
        if let Failed::Index(e) = e {
            say(|| {
                format!(
                    "the index {} of the fact log is unreadable ({e}): building it again from \
                     the log",
                    path.display()
                )
            });
        }
        for suffix in ["", "-wal", "-shm"] {
            let mut file = path.clone().into_os_string();
            file.push(suffix);
            match std::fs::remove_file(&file) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("cannot remove {}: {e}", path.display())),
            }
        }
        Ok(())
    }
}

/// Under the lock, in `tx`: indexes what was appended to `file` since the index's mark (all
/// of it when the index has none, or when `file` is not the log it read), and cuts off a torn
/// last line (no writer holds the lock, so no write is under way: its writer died). Returns
/// the mark, `known` the log's end, and whether it changed; counts what it reads in `read`.
fn catch_up(
    file: &File,
    path: &Path,
    tx: &Transaction,
    read: &mut u64,
) -> Result<(Mark, bool), Failed> {
    let failed = |what: &str, e: std::io::Error| {
        Failed::Log(format!("cannot {what} {}: {e}", path.display()))
    };
    let len = file.metadata().map_err(|e| failed("read", e))?.len();
    let kept = tx
        .prepare_cached(SELECT_MARK)?
        .query_row([], |row| {
            Ok(Mark {
                known: row.get(0)?,
                last: row.get(1)?,
                head: row.get(2)?,
            })
        })
        .optional()?;
    let (mut mark, mut changed) = match kept {
        Some(mark) if mark.known <= len && reads_as(file, &mark, read) => (mark, false),
        kept => {
            if kept.is_some() {
                say(|| {
                    format!(
                        "{} is not the log its index read (cut short or replaced): indexing it \
                         again from its start",
                        path.display()
                    )
                });
            } else if len > 0 {
                say(|| {
                    format!(
                        "indexing {} from its start: it has no index yet",
                        path.display()
                    )
                });
            }
            tx.execute("DELETE FROM ids", [])?;
            (Mark::default(), true)
        }
    };
    if len == mark.known {
        return Ok((mark, changed));
    }
    *read += len - mark.known;
    let mut insert = tx.prepare_cached(INSERT_ID)?;
    let mut refused = None;
    let mut last = None;
    let mut last_head = Vec::new();
    let end = lines(file, mark.known, |at, line| {
        if let Some(id) = id_of(line)
            && let Err(e) = insert.execute([id])
        {
            refused = Some(e);
            return false;
        }
        last = Some(at);
        last_head.clear();
        last_head.extend_from_slice(&line[..line.len().min(HEAD)]);
        true
    })
    .map_err(|e| failed("read", e))?;
    if let Some(e) = refused {
        return Err(e.into());
    }
    if end < len {
        file.set_len(end)
            .and_then(|()| file.sync_data())
            .map_err(|e| failed("cut the torn last line of", e))?;
    }
    if let Some(last) = last {
        mark = Mark {
            known: end,
            last,
            head: last_head,
        };
        changed = true;
    }
    Ok((mark, changed))
}

/// Whether `file` is the log `mark` was taken of: the line it last read is where it was, and
/// ends where it did.
fn reads_as(file: &File, mark: &Mark, read: &mut u64) -> bool {
    if mark.known == 0 {
        return true;
    }
    let mut head = vec![0; mark.head.len()];
    let mut end = [0];
    *read += head.len() as u64 + 1;
    file.read_exact_at(&mut head, mark.last).is_ok()
        && file.read_exact_at(&mut end, mark.known - 1).is_ok()
        && head == mark.head
        && end[0] == b'\n'
}

/// An offset of the log: a byte position.
fn offset(from: &str) -> Result<u64, String> {
    from.trim().parse().map_err(|_| {
        format!(
            "`{from}` is not an offset of the embedded log: it is the byte position where a \
             record starts (`0` for the first; `palisade logs --facts … --format json` shows \
             each record's)"
        )
    })
}

/// Up to `max` records of the log in `dir` from offset `from` on, waiting `block` at most for
/// one when there is none yet.
pub(crate) fn read(
    dir: &Path,
    from: &str,
    max: usize,
    block: Duration,
) -> Result<Vec<StoredFact>, String> {
    let path = dir.join(LOG);
    let from = offset(from)?;
    let deadline = Instant::now() + block;
    loop {
        let file = match File::open(&path) {
            Ok(file) => Some(file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("cannot open {}: {e}", path.display())),
        };
        let records = match &file {
            Some(file) => read_from(file, &path, from, max)?,
            None if block.is_zero() => {
                return Err(format!(
                    "there is no fact log {}: nothing was appended to it yet, or it is not \
                     the directory the host appends to",
                    path.display()
                ));
            }
            None => Vec::new(),
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if !records.is_empty() || left.is_zero() {
            return Ok(records);
        }
        std::thread::sleep(POLL.min(left));
    }
}

fn read_from(file: &File, path: &Path, from: u64, max: usize) -> Result<Vec<StoredFact>, String> {
    let failed = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    if from > 0 {
        let mut before = [0];
        let n = file.read_at(&mut before, from - 1).map_err(failed)?;
        if n == 0 || before[0] != b'\n' {
            return Err(format!(
                "{from} is not the offset of a record of {}: it is past the log's end or \
                 inside a record (use an offset `palisade logs --facts` showed)",
                path.display()
            ));
        }
    }
    let mut records = Vec::new();
    let mut bad = None;
    lines(file, from, |at, line| {
        if records.len() >= max {
            return false;
        }
        match serde_json::from_slice::<FactRecord>(line) {
            Ok(record) => {
                records.push(StoredFact {
                    offset: at.to_string(),
                    next: (at + line.len() as u64 + 1).to_string(),
                    record,
                });
                true
            }
            Err(e) => {
                bad = Some(format!(
                    "the line at offset {at} of {} is not a fact record ({e}); read on from \
                     the offset after it",
                    path.display()
                ));
                false
            }
        }
    })
    .map_err(failed)?;
    match bad {
        Some(bad) if records.is_empty() => Err(bad),
        // The records before it first; the next read starts at it and says so.
        _ => Ok(records),
    }
}

/// A consumer group of the log: its position, kept in `groups/<name>` beside it.
pub(crate) struct Group {
    dir: PathBuf,
    path: PathBuf,
    /// Where the next read starts (past what was given, acknowledged or not).
    cursor: u64,
    /// The position kept: past what the group acknowledged.
    acknowledged: u64,
}

impl Group {
    pub fn open(dir: &Path, name: &str) -> Result<Group, String> {
        let groups = dir.join("groups");
        let path = groups.join(name);
        let acknowledged = match std::fs::read_to_string(&path) {
            Ok(text) => offset(&text).map_err(|e| format!("{}: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        Ok(Group {
            dir: dir.to_path_buf(),
            path,
            cursor: acknowledged,
            acknowledged,
        })
    }

    pub fn next(&mut self, max: usize, block: Duration) -> Result<Vec<StoredFact>, String> {
        let records = read(&self.dir, &self.cursor.to_string(), max, block)?;
        if let Some(last) = records.last() {
            self.cursor = offset(&last.next)?;
        }
        Ok(records)
    }

    pub fn ack(&mut self, record: &StoredFact) -> Result<(), String> {
        let next = offset(&record.next)?;
        if next <= self.acknowledged {
            return Ok(());
        }
        let groups = self.path.parent().unwrap_or(&self.dir);
        create_dir(groups)?;
        let temporary = groups.join(format!(
            ".{}.{}",
            self.path.file_name().unwrap_or_default().to_string_lossy(),
            std::process::id()
        ));
        let written = File::create(&temporary)
            .and_then(|mut file| {
                file.write_all(next.to_string().as_bytes())?;
                file.sync_data()
            })
            .and_then(|()| std::fs::rename(&temporary, &self.path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(format!("cannot write {}: {e}", self.path.display()));
        }
        self.acknowledged = next;
        Ok(())
    }
}
