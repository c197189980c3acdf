//! The durable fact stream from the command line: the hook commands append to the stream
//! `PALISADE_FACTS` names before they answer, refuse an event whose facts it does not take,
//! and `palisade logs --facts` and `palisade replay --facts` read it — on the embedded log
//! and on Redis, a consumer group resuming where it left off.

use crate::server;
use palisade_tests::redis::Redis;
use serde_json::{Value, json};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("bridge-cache")
}

/// `palisade ARGS` appending to the fact stream `facts`, `stdin` its input.
fn palisade(facts: &str, args: &[&str], stdin: &str) -> Output {
    let state = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(args)
        .env("PALISADE_CACHE_DIR", cache_dir())
        .env("PALISADE_STATE_DIR", state.path())
        .env("PALISADE_FACTS", facts)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    crate::process::fed(child, stdin)
        .wait_with_output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A guard that denies `Bash` and lets every other tool through.
fn guarded() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    server::scripted(
        dir.path(),
        "guard",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"Bash\"\n\
         [config]\npre_tool = \"deny\"\n",
    );
    dir
}

/// A Claude Code hook event of session `s1`, turn `p1`.
fn event(name: &str, fields: Value) -> String {
    let mut event = json!({
        "session_id": "s1", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
        "prompt_id": "p1", "hook_event_name": name,
    });
    event
        .as_object_mut()
        .unwrap()
        .extend(fields.as_object().unwrap().clone());
    event.to_string()
}

fn pre_tool(tool: &str, id: &str) -> String {
    event(
        "PreToolUse",
        json!({ "tool_name": tool, "tool_input": { "file_path": "/etc/hosts" }, "tool_use_id": id }),
    )
}

/// The `interaction_id`s `palisade logs --facts STREAM --json` prints, in order.
fn logged_ids(facts: &str, more: &[&str]) -> Vec<String> {
    let mut args = vec!["logs", "--facts", facts, "--json"];
    args.extend_from_slice(more);
    stdout(&palisade(facts, &args, ""))
        .lines()
        .map(|line| {
            let record: Value = serde_json::from_str(line).unwrap();
            assert!(record["offset"].is_string(), "{line}");
            record["interaction_id"].as_str().unwrap().to_string()
        })
        .collect()
}

/// A sub-agent's events (Claude Code's `agent_id`) are in its agent's session, and their facts
/// and decisions are under ids that name the sub-agent; the main agent's keep theirs.
#[test]
fn a_subagents_facts_and_decisions_name_it_in_their_ids() {
    let plugins = guarded();
    let dir = plugins.path().to_str().unwrap();
    let facts_dir = tempfile::tempdir().unwrap();
    let facts = facts_dir.path().to_str().unwrap();
    let bridge = |input: String| palisade(facts, &["claude-code", dir], &input);
    let sub = event(
        "PreToolUse",
        json!({ "tool_name": "Bash", "tool_input": { "command": "rm -rf /" },
                "tool_use_id": "t1", "agent_id": "a7", "agent_type": "Explore" }),
    );
    assert!(stdout(&bridge(sub)).contains("deny"));
    assert!(stdout(&bridge(pre_tool("Bash", "t2"))).contains("deny"));
    assert_eq!(
        logged_ids(facts, &[]),
        [
            "s1:agent-a7:tool-call:t1",
            "s1:agent-a7:tool-decision:t1",
            "s1:tool-call:t2",
            "s1:tool-decision:t2",
        ]
    );
}

/// Each bridged event's facts and decisions are on the stream once it has answered; `logs
/// --facts` prints them in order, from an offset, or as a consumer group that resumes where
/// it left off; `replay --facts` replays the session through a plugin set.
#[test]
fn bridged_events_are_on_the_stream_and_logs_and_replay_read_it() {
    let plugins = guarded();
    let dir = plugins.path().to_str().unwrap();
    let facts_dir = tempfile::tempdir().unwrap();
    let facts = facts_dir.path().to_str().unwrap();
    let bridge = |input: String| palisade(facts, &["claude-code", dir], &input);

    stdout(&bridge(event(
        "UserPromptSubmit",
        json!({ "prompt": "look" }),
    )));
    stdout(&bridge(pre_tool("Read", "t1")));
    stdout(&bridge(event(
        "PostToolUse",
        json!({ "tool_name": "Read", "tool_input": { "file_path": "/etc/hosts" },
                "tool_response": { "content": "127.0.0.1 localhost" }, "tool_use_id": "t1" }),
    )));
    let denied = stdout(&bridge(pre_tool("Bash", "t2")));
    assert!(denied.contains("deny"), "{denied}");
    let ids = logged_ids(facts, &[]);
    assert_eq!(
        ids,
        [
            "s1:turn-p1:step-1:prompt-submit",
            "s1:turn-p1:message-0",
            "s1:tool-call:t1",
            "s1:tool-decision:t1",
            "s1:tool-result:t1",
            "s1:tool-call:t2",
            "s1:tool-decision:t2",
        ]
    );

    // The text lines: the offset, the session, the id, what it records.
    let text = stdout(&palisade(
        facts,
        &["logs", "--facts", facts, "--session", "s1"],
        "",
    ));
    let denial = text.lines().nth(6).unwrap();
    assert!(denial.starts_with('@'), "{denial}");
    assert!(
        denial.contains("s1 s1:tool-decision:t2 decision pre-tool deny guard/pre-tool"),
        "{denial}"
    );
    let only = stdout(&palisade(
        facts,
        &["logs", "--facts", facts, "--outcome", "deny"],
        "",
    ));
    assert_eq!(only.lines().count(), 1, "{only}");

    // From an offset: the records from the denied call on.
    let all: Vec<Value> = stdout(&palisade(facts, &["logs", "--facts", facts, "--json"], ""))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let from = all[5]["offset"].as_str().unwrap();
    assert_eq!(logged_ids(facts, &["--from", from]), ids[5..]);

    // A consumer group: everything once, then only what is new.
    assert_eq!(logged_ids(facts, &["--group", "audit"]), ids);
    assert!(logged_ids(facts, &["--group", "audit"]).is_empty());
    stdout(&bridge(event(
        "Stop",
        json!({ "stop_hook_active": false, "last_assistant_message": "done" }),
    )));
    assert_eq!(
        logged_ids(facts, &["--group", "audit"]),
        ["s1:turn-p1:step-1:stop-1", "s1:turn-p1:completed"]
    );

    // Replayed from the stream through the same guard: the same decisions.
    let replayed = stdout(&palisade(
        facts,
        &["replay", dir, "--facts", facts, "--session", "s1"],
        "",
    ));
    assert!(replayed.contains("look"), "{replayed}");
    let bash = replayed.lines().find(|l| l.contains("Bash")).unwrap();
    assert!(bash.contains("DENY"), "{replayed}");
    let read = replayed.lines().find(|l| l.contains("Read")).unwrap();
    assert!(read.contains("allow"), "{replayed}");
}

/// An event whose facts the stream does not take is refused, naming the stream: the agent
/// never goes on off the record.
#[test]
fn a_bridged_event_whose_stream_fails_is_refused_naming_it() {
    let plugins = guarded();
    let root = tempfile::tempdir().unwrap();
    let blocked = root.path().join("facts");
    std::fs::write(&blocked, b"in the way").unwrap();
    let facts = blocked.to_str().unwrap();
    let out = palisade(
        facts,
        &["claude-code", plugins.path().to_str().unwrap()],
        &pre_tool("Read", "t1"),
    );
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("the fact stream"), "{said}");
    assert!(said.contains(facts), "{said}");
}

/// On Redis, `logs --facts --follow` prints what is appended while it runs; a consumer group
/// given records before resumes after what it acknowledged.
#[test]
fn logs_follows_a_redis_stream_and_a_group_resumes() {
    let redis = Redis::start();
    let url = redis.url();
    let plugins = guarded();
    let dir = plugins.path().to_str().unwrap();
    stdout(&palisade(
        &url,
        &["claude-code", dir],
        &pre_tool("Read", "t1"),
    ));
    assert_eq!(
        logged_ids(&url, &["--group", "audit"]),
        ["s1:tool-call:t1", "s1:tool-decision:t1"]
    );

    let mut follow = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(["logs", "--facts", &url, "--follow", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(follow.stdout.take().unwrap()).lines();
    stdout(&palisade(
        &url,
        &["claude-code", dir],
        &pre_tool("Bash", "t2"),
    ));
    let mut followed = Vec::new();
    while followed.len() < 4 {
        let line: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
        followed.push(line["interaction_id"].as_str().unwrap().to_string());
    }
    follow.kill().unwrap();
    follow.wait().unwrap();
    assert_eq!(
        followed,
        [
            "s1:tool-call:t1",
            "s1:tool-decision:t1",
            "s1:tool-call:t2",
            "s1:tool-decision:t2"
        ]
    );
    assert_eq!(
        logged_ids(&url, &["--group", "audit"]),
        ["s1:tool-call:t2", "s1:tool-decision:t2"]
    );
}
