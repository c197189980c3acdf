//! Policies as data: `rego-guard` and `cedar-guard`, the example plugins whose policy is Rego
//! or Cedar in files the manifest grants them, run by the policy engine inside the plugin's
//! sandbox. Each one's example policy makes the decisions shell-guard, secret-guard and
//! no-force-push make (its own `cases.jsonl`), and a policy that is broken, hostile or (Cedar)
//! names what no request has fails closed, naming its file and line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn palisade(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(args)
        .env(
            "PALISADE_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("policies-cache"),
        )
        .env(
            "PALISADE_STATE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("policies-state"),
        )
        .output()
        .expect("the palisade binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The example plugin `name` with its example policy, installed in a fresh plugin directory:
/// the directory, and the plugin's folder.
fn installed(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let example = palisade_examples::get(name).expect("the example");
    palisade_examples::install_one(example, dir.path()).unwrap();
    let folder = dir.path().join(name);
    (dir, folder)
}

fn rego_guard() -> (tempfile::TempDir, PathBuf) {
    installed("rego-guard")
}

/// What `palisade run --point pre-tool` decides for a Bash `command` with the plugins in `dir`.
fn decide(dir: &Path, command: &str) -> serde_json::Value {
    let input = serde_json::json!({ "tool_use_id": "t", "name": "Bash",
        "arguments": { "command": command } });
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), input.to_string()).unwrap();
    let input = file.path().to_str().unwrap();
    let dir = dir.to_str().unwrap();
    let out = palisade(&["run", "--point", "pre-tool", "--input", input, dir]);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)))
}

/// Every case of `example-plugins/rego-guard/cases.jsonl` and `…/cedar-guard/cases.jsonl`
/// passes: each policy denies what the Rust examples deny, with their reason codes, on every
/// agent's tool names, and asks before a global npm install.
#[test]
fn the_rego_and_cedar_policies_pass_their_cases() {
    for name in ["rego-guard", "cedar-guard"] {
        passes_its_cases(name);
    }
}

fn passes_its_cases(name: &str) {
    let (dir, _) = installed(name);
    let cases = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../example-plugins")
        .join(name)
        .join("cases.jsonl");
    let out = palisade(&[
        "test",
        dir.path().to_str().unwrap(),
        cases.to_str().unwrap(),
    ]);
    let said = text(&out.stdout);
    assert!(out.status.success(), "{said}{}", text(&out.stderr));
    assert!(
        said.contains("failed") && said.contains(" 0 failed"),
        "{said}"
    );
}

/// A policy that does not parse denies every call, naming the file and the line; fixed, the
/// next call reads it again and is judged by it (no reload, no restart).
#[test]
fn a_broken_policy_fails_closed_naming_its_file_and_line_until_it_is_fixed() {
    let (dir, folder) = rego_guard();
    let broken = folder.join("policy/broken.rego");
    std::fs::write(
        &broken,
        "package palisade\n\ndeny contains x if {\n  x := \n}\n",
    )
    .unwrap();
    let decided = decide(dir.path(), "ls");
    assert_eq!(decided["decision"], "deny", "{decided}");
    assert_eq!(decided["reason_code"], "policy-error", "{decided}");
    let why = decided["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("/policy/broken.rego") && why.contains(":5"),
        "{decided}"
    );
    std::fs::remove_file(&broken).unwrap();
    assert_eq!(decide(dir.path(), "ls")["decision"], "allow");
}

/// A policy that has only `deny` rules answers: it asks nothing, and allows what it does not
/// deny (the rule it does not define is no answer, not an error).
#[test]
fn a_rego_policy_of_denials_alone_allows_what_it_does_not_deny() {
    let (dir, folder) = rego_guard();
    for entry in std::fs::read_dir(folder.join("policy")).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    std::fs::write(
        folder.join("policy/only.rego"),
        "package palisade\n\nimport rego.v1\n\n\
         deny contains \"no sudo here\" if contains(input.tool.arguments.command, \"sudo \")\n",
    )
    .unwrap();
    assert_eq!(decide(dir.path(), "ls")["decision"], "allow");
    let decided = decide(dir.path(), "sudo ls");
    assert_eq!(decided["decision"], "deny", "{decided}");
    assert_eq!(decided["message"], "no sudo here", "{decided}");
}

/// A hostile policy is stopped by the plugin's limits and fails closed: a rule over a range of
/// a billion numbers fails the hook, and a data file larger than the plugin's memory cannot be
/// read into it.
#[test]
fn a_hostile_policy_is_stopped_by_the_plugins_limits() {
    let (dir, folder) = rego_guard();
    std::fs::write(
        folder.join("policy/spin.rego"),
        "package palisade\n\ndeny contains \"never\" if {\n  some i in numbers.range(1, 1000000000)\n  i < 0\n}\n",
    )
    .unwrap();
    let failed = |decided: &serde_json::Value| {
        decided["decision"] == "deny"
            && decided["reason_code"]
                .as_str()
                .is_some_and(|code| code.starts_with("hook-failure:"))
    };
    let decided = decide(dir.path(), "ls");
    assert!(failed(&decided), "{decided}");
    std::fs::remove_file(folder.join("policy/spin.rego")).unwrap();

    // 80 MB of data, past the manifest's 64 MiB.
    let mut big = String::from("{\"blob\": [");
    let item = format!("\"{}\",", "x".repeat(1000));
    for _ in 0..80_000 {
        big.push_str(&item);
    }
    big.push_str("\"end\"]}");
    std::fs::write(folder.join("policy/big.json"), big).unwrap();
    let decided = decide(dir.path(), "ls");
    // The plugin's own read fails first (the allocation is refused), naming the file.
    let why = decided["message"].as_str().unwrap_or_default();
    let named = decided["reason_code"] == "policy-error" && why.contains("/policy/big.json");
    assert!(failed(&decided) || named, "{decided}");
}

/// A Cedar policy is validated against the schema of Palisade's requests when it is read: one
/// that names an attribute no request has denies every call, naming its file and line; so
/// does one that does not parse.
#[test]
fn a_cedar_policy_that_names_what_no_request_has_fails_closed_naming_its_line() {
    let (dir, folder) = installed("cedar-guard");
    let wrong = folder.join("policy/wrong.cedar");
    std::fs::write(
        &wrong,
        "// A typo: the context has `command`, not `comand`.\n\n\
         forbid (principal, action == Palisade::Action::\"pre-tool\", resource)\n\
         when { context.comand like \"*sudo*\" };\n",
    )
    .unwrap();
    let decided = decide(dir.path(), "ls");
    assert_eq!(decided["reason_code"], "policy-error", "{decided}");
    let why = decided["message"].as_str().unwrap_or_default();
    assert!(why.contains("/policy/wrong.cedar:4"), "{decided}");
    std::fs::write(&wrong, "forbid (principal, action, resource) when {\n").unwrap();
    let decided = decide(dir.path(), "ls");
    assert_eq!(decided["reason_code"], "policy-error", "{decided}");
    assert!(
        decided["message"]
            .as_str()
            .unwrap_or_default()
            .contains("/policy/wrong.cedar"),
        "{decided}"
    );
    std::fs::remove_file(&wrong).unwrap();
    assert_eq!(decide(dir.path(), "ls")["decision"], "allow");
}

/// `palisade diff` shows what a policy change tightens over a recorded session: the same
/// plugin with one more Rego rule (no `npm publish`) denies that one recorded call, and only
/// that one, with the new rule's reason code.
#[test]
fn diff_shows_what_a_policy_change_tightens() {
    let (old, _) = rego_guard();
    let (new, folder) = rego_guard();
    std::fs::write(
        folder.join("policy/publish.rego"),
        "package palisade\n\nimport rego.v1\n\n\
         deny contains {\"reason_code\": \"no-publish\", \"message\": \"Publishing is the release job's.\"} if {\n\
         \tregex.match(`\\bnpm\\s+publish\\b`, command)\n}\n",
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let log = work.path().join("recorded.jsonl");
    let recorded: String = ["ls -la", "npm publish", "rm -rf /"]
        .iter()
        .enumerate()
        .map(|(n, command)| {
            let input = serde_json::json!({ "session_id": "s1", "transcript_path": "/tmp/t.jsonl",
                "cwd": "/tmp", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                "tool_input": { "command": command }, "tool_use_id": format!("toolu_{n}") });
            let line = serde_json::json!({ "event": "agent_event", "at_ms": 1,
                "dialect": "claude-code", "session_id": "s1", "input": input });
            format!("{line}\n")
        })
        .collect();
    std::fs::write(&log, recorded).unwrap();
    let out = palisade(&[
        "diff",
        old.path().to_str().unwrap(),
        new.path().to_str().unwrap(),
        log.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", text(&out.stdout), text(&out.stderr)));
    let changes = doc["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{doc:#}");
    assert_eq!(changes[0]["kind"], "tightened", "{doc:#}");
    assert_eq!(changes[0]["new"]["outcome"], "DENY", "{doc:#}");
    let groups = doc["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{doc:#}");
    assert_eq!(groups[0]["reason_code"], "no-publish", "{doc:#}");
}
