use super::*;
use crate::lifecycle::{ToolDecision, ToolStep, step_decision};
use crate::point::Point;
use crate::types::{Steering, ToolCall};

fn observation(id: &str) -> Arc<Shared<Observation>> {
    Shared::new(Observation {
        interaction_id: id.into(),
        turn: 1,
        fact: CommittedFact::ToolCall {
            call: ToolCall::new(id, "Bash", serde_json::json!({ "command": "ls" })),
        },
    })
}

fn pending(id: &str) -> Pending {
    Pending {
        session: Arc::from("s"),
        at_ms: 7,
        body: Body::Fact(observation(id)),
    }
}

fn lines(ids: &[&str]) -> Vec<Line> {
    ids.iter().map(|id| pending(id).line()).collect()
}

fn ids(records: &[StoredFact]) -> Vec<&str> {
    records
        .iter()
        .map(|r| r.record.interaction_id.as_str())
        .collect()
}

const ALL: usize = usize::MAX;

/// A record is written as `FactRecord` reads it, its id first (the index reads it alone).
#[test]
fn a_record_reads_back_as_written_its_id_first() {
    let fact = pending("s:tool-call:t1").line();
    assert!(fact.json.starts_with(file::ID_PREFIX));
    let record: FactRecord = serde_json::from_slice(&fact.json).unwrap();
    assert_eq!(record.interaction_id, "s:tool-call:t1");
    assert_eq!(record.session_id, "s");
    assert_eq!((record.at_ms, record.turn), (7, 1));
    assert!(matches!(
        record.entry,
        Entry::Fact(CommittedFact::ToolCall { .. })
    ));

    let decision = Pending {
        session: Arc::from("s"),
        at_ms: 8,
        body: Body::Decision {
            interaction_id: "s:tool-decision:t1".into(),
            turn: 1,
            decision: Decision::new(Point::ToolGuard, "allow"),
        },
    }
    .line();
    let record: FactRecord = serde_json::from_slice(&decision.json).unwrap();
    assert_eq!(
        record.entry,
        Entry::Decision(Decision::new(Point::ToolGuard, "allow"))
    );
    let text = String::from_utf8(decision.json).unwrap();
    assert!(
        text.contains(r#""decision":{"point":"tool-guard","outcome":"allow"}"#),
        "{text}"
    );
}

/// The embedded log appends in order, one record per interaction id — in a batch, across
/// batches, and after it is opened again (its index rebuilt from the file) — and reads back
/// from any record's offset.
#[test]
fn the_embedded_log_keeps_one_record_per_id_across_batches_and_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = file::Log::open(dir.path()).unwrap();
    assert_eq!(log.append(&lines(&["a", "b", "a"])).unwrap(), 2);
    assert_eq!(log.append(&lines(&["b", "c"])).unwrap(), 1);
    drop(log);
    let mut again = file::Log::open(dir.path()).unwrap();
    assert_eq!(again.append(&lines(&["c", "a", "d"])).unwrap(), 1);

    let all = file::read(dir.path(), "0", ALL, Duration::ZERO).unwrap();
    assert_eq!(ids(&all), ["a", "b", "c", "d"]);
    let from_c = file::read(dir.path(), &all[2].offset, ALL, Duration::ZERO).unwrap();
    assert_eq!(ids(&from_c), ["c", "d"]);
    let after_b = file::read(dir.path(), &all[1].next, 1, Duration::ZERO).unwrap();
    assert_eq!(ids(&after_b), ["c"]);
    let end = file::read(dir.path(), &all[3].next, ALL, Duration::ZERO).unwrap();
    assert!(end.is_empty());

    // An offset inside a record is refused, with the fix.
    let inside = (all[1].offset.parse::<u64>().unwrap() + 3).to_string();
    let err = file::read(dir.path(), &inside, ALL, Duration::ZERO).unwrap_err();
    assert!(err.contains("is not the offset of a record"), "{err}");
    let err = file::read(dir.path(), "x", ALL, Duration::ZERO).unwrap_err();
    assert!(err.contains("byte position"), "{err}");
}

/// Two writers on one log (two processes: a bridge's events) see each other's records under
/// the lock: neither appends an id the other did.
#[test]
fn two_writers_on_one_log_never_append_the_same_id() {
    let dir = tempfile::tempdir().unwrap();
    let mut one = file::Log::open(dir.path()).unwrap();
    let mut two = file::Log::open(dir.path()).unwrap();
    assert_eq!(one.append(&lines(&["a", "b"])).unwrap(), 2);
    assert_eq!(two.append(&lines(&["b", "c"])).unwrap(), 1);
    assert_eq!(one.append(&lines(&["c", "d"])).unwrap(), 1);
    let all = file::read(dir.path(), "0", ALL, Duration::ZERO).unwrap();
    assert_eq!(ids(&all), ["a", "b", "c", "d"]);
}

/// A torn last line (a writer killed inside its write, never acknowledged) is cut off before
/// the next append: the log stays whole records, and a reader never sees the torn one.
#[test]
fn a_torn_last_line_is_cut_off_before_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = file::Log::open(dir.path()).unwrap();
    log.append(&lines(&["a"])).unwrap();
    let path = dir.path().join(LOG);
    let torn = pending("b").line().json;
    let mut text = std::fs::read(&path).unwrap();
    text.extend_from_slice(&torn[..torn.len() / 2]);
    std::fs::write(&path, &text).unwrap();
    // A reader reads the whole records only.
    let read = file::read(dir.path(), "0", ALL, Duration::ZERO).unwrap();
    assert_eq!(ids(&read), ["a"]);
    // The id of the torn record was never appended: it is appended now, whole.
    let mut again = file::Log::open(dir.path()).unwrap();
    assert_eq!(again.append(&lines(&["b", "c"])).unwrap(), 2);
    let all = file::read(dir.path(), "0", ALL, Duration::ZERO).unwrap();
    assert_eq!(ids(&all), ["a", "b", "c"]);
    assert!(std::fs::read(&path).unwrap().ends_with(b"\n"));
}

/// The log, its index and their folder are their owner's alone: facts hold prompts and tool
/// results.
#[test]
fn the_embedded_log_is_readable_by_its_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("facts");
    file::Log::open(&dir)
        .unwrap()
        .append(&lines(&["a"]))
        .unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let index = file::INDEX;
    let mut expected = [
        LOG.to_string(),
        index.into(),
        format!("{index}-shm"),
        format!("{index}-wal"),
    ];
    expected.sort();
    assert_eq!(files, expected);
    for name in files {
        assert_eq!(mode(&dir.join(&name)), 0o600, "{name}");
    }
}

/// A consumer group of the embedded log is given what it did not acknowledge again when it
/// opens anew (a restart), then the records after.
#[test]
fn a_group_of_the_embedded_log_resumes_after_what_it_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = file::Log::open(dir.path()).unwrap();
    log.append(&lines(&["a", "b", "c"])).unwrap();
    let stream = FactStream::embedded(dir.path());
    let mut consumer = stream.consumer("audit", "one").unwrap();
    let first = consumer.next(2, Duration::ZERO).unwrap();
    assert_eq!(ids(&first), ["a", "b"]);
    consumer.ack(&first[0]).unwrap();
    // Not given again in this run, acknowledged or not.
    assert_eq!(ids(&consumer.next(ALL, Duration::ZERO).unwrap()), ["c"]);
    drop(consumer);
    let mut restarted = stream.consumer("audit", "one").unwrap();
    assert_eq!(
        ids(&restarted.next(ALL, Duration::ZERO).unwrap()),
        ["b", "c"]
    );
    // Another group has a position of its own.
    let mut other = stream.consumer("billing", "one").unwrap();
    assert_eq!(ids(&other.next(1, Duration::ZERO).unwrap()), ["a"]);
    let err = stream.consumer("../up", "one").unwrap_err();
    assert!(err.why.contains("not a consumer group's name"), "{err}");
}

/// A decision waits until the records queued before it are acknowledged (so no decision is
/// made off the record), and the stream then holds them.
#[tokio::test]
async fn a_decision_waits_until_the_records_before_it_are_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let stream = FactStream::embedded(dir.path());
    for id in ["a", "b", "c"] {
        stream.fact(&Arc::from("s"), observation(id));
    }
    stream.admit().await.unwrap();
    let counts = stream.counts();
    assert_eq!((counts.queued, counts.acknowledged), (3, 3));
    let all = stream.read("0", ALL, Duration::ZERO).unwrap();
    assert_eq!(ids(&all), ["a", "b", "c"]);
}

/// A stream whose backend fails keeps its records and refuses the next decisions, naming the
/// stream and why; once the backend takes them, decisions are made again and nothing was
/// lost.
#[tokio::test]
async fn a_failing_stream_refuses_decisions_keeps_its_records_and_recovers() {
    let root = tempfile::tempdir().unwrap();
    // A regular file where the log's folder must be: nothing can be appended.
    let dir = root.path().join("facts");
    std::fs::write(&dir, b"in the way").unwrap();
    let stream = FactStream::embedded(&dir);
    stream.fact(&Arc::from("s"), observation("a"));
    let denial = stream.admit().await.unwrap_err();
    assert_eq!(denial.reason_code, "fact-stream-unavailable");
    assert_eq!(denial.failure, Some(FailureReason::FactStreamUnavailable));
    assert_eq!(denial.hook_id, "palisade/fact-stream");
    assert!(denial.message.contains(stream.describe()), "{denial:?}");
    assert!(
        denial.message.contains("cannot create the directory"),
        "{denial:?}"
    );
    let err = stream.flush(Duration::from_millis(10)).unwrap_err();
    assert!(err.why.contains("1 record(s) not acknowledged"), "{err}");

    std::fs::remove_file(&dir).unwrap();
    stream.flush(Duration::from_secs(30)).unwrap();
    stream.admit().await.unwrap();
    let all = stream.read("0", ALL, Duration::ZERO).unwrap();
    assert_eq!(ids(&all), ["a"]);
}

/// A stream that takes nothing in time (its log locked by a stuck process) refuses a decision
/// once the decision's wait is over; relaxed, a decision waits only past the queue's bound.
#[tokio::test]
async fn a_stream_that_takes_nothing_in_time_refuses_past_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    drop(file::Log::open(dir.path()).unwrap());
    let holder = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join(LOG))
        .unwrap();
    holder.lock().unwrap();
    let stream = FactStream::embedded(dir.path()).decision_wait(Duration::from_millis(20));
    stream.fact(&Arc::from("s"), observation("a"));
    let denial = stream.admit().await.unwrap_err();
    assert!(
        denial
            .message
            .contains("1 record(s) still wait for it after 20 ms"),
        "{denial:?}"
    );

    // Relaxed, with room for two: one waiting record does not hold a decision up.
    let relaxed = FactStream::embedded(dir.path())
        .acknowledge_before_decisions(false)
        .queue_bound(2)
        .decision_wait(Duration::from_millis(20));
    relaxed.fact(&Arc::from("s"), observation("b"));
    relaxed.admit().await.unwrap();
    relaxed.fact(&Arc::from("s"), observation("c"));
    relaxed.admit().await.unwrap_err();

    holder.unlock().unwrap();
    stream.flush(Duration::from_secs(30)).unwrap();
    relaxed.flush(Duration::from_secs(30)).unwrap();
    let all = stream.read("0", ALL, Duration::ZERO).unwrap();
    let mut got = ids(&all);
    got.sort_unstable();
    assert_eq!(got, ["a", "b", "c"]);
}

/// The decisions a lifecycle makes are recorded as what they decided.
#[test]
fn decisions_are_recorded_as_decided() {
    let step = ToolStep {
        decision: ToolDecision::Denied(Denial {
            hook_id: "g/pre-tool".into(),
            reason_code: "no".into(),
            message: "not that".into(),
            payload: None,
            failure: None,
        }),
        points: vec![Point::ToolCallCommitted, Point::PreTool],
    };
    let decision = step_decision(&step);
    assert_eq!(decision.point, Point::PreTool);
    assert_eq!(decision.outcome, "deny");
    assert_eq!(decision.reason_code.as_deref(), Some("no"));
    let steer = Decision::of_stop(&[
        Steering {
            hook_id: "a/turn-stopping".into(),
            content: "go on".into(),
        },
        Steering {
            hook_id: "b/turn-stopping".into(),
            content: "and test".into(),
        },
    ]);
    assert_eq!(steer.outcome, "steer");
    assert_eq!(
        steer.hook_id.as_deref(),
        Some("a/turn-stopping, b/turn-stopping")
    );
    assert_eq!(Decision::of_stop(&[]).outcome, "stop");
}
