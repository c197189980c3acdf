//! The fact stream in Redis: the stream `palisade:facts`, each entry one record (its field
//! `record`, the record's JSON), its offset the entry's id; and the hash `palisade:facts:ids`,
//! from each interaction id to its entry.
//!
//! A batch is appended by one Lua script, which Redis runs as one atomic step: for each record,
//! `HEXISTS` on the index, and only if the id is new, `XADD` and `HSET`. Two hosts that append
//! the same fact (a re-sent event) leave one entry. Readers are consumer groups (`XREADGROUP`,
//! `XACK`): a consumer that restarts is given the entries it was given and did not acknowledge,
//! then the group's new ones. The connections are synchronous, on the stream's writer thread
//! or the reader's; every call has a timeout. May touch: those two keys.

use super::record::{FactRecord, Line, StoredFact};
use std::time::Duration;

/// The stream's key.
pub(crate) use super::record::STREAM;
/// The index's key: interaction id → entry id.
const INDEX: &str = "palisade:facts:ids";
/// The longest a connection or a call may take (a blocking read: past its block).
const TIMEOUT: Duration = Duration::from_secs(5);

/// Appends each record whose id the index does not hold (`ARGV`: id, record, id, record, …);
/// returns how many were new.
const APPEND: &str = "
local added = 0
for i = 1, #ARGV, 2 do
  if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 0 then
    local entry = redis.call('XADD', KEYS[1], '*', 'record', ARGV[i + 1])
    redis.call('HSET', KEYS[2], ARGV[i], entry)
    added = added + 1
  end
end
return added
";

/// An entry as Redis returns it: its id and its fields (`None`: deleted since it was given).
type Entry = (String, Option<Vec<Vec<u8>>>);
/// What `XREAD` and `XREADGROUP` return: per stream, its entries (`None`: nothing in time).
type Streams = Option<Vec<(String, Vec<Entry>)>>;

/// A connection to the stream.
pub(crate) struct Stream {
    con: redis::Connection,
}

/// `max` as a `COUNT`, which Redis takes up to `i64::MAX`.
fn count(max: usize) -> u64 {
    (max as u64).min(i64::MAX as u64)
}

fn failed(e: redis::RedisError) -> String {
    format!("redis: {e}")
}

/// An entry id, `ms-seq`, as its two numbers (`ms` alone: sequence 0).
fn id_numbers(id: &str) -> Option<(u64, u64)> {
    let (ms, seq) = id.trim().split_once('-').unwrap_or((id.trim(), "0"));
    Some((ms.parse().ok()?, seq.parse().ok()?))
}

/// The offset `from`, checked: an entry id (`0` for the stream's start).
fn offset(from: &str) -> Result<(u64, u64), String> {
    id_numbers(from).ok_or_else(|| {
        format!(
            "`{from}` is not an offset of a Redis fact stream: it is an entry id, `<ms>-<seq>` \
             (`0` for the first; `palisade logs --facts … --format json` shows each record's)"
        )
    })
}

/// The records of `entries` (skipping those deleted since).
fn stored(entries: Vec<Entry>) -> Result<Vec<StoredFact>, String> {
    let mut records = Vec::with_capacity(entries.len());
    for (id, fields) in entries {
        let Some(fields) = fields else { continue };
        let json = fields
            .chunks(2)
            .find(|pair| pair[0] == b"record")
            .and_then(|pair| pair.get(1))
            .ok_or_else(|| format!("the entry {id} of {STREAM} has no `record` field"))?;
        let record: FactRecord = serde_json::from_slice(json)
            .map_err(|e| format!("the entry {id} of {STREAM} is not a fact record ({e})"))?;
        let (ms, seq) = offset(&id)?;
        records.push(StoredFact {
            offset: id,
            next: format!("{ms}-{}", seq + 1),
            record,
        });
    }
    Ok(records)
}

impl Stream {
    pub fn open(url: &str) -> Result<Stream, String> {
        let client = redis::Client::open(url).map_err(failed)?;
        let con = client
            .get_connection_with_timeout(TIMEOUT)
            .map_err(failed)?;
        con.set_read_timeout(Some(TIMEOUT)).map_err(failed)?;
        con.set_write_timeout(Some(TIMEOUT)).map_err(failed)?;
        Ok(Stream { con })
    }

    pub fn append(&mut self, lines: &[Line]) -> Result<usize, String> {
        let mut eval = redis::cmd("EVAL");
        eval.arg(APPEND).arg(2).arg(STREAM).arg(INDEX);
        for line in lines {
            eval.arg(&line.id).arg(&line.json);
        }
        let added: usize = eval.query(&mut self.con).map_err(failed)?;
        Ok(added)
    }

    /// Up to `max` records from `from` on, waiting `block` at most for one.
    pub fn read(
        &mut self,
        from: &str,
        max: usize,
        block: Duration,
    ) -> Result<Vec<StoredFact>, String> {
        let (ms, seq) = offset(from)?;
        let entries: Vec<Entry> = redis::cmd("XRANGE")
            .arg(STREAM)
            .arg(format!("{ms}-{seq}"))
            .arg("+")
            .arg("COUNT")
            .arg(count(max))
            .query(&mut self.con)
            .map_err(failed)?;
        if !entries.is_empty() || block.is_zero() {
            return stored(entries);
        }
        // The id just before `from`: `XREAD` gives the entries after it.
        let before = match (ms, seq) {
            (0, 0) => "0-0".to_string(),
            (ms, 0) => format!("{}-{}", ms - 1, u64::MAX),
            (ms, seq) => format!("{ms}-{}", seq - 1),
        };
        let mut read = redis::cmd("XREAD");
        read.arg("COUNT").arg(count(max));
        self.blocking(&mut read, block)?;
        read.arg("STREAMS").arg(STREAM).arg(before);
        let streams: Streams = read.query(&mut self.con).map_err(failed)?;
        stored(streams.into_iter().flatten().flat_map(|(_, e)| e).collect())
    }

    /// Makes `cmd` block `block` at most, and the connection wait that long for its answer.
    fn blocking(&mut self, cmd: &mut redis::Cmd, block: Duration) -> Result<(), String> {
        if !block.is_zero() {
            cmd.arg("BLOCK").arg(block.as_millis().max(1) as u64);
        }
        self.con
            .set_read_timeout(Some(block + TIMEOUT))
            .map_err(failed)
    }
}

/// A consumer of a group.
pub(crate) struct Group {
    stream: Stream,
    group: String,
    consumer: String,
    /// While it goes through what it was given before (after a restart): the id after which
    /// it reads on. `None` once done: it reads the group's new entries.
    history: Option<String>,
}

impl Group {
    pub fn open(url: &str, group: &str, consumer: &str) -> Result<Group, String> {
        let mut stream = Stream::open(url)?;
        let created: redis::RedisResult<()> = redis::cmd("XGROUP")
            .arg("CREATE")
            .arg(STREAM)
            .arg(group)
            .arg("0")
            .arg("MKSTREAM")
            .query(&mut stream.con);
        match created {
            Err(e) if e.code() != Some("BUSYGROUP") => return Err(failed(e)),
            _ => {}
        }
        Ok(Group {
            stream,
            group: group.to_string(),
            consumer: consumer.to_string(),
            history: Some("0".into()),
        })
    }

    pub fn next(&mut self, max: usize, block: Duration) -> Result<Vec<StoredFact>, String> {
        if let Some(after) = self.history.clone() {
            let entries = self.read_group(&after, max, Duration::ZERO)?;
            match entries.last() {
                Some((last, _)) => {
                    self.history = Some(last.clone());
                    return stored(entries);
                }
                None => self.history = None,
            }
        }
        let entries = self.read_group(">", max, block)?;
        stored(entries)
    }

    fn read_group(&mut self, id: &str, max: usize, block: Duration) -> Result<Vec<Entry>, String> {
        let mut read = redis::cmd("XREADGROUP");
        read.arg("GROUP")
            .arg(&self.group)
            .arg(&self.consumer)
            .arg("COUNT")
            .arg(count(max));
        self.stream.blocking(&mut read, block)?;
        read.arg("STREAMS").arg(STREAM).arg(id);
        let streams: Streams = read.query(&mut self.stream.con).map_err(failed)?;
        Ok(streams.into_iter().flatten().flat_map(|(_, e)| e).collect())
    }

    pub fn ack(&mut self, record: &StoredFact) -> Result<(), String> {
        redis::cmd("XACK")
            .arg(STREAM)
            .arg(&self.group)
            .arg(&record.offset)
            .query::<i64>(&mut self.stream.con)
            .map_err(failed)?;
        Ok(())
    }
}
