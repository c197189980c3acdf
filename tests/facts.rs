//! The durable fact stream (`palisade::facts`): every committed fact and every decision of a
//! lifecycle, in order, keyed by interaction id; never a decision off the record (a stream
//! that fails makes the session's decisions deny, naming it); one record per id, whatever
//! re-commits it; and nothing acknowledged lost when the writer is killed mid-stream — on the
//! embedded log and on Redis.

use palisade::facts::FactStream;
use palisade::facts::{Entry, FactCounts, StoredFact};
use palisade::{
    AskPolicy, CommittedFact, FailureReason, Host, Lifecycle, Observation, PreStepDecision,
    StopEvent, ToolCall, ToolDecision, ToolOutcome,
};
use palisade_tests::PluginDir;
use palisade_tests::redis::Redis;
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::time::Duration;

const ALL: usize = usize::MAX;

/// A guard that denies `Bash` and lets every other tool through.
fn guarded() -> PluginDir {
    let dir = PluginDir::new();
    dir.scripted(
        "guard",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"Bash\"\n\
         [config]\npre_tool = \"deny\"\n",
    );
    dir
}

/// A lifecycle of a host of its own (a process of its own), with state in memory: never the
/// user's state store.
fn lifecycle(dir: &PluginDir, stream: &FactStream, session: &str) -> Lifecycle {
    let plugins = Host::builder()
        .fact_stream(stream.clone())
        .state(palisade::state::StateStore::memory())
        .build()
        .unwrap()
        .load_dir(dir.path())
        .unwrap();
    Lifecycle::new(plugins.session(session))
}

fn read_all(stream: &FactStream) -> Vec<StoredFact> {
    stream.read("0", ALL, Duration::ZERO).unwrap()
}

/// Each record as `id what`: a fact's kind, a decision's point and outcome.
fn described(records: &[StoredFact]) -> Vec<String> {
    records
        .iter()
        .map(|r| {
            let what = match &r.record.entry {
                Entry::Fact(fact) => serde_json::to_value(fact).unwrap()["kind"]
                    .as_str()
                    .unwrap()
                    .to_string(),
                Entry::Decision(d) => format!("{} {}", d.point, d.outcome),
                other => format!("{other:?}"),
            };
            format!("{} {what}", r.record.interaction_id)
        })
        .collect()
}

/// A turn as a bridge drives it: a prompt, a call let through and its result, a call denied
/// and its error result, the stop, the session's end.
async fn one_turn(lifecycle: &Lifecycle) {
    let entered = lifecycle.prompt(None, "list the files").await;
    assert!(matches!(entered, PreStepDecision::Enter { .. }));
    let ls = ToolCall::new("t1", "Read", json!({ "path": "." }));
    let step = lifecycle.authorize(&ls, AskPolicy::Deny).await;
    assert!(matches!(step.decision, ToolDecision::Allowed { .. }));
    lifecycle
        .tool_finished(&ls, &ToolOutcome::text("a b c"))
        .await;
    let rm = ToolCall::new("t2", "Bash", json!({ "command": "rm -rf /" }));
    let step = lifecycle.authorize(&rm, AskPolicy::Deny).await;
    let ToolDecision::Denied(denial) = step.decision else {
        panic!("{step:?}");
    };
    lifecycle.tool_denied(&rm, &denial).await;
    let stop = StopEvent {
        turn: 1,
        step: 2,
        last_assistant_message: Some("done".into()),
        continuations: 0,
    };
    assert!(lifecycle.stopping(&stop, true).await.is_empty());
    lifecycle.session_ended("exit");
}

/// Every fact a lifecycle commits and every decision it makes is on the stream, in the order
/// it happened, under the interaction id the lifecycle gave it.
#[tokio::test]
async fn every_fact_and_decision_is_on_the_stream_in_order_keyed_by_interaction_id() {
    let dir = guarded();
    let facts = tempfile::tempdir().unwrap();
    let stream = FactStream::embedded(facts.path());
    let lifecycle = lifecycle(&dir, &stream, "s");
    one_turn(&lifecycle).await;
    stream.flush(Duration::from_secs(30)).unwrap();
    let records = read_all(&stream);
    assert_eq!(
        described(&records),
        [
            "s:turn-1:step-1:prompt-submit prompt-submit enter",
            "s:turn-1:message-0 message",
            "s:tool-call:t1 tool-call",
            "s:tool-decision:t1 tool-guard allow",
            "s:tool-result:t1 tool-result",
            "s:tool-call:t2 tool-call",
            "s:tool-decision:t2 pre-tool deny",
            "s:tool-result:t2 tool-result",
            "s:turn-1:step-2:stop-1 turn-stopping stop",
            "s:turn-1:completed turn-completed",
            "s:session-ended session-ended",
        ]
    );
    assert!(records.iter().all(|r| r.record.session_id == "s"));
    let Entry::Decision(denied) = &records[6].record.entry else {
        panic!("{records:?}");
    };
    assert_eq!(denied.hook_id.as_deref(), Some("guard/pre-tool"));
    assert_eq!(denied.reason_code.as_deref(), Some("scripted-deny"));
    let Entry::Fact(CommittedFact::ToolResult { result }) = &records[4].record.entry else {
        panic!("{records:?}");
    };
    assert_eq!(result.outcome, ToolOutcome::text("a b c"));
    // Replayable from an offset: from the denied call's record on.
    let from = stream
        .read(&records[5].offset, ALL, Duration::ZERO)
        .unwrap();
    assert_eq!(described(&from), described(&records)[5..]);
}

/// A stream that cannot take the facts makes the session's next foreground decisions deny,
/// naming the stream — a final failure, which no `post-tool` rewrites — and keeps every
/// record; once it takes them, decisions are made again, and the stream holds all of them,
/// the records of the refused decisions too.
#[tokio::test]
async fn a_failing_stream_denies_the_next_decisions_naming_it_and_loses_nothing() {
    let dir = guarded();
    let root = tempfile::tempdir().unwrap();
    let facts = root.path().join("facts");
    // A regular file where the log's folder must be: nothing can be appended.
    std::fs::write(&facts, b"in the way").unwrap();
    let stream = FactStream::embedded(&facts);
    let lifecycle = lifecycle(&dir, &stream, "s");

    // Nothing is on its way to the stream yet: the prompt is decided.
    let entered = lifecycle.prompt(None, "hello").await;
    assert!(
        matches!(entered, PreStepDecision::Enter { .. }),
        "{entered:?}"
    );
    // Its records are not taken: the next decisions deny, naming the stream.
    let call = ToolCall::new("t1", "Read", json!({ "path": "." }));
    let step = lifecycle.authorize(&call, AskPolicy::Deny).await;
    let ToolDecision::Denied(denial) = step.decision else {
        panic!("{step:?}");
    };
    assert_eq!(denial.hook_id, "palisade/fact-stream");
    assert_eq!(denial.reason_code, "fact-stream-unavailable");
    assert_eq!(denial.failure, Some(FailureReason::FactStreamUnavailable));
    assert!(
        denial
            .message
            .contains(&facts.join("facts.jsonl").display().to_string()),
        "{denial:?}"
    );
    let result = lifecycle.tool_denied(&call, &denial).await;
    assert_eq!(result.blocked, None);
    let rejected = lifecycle.pre_step(2, vec![]).await;
    let PreStepDecision::Reject(denial) = rejected else {
        panic!("{rejected:?}");
    };
    assert_eq!(denial.reason_code, "fact-stream-unavailable");

    std::fs::remove_file(&facts).unwrap();
    stream.flush(Duration::from_secs(30)).unwrap();
    let allowed = lifecycle
        .authorize(&ToolCall::new("t2", "Read", json!({})), AskPolicy::Deny)
        .await;
    assert!(
        matches!(allowed.decision, ToolDecision::Allowed { .. }),
        "{allowed:?}"
    );
    stream.flush(Duration::from_secs(30)).unwrap();
    assert_eq!(
        described(&read_all(&stream)),
        [
            "s:turn-1:step-1:prompt-submit prompt-submit enter",
            "s:turn-1:message-0 message",
            "s:tool-call:t1 tool-call",
            "s:tool-decision:t1 pre-tool deny",
            "s:tool-result:t1 tool-result",
            "s:turn-1:step-2:prompt-submit prompt-submit reject",
            "s:turn-1:completed turn-completed",
            "s:tool-call:t2 tool-call",
            "s:tool-decision:t2 tool-guard allow",
        ]
    );
}

/// On Redis, two hosts that commit the same facts (an event re-sent to another process) leave
/// one record of each; a consumer group shares the records among its consumers, and a
/// consumer that restarts is given what it did not acknowledge, then what is new.
#[tokio::test]
async fn redis_keeps_one_record_per_id_and_a_restarted_consumer_resumes() {
    let redis = Redis::start();
    let dir = guarded();
    let one = FactStream::redis(&redis.url());
    let two = FactStream::redis(&redis.url());
    one_turn(&lifecycle(&dir, &one, "s")).await;
    one_turn(&lifecycle(&dir, &two, "s")).await;
    one.flush(Duration::from_secs(30)).unwrap();
    two.flush(Duration::from_secs(30)).unwrap();
    assert_eq!(two.counts().duplicates, 11);
    let records = read_all(&one);
    assert_eq!(records.len(), 11, "{:?}", described(&records));
    assert_eq!(described(&records)[2], "s:tool-call:t1 tool-call");
    assert_eq!(
        described(&one.read(&records[9].offset, ALL, Duration::ZERO).unwrap()),
        described(&records)[9..]
    );

    let ids = |got: &[StoredFact]| -> Vec<String> {
        got.iter()
            .map(|r| r.record.interaction_id.clone())
            .collect()
    };
    let mut reader = one.consumer("audit", "reader-1").unwrap();
    let first = reader.next(3, Duration::ZERO).unwrap();
    assert_eq!(ids(&first), ids(&records[..3]));
    reader.ack(&first[0]).unwrap();
    drop(reader);
    // Another consumer of the group is given what no consumer was.
    let mut other = one.consumer("audit", "reader-2").unwrap();
    assert_eq!(
        ids(&other.next(2, Duration::ZERO).unwrap()),
        ids(&records[3..5])
    );
    // The first, restarted: its two unacknowledged records, then the group's next.
    let mut restarted = one.consumer("audit", "reader-1").unwrap();
    assert_eq!(
        ids(&restarted.next(ALL, Duration::ZERO).unwrap()),
        ids(&records[1..3])
    );
    assert_eq!(
        ids(&restarted.next(ALL, Duration::ZERO).unwrap()),
        ids(&records[5..])
    );
    // Nothing new: a read that waits returns empty once its wait is over.
    assert!(
        restarted
            .next(ALL, Duration::from_millis(20))
            .unwrap()
            .is_empty()
    );
}

/// Runs `fact-writer` on `spec` until it has said `at_least` records were acknowledged, then
/// kills it (SIGKILL, mid-stream); returns every id it said was acknowledged.
fn kill_mid_stream(spec: &str, at_least: usize) -> Vec<String> {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_fact-writer"))
        .args([spec, "s", "1000000"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut acked = Vec::new();
    while acked.len() < at_least {
        let line = lines.next().expect("the writer said nothing more").unwrap();
        acked.push(line.strip_prefix("acked ").unwrap().to_string());
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // What it said before it died was acknowledged too.
    acked.extend(
        lines
            .map_while(Result::ok)
            .filter_map(|l| l.strip_prefix("acked ").map(str::to_string)),
    );
    acked
}

/// The kill -9 test, on `spec` (read back through `stream`): nothing the killed writer said
/// was acknowledged is lost; a writer started again re-commits every fact from the first,
/// and each is on the stream once, in order.
fn nothing_acknowledged_lost_nothing_duplicated(spec: &str, stream: &FactStream) {
    let acked = kill_mid_stream(spec, 60);
    let calls = acked.len() / 3 + 10;
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_fact-writer"))
        .args([spec, "s", &calls.to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());

    let records = stream.read("0", ALL, Duration::ZERO).unwrap();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for record in &records {
        *seen.entry(&record.record.interaction_id).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "recorded more than once: {twice:?}");
    let lost: Vec<_> = acked
        .iter()
        .filter(|id| !seen.contains_key(id.as_str()))
        .collect();
    assert!(lost.is_empty(), "acknowledged, then lost: {lost:?}");
    // Every call's three records, each call's in order.
    let ids: Vec<&str> = records
        .iter()
        .map(|r| r.record.interaction_id.as_str())
        .collect();
    assert_eq!(ids.len(), calls * 3);
    let position: HashMap<&str, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    for i in 0..calls {
        let at = |what: &str| position[format!("s:{what}:t{i}").as_str()];
        assert!(at("tool-call") < at("tool-decision"), "t{i}");
        assert!(at("tool-decision") < at("tool-result"), "t{i}");
    }
    let unique: HashSet<&str> = ids.into_iter().collect();
    assert_eq!(unique.len(), calls * 3);
}

#[test]
fn a_writer_killed_mid_stream_loses_nothing_acknowledged_on_the_embedded_log() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().to_str().unwrap();
    nothing_acknowledged_lost_nothing_duplicated(spec, &FactStream::embedded(spec));
}

#[test]
fn a_writer_killed_mid_stream_loses_nothing_acknowledged_on_redis() {
    let redis = Redis::start();
    let spec = redis.url();
    nothing_acknowledged_lost_nothing_duplicated(&spec, &FactStream::redis(&spec));
}

/// Every stop of a turn gets a decision record of its own: two subagents stopping in one step,
/// in each of two processes that serve the turn one event at a time (whose agent says only
/// whether it continued, so every stop looks the same). Their numbers come from the
/// session's durable counter, which both processes share through the state store.
#[tokio::test]
async fn every_stop_of_a_turn_has_a_decision_record_of_its_own() {
    let dir = PluginDir::new();
    let facts = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let stream = FactStream::embedded(facts.path());
    let stop = StopEvent {
        turn: 1,
        step: 1,
        last_assistant_message: None,
        continuations: 1,
    };
    for _process in 0..2 {
        let plugins = Host::builder()
            .fact_stream(stream.clone())
            .state(palisade::state::StateStore::embedded(state.path()))
            .build()
            .unwrap()
            .load_dir(dir.path())
            .unwrap();
        let lifecycle = Lifecycle::new(plugins.session("s"));
        lifecycle.in_turn(Some("p1"));
        for _subagent in 0..2 {
            assert!(lifecycle.stopping(&stop, false).await.is_empty());
        }
    }
    stream.flush(Duration::from_secs(30)).unwrap();
    assert_eq!(
        described(&read_all(&stream)),
        (1..=4)
            .map(|n| format!("s:turn-p1:step-1:subagent-stop-{n} turn-stopping stop"))
            .collect::<Vec<_>>()
    );
}

/// Commits a `tool-call` fact of session `s` under each of `ids` to `stream` through a host of
/// its own, and waits until the stream has acknowledged them; returns the stream's counts.
fn commit_calls(stream: &FactStream, ids: impl IntoIterator<Item = String>) -> FactCounts {
    let lifecycle = lifecycle(&PluginDir::new(), stream, "s");
    for interaction_id in ids {
        lifecycle.session().committed(&Observation {
            interaction_id,
            turn: 1,
            fact: CommittedFact::ToolCall {
                call: ToolCall::new("t", "Bash", json!({ "command": "ls" })),
            },
        });
    }
    stream.flush(Duration::from_secs(30)).unwrap();
    stream.counts()
}

/// Appending to the embedded log reads what is new to the log's index, not the records
/// already there, so what a process-per-event bridge pays does not grow with the log: a new
/// stream on a log of 2,000 records appends its record, and finds the one it re-commits held
/// already, without reading them. Records the index did not take (their writer died between
/// the log's `fsync` and the index's commit) it reads, and no more. A log whose index is gone
/// or unreadable is indexed again from the log, every id kept.
#[tokio::test]
async fn appending_to_a_long_embedded_log_reads_what_is_new_not_the_log() {
    let facts = tempfile::tempdir().unwrap();
    let path = facts.path().join("facts.jsonl");
    let size = || std::fs::metadata(&path).unwrap().len();
    let call = |i: usize| format!("s:tool-call:t{i}");
    let first = FactStream::embedded(facts.path());
    commit_calls(&first, (0..2000).map(call));
    let long = size();

    // A process of its own, as each bridged event is: one record new, one held already.
    let second = FactStream::embedded(facts.path());
    let counts = commit_calls(&second, [call(2000), call(0)]);
    assert_eq!((counts.acknowledged, counts.duplicates), (2, 1));
    assert!(
        counts.log_bytes_read < 1024,
        "read {} bytes of a log of {long}",
        counts.log_bytes_read
    );
    let read = counts.log_bytes_read;

    // Ten records on the log that its index has not taken: the second reads those, and
    // nothing before them.
    let text = std::fs::read_to_string(&path).unwrap();
    let template = text.lines().next().unwrap();
    let theirs: String = (2001..2011)
        .map(|i| template.replace("\"s:tool-call:t0\"", &format!("\"{}\"", call(i))) + "\n")
        .collect();
    let mut log = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut log, theirs.as_bytes()).unwrap();
    let counts = commit_calls(&second, [call(2011), call(2005)]);
    assert_eq!((counts.acknowledged, counts.duplicates), (4, 2));
    let now = counts.log_bytes_read - read;
    let theirs = theirs.len() as u64;
    assert!(
        (theirs..theirs + 1024).contains(&now),
        "read {now} bytes, {theirs} of them not indexed yet"
    );
    drop((first, second));

    // The index gone, then unreadable: built again from the log, no id appended twice.
    let index = facts.path().join("facts.index.sqlite3");
    for (k, damage) in [None, Some(&b"not an index"[..])].into_iter().enumerate() {
        std::fs::remove_file(&index).unwrap();
        for suffix in ["-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", index.display()));
        }
        if let Some(bytes) = damage {
            std::fs::write(&index, bytes).unwrap();
        }
        let again = FactStream::embedded(facts.path());
        let counts = commit_calls(&again, [call(k), call(3000 + k)]);
        assert_eq!((counts.acknowledged, counts.duplicates), (2, 1));
        assert!(counts.log_bytes_read >= size() - 1024, "{counts:?}");
    }
    let records = read_all(&FactStream::embedded(facts.path()));
    let ids: HashSet<&str> = records
        .iter()
        .map(|r| r.record.interaction_id.as_str())
        .collect();
    assert_eq!((records.len(), ids.len()), (2014, 2014));
    assert!(long > 100 * 1024, "{long}");
}
