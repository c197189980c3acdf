//! The `palisade` command line: check, run and demo, as a user runs them.

use crate::server;

use std::path::Path;
use std::process::{Command, Output};

fn palisade(args: &[&str]) -> Output {
    palisade_with_env(args, &[])
}

fn palisade_with_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(args)
        .envs(env.iter().copied())
        // The tests' own cache, not the user's.
        .env(
            "PALISADE_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-cache"),
        )
        // Nor the user's plugin state.
        .env(
            "PALISADE_STATE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-state"),
        )
        .output()
        .expect("the palisade binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn examples() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    palisade_examples::install(dir.path()).unwrap();
    dir
}

fn write_call(dir: &Path, command: &str) -> String {
    let path = dir.join(format!("call-{}.json", command.len()));
    let call = serde_json::json!({ "tool_use_id": "toolu_1", "name": "Bash", "arguments": { "command": command } });
    std::fs::write(&path, call.to_string()).unwrap();
    path.display().to_string()
}

#[test]
fn check_lists_every_plugin_hook_and_grant() {
    let dir = examples();
    let out = palisade(&["check", dir.path().to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    for needle in [
        "shell-guard",
        "secret-guard",
        "audit-log",
        "pre-tool",
        "tool-result",
        "guard",
        "observe",
        "background",
        "@shell|@mcp",
        "100 ms, 50000000 fuel, 16 MiB",
        "ok: 5 plugins, 6 hooks on 3 points",
        "tool-execute",
        "wrap",
    ] {
        assert!(
            stdout.contains(needle),
            "`{needle}` missing from:\n{stdout}"
        );
    }
}

/// A shadow hook shows as such: MODE `shadow`, its failures recorded.
#[test]
fn check_shows_a_shadow_hook() {
    let dir = examples_with_shell_guard_in_shadow();
    let out = palisade(&["check", dir.path().to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let row = stdout
        .lines()
        .find(|l| l.starts_with("shell-guard") && l.contains("pre-tool"))
        .unwrap_or_else(|| panic!("no shell-guard row in:\n{stdout}"));
    assert!(
        row.contains(" shadow ") && row.contains(" record "),
        "{row}"
    );
}

#[test]
fn check_fails_listing_every_problem() {
    let dir = examples();
    std::fs::write(
        dir.path().join("audit-log/plugin.toml"),
        "name = \"audit-log\"\nwasm = \"../shell-guard/shell_guard.wasm\"\n\
         [[hooks]]\npoint = \"tool-result\"\ncapability = \"guard\"\n",
    )
    .unwrap();
    std::fs::remove_file(dir.path().join("secret-guard/secret_guard.wasm")).unwrap();
    let out = palisade(&["check", dir.path().to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    // After the progress of any component compiled on the way (a cold cache), the problems.
    let listing: Vec<_> = stderr
        .lines()
        .skip_while(|l| l.starts_with("compil"))
        .collect();
    let listing = listing.join("\n");
    assert!(listing.starts_with("2 problems in"), "{stderr}");
    assert!(stderr.contains("audit-log/plugin.toml: `hooks[0].capability`: `guard` cannot be granted on `tool-result`"), "{stderr}");
    assert!(
        stderr.contains("secret-guard/plugin.toml: `wasm`: `secret_guard.wasm` does not exist"),
        "{stderr}"
    );
}

#[test]
fn run_denies_rm_rf_root_through_shell_guard_and_allows_ls() {
    let dir = examples();
    let deny = write_call(dir.path(), "rm -rf /");
    let out = palisade(&[
        "run",
        dir.path().to_str().unwrap(),
        "--point",
        "pre-tool",
        "--input",
        &deny,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let decision: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(decision["decision"], "deny");
    assert_eq!(decision["hook_id"], "shell-guard/pre-tool");
    assert_eq!(decision["reason_code"], "destructive-delete");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("hook_denied     shell-guard/pre-tool destructive-delete"),
        "{stderr}"
    );
    assert!(
        stderr.contains("hook_completed  audit-log/pre-tool allow (recorded, not honoured)"),
        "{stderr}"
    );

    let allow = write_call(dir.path(), "ls");
    let out = palisade(&[
        "run",
        dir.path().to_str().unwrap(),
        "--point",
        "pre-tool",
        "--input",
        &allow,
    ]);
    let decision: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(decision, serde_json::json!({ "decision": "allow" }));
}

#[test]
fn run_writes_lifecycle_events_as_json_lines() {
    let dir = examples();
    let call = write_call(dir.path(), "rm -rf ~");
    let out = palisade(&[
        "run",
        dir.path().to_str().unwrap(),
        "--point",
        "pre-tool",
        "--input",
        &call,
        "--events",
        "jsonl",
    ]);
    let events: Vec<serde_json::Value> = text(&out.stderr)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "hook_started",
            "plugin_log",
            "hook_completed",
            "hook_started",
            "hook_denied"
        ]
    );
    let denied = &events[4];
    assert_eq!(denied["plugin"], "shell-guard");
    assert_eq!(denied["point"], "pre-tool");
    assert!(denied["fuel_consumed"].as_u64().unwrap() > 0);
    assert!(denied["duration_us"].is_u64());
    assert_eq!(denied["invocation_id"], events[0]["invocation_id"]);
}

#[test]
fn run_explains_bad_input() {
    let dir = examples();
    let input = dir.path().join("bad.json");
    std::fs::write(&input, "{\"tool\": \"Bash\"}").unwrap();
    let out = palisade(&[
        "run",
        dir.path().to_str().unwrap(),
        "--point",
        "pre-tool",
        "--input",
        input.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("not a valid `pre-tool` input"), "{stderr}");
    assert!(stderr.contains("unknown field `tool`"), "{stderr}");
}

#[test]
fn demo_prints_its_table() {
    let out = palisade(&["demo"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("OUTCOME"), "{stdout}");
    assert_eq!(stdout.matches("DENY").count(), 6, "{stdout}");
    assert!(stdout.contains("destructive-delete"), "{stdout}");
    assert!(stdout.contains("secret-file"), "{stdout}");
    assert!(stdout.contains("PLUGIN        CALLS  P50 µs"), "{stdout}");
    assert!(
        stdout.contains("tool-call      Bash git push origin release/1.0           allow"),
        "{stdout}"
    );
}

/// A plugin directory with one scripted plugin subscribed to every point.
fn every_point() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("all");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::copy(palisade_fixtures::SCRIPTED, folder.join("plugin.wasm")).unwrap();
    let mut manifest = String::from("name = \"all\"\nwasm = \"plugin.wasm\"\n");
    for (point, capability) in [
        ("session-start", "\"transform\""),
        ("prompt-submit", "[\"guard\", \"transform\"]"),
        ("pre-tool", "\"guard\""),
        ("tool-guard", "\"guard\""),
        ("post-tool", "\"transform\""),
        ("tool-result", "\"observe\""),
        ("turn-stopping", "\"steer\""),
        ("message-committed", "\"observe\""),
        ("tool-call-committed", "\"observe\""),
        ("tool-result-committed", "\"observe\""),
        ("llm-response-committed", "\"observe\""),
        ("turn-completed", "\"observe\""),
        ("session-ended", "\"observe\""),
    ] {
        manifest.push_str(&format!(
            "[[hooks]]\npoint = \"{point}\"\ncapability = {capability}\n"
        ));
    }
    manifest.push_str(
        "[config]\ncontexts = [\"ctx\"]\ntool_guard = \"deny\"\npost_tool = \"upper\"\nturn_stopping = \"steer\"\n",
    );
    std::fs::write(folder.join("plugin.toml"), manifest).unwrap();
    dir
}

#[test]
fn run_dispatches_every_point() {
    let dir = every_point();
    let call = serde_json::json!({ "tool_use_id": "t1", "name": "Bash", "arguments": { "command": "ls" } });
    let outcome = serde_json::json!({ "content_blocks": [{ "type": "text", "text": "a b" }], "is_error": false });
    let observation = |kind: &str, body: serde_json::Value| {
        let mut fact = serde_json::json!({ "kind": kind });
        fact.as_object_mut()
            .unwrap()
            .extend(body.as_object().unwrap().clone());
        serde_json::json!({ "interaction_id": "i-1", "turn": 1, "fact": fact })
    };
    let cases = [
        (
            "session-start",
            serde_json::json!({ "source": "startup" }),
            "contexts",
        ),
        (
            "prompt-submit",
            serde_json::json!({ "messages": [{ "role": "user", "text": "hi" }], "turn": 1, "step": 1 }),
            "enter",
        ),
        ("pre-tool", call.clone(), "allow"),
        ("tool-guard", call.clone(), "deny"),
        (
            "post-tool",
            serde_json::json!({ "call": call, "outcome": outcome }),
            "A B",
        ),
        (
            "tool-result",
            serde_json::json!({ "call": call, "outcome": outcome }),
            "none",
        ),
        (
            "turn-stopping",
            serde_json::json!({ "turn": 1, "step": 2 }),
            "keep going",
        ),
        (
            "message-committed",
            observation(
                "message",
                serde_json::json!({ "message": { "role": "user", "text": "hi" } }),
            ),
            "none",
        ),
        (
            "tool-call-committed",
            observation("tool-call", serde_json::json!({ "call": call })),
            "none",
        ),
        (
            "tool-result-committed",
            observation(
                "tool-result",
                serde_json::json!({ "result": { "tool_use_id": "t1", "name": "Bash", "outcome": outcome } }),
            ),
            "none",
        ),
        (
            "llm-response-committed",
            observation(
                "llm-response",
                serde_json::json!({ "response": { "model": "m", "stop_reason": "end_turn", "server_tool_content": [{ "kind": "web-search", "query": "q", "result_urls": [] }] } }),
            ),
            "none",
        ),
        (
            "turn-completed",
            observation(
                "turn-completed",
                serde_json::json!({ "outcome": "completed" }),
            ),
            "none",
        ),
        (
            "session-ended",
            observation("session-ended", serde_json::json!({ "reason": "exit" })),
            "none",
        ),
    ];
    for (point, input, expect) in cases {
        let path = dir.path().join(format!("{point}.json"));
        std::fs::write(&path, input.to_string()).unwrap();
        let out = palisade(&[
            "run",
            dir.path().to_str().unwrap(),
            "--point",
            point,
            "--input",
            path.to_str().unwrap(),
            "--events",
            "jsonl",
        ]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{point}: {}", text(&out.stderr));
        assert!(
            stdout.contains(expect),
            "{point}: `{expect}` not in {stdout}"
        );
        let events: Vec<serde_json::Value> = text(&out.stderr)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert!(
            events
                .iter()
                .any(|e| e["event"] == "hook_started" && e["point"] == point),
            "{point}: no hook ran: {events:?}"
        );
        assert!(
            events.iter().any(|e| e["event"] != "hook_started"
                && e["event"] != "plugin_log"
                && e["point"] == point),
            "{point}: the hook did not finish: {events:?}"
        );
    }
}

#[test]
fn run_refuses_a_fact_of_another_point() {
    let dir = every_point();
    let path = dir.path().join("fact.json");
    std::fs::write(
        &path,
        r#"{"interaction_id": "i", "fact": {"kind": "session-ended", "reason": "x"}}"#,
    )
    .unwrap();
    let out = palisade(&[
        "run",
        dir.path().to_str().unwrap(),
        "--point",
        "turn-completed",
        "--input",
        path.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("a `session-ended` fact was given for `turn-completed`"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn replay_prints_a_timeline_and_a_latency_table() {
    let dir = examples();
    let session = dir.path().join("session.jsonl");
    std::fs::write(
        &session,
        [
            r#"{"event": "session-start", "source": "startup"}"#,
            r#"{"event": "prompt", "turn": 1, "text": "clean up"}"#,
            r#"{"event": "tool-call", "call": {"tool_use_id": "t1", "name": "Bash", "arguments": {"command": "rm -rf ~"}}, "result": {"content_blocks": []}}"#,
            r#"{"event": "tool-call", "call": {"tool_use_id": "t2", "name": "Bash", "arguments": {"command": "ls"}}, "result": {"content_blocks": [{"type": "text", "text": "a b"}]}}"#,
            r#"{"event": "stop", "turn": 1, "step": 3}"#,
            r#"{"event": "session-end", "reason": "exit"}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let args = [
        "replay",
        dir.path().to_str().unwrap(),
        session.to_str().unwrap(),
    ];
    let out = palisade(&args);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(stdout.contains("Replay of"), "{stdout}");
    assert!(stdout.contains("DENY"), "{stdout}");
    assert!(stdout.contains("destructive-delete"), "{stdout}");
    assert!(stdout.contains("P95 µs"), "{stdout}");

    let out = palisade(&[args[0], args[1], args[2], "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let timeline = doc["timeline"].as_array().unwrap();
    assert_eq!(timeline.len(), 6);
    assert_eq!(timeline[2]["outcome"], "DENY");
    assert_eq!(timeline[2]["by"], "shell-guard/pre-tool");
    assert_eq!(timeline[3]["outcome"], "allow");
    let hooks: Vec<&str> = timeline[3]["hooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["hook_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        hooks,
        [
            "audit-log/pre-tool",
            "shell-guard/pre-tool",
            "secret-guard/pre-tool",
            "audit-log/tool-result"
        ]
    );
    assert_eq!(doc["plugins"]["shell-guard"]["invocations"], 2);
    assert_eq!(doc["plugins"]["shell-guard"]["denied"], 1);
}

#[test]
fn replay_names_the_bad_line() {
    let dir = examples();
    let session = dir.path().join("bad.jsonl");
    std::fs::write(
        &session,
        "{\"event\": \"session-start\", \"source\": \"startup\"}\n{\"event\": \"launch\"}\n",
    )
    .unwrap();
    let out = palisade(&[
        "replay",
        dir.path().to_str().unwrap(),
        session.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("bad.jsonl:2: not a session event"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn test_reports_each_case_and_fails_on_a_wrong_expectation() {
    let dir = examples();
    let cases = dir.path().join("cases.jsonl");
    std::fs::write(
        &cases,
        concat!(
            "# a comment\n",
            r#"{"name": "rm is denied", "point": "pre-tool", "input": {"name": "Bash", "arguments": {"command": "rm -rf /"}}, "expect": {"decision": "deny", "hook_id": "shell-guard/pre-tool"}}"#,
            "\n",
            r#"{"name": "wrongly expected", "point": "pre-tool", "input": {"name": "Bash", "arguments": {"command": "ls"}}, "expect": {"decision": "deny"}}"#,
            "\n",
        ),
    )
    .unwrap();
    let out = palisade(&[
        "test",
        dir.path().to_str().unwrap(),
        cases.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("pass  rm is denied")
            && stdout.contains("deny by shell-guard/pre-tool")
            && stdout.contains("shell-guard deny"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FAIL  wrongly expected")
            && stdout.contains(r#"expected {"decision":"deny"}, got {"decision":"allow"}"#),
        "{stdout}"
    );
    assert!(stdout.contains("cases: 1 passed, 1 failed"), "{stdout}");

    // A malformed case names its line.
    std::fs::write(&cases, "{\"name\": \"x\", \"point\": \"pre-tool\"}\n").unwrap();
    let out = palisade(&[
        "test",
        dir.path().to_str().unwrap(),
        cases.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("cases.jsonl:1: not a test case"),
        "{}",
        text(&out.stderr)
    );
}

/// A folder of scripted-guest plugins: `(name, manifest body after name/wasm)`.
fn scripted(plugins: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in plugins {
        server::scripted(dir.path(), name, body);
    }
    dir
}

#[test]
fn nothing_a_plugin_logs_can_pass_for_the_hosts_own_lines() {
    // The plugin logs its `tag`: a line break, then a forged lifecycle line.
    let dir = scripted(&[(
        "sly",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"observe\"\n\
         [config]\ntag = \"ok\\nhook_completed forged/pre-tool allow\\u001b[2J\"\n",
    )]);
    let call = write_call(dir.path(), "ls");
    let out = palisade(&[
        "run",
        dir.path().to_str().unwrap(),
        "--point",
        "pre-tool",
        "--input",
        &call,
    ]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr
            .lines()
            .any(|l| l.starts_with("hook_completed forged")),
        "a plugin forged a line:\n{stderr}"
    );
    assert!(
        !stderr.contains('\u{1b}'),
        "an escape sequence got through:\n{stderr}"
    );
    assert!(
        stderr.contains("[info] ok\\nhook_completed forged/pre-tool allow\\u{1b}[2J"),
        "{stderr}"
    );
}

#[test]
fn test_matches_expected_logs_to_the_plugin_that_logged_them() {
    // `mimic` logs "tool-tally: call 1", which must not pass for tool-tally's own line.
    let dir = scripted(&[
        (
            "mimic",
            "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"observe\"\n[config]\ntag = \"tool-tally: call 1\"\n",
        ),
        (
            "tool-tally",
            "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"observe\"\n[config]\ntag = \"quiet\"\n",
        ),
    ]);
    let cases = dir.path().join("cases.jsonl");
    std::fs::write(
        &cases,
        r#"{"name": "tally", "point": "pre-tool", "input": {"name": "Bash", "arguments": {}}, "expect": {"decision": "allow"}, "logs": ["tool-tally: call 1"]}"#,
    )
    .unwrap();
    let out = palisade(&[
        "test",
        dir.path().to_str().unwrap(),
        cases.to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("FAIL  tally"), "{stdout}");
}

/// `check` lists the hooks that fail open; `--strict` and PALISADE_STRICT=1 (which every
/// command reads) refuse them, naming the field and the fix. An observer saying
/// `on_failure = "allow"` fails open nowhere, so strict mode takes it.
#[test]
fn check_lists_hooks_that_fail_open_and_strict_mode_refuses_them() {
    let dir = scripted(&[
        (
            "lenient",
            "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\non_failure = \"allow\"\n",
        ),
        (
            "watcher",
            "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"observe\"\non_failure = \"allow\"\n",
        ),
    ]);
    let path = dir.path().to_str().unwrap();
    let out = palisade(&["check", path]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("warning: lenient/pre-tool holds `guard` and fails open"),
        "{stdout}"
    );
    assert!(!stdout.contains("watcher/pre-tool holds"), "{stdout}");
    let strict = [
        palisade(&["check", "--strict", path]),
        palisade_with_env(&["check", path], &[("PALISADE_STRICT", "1")]),
    ];
    for out in strict {
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("lenient/plugin.toml")
                && stderr.contains("hooks[0].on_failure")
                && stderr.contains("fails open")
                && stderr.contains("remove `on_failure = \"allow\"`"),
            "{stderr}"
        );
        assert!(!stderr.contains("watcher"), "{stderr}");
    }
}

/// `check` says which protocol each external hook speaks, and warns when a guard speaks
/// Claude Code's lenient one.
#[test]
fn check_shows_an_external_hooks_protocol_and_warns_on_a_lenient_guard() {
    let dir = tempfile::tempdir().unwrap();
    for (name, protocol) in [("cc-guard", "claude-code"), ("typed-guard", "palisade")] {
        let folder = dir.path().join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(
            folder.join("plugin.toml"),
            format!(
                "name = \"{name}\"\ncommand = [\"/bin/true\"]\nprotocol = \"{protocol}\"\n\
                 [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n"
            ),
        )
        .unwrap();
    }
    let out = palisade(&["check", dir.path().to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(
        stdout.contains("command (claude-code protocol)")
            && stdout.contains("command (palisade protocol)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("warning: cc-guard/pre-tool is a guard speaking Claude Code's lenient"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("typed-guard/pre-tool is a guard"),
        "{stdout}"
    );
}

/// A replay commits the recorded facts with ids of their own — named by the recording, the
/// turn and the tool call — and the same ids in every replay of it (seed 2: the interaction id
/// is the idempotency key of side effects).
#[test]
fn a_replay_gives_each_fact_its_own_id_the_same_in_every_replay() {
    let dir = tempfile::tempdir().unwrap();
    let mut body = String::new();
    for point in [
        "message-committed",
        "tool-call-committed",
        "tool-result-committed",
        "turn-completed",
        "session-ended",
    ] {
        body.push_str(&format!(
            "[[hooks]]\npoint = \"{point}\"\ncapability = \"observe\"\n"
        ));
    }
    server::scripted(dir.path(), "observer", &body);
    let session = dir.path().join("night-shift.jsonl");
    std::fs::write(
        &session,
        [
            r#"{"event": "prompt", "turn": 1, "text": "list"}"#,
            r#"{"event": "tool-call", "call": {"tool_use_id": "t1", "name": "Bash", "arguments": {"command": "ls"}}, "result": {"content_blocks": []}}"#,
            r#"{"event": "stop", "turn": 1, "step": 2}"#,
            r#"{"event": "session-end", "reason": "exit"}"#,
        ]
        .join("\n"),
    )
    .unwrap();
    let replay = || {
        let out = palisade(&[
            "replay",
            dir.path().to_str().unwrap(),
            session.to_str().unwrap(),
            "--format",
            "json",
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut logs: Vec<String> = doc["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|step| step["hooks"].as_array().cloned().unwrap_or_default())
            .flat_map(|hook| hook["logs"].as_array().cloned().unwrap_or_default())
            .map(|l| l.as_str().unwrap().to_string())
            .collect();
        logs.sort();
        logs
    };
    let first = replay();
    assert_eq!(
        first,
        [
            "message night-shift:turn-1:message-0",
            "session-ended night-shift:session-ended",
            "tool-call night-shift:tool-call:t1",
            "tool-result night-shift:tool-result:t1",
            "turn-completed night-shift:turn-1:completed",
        ]
    );
    assert_eq!(replay(), first, "the same facts, the same ids");
}

/// The `http` grant over TLS, end to end: `classifier-guard` asks an HTTPS classifier at a
/// granted name; the certificate is verified for that name against the system's roots (here
/// `SSL_CERT_FILE`, a test authority), the connection going to the address the name resolved
/// to. Without the authority, or granted by address where the certificate names a host, the
/// connection fails and the guard fails closed.
#[test]
fn run_asks_an_https_service_verified_for_the_granted_name() {
    use palisade_tests::web::{Reply, Server, Tls};
    let tls = Tls::for_names(&["localhost"]);
    let service = Server::start_tls(&tls, |r| {
        if String::from_utf8_lossy(&r.body).contains("customer list") {
            Reply::ok(r#"{"verdict":"reject","reason":"customer data"}"#)
        } else {
            Reply::ok(r#"{"verdict":"allow"}"#)
        }
    });
    let work = tempfile::tempdir().unwrap();
    let ca = work.path().join("ca.pem");
    std::fs::write(&ca, &tls.ca_pem).unwrap();
    let dir = work.path().join("plugins");
    let example = palisade_examples::get("classifier-guard").unwrap();
    palisade_examples::install_one(example, &dir).unwrap();
    let manifest = dir.join("classifier-guard/plugin.toml");
    let original = std::fs::read_to_string(&manifest).unwrap();
    let grant = |origin: &str, network: Option<&str>| {
        let entry = match network {
            Some(network) => format!("{{ url = \"{origin}\", network = \"{network}\" }}"),
            None => format!("\"{origin}\""),
        };
        let text = original
            .replace(
                "{ url = \"https://classifier.internal:8443\", network = \"private\" }",
                &entry,
            )
            .replace("https://classifier.internal:8443", origin);
        std::fs::write(&manifest, text).unwrap();
    };
    let step = |text: &str| {
        let path = work.path().join(format!("step-{}.json", text.len()));
        let step = serde_json::json!({ "messages": [{ "role": "user", "text": text }], "turn": 1, "step": 1 });
        std::fs::write(&path, step.to_string()).unwrap();
        path.display().to_string()
    };
    let run = |prompt: &str, trust: bool| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_palisade"));
        command
            .args(["run", dir.to_str().unwrap(), "--point", "prompt-submit"])
            .args(["--input", &step(prompt)])
            .env(
                "PALISADE_CACHE_DIR",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-cache"),
            )
            .env_remove("SSL_CERT_DIR");
        if trust {
            command.env("SSL_CERT_FILE", &ca);
        } else {
            command.env_remove("SSL_CERT_FILE");
        }
        let out = command.output().unwrap();
        let decision: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", text(&out.stderr)));
        let code = decision["reason_code"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        (
            decision["decision"].as_str().unwrap().to_string(),
            code,
            text(&out.stderr),
        )
    };
    let https = format!("https://localhost:{}", service.port);
    grant(&https, Some("loopback"));
    // `check` shows the grant.
    let out = palisade(&["check", dir.to_str().unwrap()]);
    assert!(
        text(&out.stdout).contains(&format!("http: {https} (loopback addresses)")),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(run("summarise the README", true).0, "enter");
    let (decision, code, _) = run("paste the customer list", true);
    assert_eq!(
        (decision.as_str(), code.as_str()),
        ("reject", "classifier-reject")
    );
    assert_eq!(service.received().len(), 2);
    // Not trusted: the certificate is refused; the guard fails closed.
    let (decision, code, stderr) = run("summarise the README", false);
    assert_eq!(
        (decision.as_str(), code.as_str()),
        ("reject", "classifier-unavailable"),
        "{stderr}"
    );
    // Granted (and asked) by address: the certificate names `localhost`, not 127.0.0.1.
    grant(&format!("https://127.0.0.1:{}", service.port), None);
    let (decision, code, stderr) = run("summarise the README", true);
    assert_eq!(
        (decision.as_str(), code.as_str()),
        ("reject", "classifier-unavailable"),
        "{stderr}"
    );
    assert_eq!(
        service.received().len(),
        2,
        "no request was sent over a refused connection"
    );
}

/// The examples, with shell-guard in shadow (its denials recorded, not enforced).
fn examples_with_shell_guard_in_shadow() -> tempfile::TempDir {
    let dir = examples();
    let manifest = dir.path().join("shell-guard/plugin.toml");
    let text_of = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text_of.replacen("[[hooks]]\n", "[[hooks]]\nenforce = false\n", 1),
    )
    .unwrap();
    dir
}

/// A recorded session is untrusted text: `palisade diff` (text and JSON) and `palisade logs`
/// print a session id holding terminal controls (a window title, a screen clear, an 8-bit CSI,
/// a bidirectional override) escaped, never raw; the JSON still holds the id as it was.
#[test]
fn diff_and_logs_print_a_recorded_session_id_escaped() {
    let old = examples();
    let new = examples_with_shell_guard_in_shadow();
    let (old_dir, new_dir) = (old.path().to_str().unwrap(), new.path().to_str().unwrap());
    let work = tempfile::tempdir().unwrap();
    let log = work.path().join("audit.jsonl");
    let log_path = log.to_str().unwrap();
    let hostile = "s\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}2J\u{202e}";
    let recorded: String = ["s1", hostile]
        .iter()
        .map(|id| {
            let input: serde_json::Value =
                serde_json::from_str(&bash_event(id, "rm -rf /")).unwrap();
            let line = serde_json::json!({
                "event": "agent_event", "at_ms": 1, "dialect": "claude-code",
                "session_id": id, "input": input,
            });
            format!("{line}\n")
        })
        .collect();
    std::fs::write(&log, recorded).unwrap();
    let raw = ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'];

    let out = palisade(&["diff", old_dir, new_dir, log_path, "--fail-on", "none"]);
    let printed = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{printed}{}", text(&out.stderr));
    assert!(
        printed.contains(r"#s\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}2J\u{202e}:1 tool-call"),
        "{printed}"
    );
    assert!(!printed.contains(raw), "{printed:?}");

    let out = palisade(&["diff", old_dir, new_dir, log_path, "--format", "json"]);
    let printed = text(&out.stdout);
    assert!(!printed.contains(raw), "{printed:?}");
    let doc: serde_json::Value = serde_json::from_str(&printed).unwrap();
    let sessions: Vec<&str> = doc["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["session"].as_str().unwrap())
        .collect();
    assert_eq!(
        sessions,
        [format!("{log_path}#s1"), format!("{log_path}#{hostile}")],
        "{doc:#}"
    );

    let out = palisade(&["logs", log_path]);
    let printed = text(&out.stdout);
    assert!(out.status.success(), "{printed}{}", text(&out.stderr));
    assert_eq!(printed.lines().count(), 2, "{printed}");
    assert!(!printed.contains(raw), "{printed:?}");
}

/// `palisade diff` over the bundled session: the examples against the same set with
/// shell-guard in shadow lists exactly the events shell-guard denied, now let through
/// (`loosened`), grouped by reason code, and exits 1; `--fail-on tightened` lets that pass;
/// a set against itself differs nowhere; a set that cannot load exits 2.
#[test]
fn diff_lists_exactly_the_changed_events_and_gates_on_a_class() {
    let old = examples();
    let new = examples_with_shell_guard_in_shadow();
    let session = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/commands/demo-session.jsonl");
    let session = session.to_str().unwrap();
    let (old_dir, new_dir) = (old.path().to_str().unwrap(), new.path().to_str().unwrap());

    let out = palisade(&["diff", old_dir, new_dir, session, "--format", "json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let changed: Vec<(u64, String, String)> = doc["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["index"].as_u64().unwrap(),
                c["kind"].as_str().unwrap().to_string(),
                c["new"]["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let loosened = |i| (i, "loosened".to_string(), "allow".to_string());
    assert_eq!(
        changed,
        [loosened(4), loosened(8), loosened(11), loosened(13)],
        "{doc:#}"
    );
    let groups: Vec<(String, String, u64)> = doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["hook"].as_str().unwrap().to_string(),
                g["reason_code"].as_str().unwrap().to_string(),
                g["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        groups,
        [
            (
                "shell-guard/pre-tool".into(),
                "destructive-delete".into(),
                1
            ),
            ("shell-guard/pre-tool".into(), "force-push-main".into(), 1),
            ("shell-guard/pre-tool".into(), "fork-bomb".into(), 1),
            ("shell-guard/pre-tool".into(), "pipe-to-shell".into(), 1),
        ],
        "{doc:#}"
    );

    let out = palisade(&["diff", old_dir, new_dir, session, "--fail-on", "tightened"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("4 of 16 event(s) in 1 session(s) differ"),
        "{}",
        text(&out.stdout)
    );

    let out = palisade(&["diff", old_dir, old_dir, session]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("0 of 16 event(s)"),
        "{}",
        text(&out.stdout)
    );

    let out = palisade(&["diff", old_dir, "/nonexistent/plugins", session]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// Runs `palisade ARGS` with `stdin`.
fn palisade_with_input(args: &[&str], stdin: &str) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(args)
        .env(
            "PALISADE_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-cache"),
        )
        .env(
            "PALISADE_STATE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-state"),
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    crate::process::fed(child, stdin)
        .wait_with_output()
        .unwrap()
}

fn bash_event(session: &str, command: &str) -> String {
    serde_json::json!({
        "session_id": session,
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/tmp",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": command },
        "tool_use_id": "toolu_1",
    })
    .to_string()
}

/// `palisade logs` over an audit log the Claude Code bridge wrote: filters by outcome,
/// session and hook, a summary per hook, an unreadable line reported (not hidden), and
/// `--follow` printing what is appended.
#[test]
fn logs_filters_summarises_and_follows_an_audit_log() {
    let dir = examples();
    let plugins = dir.path().to_str().unwrap();
    let work = tempfile::tempdir().unwrap();
    let log = work.path().join("audit.jsonl");
    let log_path = log.to_str().unwrap();
    for (session, command) in [("s1", "rm -rf /"), ("s2", "ls -la")] {
        let out = palisade_with_input(
            &["claude-code", "--audit-log", log_path, plugins],
            &bash_event(session, command),
        );
        assert!(out.status.success(), "{out:?}");
    }

    let out = palisade(&["logs", log_path, "--outcome", "deny"]);
    let printed = text(&out.stdout);
    assert!(out.status.success(), "{printed}{}", text(&out.stderr));
    let lines: Vec<_> = printed.lines().collect();
    assert_eq!(lines.len(), 1, "{printed}");
    assert!(
        lines[0].contains(" s1 hook_denied ")
            && lines[0].contains("shell-guard/pre-tool destructive-delete"),
        "{printed}"
    );

    let out = palisade(&["logs", log_path, "--session", "s2", "--hook", "shell-guard"]);
    let printed = text(&out.stdout);
    assert!(
        !printed.is_empty() && printed.lines().all(|l| l.contains(" s2 ")),
        "{printed}"
    );
    assert!(
        printed.contains("hook_completed  shell-guard/pre-tool allow"),
        "{printed}"
    );

    let out = palisade(&["logs", log_path, "--summary", "--since", "1h"]);
    let printed = text(&out.stdout);
    let row = printed
        .lines()
        .find(|l| l.starts_with("shell-guard/pre-tool"))
        .unwrap_or_else(|| panic!("{printed}"));
    let cells: Vec<_> = row.split_whitespace().collect();
    // CALLS, then (after the latencies and fuel) DENIED, FAILED, SHADOWED.
    assert_eq!(cells[1], "2", "{printed}");
    assert_eq!(&cells[7..10], ["1", "0", "0"], "{printed}");
    // Nothing in the future.
    let out = palisade(&["logs", log_path, "--until", "1h"]);
    assert!(text(&out.stdout).is_empty(), "{}", text(&out.stdout));

    // A line that is not an event is reported, and makes the exit status 1.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"not json\n"))
        .unwrap();
    let out = palisade(&["logs", log_path]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("not a lifecycle event"),
        "{out:?}"
    );

    // --follow prints what is appended.
    let mut follower = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(["logs", "--follow", "--session", "s3", log_path])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = follower.stdout.take().unwrap();
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            if send.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let out = palisade_with_input(
        &["claude-code", "--audit-log", log_path, plugins],
        &bash_event("s3", "rm -rf /"),
    );
    assert!(out.status.success(), "{out:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut seen = Vec::new();
    while std::time::Instant::now() < deadline {
        match receive.recv_timeout(std::time::Duration::from_millis(200)) {
            Ok(line) => {
                let denied = line.contains("hook_denied");
                seen.push(line);
                if denied {
                    break;
                }
            }
            Err(_) => continue,
        }
    }
    assert!(
        seen.iter().any(|l| l.contains(" s3 hook_denied ")),
        "{seen:#?}"
    );
    // Rotated: the old log moved away, a new one at its path is followed from its start,
    // and nothing of the old one is printed again.
    std::fs::rename(&log, work.path().join("audit.jsonl.1")).unwrap();
    let out = palisade_with_input(
        &["claude-code", "--audit-log", log_path, plugins],
        &bash_event("s3", "git push --force origin main"),
    );
    assert!(out.status.success(), "{out:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut after = Vec::new();
    while std::time::Instant::now() < deadline {
        if let Ok(line) = receive.recv_timeout(std::time::Duration::from_millis(200)) {
            let denied = line.contains("hook_denied");
            after.push(line);
            if denied {
                break;
            }
        }
    }
    let _ = follower.kill();
    let _ = follower.wait();
    assert!(
        after
            .iter()
            .any(|l| l.contains(" s3 hook_denied ") && l.contains("force-push")),
        "{after:#?}"
    );
    assert!(
        !after.iter().any(|l| l.contains("destructive-delete")),
        "the old log was printed again: {after:#?}"
    );
}

/// `palisade logs … | head`: a reader that goes away ends the process quietly, with the status
/// of a process SIGPIPE killed (141), not a panic (101) at the next line it prints.
#[test]
fn a_reader_that_goes_away_ends_the_output_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let line = r#"{"event":"hook_completed","duration_us":12,"fuel_consumed":3,"decision":"allow","honoured":true,"at_ms":1,"session_id":"s","invocation_id":"inv-1","hook_id":"g/pre-tool","plugin":"g","point":"pre-tool"}"#;
    std::fs::write(&log, format!("{line}\n")).unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(["logs", log.to_str().unwrap()])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}
