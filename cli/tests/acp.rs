//! `palisade acp` between real software on both sides, offline: the official ACP client
//! library (`@agentclientprotocol/sdk`, driven by `acp/client.mjs`) as the editor, and as the
//! agent the Claude Code ACP adapter (`@agentclientprotocol/claude-agent-acp`, running the real
//! Claude Code) or Gemini CLI in its ACP mode (whose file reads go through the editor), each
//! against the loopback mock of its model.

use crate::mock_model;

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
    /// What the editor starts, as its settings say (`{"command": …, "args": […]}`), instead
    /// of `palisade acp --plugins DIR -- AGENT…`.
    server: Option<Value>,
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
    let mut command = client(
        plugins,
        prompts,
        &project,
        options,
        &[Path::new("node"), &adapter],
    );
    command
        .env("HOME", home.path())
        .env("PALISADE_STATE_DIR", home.path().join("state"))
        .envs(mock.agent_env())
        // Root in a container: Claude Code refuses its permission flags unless told it is
        // sandboxed; the adapter still asks the editor before a shell command.
        .env("IS_SANDBOX", "1");
    (report(command), mock)
}

/// The client's command: `prompts` in `project` through `palisade acp -- AGENT…`.
fn client(
    plugins: &PluginDir,
    prompts: &[&str],
    project: &Path,
    options: &Options,
    agent: &[&Path],
) -> Command {
    let script = serde_json::json!({
        "prompts": prompts,
        "server": options.server,
        "cancelAfterMs": options.cancel_after_ms,
        "auditLog": options.audit_log,
    })
    .to_string();
    let mut command = Command::new("node");
    command
        .arg(client_script())
        .arg(env!("CARGO_BIN_EXE_palisade"))
        .arg(plugins.path())
        .arg(project)
        .arg(&script)
        .arg("--")
        .args(agent)
        .env(
            "PALISADE_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("acp-cache"),
        );
    command
}

/// Runs the client; its report.
fn report(mut command: Command) -> Value {
    let out = command
        .output()
        .expect("node runs (install Node.js 20 or later)");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "no report from the client ({e}):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Gemini CLI in its ACP mode: its reads and writes of the project's files go through the
/// editor's `fs/*` methods. The model calls `call` (`{"name": …, "args": …}`) once, on
/// `project/FILE` holding `content`; returns the client's report, the mock, and the home
/// holding the project.
fn run_gemini(
    plugins: &PluginDir,
    prompt: &str,
    call: impl FnOnce(&Path) -> Value,
    (file, content): (&str, &str),
) -> (Value, MockModel, tempfile::TempDir) {
    let gemini = PathBuf::from(std::env::var_os("PALISADE_GEMINI").unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/tools/agents/node_modules/@google/gemini-cli/bundle/gemini.js")
            .into()
    }));
    assert!(
        gemini.exists(),
        "Gemini CLI is not installed at {}: run `bash scripts/tools.sh` (scripts/test.sh \
         does), or set PALISADE_GEMINI",
        gemini.display()
    );
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let file = project.join(file);
    std::fs::write(&file, content).unwrap();
    let mock = MockModel::start(Api::Gemini, &call(&file).to_string());
    std::fs::create_dir_all(home.path().join(".gemini")).unwrap();
    // API-key auth; no usage statistics (the only network call besides the model); one model
    // (no router); no folder-trust checks.
    std::fs::write(
        home.path().join(".gemini/settings.json"),
        r#"{"security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": false}},
            "privacy": {"usageStatisticsEnabled": false}, "model": {"name": "gemini-2.5-flash"}}"#,
    )
    .unwrap();
    // The editor starts what `palisade install zed` registered.
    let agent = [Path::new("node"), &gemini, Path::new("--acp")];
    let options = Options {
        server: Some(zed_registration(plugins, &agent)),
        ..Options::default()
    };
    let mut command = client(plugins, &[prompt], &project, &options, &agent);
    command
        .env("HOME", home.path())
        .env("PALISADE_STATE_DIR", home.path().join("state"))
        .envs(mock.agent_env());
    let report = report(command);
    assert!(report["error"].is_null(), "the client failed: {report:#}");
    (report, mock, home)
}

/// The agent server `palisade install zed --plugins DIR -- AGENT…` registers (printed, as
/// Zed's `agent_servers` entry).
fn zed_registration(plugins: &PluginDir, agent: &[&Path]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(["install", "zed", "--name", "Gemini (guarded)", "--plugins"])
        .arg(plugins.path())
        .arg("--")
        .args(agent)
        .env(
            "PALISADE_CACHE_DIR",
            Path::new(env!("CARGO_TARGET_TMPDIR")).join("acp-cache"),
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let snippet: Value = serde_json::from_slice(&out.stdout).unwrap();
    snippet["agent_servers"]["Gemini (guarded)"].clone()
}

/// Every request body the model received.
fn bodies(mock: &MockModel) -> Vec<String> {
    mock.model_requests()
        .iter()
        .map(|r| r.body.to_string())
        .collect()
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
         [config]\ncontexts = [\"ACP-PROMPT-5e1\"]\n",
    );
    plugins.scripted(
        "starter",
        "[[hooks]]\npoint = \"session-start\"\ncapability = \"transform\"\n\
         [config]\ncontexts = [\"ACP-START-7c2\"]\n",
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
    let bodies = bodies(&mock);
    assert!(
        bodies.iter().all(|b| !b.contains("hunter2")),
        "the rejected prompt reached the model"
    );
    // The next prompt went through, with the prompt's contexts and the session-start ones,
    // which waited for the first prompt that entered.
    let next = turn(&report, 1);
    assert_eq!(next["stopReason"], "end_turn", "{report:#}");
    assert!(
        bodies.first().is_some_and(|b| b.contains("list the files")
            && b.contains("ACP-PROMPT-5e1")
            && b.contains("ACP-START-7c2")),
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

/// The ACP conductor of the Rust SDK (`agent-client-protocol-conductor`), which
/// scripts/tools.sh builds into the build tree.
fn conductor() -> PathBuf {
    let path = std::env::var_os("PALISADE_ACP_CONDUCTOR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../target/tools/cargo/bin/agent-client-protocol-conductor")
        });
    assert!(
        path.exists(),
        "the ACP conductor is not installed at {}: run `bash scripts/tools.sh` (scripts/test.sh \
         does), or set PALISADE_ACP_CONDUCTOR",
        path.display()
    );
    path
}

/// `palisade acp` as one proxy of a real conductor chain: the editor starts the conductor,
/// which starts Palisade (with no agent of its own) and after it the Claude Code adapter, and
/// relays the adapter's messages to Palisade in `proxy/successor`. A rejected prompt never
/// reaches the model; the adapter's permission request for a denied command is answered with
/// its reject option, and the command does not run.
#[test]
fn palisade_acp_guards_as_one_proxy_of_a_conductor_chain() {
    let plugins = PluginDir::new();
    plugins.scripted(
        "gate",
        "[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"guard\"\n\
         [config]\nprompt_submit = \"reject-secrets\"\n",
    );
    plugins.scripted(
        "no-shell",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"Bash\"\n\
         [config]\npre_tool = \"deny\"\n",
    );
    let marker = tempfile::tempdir().unwrap();
    let file = marker.path().join("ran.txt");
    let adapter =
        acp_tools().join("node_modules/@agentclientprotocol/claude-agent-acp/dist/index.js");
    let proxy = format!(
        "{} acp --plugins {}",
        env!("CARGO_BIN_EXE_palisade"),
        plugins.path().display()
    );
    let options = Options {
        server: Some(serde_json::json!({
            "command": conductor(),
            "args": ["agent", proxy, format!("node {}", adapter.display())],
        })),
        ..Options::default()
    };
    let (report, mock) = run_editor(
        &plugins,
        &["my password is hunter2", "create the marker"],
        &format!("touch {}", file.display()),
        &options,
    );
    assert!(report["error"].is_null(), "the client failed: {report:#}");
    let rejected = turn(&report, 0);
    assert_eq!(rejected["stopReason"], "end_turn", "{report:#}");
    assert!(said(rejected).contains("gate/prompt-submit"), "{report:#}");
    assert!(
        bodies(&mock).iter().all(|b| !b.contains("hunter2")),
        "the rejected prompt reached the model"
    );
    assert_eq!(report["permissions"], serde_json::json!([]), "{report:#}");
    assert!(!file.exists(), "the denied command ran");
    assert!(
        said(turn(&report, 1)).contains("no-shell/pre-tool"),
        "{report:#}"
    );
}

/// The same guard in shadow (`enforce = false`): the editor is asked as it would be without
/// Palisade, and the command it allows runs.
#[test]
fn a_shadow_guard_leaves_the_permission_request_to_the_editor() {
    let plugins = PluginDir::new();
    plugins.scripted(
        "no-shell",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"Bash\"\n\
         enforce = false\n[config]\npre_tool = \"deny\"\n",
    );
    let marker = tempfile::tempdir().unwrap();
    let file = marker.path().join("ran.txt");
    let command = format!("touch {}", file.display());
    let (report, _mock) = editor(&plugins, &["create the marker"], &command);
    assert_eq!(
        report["permissions"],
        serde_json::json!([command]),
        "{report:#}"
    );
    assert!(file.exists(), "the allowed command did not run: {report:#}");
    assert!(
        !said(turn(&report, 0)).contains("no-shell/pre-tool"),
        "{report:#}"
    );
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
    let bodies = bodies(&mock);
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

/// Gemini's `replace` of `old` by `new` in `file`.
fn edit(file: &Path, old: &str, new: &str) -> Value {
    serde_json::json!({ "name": "replace", "args": {
        "file_path": file, "instruction": "as asked", "old_string": old, "new_string": new,
    } })
}

/// The tool's answer as the model received it (Gemini's `functionResponse`).
fn function_response(mock: &MockModel) -> String {
    mock.model_requests()
        .iter()
        .flat_map(|r| r.body["contents"].as_array().cloned().unwrap_or_default())
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .find_map(|p| p.get("functionResponse").map(Value::to_string))
        .unwrap_or_else(|| panic!("no tool answer reached the model: {:#?}", bodies(mock)))
}

/// Gemini CLI edits a file by reading it through the editor (`fs/read_text_file`), then
/// writing it back. The model's `replace` on a key file: the example `secret-guard` refuses
/// the read before the editor reads anything, nothing is written, the agent's tool fails, and
/// the user is told why.
#[test]
fn a_read_of_a_secret_through_the_editor_is_refused() {
    let plugins = PluginDir::new();
    let guard = palisade_examples::get("secret-guard").unwrap();
    palisade_examples::install_one(guard, plugins.path()).unwrap();
    let (report, mock, _home) = run_gemini(
        &plugins,
        "rotate the key",
        |file| edit(file, "sk-live-4b1d", "sk-live-0000"),
        ("deploy.pem", "-----BEGIN PRIVATE KEY----- sk-live-4b1d"),
    );
    assert_eq!(report["reads"], serde_json::json!([]), "{report:#}");
    assert_eq!(report["writes"], serde_json::json!([]), "{report:#}");
    // The agent's tool failed (Gemini CLI 0.61 hands its model an editor's error as
    // "[object Object]"); the user is told why in the transcript.
    let answer = function_response(&mock);
    assert!(
        !answer.contains("sk-live-4b1d"),
        "the secret reached the model: {answer}"
    );
    assert!(
        answer.contains("\"error\""),
        "the tool did not fail: {answer}"
    );
    let told = said(turn(&report, 0));
    assert!(
        told.contains("secret-guard/pre-tool") && told.contains("secret-file"),
        "the editor was not told why: {report:#}"
    );
}

/// A `post-tool` hook redacts what the editor read for the agent (unlike an agent's built-in
/// tools, ACP carries a replacement back): Gemini edits the redacted text, and the model — shown
/// the edited lines — sees `[REDACTED]`, never the token. (What the agent then writes back is
/// the redacted text: a replaced read is what the agent works on.)
#[test]
fn a_post_tool_hook_redacts_what_the_editor_read_and_the_model_sees_it() {
    let plugins = PluginDir::new();
    plugins.scripted(
        "redact",
        "[[hooks]]\npoint = \"post-tool\"\ncapability = \"transform\"\n\
         matcher = \"fs/read_text_file\"\n[config]\npost_tool = \"redact\"\n\
         secret = \"ghp_9c2e7aa1\"\n",
    );
    let (report, mock, home) = run_gemini(
        &plugins,
        "rename the project",
        |file| edit(file, "name = demo", "name = prod"),
        ("notes.txt", "token = ghp_9c2e7aa1\nname = demo\n"),
    );
    let read = home.path().join("project/notes.txt").display().to_string();
    let reads = report["reads"].as_array().cloned().unwrap_or_default();
    assert!(
        !reads.is_empty() && reads.iter().all(|r| *r == read),
        "the edit did not read through the editor: {report:#}"
    );
    let answer = function_response(&mock);
    assert!(
        !answer.contains("ghp_9c2e7aa1"),
        "the model saw the token: {answer}"
    );
    assert!(answer.contains("token = [REDACTED]"), "{answer}");
    assert!(answer.contains("name = prod"), "{answer}");
}

/// The editor closing the connection ends the agent and everything it started. The agent here
/// leaves a process behind that has nothing to do with its input (as the Claude Code adapter
/// leaves Claude Code running when it is killed); once the proxy has exited, it must be gone
/// too, not left holding the session's files.
#[test]
fn an_editor_that_goes_away_takes_the_agent_and_what_it_started_with_it() {
    let plugins = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("left-behind.pid");
    let agent = format!(
        "sleep 600 & echo $! > {}.tmp && mv {0}.tmp {0}; cat > /dev/null",
        pid_file.display()
    );
    let mut proxy = Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(["acp", "--plugins"])
        .arg(plugins.path())
        .args(["--", "sh", "-c", &agent])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let waited = std::time::Instant::now();
    while !pid_file.exists() {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(20),
            "the agent never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let left: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The editor goes away.
    drop(proxy.stdin.take());
    let status = proxy.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    // Gone, or a zombie waiting for init: not running.
    let running = || {
        std::fs::read_to_string(format!("/proc/{left}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    };
    let waited = std::time::Instant::now();
    while running() && waited.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let still = running();
    if still {
        let _ = Command::new("kill")
            .args(["-9", &left.to_string()])
            .status();
    }
    assert!(
        !still,
        "process {left}, which the agent started, outlived the proxy by 5 s"
    );
}
