//! `palisade claude-code` and `palisade codex` as the agents run them: one process per event,
//! the event's JSON (recorded from the real CLIs, under `samples/`) on stdin.

use crate::server;

use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("bridge-cache")
}

/// This test process's plugin state (never the user's).
fn state_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

fn palisade(args: &[&str], stdin: &str) -> Output {
    palisade_caching_in(&cache_dir(), args, stdin)
}

/// [`palisade`] with the component cache `cache`.
fn palisade_caching_in(cache: &Path, args: &[&str], stdin: &str) -> Output {
    started(cache, args, stdin).wait_with_output().unwrap()
}

/// `palisade ARGS` started with the component cache `cache`, `stdin` written to it and
/// closed, its output piped.
fn started(cache: &Path, args: &[&str], stdin: &str) -> std::process::Child {
    crate::process::fed(spawned(cache, args), stdin)
}

/// `palisade ARGS` started with the component cache `cache`, its stdin and output piped.
fn spawned(cache: &Path, args: &[&str]) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(args)
        .env("PALISADE_CACHE_DIR", cache)
        .env("PALISADE_STATE_DIR", state_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `child`'s output once it has exited; fails the test (killing it) if it has not answered 20 s
/// in — an event with a budget of `budget_ms`.
fn answered_in_time(mut child: std::process::Child, budget_ms: u64) -> Output {
    let started = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > std::time::Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("no answer 20 s into an event with a budget of {budget_ms} ms");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn sample(agent: &str, event: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/samples/{agent}/{event}.json")),
    )
    .unwrap()
}

/// A plugin directory with one scripted plugin: `body` is its manifest after `name`/`wasm`.
fn plugins(body: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    server::scripted(dir.path(), "scripted", body);
    dir
}

fn answer(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "status {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {:?}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

const EVERY_POINT: &str = r#"
[[hooks]]
point = "session-start"
capability = "transform"
[[hooks]]
point = "prompt-submit"
capability = ["guard", "transform"]
[[hooks]]
point = "pre-tool"
capability = "guard"
[[hooks]]
point = "post-tool"
capability = ["guard", "transform"]
[[hooks]]
point = "turn-stopping"
capability = "steer"
[[hooks]]
point = "session-ended"
capability = "observe"
[config]
contexts = ["ctx"]
pre_tool = "deny"
post_tool = "block"
turn_stopping = "steer"
"#;

#[test]
fn every_recorded_event_of_both_agents_gets_its_answer() {
    let dir = plugins(EVERY_POINT);
    let audit = dir.path().join("audit.jsonl");
    for (agent, command) in [("claude", "claude-code"), ("codex", "codex")] {
        let run = |event: &str| {
            palisade(
                &[
                    command,
                    dir.path().to_str().unwrap(),
                    "--audit-log",
                    audit.to_str().unwrap(),
                ],
                &sample(agent, event),
            )
        };
        let at = |event: &str| format!("{agent} {event}");

        let start = answer(&run("SessionStart"));
        assert_eq!(
            start,
            json!({"hookSpecificOutput": {"hookEventName": "SessionStart",
                "additionalContext": "ctx (SessionSource::Startup)"}}),
            "{}",
            at("SessionStart")
        );
        let prompt = answer(&run("UserPromptSubmit"));
        assert_eq!(
            prompt,
            json!({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                "additionalContext": "ctx"}}),
            "{}",
            at("UserPromptSubmit")
        );
        let pre = answer(&run("PreToolUse"));
        assert_eq!(
            pre,
            json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "deny", "permissionDecisionReason": "denied Bash"}}),
            "{}",
            at("PreToolUse")
        );
        let post = answer(&run("PostToolUse"));
        assert_eq!(post["decision"], "block", "{}: {post}", at("PostToolUse"));
        assert!(
            post["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("blocked Bash")),
            "{}: {post}",
            at("PostToolUse")
        );
        let stop = answer(&run("Stop"));
        assert_eq!(
            stop,
            json!({"decision": "block", "reason": "keep going (turn 1)"}),
            "{}",
            at("Stop")
        );
        let end = run("SessionEnd");
        assert!(end.status.success() && end.stdout.is_empty(), "{end:?}");
    }
    // Every event left its trace in the audit log, the session-end observer included.
    let log = std::fs::read_to_string(&audit).unwrap();
    for hook in [
        "scripted/session-start",
        "scripted/prompt-submit",
        "scripted/pre-tool",
        "scripted/post-tool",
        "scripted/turn-stopping",
        "scripted/session-ended",
    ] {
        assert!(
            log.contains(&format!("\"hook_id\":\"{hook}\"")),
            "{hook} missing from the audit log:\n{log}"
        );
    }
}

#[test]
fn an_ask_is_an_ask_for_claude_code_and_a_deny_for_codex() {
    let dir = plugins(
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"ask\"\n",
    );
    let path = dir.path().to_str().unwrap();
    let claude = answer(&palisade(
        &["claude-code", path],
        &sample("claude", "PreToolUse"),
    ));
    assert_eq!(
        claude["hookSpecificOutput"]["permissionDecision"], "ask",
        "{claude}"
    );
    assert_eq!(
        claude["hookSpecificOutput"]["permissionDecisionReason"],
        "may Bash run?"
    );
    // Codex honours only deny at PreToolUse: an ask it cannot put to the user is a denial.
    let codex = answer(&palisade(&["codex", path], &sample("codex", "PreToolUse")));
    assert_eq!(
        codex["hookSpecificOutput"]["permissionDecision"], "deny",
        "{codex}"
    );
    let reason = codex["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap();
    assert!(
        reason.contains("may Bash run?") && reason.contains("Codex"),
        "{reason}"
    );
}

#[test]
fn an_event_remembers_its_largest_component_and_the_next_loads_it_ahead_whatever_the_hint() {
    let cache = tempfile::tempdir().unwrap();
    let dir = plugins(
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"deny\"\n",
    );
    let path = dir.path().to_str().unwrap();
    let event = sample("claude", "PreToolUse");
    let denies = || {
        let out = answer(&palisade_caching_in(
            cache.path(),
            &["claude-code", path],
            &event,
        ));
        assert_eq!(
            out["hookSpecificOutput"]["permissionDecision"], "deny",
            "{out}"
        );
    };
    // The compiled component's digest names its cache entry.
    let compiled = || -> String {
        let mut entries = Vec::new();
        for dir in std::fs::read_dir(cache.path()).unwrap() {
            let dir = dir.unwrap().path();
            if dir.is_dir() && dir.file_name().unwrap() != "ahead" {
                for entry in std::fs::read_dir(&dir).unwrap() {
                    let entry = entry.unwrap().path();
                    if entry.extension().is_some_and(|e| e == "cwasm") {
                        entries.push(entry.file_stem().unwrap().to_str().unwrap().to_string());
                    }
                }
            }
        }
        assert_eq!(entries.len(), 1, "{entries:?}");
        entries.remove(0)
    };
    let hints = || -> Vec<PathBuf> {
        std::fs::read_dir(cache.path().join("ahead"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    };
    denies();
    let hint = match hints().as_slice() {
        [hint] => hint.clone(),
        other => panic!("one hint expected: {other:?}"),
    };
    assert_eq!(
        std::fs::read_to_string(&hint).unwrap(),
        format!("{}\n", compiled())
    );
    // Loaded ahead from the hint, the component answers as before; a hint that is no digest,
    // or that names a component the cache does not hold, is only a hint: the event is
    // answered by the plugin's own component, and the hint is mended.
    denies();
    for wrong in ["not a digest\n", &format!("{}\n", "0".repeat(64)), ""] {
        std::fs::write(&hint, wrong).unwrap();
        denies();
        assert_eq!(hints(), std::slice::from_ref(&hint));
        assert_eq!(
            std::fs::read_to_string(&hint).unwrap(),
            format!("{}\n", compiled()),
            "after {wrong:?}"
        );
    }
}

#[test]
fn no_objection_answers_nothing_so_the_agents_own_rules_decide() {
    let dir = plugins("[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n");
    let out = palisade(
        &["claude-code", dir.path().to_str().unwrap()],
        &sample("claude", "PreToolUse"),
    );
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn a_bridge_that_cannot_work_blocks_tool_calls_and_prompts_but_not_stops() {
    let missing = "/no/such/plugin/dir";
    for (event, status) in [
        ("PreToolUse", 2),
        ("UserPromptSubmit", 2),
        ("Stop", 1),
        ("SessionStart", 1),
    ] {
        let out = palisade(&["claude-code", missing], &sample("claude", event));
        assert_eq!(out.status.code(), Some(status), "{event}: {out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("palisade: cannot load the plugins of /no/such/plugin/dir"),
            "{event}: {stderr}"
        );
    }
    // Unreadable input: nothing says what it was, so it blocks.
    let out = palisade(&["claude-code", missing], "not json");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

#[test]
fn events_without_a_point_run_nothing() {
    let dir = plugins(EVERY_POINT);
    for event in ["Notification", "PreCompact"] {
        let input = json!({"session_id": "s", "hook_event_name": event}).to_string();
        let out = palisade(&["claude-code", dir.path().to_str().unwrap()], &input);
        assert!(
            out.status.success() && out.stdout.is_empty(),
            "{event}: {out:?}"
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("has no Palisade point"),
            "{event}: {out:?}"
        );
    }
}

#[test]
fn an_existing_shell_hook_runs_as_a_command_plugin_through_the_bridge() {
    // The example `no-force-push`: a plain Claude Code hook script (exit 2 blocks).
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../example-plugins/no-force-push");
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("no-force-push");
    std::fs::create_dir_all(&folder).unwrap();
    for file in ["plugin.toml", "hook.sh"] {
        std::fs::copy(examples.join(file), folder.join(file)).unwrap();
    }
    let event = |command: &str| {
        json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": command}, "tool_use_id": "t"})
        .to_string()
    };
    let path = dir.path().to_str().unwrap();
    let denied = answer(&palisade(
        &["claude-code", path],
        &event("git push --force origin main"),
    ));
    assert_eq!(denied["hookSpecificOutput"]["permissionDecision"], "deny");
    assert!(
        denied["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .unwrap()
            .starts_with("Refused: force-pushing")
    );
    let allowed = palisade(&["claude-code", path], &event("git push origin main"));
    assert!(
        allowed.status.success() && allowed.stdout.is_empty(),
        "{allowed:?}"
    );
}

/// An event whose text holds a lone surrogate's escape (Claude Code writes one for a string
/// with a lone surrogate; serde_json alone refuses it) is judged, not refused unread: a
/// post-tool block answers as for any other result.
#[test]
fn an_event_with_a_lone_surrogate_is_judged() {
    let dir = plugins(EVERY_POINT);
    let event = sample("claude", "PostToolUse").replacen(
        "\"tool_response\": {",
        "\"tool_response\": {\"note\": \"x\\ud800y\",",
        1,
    );
    assert!(event.contains("\\ud800"), "{event}");
    let post = answer(&palisade(
        &["claude-code", dir.path().to_str().unwrap()],
        &event,
    ));
    assert_eq!(post["decision"], "block", "{post}");
}

/// `install zed --settings` adds (or, again, replaces) its agent server and keeps the rest; a
/// settings file it cannot read as JSON is left as it is, with the way out.
#[test]
fn install_zed_merges_an_agent_server_and_keeps_other_settings() {
    let dir = plugins(EVERY_POINT);
    let home = tempfile::tempdir().unwrap();
    let settings = home.path().join("zed/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let theirs = json!({"theme": "One Dark", "agent_servers": {"Other": {"command": "other-acp"}}});
    std::fs::write(&settings, theirs.to_string()).unwrap();
    let args = |settings: &Path| {
        vec![
            "install".to_string(),
            "zed".into(),
            "--plugins".into(),
            dir.path().display().to_string(),
            "--name".into(),
            "Guarded".into(),
            "--settings".into(),
            settings.display().to_string(),
            "--".into(),
            "npx".into(),
            "@agentclientprotocol/claude-agent-acp".into(),
        ]
    };
    let install = || {
        let args = args(&settings);
        let out = palisade(&args.iter().map(String::as_str).collect::<Vec<_>>(), "");
        assert!(out.status.success(), "{out:?}");
        serde_json::from_str::<Value>(&std::fs::read_to_string(&settings).unwrap()).unwrap()
    };
    let once = install();
    assert_eq!(once, install(), "re-installing changes nothing");
    assert_eq!(once["theme"], "One Dark", "other settings are kept");
    assert_eq!(once["agent_servers"]["Other"]["command"], "other-acp");
    let ours = &once["agent_servers"]["Guarded"];
    assert!(
        ours["command"].as_str().unwrap().ends_with("palisade"),
        "{ours}"
    );
    let canonical = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        ours["args"],
        json!([
            "acp",
            "--plugins",
            canonical,
            "--",
            "npx",
            "@agentclientprotocol/claude-agent-acp"
        ])
    );
    // Zed's own files may carry comments: not plain JSON, so not rewritten.
    let commented = home.path().join("commented.json");
    let text = "// Zed settings\n{\"theme\": \"One Dark\"}\n";
    std::fs::write(&commented, text).unwrap();
    let args = args(&commented);
    let out = palisade(&args.iter().map(String::as_str).collect::<Vec<_>>(), "");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("commented.json is not plain JSON") && stderr.contains("by hand"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&commented).unwrap(), text);
}

/// An event with no point that the agent reports is recorded as having happened: an audit log
/// gets an `agent_event` line naming it (not what it says: that takes `--record`), and
/// `install --observe` registers every such event but the one whose hook would act in the
/// agent's place (`WorktreeCreate`), and only with an audit log to record into.
#[test]
fn an_event_with_no_point_is_recorded_and_install_observe_registers_it() {
    let dir = plugins(EVERY_POINT);
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("audit.jsonl");
    let input = json!({"session_id": "observed", "hook_event_name": "Notification",
        "message": "Claude needs your permission to use Bash"});
    let plain = [
        "claude-code",
        dir.path().to_str().unwrap(),
        "--audit-log",
        log.to_str().unwrap(),
    ];
    let out = palisade(&plain, &input.to_string());
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    let audit = server::log_having(&log, |log| log.contains("agent_event"));
    let line: Value = serde_json::from_str(audit.lines().next().unwrap()).unwrap();
    assert_eq!(line["event"], "agent_event", "{line}");
    assert_eq!(line["dialect"], "claude-code", "{line}");
    assert_eq!(line["input"]["hook_event_name"], "Notification", "{line}");
    assert_eq!(line["session_id"], "observed", "{line}");
    assert!(line["input"].get("message").is_none(), "{line}");
    // With --record, the event as the agent wrote it.
    std::fs::remove_file(&log).unwrap();
    let recorded = [&plain[..], &["--record"]].concat();
    palisade(&recorded, &input.to_string());
    let audit = server::log_having(&log, |log| log.contains("agent_event"));
    assert!(audit.contains("needs your permission"), "{audit}");

    let install = |extra: &[&str]| {
        let args = [
            &["install", "claude-code", dir.path().to_str().unwrap()],
            extra,
        ]
        .concat();
        palisade(&args, "")
    };
    let refused = install(&["--observe"]);
    assert!(!refused.status.success(), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--audit-log"),
        "{refused:?}"
    );
    let out = install(&["--observe", "--audit-log", log.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let hooks: Value = serde_json::from_slice(&out.stdout).unwrap();
    for event in ["Notification", "PreCompact", "CwdChanged", "SubagentStart"] {
        assert!(hooks["hooks"].get(event).is_some(), "{event}: {hooks}");
    }
    assert!(hooks["hooks"].get("WorktreeCreate").is_none(), "{hooks}");
    let without = install(&[]);
    let hooks: Value = serde_json::from_slice(&without.stdout).unwrap();
    assert!(hooks["hooks"].get("Notification").is_none(), "{hooks}");
}

/// Claude Code's `ConfigChange` (a settings file changed on disk, about to load into the
/// session) is judged as a call of `config/change`: a guard on it keeps the change from
/// loading, a hook on other tools does not see it, and `install` registers the event for a
/// hook whose matcher takes it.
#[test]
fn a_guard_keeps_a_settings_change_from_loading() {
    let dir = tempfile::tempdir().unwrap();
    server::scripted(
        dir.path(),
        "settings-guard",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"config/change\"\n\
         [config]\npre_tool = \"deny\"\n",
    );
    let change = json!({ "session_id": "s", "hook_event_name": "ConfigChange",
        "source": "project_settings", "file_path": "/p/.claude/settings.json" });
    let out = palisade(
        &["claude-code", dir.path().to_str().unwrap()],
        &change.to_string(),
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    assert_eq!(answer["decision"], "block", "{out:?}");
    let install = palisade(
        &["install", "claude-code", dir.path().to_str().unwrap()],
        "",
    );
    let hooks: Value = serde_json::from_slice(&install.stdout).unwrap();
    assert!(hooks["hooks"].get("ConfigChange").is_some(), "{hooks}");
    // A guard of the shell sees no settings change, and install does not register it.
    let shell = tempfile::tempdir().unwrap();
    server::scripted(
        shell.path(),
        "shell-guard",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"@shell\"\n\
         [config]\npre_tool = \"deny\"\n",
    );
    let out = palisade(
        &["claude-code", shell.path().to_str().unwrap()],
        &change.to_string(),
    );
    assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
    let install = palisade(
        &["install", "claude-code", shell.path().to_str().unwrap()],
        "",
    );
    let hooks: Value = serde_json::from_slice(&install.stdout).unwrap();
    assert!(hooks["hooks"].get("ConfigChange").is_none(), "{hooks}");
}

#[test]
fn install_merges_into_claude_code_settings_and_reinstalls_in_place() {
    let dir = plugins(EVERY_POINT);
    let settings_dir = tempfile::tempdir().unwrap();
    let settings = settings_dir.path().join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let theirs = json!({"model": "opus", "hooks": {"PreToolUse": [
        {"matcher": "Write", "hooks": [{"type": "command", "command": "./lint.sh"}]}]}});
    std::fs::write(&settings, theirs.to_string()).unwrap();
    let install = || {
        let out = palisade(
            &[
                "install",
                "claude-code",
                dir.path().to_str().unwrap(),
                "--settings",
                settings.to_str().unwrap(),
            ],
            "",
        );
        assert!(out.status.success(), "{out:?}");
        serde_json::from_str::<Value>(&std::fs::read_to_string(&settings).unwrap()).unwrap()
    };
    let once = install();
    let twice = install();
    assert_eq!(once, twice, "re-installing changes nothing");
    assert_eq!(twice["model"], "opus", "other settings are kept");
    let pre = twice["hooks"]["PreToolUse"].as_array().unwrap();
    assert_eq!(pre.len(), 2, "{pre:?}");
    assert_eq!(
        pre[0]["hooks"][0]["command"], "./lint.sh",
        "their hook is kept"
    );
    let ours = pre[1]["hooks"][0]["command"].as_str().unwrap();
    assert!(ours.contains(" claude-code "), "{ours}");
    for event in [
        "SessionStart",
        "UserPromptSubmit",
        "PostToolUse",
        "Stop",
        "SessionEnd",
    ] {
        assert_eq!(
            twice["hooks"][event].as_array().map(Vec::len),
            Some(1),
            "{event}: {twice}"
        );
    }
    // A bridge that crashes or times out blocks what the event guards; at the stop and the
    // session events (which guard nothing, or would keep the agent going) it does not.
    for (event, on_failure) in [
        ("PreToolUse", json!("block")),
        ("UserPromptSubmit", json!("block")),
        ("PostToolUse", json!("block")),
        ("Stop", Value::Null),
        ("SessionStart", Value::Null),
        ("SessionEnd", Value::Null),
    ] {
        let entries = twice["hooks"][event].as_array().unwrap();
        let ours = &entries[entries.len() - 1]["hooks"][0];
        assert_eq!(ours["onFailure"], on_failure, "{event}: {ours}");
    }
    assert!(
        pre[0]["hooks"][0].get("onFailure").is_none(),
        "theirs untouched"
    );
}

/// `palisade install claude-code DIR --settings SETTINGS`, which must succeed.
fn install_claude_code_into(dir: &Path, settings: &Path) -> Output {
    let out = palisade(
        &[
            "install",
            "claude-code",
            dir.to_str().unwrap(),
            "--settings",
            settings.to_str().unwrap(),
        ],
        "",
    );
    assert!(out.status.success(), "{out:?}");
    out
}

/// The permission bits of `path`, in octal.
fn mode_of(path: &Path) -> String {
    use std::os::unix::fs::PermissionsExt;
    format!(
        "{:o}",
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    )
}

/// The names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Settings can hold an API key: `install --settings` keeps the file's mode (0600 stays 0600,
/// 0640 stays 0640 whatever the umask), makes a new file 0600, and leaves no temporary file.
#[test]
fn install_keeps_the_mode_of_the_settings_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = plugins(EVERY_POINT);
    let home = tempfile::tempdir().unwrap();
    for mode in [0o600, 0o640] {
        let settings = home.path().join(format!("settings-{mode:o}.json"));
        std::fs::write(&settings, r#"{"env": {"ANTHROPIC_API_KEY": "sk-secret"}}"#).unwrap();
        std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(mode)).unwrap();
        install_claude_code_into(dir.path(), &settings);
        assert_eq!(
            mode_of(&settings),
            format!("{mode:o}"),
            "{}",
            settings.display()
        );
        let merged: Value =
            serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
        assert_eq!(merged["env"]["ANTHROPIC_API_KEY"], "sk-secret");
        assert!(merged["hooks"]["PreToolUse"].is_array(), "{merged}");
    }
    let new = home.path().join("new/settings.json");
    install_claude_code_into(dir.path(), &new);
    assert_eq!(mode_of(&new), "600");
    assert_eq!(
        names_in(home.path()),
        ["new", "settings-600.json", "settings-640.json"]
    );
    assert_eq!(names_in(&home.path().join("new")), ["settings.json"]);
}

/// A link planted beside the settings file at a name an older install wrote its temporary
/// file to (say, committed in a cloned repository) is never written through: the file it
/// points at is untouched, and the settings file is a file of its own.
#[test]
fn install_never_writes_through_a_link_planted_beside_the_settings_file() {
    let dir = plugins(EVERY_POINT);
    let home = tempfile::tempdir().unwrap();
    let victim = home.path().join("victim");
    std::fs::write(&victim, "the user's own file\n").unwrap();
    let repo = home.path().join("repo/.claude");
    std::fs::create_dir_all(&repo).unwrap();
    let settings = repo.join("settings.json");
    std::fs::write(&settings, "{}").unwrap();
    std::os::unix::fs::symlink(&victim, repo.join("settings.json.palisade-tmp")).unwrap();
    install_claude_code_into(dir.path(), &settings);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "the user's own file\n"
    );
    assert!(
        !std::fs::symlink_metadata(&settings)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert!(merged["hooks"]["PreToolUse"].is_array(), "{merged}");
}

/// A settings file that is a symbolic link (a dotfile manager's) is written through on
/// purpose: the link stays, the file it leads to gets the hooks and keeps its mode, and the
/// message names both.
#[test]
fn install_writes_through_a_settings_file_that_is_a_link() {
    let dir = plugins(EVERY_POINT);
    let home = tempfile::tempdir().unwrap();
    let dotfiles = home.path().join("dotfiles");
    std::fs::create_dir_all(&dotfiles).unwrap();
    let real = dotfiles.join("claude-settings.json");
    std::fs::write(&real, r#"{"model": "opus"}"#).unwrap();
    std::fs::set_permissions(&real, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let claude = home.path().join(".claude");
    std::fs::create_dir_all(&claude).unwrap();
    let settings = claude.join("settings.json");
    let link = Path::new("../dotfiles/claude-settings.json");
    std::os::unix::fs::symlink(link, &settings).unwrap();
    let out = install_claude_code_into(dir.path(), &settings);
    assert_eq!(std::fs::read_link(&settings).unwrap(), link);
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&real).unwrap()).unwrap();
    assert_eq!(merged["model"], "opus");
    assert!(merged["hooks"]["PreToolUse"].is_array(), "{merged}");
    assert_eq!(mode_of(&real), "600");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("(a link to "), "{stdout}");
    assert_eq!(names_in(&dotfiles), ["claude-settings.json"]);
    assert_eq!(names_in(&claude), ["settings.json"]);
}

#[test]
fn forward_answers_what_palisade_serve_answers_and_fails_like_the_bridge() {
    let dir = plugins(
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"deny\"\n",
    );
    let served = server::Server::start(dir.path(), &[], &[]);
    let url = format!("{}/claude-code", served.url());
    let token_file = served.token_file.to_str().unwrap().to_string();
    let forward = ["forward", &url, "--token-file", &token_file];
    let out = palisade(&forward, &sample("claude", "PreToolUse"));
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
    // No server: a guarding event blocks (exit 2), as the command bridge would; elsewhere
    // the error does not block (exit 1).
    let kept = tempfile::tempdir().unwrap();
    let token_copy = kept.path().join("token");
    std::fs::copy(&served.token_file, &token_copy).unwrap();
    drop(served);
    let forward = [
        "forward",
        &url,
        "--token-file",
        token_copy.to_str().unwrap(),
    ];
    let out = palisade(&forward, &sample("claude", "PreToolUse"));
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("did not answer"),
        "{out:?}"
    );
    let out = palisade(&forward, &sample("claude", "SessionStart"));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
}

#[test]
fn forward_answers_within_its_budget_when_the_server_is_slow() {
    let dir = plugins(
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\ntimeout_ms = 20000\n\
         [config]\npre_tool = \"sleep\"\n",
    );
    let served = server::Server::start(dir.path(), &[], &[]);
    let url = format!("{}/claude-code", served.url());
    let started = std::time::Instant::now();
    let out = palisade(
        &[
            "forward",
            &url,
            "--token-file",
            served.token_file.to_str().unwrap(),
            "--budget-ms",
            "700",
        ],
        &sample("claude", "PreToolUse"),
    );
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("700 ms"), "{stderr}");
    assert!(took < std::time::Duration::from_secs(5), "took {took:?}");
}

#[test]
fn the_answer_goes_out_before_observers_and_the_process_exits_in_time() {
    // A guard that denies, and a background observer of the same event that runs for 8 s.
    let dir = tempfile::tempdir().unwrap();
    server::scripted(
        dir.path(),
        "guard",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"deny\"\n",
    );
    server::scripted(
        dir.path(),
        "watcher",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"observe\"\nmode = \"background\"\n\
         priority = -1\ntimeout_ms = 8000\n[config]\npre_tool = \"sleep\"\n",
    );
    let audit = dir.path().join("audit.jsonl");
    let started = std::time::Instant::now();
    let out = palisade(
        &[
            "claude-code",
            dir.path().to_str().unwrap(),
            "--audit-log",
            audit.to_str().unwrap(),
        ],
        &sample("claude", "PreToolUse"),
    );
    let took = started.elapsed();
    let json = answer(&out);
    assert_eq!(
        json["hookSpecificOutput"]["permissionDecision"], "deny",
        "{json}"
    );
    // The observer's 8 s did not delay the answer nor the exit (a bounded drain: 2 s).
    assert!(took < std::time::Duration::from_secs(6), "took {took:?}");
    let log = std::fs::read_to_string(&audit).unwrap();
    assert!(
        log.lines().any(|l| l.contains("\"hook_failed\"")
            && l.contains("\"dropped\"")
            && l.contains("watcher/pre-tool")),
        "the cut-off observer is not recorded as dropped:\n{log}"
    );
}

#[test]
fn an_event_whose_budget_runs_out_gets_its_fail_closed_answer_naming_what_overran() {
    let dir = plugins(
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\ntimeout_ms = 20000\n\
         [config]\npre_tool = \"sleep\"\n",
    );
    // Compile the component into the cache first (a cold compile on a slow machine can take
    // longer than the budget below, which would then run out while loading, not in the hook).
    // `check` loads every hook; a bridged event loads only its own point's (a `SessionStart`
    // would compile nothing here).
    let warm = palisade(&["check", dir.path().to_str().unwrap()], "");
    assert!(
        warm.status.success(),
        "{}",
        String::from_utf8_lossy(&warm.stderr)
    );
    let started = std::time::Instant::now();
    let out = palisade(
        &[
            "claude-code",
            dir.path().to_str().unwrap(),
            "--budget-ms",
            "700",
        ],
        &sample("claude", "PreToolUse"),
    );
    let took = started.elapsed();
    refused_for_the_budget_of_700_ms(&out);
    assert!(took < std::time::Duration::from_secs(5), "took {took:?}");
}

/// A `PreToolUse` event through `claude-code DIR --audit-log LOG --budget-ms BUDGET`; fails
/// the test if it has not answered 20 s in.
fn bridged_logging_to(dir: &Path, log: &Path, budget_ms: u64) -> Output {
    let budget = budget_ms.to_string();
    let child = started(
        &cache_dir(),
        &[
            "claude-code",
            dir.to_str().unwrap(),
            "--audit-log",
            log.to_str().unwrap(),
            "--budget-ms",
            &budget,
        ],
        &sample("claude", "PreToolUse"),
    );
    answered_in_time(child, budget_ms)
}

/// A bridged agent keeps its own result where its protocol cannot carry post-tool's answer
/// back, and what it keeps is what `tool-result` sees and the audit log shows: Claude Code
/// takes a replaced shell output (`updatedToolOutput`) and keeps the result after a block
/// (whose feedback its model reads beside it); Codex keeps its result after a replacement;
/// Gemini CLI's model reads a block's feedback instead of the result. What was not applied is
/// recorded as `hook_not_applied`.
#[test]
fn a_bridged_agent_commits_the_result_it_keeps_and_records_what_it_could_not_apply() {
    let cases = [
        (
            "claude-code",
            "upper",
            "PostToolUse",
            "saw HELLO WORLD",
            None,
        ),
        (
            "codex",
            "upper",
            "PostToolUse",
            "saw hello world",
            Some("replace"),
        ),
        (
            "claude-code",
            "block",
            "PostToolUse",
            "saw hello world",
            Some("block"),
        ),
        ("gemini", "block", "AfterTool", "saw error blocked", None),
    ];
    for (agent, post_tool, event, saw, not_applied) in cases {
        let dir = tempfile::tempdir().unwrap();
        server::scripted(
            dir.path(),
            "post",
            &format!(
                "[[hooks]]\npoint = \"post-tool\"\ncapability = [\"guard\", \"transform\"]\n\
                 [config]\npost_tool = \"{post_tool}\"\n"
            ),
        );
        server::scripted(
            dir.path(),
            "audit",
            "[[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\n\
             [config]\ntool_result = \"echo\"\n",
        );
        let log = dir.path().join("audit.jsonl");
        let response = match agent {
            "gemini" => json!({ "llmContent": "hello world" }),
            _ => json!({ "stdout": "hello world", "stderr": "" }),
        };
        let input = json!({ "session_id": "kept", "hook_event_name": event, "cwd": "/",
            "tool_name": "Bash", "tool_input": { "command": "echo hello world" },
            "tool_use_id": "toolu_1", "tool_response": response });
        let args = [
            agent,
            dir.path().to_str().unwrap(),
            "--audit-log",
            log.to_str().unwrap(),
        ];
        let out = palisade(&args, &input.to_string());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        if (agent, post_tool) == ("claude-code", "upper") {
            // Claude Code takes a replaced result in the tool's own shape.
            let answer = answer(&out);
            let updated = &answer["hookSpecificOutput"]["updatedToolOutput"];
            assert_eq!(updated["stdout"], "HELLO WORLD", "{answer}");
        }
        let events: Vec<Value> = std::fs::read_to_string(&log)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let saw_lines: Vec<&str> = events
            .iter()
            .filter(|e| e["event"] == "plugin_log")
            .filter_map(|e| e["message"].as_str())
            .collect();
        assert!(
            saw_lines.iter().any(|l| l.starts_with(saw)),
            "{agent} {post_tool}: {saw_lines:?}"
        );
        let recorded: Vec<&Value> = events
            .iter()
            .filter(|e| e["event"] == "hook_not_applied")
            .collect();
        match not_applied {
            Some(decision) => {
                assert_eq!(recorded.len(), 1, "{agent} {post_tool}: {events:?}");
                assert_eq!(recorded[0]["decision"], decision);
                assert_eq!(recorded[0]["hook_id"], "post/post-tool");
            }
            None => assert!(recorded.is_empty(), "{agent} {post_tool}: {recorded:?}"),
        }
        if not_applied.is_none() {
            continue;
        }
        // `logs` shows it; a replay of the agent's recorded events says it too.
        let shown = palisade(
            &["logs", log.to_str().unwrap(), "--outcome", "not-applied"],
            "",
        );
        let shown = String::from_utf8_lossy(&shown.stdout).to_string();
        assert!(shown.contains("not applied by the agent"), "{shown}");
        let recording = dir.path().join("recording.jsonl");
        let recorded = json!({ "event": "agent_event", "at_ms": 1, "dialect": agent,
            "session_id": "kept", "input": input });
        std::fs::write(&recording, format!("{recorded}\n")).unwrap();
        let replayed = palisade(
            &[
                "replay",
                dir.path().to_str().unwrap(),
                recording.to_str().unwrap(),
            ],
            "",
        );
        let replayed = String::from_utf8_lossy(&replayed.stdout).to_string();
        assert!(
            replayed.contains(&format!(
                "{} by post/post-tool not applied by {agent}",
                not_applied.unwrap()
            )),
            "{replayed}"
        );
    }
}

/// Claude Code's `PostToolUseFailure` (a tool call that failed): its error is the call's result,
/// which post-tool sees (its contexts answered under that event), tool-result observes and the
/// audit trail keeps; `install claude-code` registers it.
#[test]
fn a_failed_tool_call_reaches_post_tool_and_tool_result() {
    let dir = tempfile::tempdir().unwrap();
    server::scripted(
        dir.path(),
        "notes",
        "[[hooks]]\npoint = \"post-tool\"\ncapability = \"transform\"\n\
         [config]\ncontexts = [\"CHECK-THE-DISK\"]\n",
    );
    server::scripted(
        dir.path(),
        "audit",
        "[[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\n\
         [config]\ntool_result = \"echo\"\n",
    );
    let log = dir.path().join("audit.jsonl");
    let input = json!({ "session_id": "failed", "hook_event_name": "PostToolUseFailure",
        "cwd": "/", "tool_name": "Bash", "tool_input": { "command": "make" },
        "tool_use_id": "toolu_1", "error": "make: *** No rule to make target", "is_interrupt": false });
    let args = [
        "claude-code",
        dir.path().to_str().unwrap(),
        "--audit-log",
        log.to_str().unwrap(),
    ];
    let out = palisade(&args, &input.to_string());
    let answer = answer(&out);
    assert_eq!(
        answer["hookSpecificOutput"]["hookEventName"], "PostToolUseFailure",
        "{answer}"
    );
    assert_eq!(
        answer["hookSpecificOutput"]["additionalContext"], "CHECK-THE-DISK",
        "{answer}"
    );
    let audit = std::fs::read_to_string(&log).unwrap();
    assert!(
        audit.contains("saw error make: *** No rule to make target"),
        "{audit}"
    );
    // Installed for Claude Code, with a matcher as the other tool events have.
    let settings = dir.path().join("settings.json");
    let out = install_claude_code_into(dir.path(), &settings);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: Value =
        serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(
        written["hooks"]["PostToolUseFailure"][0]["matcher"], "*",
        "{written:#}"
    );
}

/// A bridged agent names an MCP tool only by its display name, which may be read more than one
/// way (`mcp__a__b__c`: server `a`, or `a__b`?): the bridge gives hooks the name and no
/// provenance made up from it.
#[test]
fn a_bridged_call_carries_no_provenance_made_from_its_name() {
    let dir = tempfile::tempdir().unwrap();
    server::scripted(
        dir.path(),
        "origin",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"observe\"\n\
         [config]\npre_tool = \"provenance\"\n",
    );
    let log = dir.path().join("audit.jsonl");
    let input = json!({ "session_id": "names", "hook_event_name": "PreToolUse", "cwd": "/",
        "tool_name": "mcp__a__b__c", "tool_input": {}, "tool_use_id": "toolu_1" });
    let args = [
        "claude-code",
        dir.path().to_str().unwrap(),
        "--audit-log",
        log.to_str().unwrap(),
    ];
    let out = palisade(&args, &input.to_string());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let audit = std::fs::read_to_string(&log).unwrap();
    assert!(audit.contains("provenance none"), "{audit}");
}

/// A plugin asks the host what kind of tool a call is (`ToolCall::kind`): each agent's own
/// name for its shell is `shell`, as `@shell` in a matcher reads it; a tool of no known kind
/// has none, and the call keeps the agent's name.
#[test]
fn a_plugin_reads_each_agents_shell_as_the_shell_kind() {
    let dir = tempfile::tempdir().unwrap();
    server::scripted(
        dir.path(),
        "kinds",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"observe\"\n\
         [config]\npre_tool = \"kind\"\n",
    );
    let log = dir.path().join("audit.jsonl");
    for (dialect, event, tool) in [
        ("claude-code", "PreToolUse", "Bash"),
        ("codex", "PreToolUse", "exec_command"),
        ("gemini", "BeforeTool", "run_shell_command"),
        ("claude-code", "PreToolUse", "TodoWrite"),
    ] {
        let input = json!({ "session_id": "kinds", "hook_event_name": event, "cwd": "/",
            "tool_name": tool, "tool_input": {"command": "ls"}, "tool_use_id": tool });
        let args = [
            dialect,
            dir.path().to_str().unwrap(),
            "--audit-log",
            log.to_str().unwrap(),
        ];
        let out = palisade(&args, &input.to_string());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let audit = std::fs::read_to_string(&log).unwrap();
    for line in [
        "kind Bash shell",
        "kind exec_command shell",
        "kind run_shell_command shell",
        "kind TodoWrite none",
    ] {
        assert!(audit.contains(line), "{line} in {audit}");
    }
}

/// Gemini CLI asks `BeforeModel` before each model request, a process per request: the turn's
/// first is the prompt's step (judged at `BeforeAgent`), each later one a continuation step
/// that runs `prompt-submit` with no claimed messages, numbered by the session's durable
/// counter. A reject blocks the request; contexts the agent cannot add are recorded as not
/// applied.
#[test]
fn gemini_model_requests_after_the_first_are_continuation_steps() {
    let events = |session: &str| {
        ["BeforeAgent", "BeforeModel", "BeforeModel"].map(|event| {
            json!({ "session_id": session, "hook_event_name": event, "cwd": "/",
                "prompt": "list the files",
                "llm_request": { "model": "gemini-2.5-flash", "messages": [] } })
        })
    };
    let run = |dir: &Path, log: &Path, input: &Value| {
        let args = [
            "gemini",
            dir.to_str().unwrap(),
            "--audit-log",
            log.to_str().unwrap(),
        ];
        let out = palisade(&args, &input.to_string());
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };

    let guarded = tempfile::tempdir().unwrap();
    server::scripted(
        guarded.path(),
        "steps",
        "[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"guard\"\n\
         [config]\nprompt_submit = \"reject-continuations\"\n",
    );
    let log = guarded.path().join("audit.jsonl");
    let [prompt, first, second] = events("steps").map(|e| run(guarded.path(), &log, &e));
    assert_eq!(prompt.trim(), "", "the prompt's step enters");
    assert_eq!(first.trim(), "", "the first request is the prompt's step");
    let answer: Value = serde_json::from_str(&second).unwrap();
    assert_eq!(answer["decision"], "block", "{answer}");
    assert_eq!(
        answer["reason"], "step 2 of turn 1 is not allowed",
        "{answer}"
    );

    let contexts = tempfile::tempdir().unwrap();
    server::scripted(
        contexts.path(),
        "steps",
        "[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"transform\"\n\
         [config]\ncontexts = [\"STEP-CONTEXT\"]\n",
    );
    let log = contexts.path().join("audit.jsonl");
    let [prompt, _, second] = events("contexts").map(|e| run(contexts.path(), &log, &e));
    assert!(prompt.contains("STEP-CONTEXT"), "{prompt}");
    assert_eq!(second.trim(), "", "the request goes without the context");
    let audit = server::log_having(&log, |log| log.contains("hook_not_applied"));
    assert!(
        audit.lines().any(|line| line.contains("hook_not_applied")
            && line.contains("prompt-submit")
            && line.contains("context")),
        "{audit}"
    );
}

/// Claude Code's `Elicitation` (an MCP server asks the user a question) is judged as a call of
/// `elicitation/create` from that server: a guard's deny declines it for the user; a question
/// no guard objects to is left to the user.
#[test]
fn a_guard_declines_an_mcp_servers_question_to_the_user() {
    let dir = tempfile::tempdir().unwrap();
    server::scripted(
        dir.path(),
        "questions",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         matcher = \"elicitation/create\"\n\
         [config]\npre_tool = \"deny\"\n",
    );
    let ask = |server: &str| {
        let input = json!({ "session_id": "questions", "hook_event_name": "Elicitation",
            "cwd": "/", "mcp_server_name": server, "message": "Your API key?",
            "mode": "form", "elicitation_id": "e-1",
            "requested_schema": { "type": "object",
                "properties": { "key": { "type": "string" } } } });
        let out = palisade(
            &["claude-code", dir.path().to_str().unwrap()],
            &input.to_string(),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let answer: Value = serde_json::from_str(&ask("keys")).unwrap();
    assert_eq!(
        answer["hookSpecificOutput"],
        json!({ "hookEventName": "Elicitation", "action": "decline" }),
        "{answer}"
    );
    assert!(
        answer["systemMessage"]
            .as_str()
            .is_some_and(|m| m.contains("denied elicitation/create")),
        "{answer}"
    );

    // The user's answer is the call's result: a post-tool guard's block declines it.
    server::scripted(
        dir.path(),
        "answers",
        "[[hooks]]\npoint = \"post-tool\"\ncapability = \"guard\"\n\
         matcher = \"elicitation/create\"\n\
         [config]\npost_tool = \"block\"\n",
    );
    let input = json!({ "session_id": "questions", "hook_event_name": "ElicitationResult",
        "cwd": "/", "mcp_server_name": "keys", "elicitation_id": "e-1", "mode": "form",
        "action": "accept", "content": { "key": "sk-live-123" } });
    let out = palisade(
        &["claude-code", dir.path().to_str().unwrap()],
        &input.to_string(),
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(answer["decision"], "block", "{answer}");
    std::fs::remove_dir_all(dir.path().join("answers")).unwrap();

    // Without the guard, the user answers.
    std::fs::remove_dir_all(dir.path().join("questions")).unwrap();
    server::scripted(
        dir.path(),
        "questions",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         matcher = \"Bash\"\n[config]\npre_tool = \"deny\"\n",
    );
    assert_eq!(ask("keys").trim(), "");
}

/// A sub-agent's event (`agent_id`, `agent_type`) is judged like any other, and every audit
/// event of its hooks names the sub-agent; the main agent's name none.
#[test]
fn a_subagents_events_are_audited_under_its_id() {
    let dir = tempfile::tempdir().unwrap();
    server::scripted(
        dir.path(),
        "guard",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         [config]\npre_tool = \"deny\"\ntag = \"judged\"\n",
    );
    let log = dir.path().join("audit.jsonl");
    for (id, agent) in [("toolu_sub", Some("agent-7")), ("toolu_main", None)] {
        let mut input = json!({ "session_id": "subagents", "hook_event_name": "PreToolUse",
            "cwd": "/", "tool_name": "Bash", "tool_input": { "command": "rm -rf /" },
            "tool_use_id": id });
        if let Some(agent) = agent {
            input["agent_id"] = json!(agent);
            input["agent_type"] = json!("Explore");
        }
        let args = [
            "claude-code",
            dir.path().to_str().unwrap(),
            "--audit-log",
            log.to_str().unwrap(),
        ];
        let out = palisade(&args, &input.to_string());
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            answer["hookSpecificOutput"]["permissionDecision"], "deny",
            "{answer}"
        );
    }
    let audit = server::log_having(&log, |log| log.matches("hook_denied").count() == 2);
    let events: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (sub, main): (Vec<&Value>, Vec<&Value>) =
        events.iter().partition(|e| e.get("agent_id").is_some());
    // started, the plugin's log line, denied: each names the sub-agent.
    assert_eq!(sub.len(), 3, "{audit}");
    for event in sub {
        assert_eq!(event["agent_id"], "agent-7", "{event}");
        assert_eq!(event["agent_type"], "Explore", "{event}");
    }
    assert_eq!(main.len(), 3, "{audit}");
}

/// Two turns bridged a process per event, whose agent gives them no id of its own: the turns
/// are numbered by the session's durable counter, so their facts' interaction ids differ
/// (each process would otherwise number its turn 1).
#[test]
fn bridged_turns_without_an_agent_turn_id_get_distinct_interaction_ids() {
    let dir = tempfile::tempdir().unwrap();
    server::scripted(
        dir.path(),
        "ids",
        "[[hooks]]\npoint = \"message-committed\"\ncapability = \"observe\"\n\
         [[hooks]]\npoint = \"turn-completed\"\ncapability = \"observe\"\n",
    );
    let log = dir.path().join("audit.jsonl");
    let session = format!("no-turn-ids-{}", std::process::id());
    let event = |name: &str| {
        json!({ "session_id": session, "hook_event_name": name, "cwd": "/",
                "prompt": "go", "stop_hook_active": false })
        .to_string()
    };
    for _ in 0..2 {
        for name in ["UserPromptSubmit", "Stop"] {
            let args = [
                "claude-code",
                dir.path().to_str().unwrap(),
                "--audit-log",
                log.to_str().unwrap(),
            ];
            let out = palisade(&args, &event(name));
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let ids: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event"] == "plugin_log")
        .map(|e| e["message"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<String> = [1, 2]
        .iter()
        .flat_map(|turn| {
            [
                format!("message {session}:turn-{turn}:message-0"),
                format!("turn-completed {session}:turn-{turn}:completed"),
            ]
        })
        .collect();
    assert_eq!(ids, expected);
}

/// An audit log that cannot be opened in time (a FIFO no one reads: opening it for writing
/// waits for a reader) is an overrun like any other: the event gets its fail-closed answer
/// within its budget. (It was opened on the thread that runs the event's budget, which then
/// waited with it, for ever: the agent's own hook timeout, and no objection.)
#[test]
fn an_audit_log_that_cannot_be_opened_in_time_gets_the_fail_closed_answer_in_time() {
    let dir = plugins("[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n");
    let fifo = dir.path().join("audit.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success(), "mkfifo {}", fifo.display());
    let out = bridged_logging_to(dir.path(), &fifo, 700);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("budget of 700 ms ran out while opening the audit log"),
        "{stderr}"
    );
}

/// `--timings` prints the event's split on stderr, and changes nothing else.
#[test]
fn timings_are_printed_on_stderr() {
    let dir = plugins(
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         [config]\npre_tool = \"deny\"\n",
    );
    let path = dir.path().to_str().unwrap();
    let out = palisade(
        &["claude-code", path, "--timings"],
        &sample("claude", "PreToolUse"),
    );
    let said = answer(&out);
    assert_eq!(
        said["hookSpecificOutput"]["permissionDecisionReason"], "denied Bash",
        "{said}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("palisade: PreToolUse: read the event and checked its 1 plugin in ")
            && stderr.contains(" ms, ran ")
            && stderr.contains("pre-tool")
            && stderr.contains("(their components loading meanwhile)"),
        "{stderr}"
    );
}

/// The event is read on the thread that runs the budget, within it: an event that comes in
/// pieces is read whole, and one whose writer never closes stdin gets the fail-closed answer
/// in time, naming the read.
#[test]
fn an_event_is_read_within_the_budget_in_pieces_or_never_closed() {
    let dir = plugins(
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         [config]\npre_tool = \"deny\"\n",
    );
    let event = sample("claude", "PreToolUse");
    let (head, tail) = event.split_at(event.len() / 2);
    let run = |close: bool| {
        let args = [
            "claude-code",
            dir.path().to_str().unwrap(),
            "--budget-ms",
            "700",
        ];
        let mut child = spawned(&cache_dir(), &args);
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(head.as_bytes()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        stdin.write_all(tail.as_bytes()).unwrap();
        // Held open (not closed) until the process has answered, or closed now.
        let held = (!close).then_some(stdin);
        let out = answered_in_time(child, 700);
        drop(held);
        out
    };
    let whole = run(true);
    let said = answer(&whole);
    assert_eq!(
        said["hookSpecificOutput"]["permissionDecisionReason"], "denied Bash",
        "{said}"
    );
    let open = run(false);
    let stderr = String::from_utf8_lossy(&open.stderr);
    assert_eq!(open.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("budget of 700 ms ran out while reading the hook event on stdin"),
        "{stderr}"
    );
}

/// The standard error of `out`, an event refused when its budget of 700 ms ran out while the
/// guard `scripted` ran.
fn refused_for_the_budget_of_700_ms(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("budget of 700 ms ran out while running the hook `scripted/pre-tool`"),
        "{stderr}"
    );
    stderr
}

/// An audit log nobody reads (a FIFO whose reader stopped, its pipe full) holds up no answer:
/// the event gets its plugins' answer within its budget, and the bridge says on stderr which
/// lines it could not write. (The lines were written on the thread that runs the event's
/// budget, which then waited with the FIFO, for ever: the agent's own hook timeout, and no
/// objection.)
#[test]
fn an_audit_log_nobody_reads_holds_up_no_answer() {
    let dir = plugins(
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         [config]\npre_tool = \"deny\"\n",
    );
    let logs = tempfile::tempdir().unwrap();
    let (fifo, _full) = server::full_fifo(logs.path(), "audit.fifo");
    let out = bridged_logging_to(dir.path(), &fifo, 3000);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The plugin's own denial, not a refusal for want of time.
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stdout.contains("\"permissionDecision\":\"deny\"") && stdout.contains("denied Bash"),
        "{stdout}"
    );
    assert!(!stdout.contains("budget"), "{stdout}");
    assert!(
        stderr.contains(&format!("warning: the audit log {}: ", fifo.display()))
            && stderr.contains("line(s) not written within"),
        "{stderr}"
    );
}

/// The wait for an audit log that takes nothing ends with the event's budget, on every way out
/// (here: a refusal, the budget run out by a slow guard): a process still there at the
/// agent's own timeout is taken as no objection, whatever it answered. And what the log could
/// not take is said on that way out too. (The log went with the event's dropped work, its
/// lines lost unsaid; kept to the end, it was given 2 s more, whatever the budget.)
#[test]
fn an_audit_log_nobody_reads_keeps_no_refused_event_past_its_budget() {
    let dir = plugins(
        "[limits]\ntimeout_ms = 1500\n\n[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         [config]\npre_tool = \"sleep\"\n",
    );
    let logs = tempfile::tempdir().unwrap();
    let (fifo, _full) = server::full_fifo(logs.path(), "audit.fifo");
    let started = std::time::Instant::now();
    let out = bridged_logging_to(dir.path(), &fifo, 700);
    let took = started.elapsed();
    let stderr = refused_for_the_budget_of_700_ms(&out);
    // What the log could not take is said, however the event ended.
    assert!(
        stderr.contains(&format!("warning: the audit log {}: ", fifo.display()))
            && stderr.contains("line(s) not written within"),
        "{stderr}"
    );
    // The budget (0.7 s), the process's start and end, and a margin for a loaded machine
    // (1.5 s): short of the 2 s more the log was given.
    assert!(
        took < std::time::Duration::from_millis(2_200),
        "took {took:?}\n{stderr}"
    );
}

/// A bridged event loads only the plugins whose hooks would run for it: a plugin that only
/// guards shell commands is not loaded for a `Read` (its component not even read), so a broken
/// one refuses the events it guards and no other. (Every plugin on the event's points was
/// loaded, whatever its matcher: the `Read` was refused for a plugin that would never have
/// run on it, and paid for loading the rest.)
#[test]
fn a_plugin_whose_matcher_does_not_take_the_tool_is_not_loaded_for_it() {
    let dir = plugins(
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         [config]\npre_tool = \"deny\"\n",
    );
    let broken = dir.path().join("shell-only");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(
        broken.join("plugin.toml"),
        "name = \"shell-only\"\nwasm = \"plugin.wasm\"\n[[hooks]]\npoint = \"pre-tool\"\n\
         capability = \"guard\"\nmatcher = \"Bash\"\n",
    )
    .unwrap();
    std::fs::write(broken.join("plugin.wasm"), b"\0asm not a component").unwrap();
    let bash = sample("claude", "PreToolUse");
    let read = bash
        .replace("\"Bash\"", "\"Read\"")
        .replace("\"command\"", "\"file_path\"");
    assert!(read.contains("\"tool_name\": \"Read\""), "{read}");
    let dir_arg = dir.path().to_str().unwrap();
    let out = palisade(&["claude-code", dir_arg], &read);
    let said = answer(&out);
    assert_eq!(
        said["hookSpecificOutput"]["permissionDecisionReason"], "denied Read",
        "{said}"
    );
    let out = palisade(&["claude-code", dir_arg], &bash);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot load the plugins") && stderr.contains("shell-only"),
        "{stderr}"
    );
}

/// A component not yet in the cache that compiles for longer than an event's budget (the
/// Python `url-guard` takes seconds) gets that event refused, as any overrun does; the bridge
/// leaves a `palisade check` compiling it into the cache in the background, so the events
/// after it answer, instead of each starting the same compile and running out the same way.
/// The slow component is `shell-guard` carrying a large core module of its own (a second or
/// two of Cranelift): the same path as an interpreter's, at a tenth of its CPU.
#[test]
fn an_event_that_runs_out_while_compiling_leaves_the_compile_to_finish_for_the_next() {
    let plugins = slow_shell_guard();
    let cache = tempfile::tempdir().unwrap();
    let event = sample("claude", "PreToolUse");
    let dir = plugins.path().to_str().unwrap();
    // Well past what reading the event and the manifest take, and well short of the compile;
    // the event after the compile answers within it from the cache.
    let args = ["claude-code", dir, "--budget-ms", "500"];

    let first = palisade_caching_in(cache.path(), &args, &event);
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert_eq!(first.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("ran out while compiling the component of `shell-guard`"),
        "{stderr}"
    );
    let pid = stderr
        .split_once("in the background (pid ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(pid, _)| pid.to_string())
        .unwrap_or_else(|| panic!("no compile was left running: {stderr}"));
    // It is not this test's child: wait for it to be gone.
    let waited = std::time::Instant::now();
    while Path::new("/proc").join(&pid).exists() {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(300),
            "the background compile (pid {pid}) is still running"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }

    let next = palisade_caching_in(cache.path(), &args, &event);
    assert!(
        next.status.success(),
        "the event after the compile: {}",
        String::from_utf8_lossy(&next.stderr)
    );
}

/// A cold cache and events back to back, each with a budget shorter than the compile: the
/// events after the first wait for the one compile under way (the background `palisade
/// check`'s) instead of each starting its own on the same cores, say that the cache is warming
/// and how to warm it ahead, and the first event that starts once it is done is answered.
#[test]
fn back_to_back_events_wait_for_the_compile_under_way_instead_of_starting_their_own() {
    let plugins = slow_shell_guard();
    let cache = tempfile::tempdir().unwrap();
    let event = sample("claude", "PreToolUse");
    let dir = plugins.path().to_str().unwrap();
    let args = ["claude-code", dir, "--budget-ms", "300"];

    let first = palisade_caching_in(cache.path(), &args, &event);
    let stderr = String::from_utf8_lossy(&first.stderr).to_string();
    assert_eq!(first.status.code(), Some(2), "{stderr}");
    let pid = stderr
        .split_once("in the background (pid ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(pid, _)| pid.to_string())
        .unwrap_or_else(|| panic!("no compile was left running: {stderr}"));
    let compiling = || Path::new("/proc").join(&pid).exists();
    let (mut warming, mut refusals) = (0, Vec::new());
    let started = std::time::Instant::now();
    loop {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(300),
            "no event was answered: {refusals:#?}"
        );
        let compile_done = !compiling();
        let next = palisade_caching_in(cache.path(), &args, &event);
        if next.status.success() {
            break;
        }
        let stderr = String::from_utf8_lossy(&next.stderr).to_string();
        assert!(
            !compile_done,
            "an event started after the compile was done was refused: {stderr}"
        );
        if stderr.contains("the component cache is warming")
            && stderr.contains(&format!("`palisade check {dir}` warms it ahead"))
        {
            warming += 1;
        }
        refusals.push(stderr);
    }
    assert!(
        warming > 0 && warming + 1 >= refusals.len(),
        "the refused events compiled for themselves: {refusals:#?}"
    );
}

/// A plugin folder with `shell-guard` slow to compile (see [`slow_to_compile`]).
fn slow_shell_guard() -> tempfile::TempDir {
    let plugins = tempfile::tempdir().unwrap();
    let guard = palisade_examples::get("shell-guard").unwrap();
    palisade_examples::install_one(guard, plugins.path()).unwrap();
    std::fs::write(
        plugins.path().join("shell-guard").join(guard.wasm_file),
        slow_to_compile(guard.wasm),
    )
    .unwrap();
    plugins
}

/// `component` with one more core module, never instantiated but compiled with the rest:
/// 3,000 functions of 150 multiply-adds each (2.7 million wasm instructions for Cranelift).
fn slow_to_compile(component: &[u8]) -> Vec<u8> {
    fn leb(mut n: u64, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    fn sleb(mut n: i64, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if (n == 0 && byte & 0x40 == 0) || (n == -1 && byte & 0x40 != 0) {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    fn section(id: u8, body: &[u8], out: &mut Vec<u8>) {
        out.push(id);
        leb(body.len() as u64, out);
        out.extend_from_slice(body);
    }
    const FUNCTIONS: u64 = 3000;
    const STEPS: i64 = 150;
    // (func (param i32) (result i32)), FUNCTIONS of them.
    let types = [1, 0x60, 1, 0x7f, 1, 0x7f];
    let mut functions = Vec::new();
    leb(FUNCTIONS, &mut functions);
    functions.extend(std::iter::repeat_n(0, FUNCTIONS as usize));
    let mut code = Vec::new();
    leb(FUNCTIONS, &mut code);
    for f in 0..FUNCTIONS as i64 {
        // No locals; `x = x * k + x`, STEPS times, with a constant of its own each time.
        let mut body = vec![0];
        for step in 0..STEPS {
            body.extend_from_slice(&[0x20, 0, 0x41]);
            sleb(f * STEPS + step, &mut body);
            body.extend_from_slice(&[0x6c, 0x20, 0, 0x6a, 0x21, 0]);
        }
        body.extend_from_slice(&[0x20, 0, 0x0b]);
        leb(body.len() as u64, &mut code);
        code.extend_from_slice(&body);
    }
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    section(1, &types, &mut module);
    section(3, &functions, &mut module);
    section(10, &code, &mut module);
    // A core module section at the end of the component: a module of its own, which no
    // index of the component's other sections refers to.
    let mut out = component.to_vec();
    section(1, &module, &mut out);
    out
}

/// A `prompt-submit` hook may enter a reshaped batch (`enter-batch`); Claude Code and Codex take
/// the prompt as typed or not at all, so the bridge blocks it rather than let the unredacted
/// prompt through. A batch the hook leaves as it was enters as usual.
#[test]
fn a_prompt_a_hook_reshaped_is_blocked_since_the_agent_cannot_take_it() {
    let dir = plugins(
        "[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"transform\"\n\
         [config]\nprompt_submit = \"redact\"\n",
    );
    for (agent, command) in [("claude", "claude-code"), ("codex", "codex")] {
        let event = |prompt: &str| {
            let mut event: Value =
                serde_json::from_str(&sample(agent, "UserPromptSubmit")).unwrap();
            event["prompt"] = prompt.into();
            event.to_string()
        };
        let run = |prompt: &str| palisade(&[command, dir.path().to_str().unwrap()], &event(prompt));
        let blocked = answer(&run("deploy with password=hunter2"));
        assert_eq!(blocked["decision"], "block", "{agent}: {blocked}");
        assert!(
            blocked["reason"].as_str().unwrap().contains("reshaped"),
            "{agent}: {blocked}"
        );
        let out = run("deploy please");
        assert!(out.status.success(), "{agent}");
        assert!(
            out.stdout.is_empty(),
            "{agent}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// A bridge runs one process per event; a stateful guard's count is host-kept state, so it
/// holds from one event's process to the next (before, every event started at 0).
#[test]
fn a_stateful_guard_keeps_its_count_across_bridge_processes() {
    let dir = tempfile::tempdir().unwrap();
    let budget = palisade_examples::get("bash-budget").unwrap();
    palisade_examples::install_one(budget, dir.path()).unwrap();
    let manifest = dir.path().join("bash-budget/plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("max_calls = 50", "max_calls = 2")).unwrap();
    let mut event: Value = serde_json::from_str(&sample("claude", "PreToolUse")).unwrap();
    event["session_id"] = "budget-across-processes".into();
    event["tool_name"] = "Bash".into();
    event["tool_input"] = json!({ "command": "ls" });
    let run = || {
        palisade(
            &["claude-code", dir.path().to_str().unwrap()],
            &event.to_string(),
        )
    };
    for n in 1..=2 {
        let out = run();
        assert!(
            out.status.success() && out.stdout.is_empty(),
            "call {n}: {out:?}"
        );
    }
    let third = answer(&run());
    assert_eq!(
        third["hookSpecificOutput"]["permissionDecision"], "deny",
        "{third}"
    );
}

/// The embedded state store is a SQLite file in WAL mode. A bridge process exits without
/// closing it and leaves its write-ahead log behind; the next process cannot trust the log's
/// index and rebuilds it by reading the whole log, and its checkpoint progress is lost with
/// it, so the log only grew: every event of a stateful guard appended to it and then read all
/// of it (6 MB, and events 40% slower, after 400 events). Opening the store now truncates a
/// log past a bound.
#[test]
fn the_state_stores_log_does_not_grow_with_every_bridged_event() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    palisade_examples::install_one(palisade_examples::get("bash-budget").unwrap(), dir.path())
        .unwrap();
    let mut event: Value = serde_json::from_str(&sample("claude", "PreToolUse")).unwrap();
    event["tool_name"] = "Bash".into();
    event["tool_input"] = json!({ "command": "ls" });
    let wal = state.path().join("state.sqlite3-wal");
    let mut sizes = Vec::new();
    for n in 0..24 {
        event["session_id"] = format!("wal-{n}").into();
        let mut child = Command::new(env!("CARGO_BIN_EXE_palisade"))
            .args(["claude-code", dir.path().to_str().unwrap()])
            .env("PALISADE_CACHE_DIR", cache_dir())
            .env("PALISADE_STATE_DIR", state.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(event.to_string().as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success() && out.stdout.is_empty(), "{out:?}");
        sizes.push(std::fs::metadata(&wal).map_or(0, |m| m.len()));
    }
    // The count is kept: the store was written.
    assert!(state.path().join("state.sqlite3").is_file());
    // Before: 16 KiB more after every event, without end. Now at most the bound and the
    // one event's writes past it.
    assert!(
        sizes.iter().all(|&size| size <= 256 * 1024 + 32 * 1024),
        "the log's size after each event: {sizes:?}"
    );
    assert!(sizes.iter().any(|&size| size > 0), "{sizes:?}");
}

/// Shadow hooks through the bridges: a guard that denies and one that crashes, both with
/// `enforce = false`, leave Claude Code's and Codex's `PreToolUse` and Gemini CLI's
/// `BeforeTool` with no objection (the agent's own rules decide), and the audit log records
/// what each would have done.
#[test]
fn shadow_hooks_change_no_bridged_answer_and_are_recorded() {
    let dir = tempfile::tempdir().unwrap();
    server::scripted(
        dir.path(),
        "would-deny",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nenforce = false\n\
         [config]\npre_tool = \"deny\"\n",
    );
    server::scripted(
        dir.path(),
        "would-crash",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nenforce = false\n\
         [config]\npre_tool = \"panic\"\n",
    );
    let path = dir.path().to_str().unwrap();
    let gemini = json!({
        "session_id": "shadow",
        "transcript_path": "/tmp/t.json",
        "cwd": "/tmp",
        "hook_event_name": "BeforeTool",
        "timestamp": "2026-12-01T00:00:00Z",
        "tool_name": "run_shell_command",
        "tool_input": { "command": "rm -rf /" },
    })
    .to_string();
    for (agent, command, event) in [
        ("claude", "claude-code", sample("claude", "PreToolUse")),
        ("codex", "codex", sample("codex", "PreToolUse")),
        ("gemini", "gemini", gemini),
    ] {
        let audit = dir.path().join(format!("audit-{agent}.jsonl"));
        let out = palisade(
            &[command, "--audit-log", audit.to_str().unwrap(), path],
            &event,
        );
        assert!(out.status.success(), "{agent}: {out:?}");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            !said.contains("deny") && !said.contains("block"),
            "{agent}: {said}"
        );
        let log = std::fs::read_to_string(&audit).unwrap();
        let shadowed: Vec<Value> = log
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["event"] == "hook_shadowed")
            .collect();
        let seen: Vec<_> = shadowed
            .iter()
            .map(|e| {
                (
                    e["plugin"].as_str().unwrap().to_string(),
                    e["decision"].as_str().unwrap().to_string(),
                    e["reason_code"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert!(
            seen.contains(&(
                "would-deny".into(),
                "would_deny".into(),
                "scripted-deny".into()
            )) && seen.contains(&(
                "would-crash".into(),
                "would_deny".into(),
                "hook-failure:trap".into()
            )),
            "{agent}: {log}"
        );
    }
}

/// A session recorded by the bridge (`--audit-log FILE --record`) replays from the log as it
/// is: its `PreToolUse` and `PostToolUse` of one call are one tool call with its result, and
/// `palisade diff` over the log against a set without the guard lists exactly the call the
/// guard denied, now let through.
#[test]
fn a_session_recorded_by_the_bridge_is_replayed_and_diffed_from_its_audit_log() {
    let dir = tempfile::tempdir().unwrap();
    let guarded = dir.path().join("guarded");
    palisade_examples::install_one(palisade_examples::get("shell-guard").unwrap(), &guarded)
        .unwrap();
    let open = dir.path().join("open");
    std::fs::create_dir_all(&open).unwrap();
    let log = dir.path().join("audit.jsonl");
    let event = |name: &str, extra: Value| {
        let mut event = json!({
            "session_id": "recorded",
            "transcript_path": "/tmp/t.jsonl",
            "cwd": "/tmp",
            "hook_event_name": name,
        });
        event
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        event.to_string()
    };
    let events = [
        event("SessionStart", json!({ "source": "startup" })),
        event("UserPromptSubmit", json!({ "prompt": "tidy up" })),
        event(
            "PreToolUse",
            json!({ "tool_name": "Bash", "tool_input": { "command": "rm -rf /" }, "tool_use_id": "t1" }),
        ),
        event(
            "PreToolUse",
            json!({ "tool_name": "Bash", "tool_input": { "command": "ls" }, "tool_use_id": "t2" }),
        ),
        event(
            "PostToolUse",
            json!({ "tool_name": "Bash", "tool_input": { "command": "ls" }, "tool_use_id": "t2",
                    "tool_response": { "stdout": "Cargo.toml", "stderr": "" } }),
        ),
        event("SessionEnd", json!({ "reason": "exit" })),
    ];
    let (log_path, guarded_path) = (log.to_str().unwrap(), guarded.to_str().unwrap());
    for input in &events {
        let out = palisade(
            &[
                "claude-code",
                "--audit-log",
                log_path,
                "--record",
                guarded_path,
            ],
            input,
        );
        assert!(out.status.success(), "{out:?}");
    }
    let out = palisade(&["replay", guarded_path, log_path, "--format", "json"], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replay: Value = serde_json::from_slice(&out.stdout).unwrap();
    let timeline: Vec<(String, String)> = replay["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["event"].as_str().unwrap().to_string(),
                s["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let step = |e: &str, o: &str| (e.to_string(), o.to_string());
    assert_eq!(
        timeline,
        [
            step("session-start", "0 context(s)"),
            step("prompt", "enter (+0 context)"),
            step("tool-call", "DENY"),
            step("tool-call", "allow"),
            step("session-end", "ended"),
        ],
        "{replay:#}"
    );
    let out = palisade(
        &[
            "diff",
            guarded_path,
            open.to_str().unwrap(),
            log_path,
            "--format",
            "json",
        ],
        "",
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let diff: Value = serde_json::from_slice(&out.stdout).unwrap();
    let changes = diff["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{diff:#}");
    assert_eq!(changes[0]["index"], 3, "{diff:#}");
    assert_eq!(changes[0]["kind"], "loosened", "{diff:#}");
    assert_eq!(changes[0]["subject"], "Bash rm -rf /", "{diff:#}");
}

/// An agent that does not wait for an event's hook (Claude Code at `StopFailure`) ends it with
/// SIGTERM as it exits, often before the hook has read its event. The bridge holds that
/// signal back from its start: at such an event it finishes (the failed turn is committed); at
/// an event the agent waits for, the held signal ends it once the event is read.
#[test]
fn a_sigterm_before_the_event_ends_the_bridge_only_where_the_agent_waits() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    server::scripted(
        dir.path(),
        "turn-watch",
        "[[hooks]]\npoint = \"turn-completed\"\ncapability = \"observe\"\n\
         [[hooks]]\npoint = \"pre-tool\"\ncapability = \"observe\"\n",
    );
    let log = dir.path().join("audit.jsonl");
    let terminated_then_fed = |event: Value| {
        let args = [
            "claude-code",
            dir.path().to_str().unwrap(),
            "--audit-log",
            log.to_str().unwrap(),
        ];
        let mut child = spawned(&cache_dir(), &args);
        // Started, and waiting for its event.
        std::thread::sleep(std::time::Duration::from_millis(300));
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // The write fails if the process is gone already, as it was before the signal was held.
        let _ = stdin.write_all(event.to_string().as_bytes());
        drop(stdin);
        child.wait_with_output().unwrap()
    };
    let failed = terminated_then_fed(
        json!({ "session_id": "held", "hook_event_name": "StopFailure",
        "cwd": "/", "error": "rate_limit" }),
    );
    assert!(failed.status.success(), "{failed:?}");
    let audit = server::log_having(&log, |log| log.contains("turn-watch/turn-completed"));
    assert!(
        audit.contains("\"hook_completed\"") && audit.contains("turn-watch/turn-completed"),
        "{audit}"
    );

    use std::os::unix::process::ExitStatusExt;
    let waited = terminated_then_fed(
        json!({ "session_id": "held", "hook_event_name": "PreToolUse",
        "cwd": "/", "tool_name": "Bash", "tool_input": { "command": "ls" },
        "tool_use_id": "toolu_held" }),
    );
    assert_eq!(waited.status.signal(), Some(15), "{waited:?}");
}
