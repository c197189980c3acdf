//! `palisade acp` between real software on both sides, offline: the official ACP client
//! library (`@agentclientprotocol/sdk`, driven by `acp/client.mjs`) as the editor, and the
//! Claude Code ACP adapter (`@agentclientprotocol/claude-agent-acp`, running the real Claude
//! Code) as the agent, whose model is the loopback mock.

// Only the Anthropic API of the mock is used here.
#[allow(dead_code)]
#[path = "mock_model/mod.rs"]
mod mock_model;

use mock_model::{Api, MockModel};
use palisade_tests::PluginDir;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Where scripts/tools.sh installed the ACP client library and the adapter.
fn acp_tools() -> PathBuf {
    let dir = std::env::var_os("PALISADE_ACP_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/acp"));
    let adapter = dir.join("node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js");
    assert!(
        adapter.exists(),
        "the ACP client library and claude-agent-acp are not installed in {}: run `bash \
         scripts/tools.sh` (scripts/test.sh does), or set PALISADE_ACP_TOOLS",
        dir.display()
    );
    dir
}

/// The client script, where node finds the library beside it.
fn client_script() -> PathBuf {
    static SCRIPT: OnceLock<PathBuf> = OnceLock::new();
    SCRIPT
        .get_or_init(|| {
            let path = acp_tools().join("client.mjs");
            let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp/client.mjs");
            std::fs::copy(source, &path).expect("copy the client script");
            path
        })
        .clone()
}

/// Runs the client: `prompts` in one session through `palisade acp` in front of the adapter,
/// whose model asks to run `command`. Returns the client's report and the mock.
fn editor(plugins: &PluginDir, prompts: &[&str], command: &str) -> (Value, MockModel) {
    let report = run_editor(plugins, prompts, command, &Options::default());
    assert!(
        report.0["error"].is_null(),
        "the client failed: {:#}",
        report.0
    );
    report
}

/// How a run differs from the plain one.
#[derive(Default)]
struct Options {
    /// Send `session/cancel` this long after each prompt.
    cancel_after_ms: Option<u64>,
    /// `palisade acp --audit-log` this file.
    audit_log: Option<PathBuf>,
    /// Start the adapter through a link of this name (so that a command can find its process).
    agent_name: Option<String>,
}

fn run_editor(
    plugins: &PluginDir,
    prompts: &[&str],
    command: &str,
    options: &Options,
) -> (Value, MockModel) {
    let mock = MockModel::start(Api::Anthropic, command);
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    // The mode that asks the editor before a tool runs (the adapter's default, `auto`, lets a
    // classifier call of the model decide instead).
    std::fs::create_dir_all(home.path().join(".claude")).unwrap();
    std::fs::write(
        home.path().join(".claude/settings.json"),
        r#"{"permissions": {"defaultMode": "default"}}"#,
    )
    .unwrap();
    let mut adapter =
        acp_tools().join("node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js");
    if let Some(name) = &options.agent_name {
        let link = home.path().join(name);
        std::os::unix::fs::symlink(&adapter, &link).unwrap();
        adapter = link;
    }
    let script = serde_json::json!({
        "prompts": prompts,
        "cancelAfterMs": options.cancel_after_ms,
        "auditLog": options.audit_log,
    })
    .to_string();
    let mut command = Command::new("node");
    command
        .arg(client_script())
        .arg(env!("CARGO_BIN_EXE_palisade"))
        .arg(plugins.path())
        .arg(&project)
        .arg(&script)
        .arg("--");
    let out = command
        .arg("node")
        .arg(&adapter)
        .env("HOME", home.path())
        .env(
            "PALISADE_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("acp-cache"),
        )
        .env("PALISADE_STATE_DIR", home.path().join("state"))
        .env(
            "ANTHROPIC_BASE_URL",
            format!("http://127.0.0.1:{}", mock.port),
        )
        .env("ANTHROPIC_API_KEY", "dummy")
        // Root in a container: Claude Code refuses its permission flags unless told it is
        // sandboxed; the adapter still asks the editor before a shell command.
        .env("IS_SANDBOX", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .output()
        .expect("node runs (install Node.js 20 or later)");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no report from the client ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (report, mock)
}

fn turn(report: &Value, i: usize) -> &Value {
    &report["turns"][i]
}

fn said(turn: &Value) -> String {
    turn["updates"]
        .as_array()
        .map(|u| {
            u.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .unwrap_or_default()
}

/// Seed 1: "The ACP bridge settles an initial pre-step rejection from its blocked no-step turn
/// as end_turn". The rejected prompt never reaches the agent (nor its model); the editor is told
/// which hook rejected it; the next prompt of the session goes through, with the contexts.
#[test]
fn a_rejected_first_prompt_settles_as_end_turn_and_never_reaches_the_model() {
    let plugins = PluginDir::new();
    plugins.scripted(
        "gate",
        "[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"guard\"\n\
         [config]\nprompt_submit = \"reject-secrets\"\n",
    );
    plugins.scripted(
        "notes",
        "[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"transform\"\n\
         [[hooks]]\npoint = \"session-start\"\ncapability = \"transform\"\n\
         [config]\ncontexts = [\"ACP-CONTEXT-5e1\"]\n",
    );
    let (report, mock) = editor(
        &plugins,
        &["my password is hunter2", "list the files"],
        "ls",
    );
    let rejected = turn(&report, 0);
    assert_eq!(rejected["stopReason"], "end_turn", "{report:#}");
    assert!(rejected["error"].is_null(), "{report:#}");
    let told = said(rejected);
    assert!(
        told.contains("gate/prompt-submit") && told.contains("secret-in-prompt"),
        "{report:#}"
    );
    let bodies: Vec<String> = mock
        .model_requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert!(
        bodies.iter().all(|b| !b.contains("hunter2")),
        "the rejected prompt reached the model"
    );
    // The next prompt went through, with the session's and the prompt's contexts.
    let next = turn(&report, 1);
    assert_eq!(next["stopReason"], "end_turn", "{report:#}");
    assert!(
        bodies
            .first()
            .is_some_and(|b| b.contains("list the files") && b.contains("ACP-CONTEXT-5e1")),
        "{bodies:?}"
    );
}

/// A guard denies the shell command the agent asks permission for: the agent gets the
/// request's reject option, the editor is never asked (and is told why), and the command does
/// not run.
#[test]
fn a_denied_permission_request_rejects_the_tool_without_asking_the_editor() {
    let plugins = PluginDir::new();
    plugins.scripted(
        "no-shell",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"Bash\"\n\
         [config]\npre_tool = \"deny\"\n",
    );
    let marker = tempfile::tempdir().unwrap();
    let file = marker.path().join("ran.txt");
    let (report, mock) = editor(
        &plugins,
        &["create the marker"],
        &format!("touch {}", file.display()),
    );
    assert_eq!(report["permissions"], serde_json::json!([]), "{report:#}");
    assert!(!file.exists(), "the denied command ran");
    assert!(
        said(turn(&report, 0)).contains("no-shell/pre-tool"),
        "{report:#}"
    );
    // The model was told the tool did not run.
    let results: Vec<String> = mock
        .model_requests()
        .iter()
        .map(|r| r.body.to_string())
        .filter(|b| b.contains("tool_result"))
        .collect();
    assert!(!results.is_empty(), "{report:#}");
}

/// `session/cancel` cuts off the session's `prompt-submit` in flight: the prompt is answered
/// `cancelled` at once, and it never reaches the agent.
#[test]
fn cancelling_ends_the_prompt_submit_in_flight() {
    let plugins = PluginDir::new();
    plugins.scripted(
        "slow",
        "[limits]\ntimeout_ms = 60000\n[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"guard\"\n\
         [config]\nprompt_submit = \"sleep\"\n",
    );
    let started = std::time::Instant::now();
    let (report, mock) = run_editor(
        &plugins,
        &["hello"],
        "ls",
        &Options {
            cancel_after_ms: Some(1000),
            ..Options::default()
        },
    );
    assert!(report["error"].is_null(), "{report:#}");
    assert_eq!(turn(&report, 0)["stopReason"], "cancelled", "{report:#}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "the cancelled prompt waited for its hook ({:?})",
        started.elapsed()
    );
    assert!(mock.model_requests().is_empty());
}

/// A `turn-stopping` hook steers the turn on: the agent gets the steering as a follow-up
/// prompt, and the editor sees one turn (one answer) that went on. The agent's tool calls
/// reach `tool-result` and the committed facts, from its tool updates.
#[test]
fn steering_continues_the_same_editor_turn() {
    let plugins = PluginDir::new();
    plugins.scripted(
        "coach",
        "[[hooks]]\npoint = \"turn-stopping\"\ncapability = \"steer\"\n\
         [config]\nturn_stopping = \"steer-once\"\n",
    );
    plugins.scripted(
        "watch",
        "[[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\n\
         [[hooks]]\npoint = \"tool-result-committed\"\ncapability = \"observe\"\n\
         [[hooks]]\npoint = \"turn-completed\"\ncapability = \"observe\"\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let (report, mock) = run_editor(
        &plugins,
        &["list the files"],
        "ls",
        &Options {
            audit_log: Some(audit.clone()),
            ..Options::default()
        },
    );
    assert!(report["error"].is_null(), "{report:#}");
    assert_eq!(report["turns"].as_array().map(Vec::len), Some(1));
    let only = turn(&report, 0);
    assert_eq!(only["stopReason"], "end_turn", "{report:#}");
    assert!(
        said(only).contains("`coach/turn-stopping` continues the turn"),
        "{report:#}"
    );
    let bodies: Vec<String> = mock
        .model_requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect();
    assert!(
        bodies
            .iter()
            .any(|b| b.contains("check your work once more")),
        "the steering never reached the model: {bodies:#?}"
    );
    let log = std::fs::read_to_string(&audit).unwrap();
    for hook in [
        "coach/turn-stopping",
        "watch/tool-result",
        "watch/tool-result-committed",
        "watch/turn-completed",
    ] {
        assert!(
            log.contains(&format!("\"hook_id\":\"{hook}\"")),
            "{hook} missing from the audit log:\n{log}"
        );
    }
}

/// The agent dies in the middle of a turn: the editor's prompt is answered with an error
/// naming what happened (never left waiting), and the proxy exits non-zero.
#[test]
fn the_agent_crashing_mid_turn_fails_the_prompt_and_ends_the_proxy() {
    let plugins = PluginDir::new();
    plugins.scripted(
        "notes",
        "[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"transform\"\n",
    );
    let name = format!("acp-agent-{}.js", std::process::id());
    // The adapter's process only: the client's and Palisade's command lines name it too, but
    // later.
    let kill = format!("pkill -9 -f '^node [^ ]*{name}'");
    let started = std::time::Instant::now();
    let (report, _mock) = run_editor(
        &plugins,
        &["stop the agent"],
        &kill,
        &Options {
            agent_name: Some(name),
            ..Options::default()
        },
    );
    // The prompt's error (the client library fails the connection with it).
    let error = turn(&report, 0)["error"]
        .as_str()
        .or(report["error"].as_str())
        .unwrap_or_default();
    assert!(error.contains("the agent ended"), "{report:#}");
    assert!(turn(&report, 0)["stopReason"].is_null(), "{report:#}");
    assert_eq!(report["exitCode"], 1, "{report:#}");
    assert!(
        report["stderr"]
            .as_str()
            .is_some_and(|e| e.contains("palisade acp: the agent ended")),
        "{report:#}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}
