//! What a component may be given of the host, and only that: the `env` values its manifest
//! names (read at load) and the `files` folders it names (read-only, confined). With the
//! grants present, a plugin still cannot read outside its folder — not by `..`, not through a
//! symlink — write anything, or read a variable it was not given.

use palisade::state::StateStore;
use palisade::{Host, PreToolDecision, ToolCall};
use palisade_tests::{PluginDir, assert_load_problems};
use serde_json::json;

fn call() -> ToolCall {
    ToolCall::new("t", "Bash", json!({ "command": "ls" }))
}

/// A scripted guard doing `behaviour` with `config` (TOML lines), granted `grants` (top-level
/// manifest lines).
fn guard(dir: &PluginDir, name: &str, grants: &str, behaviour: &str, config: &str) {
    dir.scripted(
        name,
        &format!(
            "{grants}\n[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
             [config]\npre_tool = \"{behaviour}\"\n{config}\n"
        ),
    );
}

async fn decide(dir: &PluginDir) -> PreToolDecision {
    Host::builder()
        .state(StateStore::memory())
        .build()
        .unwrap()
        .load_dir(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .session("s")
        .pre_tool(&call())
        .await
}

/// What a deny said, or `None` for an allow.
fn said(decision: PreToolDecision) -> Option<String> {
    match decision {
        PreToolDecision::Deny(denial) => {
            Some(format!("{}: {}", denial.reason_code, denial.message))
        }
        _ => None,
    }
}

#[tokio::test]
async fn a_granted_folder_is_readable_and_nothing_outside_it() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "the host's secret").unwrap();
    let policy = tempfile::tempdir().unwrap();
    std::fs::write(policy.path().join("deny.txt"), "rm -rf /").unwrap();
    // A symlink inside the folder that leads out of it.
    std::os::unix::fs::symlink(
        outside.path().join("secret.txt"),
        policy.path().join("escape.txt"),
    )
    .unwrap();
    let grant = format!(
        "files = [{{ path = \"{}\", as = \"/policy\" }}]",
        policy.path().display()
    );
    let read = |path: &str| {
        let dir = PluginDir::new();
        guard(
            &dir,
            "reader",
            &grant,
            "read-file",
            &format!("path = \"{path}\""),
        );
        dir
    };
    assert_eq!(
        said(decide(&read("/policy/deny.txt")).await).as_deref(),
        Some("read: rm -rf /")
    );
    let secret = outside.path().join("secret.txt");
    for escape in [
        "/policy/escape.txt".to_string(),
        "/policy/../secret.txt".to_string(),
        secret.display().to_string(),
        "/etc/passwd".to_string(),
    ] {
        assert_eq!(said(decide(&read(&escape)).await), None, "read {escape}");
    }
    // Read-only: no write, not even inside the grant.
    let dir = PluginDir::new();
    guard(
        &dir,
        "writer",
        &grant,
        "write-file",
        "path = \"/policy/new.txt\"",
    );
    assert_eq!(said(decide(&dir).await), None);
    assert!(!policy.path().join("new.txt").exists());
}

#[tokio::test]
async fn a_granted_variable_is_given_as_read_at_load_and_no_other() {
    // Set by cargo for every test process (the tests may not change their own environment).
    let name = "CARGO_PKG_NAME";
    let value = std::env::var(name).expect("cargo sets CARGO_PKG_NAME");
    let dir = PluginDir::new();
    guard(
        &dir,
        "given",
        &format!("env = [\"{name}\"]"),
        "env-var",
        &format!("name = \"{name}\""),
    );
    assert_eq!(said(decide(&dir).await), Some(format!("env: {value}")));
    // Not named: not given, though the host has it.
    let dir = PluginDir::new();
    guard(
        &dir,
        "not-given",
        "",
        "env-var",
        &format!("name = \"{name}\""),
    );
    assert_eq!(said(decide(&dir).await), None);
    let dir = PluginDir::new();
    guard(
        &dir,
        "home",
        &format!("env = [\"{name}\"]"),
        "env-var",
        "name = \"HOME\"",
    );
    assert_eq!(said(decide(&dir).await), None);
}

#[test]
fn a_missing_variable_or_folder_is_a_load_problem() {
    let dir = PluginDir::new();
    guard(
        &dir,
        "missing",
        "env = [\"PALISADE_GRANTS_TEST_UNSET\"]\nfiles = [{ path = \"no-such-folder\", as = \"/x\" }, \
         { path = \"plugin.toml\", as = \"/y\" }]",
        "allow",
        "",
    );
    guard(
        &dir,
        "crooked",
        "files = [{ path = \"/tmp\", as = \"/../z\" }]",
        "allow",
        "",
    );
    assert_load_problems(
        &dir,
        &[
            ("env", "`PALISADE_GRANTS_TEST_UNSET` is not set"),
            ("files[0].path", "cannot open"),
            ("files[1].path", "is not a folder"),
            ("files[0].as", "is not a plain absolute guest path"),
        ],
    );
}

/// The example `policy-file-guard`: the team's deny list in a granted folder, read at every
/// call (an edit applies at once), and a list that cannot be read denies.
#[tokio::test]
async fn the_policy_file_guard_follows_the_team_list_and_fails_closed_without_it() {
    let dir = PluginDir::new();
    let example = palisade_examples::get("policy-file-guard").expect("the example");
    palisade_examples::install_one(example, dir.path()).unwrap();
    let policy = dir.path().join("policy-file-guard/policy");
    std::fs::create_dir_all(&policy).unwrap();
    let sample = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../example-plugins/policy-file-guard/policy/deny.txt");
    std::fs::copy(sample, policy.join("deny.txt")).unwrap();
    let plugins = Host::builder()
        .state(StateStore::memory())
        .build()
        .unwrap()
        .load_dir(dir.path())
        .unwrap_or_else(|e| panic!("{e}"));
    let session = plugins.session("s");
    let bash = |command: &str| ToolCall::new("t", "Bash", json!({ "command": command }));
    let code = |decision: PreToolDecision| match decision {
        PreToolDecision::Deny(denial) => Some(denial.reason_code),
        _ => None,
    };
    assert_eq!(
        code(
            session
                .pre_tool(&bash("git push --force origin main"))
                .await
        )
        .as_deref(),
        Some("policy-deny-list")
    );
    assert_eq!(code(session.pre_tool(&bash("ls -la")).await), None);
    // The team adds a phrase: the next call sees it, no reload.
    let mut list = std::fs::read_to_string(policy.join("deny.txt")).unwrap();
    list.push_str("ls -la\n");
    std::fs::write(policy.join("deny.txt"), list).unwrap();
    assert_eq!(
        code(session.pre_tool(&bash("ls -la")).await).as_deref(),
        Some("policy-deny-list")
    );
    // The list is gone: refused, not allowed.
    std::fs::remove_file(policy.join("deny.txt")).unwrap();
    assert_eq!(
        code(session.pre_tool(&bash("ls")).await).as_deref(),
        Some("policy-unreadable")
    );
}

/// A tool-execute wrapper runs the tool itself: it cannot be a shadow hook, and loading says
/// so at its `enforce`.
#[test]
fn a_wrapper_cannot_run_in_shadow() {
    let dir = PluginDir::new();
    dir.scripted(
        "wrapper",
        "[[hooks]]\npoint = \"tool-execute\"\ncapability = \"transform\"\nenforce = false\n",
    );
    assert_load_problems(&dir, &[("hooks[0].enforce", "cannot run in shadow")]);
}
