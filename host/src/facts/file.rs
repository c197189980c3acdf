//! The embedded fact log: `facts.jsonl` in a directory of its owner's (0700, the log 0600),
//! one [`FactRecord`](super::FactRecord) per line, its offset the byte where its line starts.
//!
//! Every batch is appended under the file's exclusive lock, in one write, then `fsync`ed
//! before it is acknowledged, so the process-per-event bridges and a server can append to one
//! log and its lines never interleave. Under the lock, a writer first reads what others
//! appended since it last looked (their ids join its index) and cuts off a torn last line —
//! one a writer that died mid-write left, never acknowledged — so a record is whole or
//! absent. Consumer groups keep their position in `groups/<name>`, written anew (and
//! renamed into place) at each acknowledgement. May touch: that directory only.

use super::{FactRecord, Line, StoredFact};
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The log's file name in its directory.
pub(crate) const LOG: &str = "facts.jsonl";
/// Bytes read at once when scanning the log.
const CHUNK: usize = 1 << 20;
/// How often a reader waiting for records looks again.
const POLL: Duration = Duration::from_millis(50);
/// How every record's line begins: the id comes first, so the index reads it alone.
pub(super) const ID_PREFIX: &[u8] = b"{\"interaction_id\":";

/// The log, open for appending.
pub(crate) struct Log {
    path: PathBuf,
    file: File,
    /// The interaction ids of the log's records, up to `known`.
    ids: HashSet<String>,
    /// How much of the log has been read into `ids`: the end of its last whole line.
    known: u64,
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

impl Log {
    /// Opens (creating) the log in `dir` and reads the ids it holds.
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
        let mut log = Log {
            path,
            file,
            ids: HashSet::new(),
            known: 0,
        };
        log.locked(Log::catch_up)?;
        Ok(log)
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

    fn failed(&self, what: &str, e: std::io::Error) -> String {
        format!("cannot {what} {}: {e}", self.path.display())
    }

    /// Under the lock: reads the ids of what was appended since `known`, and cuts off a torn
    /// last line (no writer holds the lock, so no write is under way: its writer died).
    fn catch_up(&mut self) -> Result<(), String> {
        let len = self
            .file
            .metadata()
            .map_err(|e| self.failed("read", e))?
            .len();
        if len == self.known {
            return Ok(());
        }
        if len < self.known {
            // Cut short by someone else: read it all again.
            self.ids.clear();
            self.known = 0;
        }
        let ids = &mut self.ids;
        let end = lines(&self.file, self.known, |_, line| {
            if let Some(id) = id_of(line) {
                ids.insert(id);
            }
            true
        })
        .map_err(|e| self.failed("read", e))?;
        if end < len {
            self.file
                .set_len(end)
                .and_then(|()| self.file.sync_data())
                .map_err(|e| self.failed("cut the torn last line of", e))?;
        }
        self.known = end;
        Ok(())
    }

    /// Appends each of `lines` whose id the log does not hold, in one write, and `fsync`s it;
    /// returns how many were new. A write that fails is cut off again, so it leaves no torn
    /// line, and the batch can be tried again.
    pub fn append(&mut self, lines: &[Line]) -> Result<usize, String> {
        self.locked(|log| {
            log.catch_up()?;
            let mut buffer = Vec::new();
            let mut added: Vec<&str> = Vec::new();
            for line in lines {
                if log.ids.insert(line.id.clone()) {
                    buffer.extend_from_slice(&line.json);
                    buffer.push(b'\n');
                    added.push(&line.id);
                }
            }
            if buffer.is_empty() {
                return Ok(0);
            }
            match (&log.file)
                .write_all(&buffer)
                .and_then(|()| log.file.sync_data())
            {
                Ok(()) => {
                    log.known += buffer.len() as u64;
                    Ok(added.len())
                }
                Err(e) => {
                    let _ = log.file.set_len(log.known);
                    for id in added {
                        log.ids.remove(id);
                    }
                    Err(log.failed("append to", e))
                }
            }
        })
    }
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
