//! The real Claude Code, Codex and Gemini CLIs, driven offline against a mock model on 127.0.0.1,
//! with Palisade as their hook command: a wasm guard's deny keeps the shell tool from running
//! and its reason reaches the model; with no objection the tool runs; session-start and
//! prompt-submit contexts reach the model's request.
//!
//! The CLIs are installed into the build tree by `scripts/tools.sh` (which `scripts/test.sh`
//! runs); `PALISADE_CLAUDE` / `PALISADE_CODEX` / `PALISADE_GEMINI` point elsewhere.

use crate::mock_model;
use crate::server;

use mock_model::{Api, MockModel};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const DENY_REASON: &str = "Refused by Palisade: no marker files (MARKER-DENY-7c1)";
const SESSION_CONTEXT: &str = "SESSION-CONTEXT-4b2";
const PROMPT_CONTEXT: &str = "PROMPT-CONTEXT-9d5";

fn agent(var: &str, name: &str) -> PathBuf {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target/tools/agents/node_modules/.bin")
            .join(name)
    });
    assert!(
        path.exists(),
        "{name} is not installed at {}: run `bash scripts/tools.sh` (scripts/test.sh does) to \
         install Claude Code and Codex into target/tools/agents, or set {var}",
        path.display()
    );
    path
}

/// A scratch world for one agent run: plugins, a project, a home, a marker path.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    plugins: PathBuf,
    project: PathBuf,
    home: PathBuf,
    marker: PathBuf,
    audit: PathBuf,
}

impl World {
    /// `deny_marker`: whether the wasm guard refuses commands that touch the marker.
    fn new(deny_marker: bool) -> World {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let plugins = root.join("plugins");
        let project = root.join("project");
        let home = root.join("home");
        for d in [&plugins, &project, &home] {
            std::fs::create_dir_all(d).unwrap();
        }
        // The real shell-guard example, with one rule of the operator's own.
        let guard = plugins.join("shell-guard");
        std::fs::create_dir_all(&guard).unwrap();
        let example = palisade_examples::get("shell-guard").unwrap();
        std::fs::write(guard.join(example.wasm_file), example.wasm).unwrap();
        let rules = if deny_marker {
            format!(
                "extra_rules = [{{ code = \"marker\", pattern = '.*marker\\.txt.*', message = \"{DENY_REASON}\" }}]"
            )
        } else {
            "extra_rules = []".to_string()
        };
        std::fs::write(
            guard.join("plugin.toml"),
            format!(
                "name = \"shell-guard\"\nwasm = \"{}\"\n\n[[hooks]]\npoint = \"pre-tool\"\n\
                 capability = \"guard\"\nmatcher = \"Bash|run_shell_command\"\n\n\
                 [config]\n{rules}\n",
                example.wasm_file
            ),
        )
        .unwrap();
        // Contexts from a component: one at session start, one with every prompt.
        for (name, point, context) in [
            ("start-context", "session-start", SESSION_CONTEXT),
            ("prompt-context", "prompt-submit", PROMPT_CONTEXT),
        ] {
            let folder = plugins.join(name);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::copy(palisade_fixtures::SCRIPTED, folder.join("plugin.wasm")).unwrap();
            std::fs::write(
                folder.join("plugin.toml"),
                format!(
                    "name = \"{name}\"\nwasm = \"plugin.wasm\"\n\n[[hooks]]\npoint = \"{point}\"\n\
                     capability = \"transform\"\n\n[config]\ncontexts = [\"{context}\"]\n"
                ),
            )
            .unwrap();
        }
        World {
            marker: root.join("marker.txt"),
            audit: root.join("audit.jsonl"),
            _dir: dir,
            root,
            plugins,
            project,
            home,
        }
    }

    /// A plugin `name` of the scripted test guest, its hooks and config `manifest` (TOML).
    fn scripted(&self, name: &str, manifest: &str) {
        let folder = self.plugins.join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::copy(palisade_fixtures::SCRIPTED, folder.join("plugin.wasm")).unwrap();
        std::fs::write(
            folder.join("plugin.toml"),
            format!("name = \"{name}\"\nwasm = \"plugin.wasm\"\n\n{manifest}"),
        )
        .unwrap();
    }

    fn command(&self) -> String {
        format!("echo hello > {}", self.marker.display())
    }

    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Whether the audit log holds an event `event` of hook `hook_id`.
    fn audited(&self, event: &str, hook_id: &str) -> bool {
        self.audit()
            .iter()
            .any(|e| e["event"] == event && e["hook_id"] == hook_id)
    }
}

fn palisade(args: &[&str]) -> Output {
    palisade_at(Path::new(env!("CARGO_BIN_EXE_palisade")), args)
}

/// Runs the `palisade` binary at `bin` with `args`, which must succeed.
fn palisade_at(bin: &Path, args: &[&str]) -> Output {
    let out = Command::new(bin)
        .args(args)
        .env("PALISADE_CACHE_DIR", cache_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "palisade {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Compiled components are shared by every run of this test binary.
fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("agents-cache")
}

/// Runs `command` to completion, or kills it after two minutes.
fn run(mut command: Command) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the agent starts");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn describe(out: &Output, world: &World) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}\naudit:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(&world.audit).unwrap_or_default()
    )
}

/// The guard denied, and the command did not run; returns the report for further messages.
fn assert_denied(world: &World, out: &Output) -> String {
    let report = describe(out, world);
    assert!(
        world.audited("hook_denied", "shell-guard/pre-tool"),
        "the guard did not deny:\n{report}"
    );
    assert!(!world.marker.exists(), "the denied command ran:\n{report}");
    report
}

/// The guard ran and had no objection, the command ran, and both contexts are in the
/// model's first request.
fn assert_allowed_with_contexts(world: &World, out: &Output, mock: &MockModel) {
    let report = describe(out, world);
    assert!(
        world.audited("hook_completed", "shell-guard/pre-tool"),
        "the guard did not run:\n{report}"
    );
    assert!(
        world.marker.exists(),
        "the allowed command did not run:\n{report}"
    );
    let first = mock
        .model_requests()
        .first()
        .map(|r| r.body.to_string())
        .unwrap_or_default();
    for context in [SESSION_CONTEXT, PROMPT_CONTEXT] {
        assert!(
            first.contains(context),
            "`{context}` is not in the model's first request:\n{report}"
        );
    }
}

// --- Claude Code ---------------------------------------------------------------------------

fn run_claude(world: &World) -> (Output, MockModel) {
    install_claude(world);
    claude(world)
}

/// `palisade install claude-code` of the world's plugins into its project's settings.
fn install_claude(world: &World) {
    install_claude_by(world, Path::new(env!("CARGO_BIN_EXE_palisade")), &[]);
}

/// [`install_claude`], by the `palisade` binary at `bin` (which the settings then name), with
/// `extra` arguments.
fn install_claude_by(world: &World, bin: &Path, extra: &[&str]) {
    let settings = world.project.join(".claude/settings.json");
    let args = [
        "install",
        "claude-code",
        world.plugins.to_str().unwrap(),
        "--settings",
        settings.to_str().unwrap(),
        "--audit-log",
        world.audit.to_str().unwrap(),
    ];
    palisade_at(bin, &[&args[..], extra].concat());
}

/// Claude Code with hooks that forward to `palisade serve` (installed by `install --serve`).
/// Claude Code with `install claude-code --serve --hook-type HOOK_TYPE` in its project's
/// settings, in front of a `palisade serve` of the world's plugins; with the server's token in
/// PALISADE_SERVE_TOKEN when `token` (what http hooks send).
fn run_claude_served(
    world: &World,
    hook_type: &str,
    token: bool,
) -> (Output, MockModel, server::Server) {
    let server = server::Server::start(
        &world.plugins,
        &["--audit-log", world.audit.to_str().unwrap()],
        &[("PALISADE_CACHE_DIR", cache_dir().to_str().unwrap())],
    );
    let settings = world.project.join(".claude/settings.json");
    palisade(&[
        "install",
        "claude-code",
        "--serve",
        &server.url(),
        "--token-file",
        server.token_file.to_str().unwrap(),
        "--hook-type",
        hook_type,
        "--settings",
        settings.to_str().unwrap(),
    ]);
    let mock = MockModel::start(Api::Anthropic, &world.command());
    let mut command = claude_command(world, "write the marker file", &mock);
    command.args(["--allowedTools", "Bash"]);
    if token {
        let token = std::fs::read_to_string(&server.token_file).unwrap();
        command.env("PALISADE_SERVE_TOKEN", token.trim());
    }
    (run(command), mock, server)
}

/// Runs Claude Code on the world's project, as set up.
fn claude(world: &World) -> (Output, MockModel) {
    claude_running(world, &world.command())
}

/// Runs Claude Code on the world's project, its model asking for the shell command `command`.
fn claude_running(world: &World, command: &str) -> (Output, MockModel) {
    claude_prompted(world, "write the marker file", command)
}

/// [`claude_running`], the user's prompt `prompt`.
fn claude_prompted(world: &World, prompt: &str, command: &str) -> (Output, MockModel) {
    let mock = MockModel::start(Api::Anthropic, command);
    let mut command = claude_command(world, prompt, &mock);
    command.args(["--allowedTools", "Bash"]);
    (run(command), mock)
}

/// Claude Code on the world's project, in print mode with the user's prompt `prompt`, its
/// model `mock`; no tool allowed ahead.
fn claude_command(world: &World, prompt: &str, mock: &MockModel) -> Command {
    let mut command = Command::new(agent("PALISADE_CLAUDE", "claude"));
    command
        .args(["-p", prompt, "--output-format", "json"])
        .current_dir(&world.project)
        .env("HOME", &world.home)
        .env("PALISADE_CACHE_DIR", cache_dir())
        .envs(mock.agent_env());
    command
}

/// The `tool_result` blocks of the model requests.
fn claude_tool_results(mock: &MockModel) -> Vec<Value> {
    mock.model_requests()
        .iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .collect()
}

/// The denied call's reason reached the model as an error tool result.
fn assert_claude_saw_the_reason(mock: &MockModel, report: &str) {
    let results = claude_tool_results(mock);
    assert!(
        results
            .iter()
            .any(|r| r["is_error"] == true && r.to_string().contains(DENY_REASON)),
        "the deny reason did not reach the model; tool results: {results:#?}\n{report}"
    );
}

/// A bridge process that dies at `PreToolUse` before it answers (a crash, an OOM kill) blocks
/// the call: `install` writes `onFailure: "block"`, and the real Claude Code honours it (its
/// default lets the call run).
#[test]
fn claude_code_blocks_a_call_whose_bridge_process_died() {
    use std::os::unix::fs::PermissionsExt;
    let world = World::new(false);
    // The `palisade` the settings name is a copy, which then dies at `PreToolUse` and runs the
    // real one at every other event.
    let bin = world.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let real = bin.join("palisade-real");
    std::fs::copy(env!("CARGO_BIN_EXE_palisade"), &real).unwrap();
    let installed = bin.join("palisade");
    std::fs::copy(&real, &installed).unwrap();
    install_claude_by(&world, &installed, &[]);
    std::fs::remove_file(&installed).unwrap();
    std::fs::write(
        &installed,
        format!(
            "#!/bin/sh\ninput=$(cat)\ncase \"$input\" in *'\"PreToolUse\"'*) kill -9 $$ ;; esac\n\
             printf '%s' \"$input\" | exec '{}' \"$@\"\n",
            real.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&installed, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (out, _mock) = claude(&world);
    let report = describe(&out, &world);
    assert!(
        !world.marker.exists(),
        "the call ran though its guard's process died:\n{report}"
    );
    assert!(
        world.audited("hook_completed", "prompt-context/prompt-submit"),
        "the other events did not reach the real bridge:\n{report}"
    );
}

/// Sub-agents do not escape the hooks: Claude Code's model starts a sub-agent (its `Agent`
/// tool), whose own model runs a shell command that deletes a folder and touches the marker;
/// the guard denies it in the sub-agent as in the main agent.
#[test]
fn claude_code_runs_a_subagents_shell_command_through_the_guard() {
    let world = World::new(true);
    let victim = world.root.join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("keep.txt"), "keep").unwrap();
    let command = format!(
        "rm -rf {} && echo hello > {}",
        victim.display(),
        world.marker.display()
    );
    let script = json!([
        {"when": "SUBAGENT TASK", "name": "Bash",
         "input": {"command": command, "description": "clean up"}},
        {"name": "Agent", "input": {
            "description": "clean up",
            "prompt": "SUBAGENT TASK: clean up the workspace",
            "subagent_type": "general-purpose",
            "run_in_background": false}},
    ]);
    // With the events that run no point registered too: the sub-agent's start is recorded.
    install_claude_by(
        &world,
        Path::new(env!("CARGO_BIN_EXE_palisade")),
        &["--observe"],
    );
    let (out, mock) = claude_running(&world, &script.to_string());
    let report = describe(&out, &world);
    let requests = mock.model_requests();
    assert!(
        requests
            .iter()
            .any(|r| r.body["messages"].to_string().contains("SUBAGENT TASK")),
        "no sub-agent ran:\n{report}"
    );
    let started = world
        .audit()
        .into_iter()
        .any(|e| e["event"] == "agent_event" && e["input"]["hook_event_name"] == "SubagentStart");
    assert!(started, "the sub-agent's start is not recorded:\n{report}");
    assert!(
        victim.join("keep.txt").exists(),
        "the sub-agent's command ran:\n{report}"
    );
    assert_denied(&world, &out);
    // The audit log says which sub-agent the denied call came from.
    let denied: Vec<Value> = world
        .audit()
        .into_iter()
        .filter(|e| e["event"] == "hook_denied")
        .collect();
    assert!(
        denied
            .iter()
            .any(|e| e["agent_id"].as_str().is_some_and(|id| !id.is_empty())
                && e["agent_type"] == "general-purpose"),
        "no denial names the sub-agent: {denied:#?}"
    );
}

/// A slash command's inline shell command (`!` and a command in backticks, in
/// `.claude/commands/*.md`; skills have them too) runs without a `PreToolUse`: Claude Code's
/// `PreSkillShellCommand` is its only hook. `install` registers it, and the guard judges it as
/// the shell call it is: denied, it does not run.
#[test]
fn claude_code_runs_a_slash_commands_inline_shell_command_through_the_guard() {
    let world = World::new(true);
    let commands = world.project.join(".claude/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(
        commands.join("mark.md"),
        "---\nallowed-tools: Bash(touch:*)\ndescription: Marks the project\n---\n\
         Marked: !`touch marker.txt`\n",
    )
    .unwrap();
    install_claude(&world);
    let (out, _mock) = claude_prompted(&world, "/mark", "true");
    let report = describe(&out, &world);
    assert!(
        world.audited("hook_denied", "shell-guard/pre-tool"),
        "the guard did not deny the inline command:\n{report}"
    );
    assert!(
        !world.project.join("marker.txt").exists(),
        "the slash command's inline shell command ran:\n{report}"
    );
}

/// A turn that ends in an API error gets no `Stop` from Claude Code but a `StopFailure`: the
/// turn is closed as failed, and its `turn-completed` fact says so (observers run; the durable
/// fact stream holds it).
#[test]
fn claude_code_closes_a_turn_that_ended_in_an_api_error_as_failed() {
    let world = World::new(false);
    world.scripted(
        "turn-watch",
        "[[hooks]]\n\
         point = \"turn-completed\"\ncapability = \"observe\"\n",
    );
    install_claude(&world);
    let facts = world.root.join("facts");
    // Claude Code does not wait for a `StopFailure` hook (its answer is ignored): the bridge
    // may still be at work when Claude Code has exited, and Claude Code may exit before it
    // has even started the hook's process (its exit races the spawn). A run where the hook
    // never started says nothing of Palisade: up to three runs, each a new turn.
    let mut runs = Vec::new();
    for _ in 0..3 {
        let mock = MockModel::start(Api::Anthropic, mock_model::API_ERROR);
        let mut command = claude_command(&world, "write the marker file", &mock);
        command.env("PALISADE_FACTS", &facts);
        runs.push(run(command));
        let waited = Instant::now();
        while !world.audited("hook_completed", "turn-watch/turn-completed")
            && waited.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        if world.audited("hook_completed", "turn-watch/turn-completed") {
            break;
        }
    }
    let out = runs.pop().unwrap();
    let report = format!("{} run(s)\n{}", runs.len() + 1, describe(&out, &world));
    assert!(
        world.audited("hook_completed", "turn-watch/turn-completed"),
        "no turn-completed observer ran:\n{report}"
    );
    let stream = std::fs::read_to_string(facts.join("facts.jsonl")).unwrap_or_default();
    let completed: Vec<Value> = stream
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|record| record.to_string().contains("turn-completed"))
        .collect();
    assert!(
        completed
            .iter()
            .any(|record| record.to_string().contains("\"failed\"")),
        "the turn is not closed as failed: {completed:#?}\n{report}"
    );
}

/// A tool call that fails reaches the observers of its result: Claude Code reports it as
/// `PostToolUseFailure` (not `PostToolUse`), whose `error` is the outcome they see, marked as
/// an error.
#[test]
fn claude_code_shows_a_failed_calls_error_to_tool_result_observers() {
    let world = World::new(false);
    world.scripted(
        "result-watch",
        "[[hooks]]\n\
         point = \"tool-result\"\ncapability = \"observe\"\nmatcher = \"@shell\"\n\n\
         [config]\ntool_result = \"echo\"\n",
    );
    install_claude(&world);
    let missing = world.root.join("no-such-folder-e41");
    let (out, _mock) = claude_running(&world, &format!("ls {}", missing.display()));
    let report = describe(&out, &world);
    let seen: Vec<String> = world
        .audit()
        .iter()
        .filter(|e| e["event"] == "plugin_log" && e["hook_id"] == "result-watch/tool-result")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect();
    assert!(
        seen.iter()
            .any(|m| m.starts_with("saw error") && m.contains("no-such-folder-e41")),
        "the observer did not see the failed call's error: {seen:?}\n{report}"
    );
}

/// Claude Code's permission dialog (`PermissionRequest`, when a call needs the user's
/// approval): a tool guard's deny denies the call instead of asking, and the model reads the
/// guard's reason. Only `PermissionRequest` runs Palisade here (installed by hand), so the deny
/// is that event's: at `PreToolUse` the same guard would have denied first.
#[test]
fn claude_code_denies_at_its_permission_dialog_when_a_tool_guard_objects() {
    let world = World::new(false);
    world.scripted(
        "invariant",
        "[[hooks]]\n\
         point = \"tool-guard\"\ncapability = \"guard\"\nmatcher = \"@shell\"\n\n\
         [config]\ntool_guard = \"deny\"\n",
    );
    let bridge = format!(
        "'{}' claude-code '{}' --audit-log '{}'",
        env!("CARGO_BIN_EXE_palisade"),
        world.plugins.display(),
        world.audit.display()
    );
    let settings = json!({ "hooks": { "PermissionRequest": [{ "matcher": "*", "hooks": [
        { "type": "command", "command": bridge, "timeout": 15 }] }] } });
    std::fs::create_dir_all(world.project.join(".claude")).unwrap();
    std::fs::write(
        world.project.join(".claude/settings.json"),
        settings.to_string(),
    )
    .unwrap();
    // Not allowed ahead (no `--allowedTools`), and outside the project: it needs approval.
    let mock = MockModel::start(Api::Anthropic, &world.command());
    let out = run(claude_command(&world, "write the marker file", &mock));
    let report = describe(&out, &world);
    assert!(
        world.audited("hook_denied", "invariant/tool-guard"),
        "the tool guard did not deny at the permission dialog:\n{report}"
    );
    let results = claude_tool_results(&mock);
    assert!(
        results
            .iter()
            .any(|r| r["is_error"] == true && r.to_string().contains("is never allowed")),
        "the model did not read the guard's reason: {results:#?}\n{report}"
    );
    assert!(!world.marker.exists(), "the denied call ran:\n{report}");
}

/// Claude Code's `ConfigChange`, as the real CLI sends it: a shell command of the session edits
/// the project's local settings, adding a `Stop` hook (through a script: Claude Code asks
/// before a command that names its own settings file). Claude Code's watcher sees the edit
/// about a second later, while the command still sleeps, and asks its hooks. A guard on
/// `config/change` denies the call Palisade makes of it, the file's source and path its
/// arguments; Claude Code logs that the hook blocked the change, and the added hook never
/// runs. A guard that allows lets the change load: the added hook runs when the turn stops.
#[test]
fn claude_code_keeps_a_settings_change_from_loading_when_a_guard_denies_it() {
    for deny in [true, false] {
        let world = World::new(false);
        world.scripted(
            "settings-guard",
            &format!(
                "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
                 matcher = \"config/change\"\n\n[config]\npre_tool = \"{}\"\n",
                if deny { "deny" } else { "allow" }
            ),
        );
        install_claude(&world);
        let installed = std::fs::read_to_string(world.project.join(".claude/settings.json"));
        let installed: Value = serde_json::from_str(&installed.unwrap()).unwrap();
        assert!(
            installed["hooks"].get("ConfigChange").is_some(),
            "install did not register ConfigChange: {installed}"
        );
        // The change: a `Stop` hook that leaves a file behind.
        let stopped = world.root.join("stopped");
        let change = json!({ "hooks": { "Stop": [{ "hooks": [{ "type": "command",
            "command": format!("touch '{}'", stopped.display()) }] }] } });
        let changed = world.root.join("changed.json");
        std::fs::write(&changed, change.to_string()).unwrap();
        let local = world.project.join(".claude/settings.local.json");
        let edit = world.root.join("edit.sh");
        std::fs::write(
            &edit,
            format!("cp '{}' '{}'\n", changed.display(), local.display()),
        )
        .unwrap();
        // The watcher takes a file once it has stayed the same for a second: the command
        // sleeps past that, and the session is still there when the hooks answer.
        let mock = MockModel::start(Api::Anthropic, &format!("sh {} && sleep 6", edit.display()));
        let debug = world.root.join("claude-debug.txt");
        let facts = world.root.join("facts");
        let mut command = claude_command(&world, "change the settings", &mock);
        command
            .args(["--allowedTools", "Bash", "--debug-file"])
            .arg(&debug)
            .env("PALISADE_FACTS", &facts);
        let started = Instant::now();
        let out = run(command);
        let said = std::fs::read_to_string(&debug).unwrap_or_default();
        let report = format!(
            "deny {deny}, {:?}\n{}\nClaude Code's debug log:\n{said}",
            started.elapsed(),
            describe(&out, &world)
        );
        assert!(
            local.exists(),
            "the command did not edit the settings:\n{report}"
        );
        // The call Palisade judged: `config/change` of the local settings.
        let stream = std::fs::read_to_string(facts.join("facts.jsonl")).unwrap_or_default();
        let calls: Vec<Value> = stream
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .map(|record| record["fact"]["call"].clone())
            .filter(|call| call["name"] == "config/change")
            .collect();
        assert_eq!(
            calls.iter().map(|c| &c["arguments"]).collect::<Vec<_>>(),
            [&json!({ "source": "local_settings", "file_path": local })],
            "{report}"
        );
        let blocked = format!("ConfigChange hook blocked change to {}", local.display());
        if deny {
            assert!(
                world.audited("hook_denied", "settings-guard/pre-tool"),
                "the guard did not deny the change:\n{report}"
            );
            assert!(
                said.contains(&blocked),
                "Claude Code did not block it:\n{report}"
            );
            assert!(!stopped.exists(), "the blocked change loaded:\n{report}");
        } else {
            assert!(
                world.audited("hook_completed", "settings-guard/pre-tool"),
                "the guard did not run:\n{report}"
            );
            assert!(
                !said.contains(&blocked),
                "Claude Code blocked it:\n{report}"
            );
            assert!(
                stopped.exists(),
                "the allowed change did not load:\n{report}"
            );
        }
    }
}

/// Policies as data: Claude Code's `Bash` `git push --force origin main` is denied by a Rego
/// rule (`rego-guard` with its example policy, in place of `shell-guard`), the command never
/// runs, and the model reads the policy's reason.
#[test]
fn claude_code_obeys_a_rego_policys_deny() {
    let world = World::new(false);
    std::fs::remove_dir_all(world.plugins.join("shell-guard")).unwrap();
    let example = palisade_examples::get("rego-guard").expect("the rego-guard example");
    palisade_examples::install_one(example, &world.plugins).unwrap();
    install_claude(&world);
    let push = format!(
        "git push --force origin main; echo ran > {}",
        world.marker.display()
    );
    let (out, mock) = claude_running(&world, &push);
    let report = describe(&out, &world);
    assert!(
        world.audited("hook_denied", "rego-guard/pre-tool"),
        "the Rego policy did not deny:\n{report}"
    );
    assert!(!world.marker.exists(), "the denied command ran:\n{report}");
    let results = claude_tool_results(&mock);
    assert!(
        results
            .iter()
            .any(|r| r["is_error"] == true
                && r.to_string().contains("force-pushing a protected branch")),
        "the policy's reason did not reach the model; tool results: {results:#?}\n{report}"
    );
}

#[test]
fn claude_code_obeys_a_wasm_deny_and_the_model_sees_the_reason() {
    let world = World::new(true);
    let (out, mock) = run_claude(&world);
    let report = assert_denied(&world, &out);
    assert_claude_saw_the_reason(&mock, &report);
}

#[test]
fn claude_code_runs_an_allowed_tool_and_the_model_sees_the_contexts() {
    let world = World::new(false);
    let (out, mock) = run_claude(&world);
    assert_allowed_with_contexts(&world, &out, &mock);
}

/// A guard (`steps`) that refuses every step of a turn but the prompt's.
fn refuse_continuations(world: &World) {
    world.scripted(
        "steps",
        "[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"guard\"\n\n\
         [config]\nprompt_submit = \"reject-continuations\"\n",
    );
}

/// The guard of [`refuse_continuations`] refused the turn's second step, which never reached
/// the model.
fn assert_continuation_refused(world: &World, mock: &MockModel, report: &str) {
    assert_eq!(
        mock.model_requests().len(),
        1,
        "the continuation reached the model: {report}"
    );
    assert!(
        world.audited("hook_denied", "steps/prompt-submit"),
        "{report}"
    );
}

/// Claude Code's `PostToolBatch` is a tool continuation's pre-step: after the shell call, a
/// guard that refuses every step but the prompt's keeps the next model request from being
/// sent, and Claude Code stops its loop. A context a prompt-submit hook adds there reaches the
/// model's next request (`additionalContext`, once for the batch).
#[test]
fn claude_code_asks_prompt_submit_before_a_tool_continuation_and_a_reject_stops_it() {
    let world = World::new(false);
    refuse_continuations(&world);
    let (out, mock) = run_claude(&world);
    let report = describe(&out, &world);
    assert!(world.marker.exists(), "the tool call ran: {report}");
    assert_continuation_refused(&world, &mock, &report);

    // The world's `prompt-context` adds its context at every prompt-submit: the prompt's step
    // put it in the first request, the batch's once more in the next.
    let world = World::new(false);
    let (out, mock) = run_claude(&world);
    let report = describe(&out, &world);
    let requests = mock.model_requests();
    assert!(requests.len() >= 2, "{report}");
    let times = |n: usize| requests[n].body.to_string().matches(PROMPT_CONTEXT).count();
    assert!(
        times(1) > times(0),
        "the batch's context is not in the next request ({} then {}): {report}",
        times(0),
        times(1)
    );
}

/// A post-tool hook's redaction reaches Claude Code's model: the bridge carries it back as
/// `updatedToolOutput`, in the shell tool's own output shape, and the model's tool result
/// holds the redacted text, never the secret.
#[test]
fn claude_code_gives_its_model_the_result_a_post_tool_hook_redacted() {
    let world = World::new(false);
    world.scripted(
        "redact",
        "[[hooks]]\npoint = \"post-tool\"\n\
         capability = \"transform\"\nmatcher = \"Bash\"\n\n\
         [config]\npost_tool = \"redact\"\nsecret = \"SECRET-42\"\n",
    );
    install_claude(&world);
    let (out, mock) = claude_running(&world, "echo token=SECRET-42");
    let report = describe(&out, &world);
    let results = claude_tool_results(&mock)
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>();
    assert!(
        results.iter().any(|r| r.contains("token=[REDACTED]")),
        "the redacted output did not reach the model: {results:#?}\n{report}"
    );
    assert!(
        results.iter().all(|r| !r.contains("SECRET-42")),
        "the secret reached the model: {results:#?}\n{report}"
    );
}

#[test]
fn claude_code_through_palisade_serve_obeys_a_deny() {
    let world = World::new(true);
    let (out, mock, server) = run_claude_served(&world, "command", false);
    let report = format!(
        "{}\nserver:\n{}",
        assert_denied(&world, &out),
        server.said()
    );
    assert_claude_saw_the_reason(&mock, &report);
}

#[test]
fn claude_code_through_palisade_serve_runs_an_allowed_tool_with_the_contexts() {
    // Claude Code POSTs the events itself (but SessionStart, which forwards).
    let world = World::new(false);
    let (out, mock, server) = run_claude_served(&world, "http", true);
    assert_allowed_with_contexts(&world, &out, &mock);
    // Every event of the run went to one Palisade session: the agent's.
    let sessions: std::collections::BTreeSet<String> = world
        .audit()
        .iter()
        .filter_map(|e| e["session_id"].as_str().map(str::to_string))
        .collect();
    assert_eq!(sessions.len(), 1, "{sessions:?}\n{}", server.said());
}

/// Http hooks whose token variable is not set: the server refuses every event, and Claude Code
/// blocks the guarded ones (`onFailure: block`), so nothing runs unjudged.
#[test]
fn claude_code_http_hooks_without_the_token_run_nothing_unjudged() {
    let world = World::new(false);
    let (out, mock, server) = run_claude_served(&world, "http", false);
    let report = format!("{}\nserver:\n{}", describe(&out, &world), server.said());
    assert!(!world.marker.exists(), "the command ran: {report}");
    assert!(
        claude_tool_results(&mock).is_empty(),
        "a tool ran: {report}"
    );
}

// --- Codex ---------------------------------------------------------------------------------

fn run_codex(world: &World) -> (Output, MockModel) {
    run_codex_doing(world, "mock-model", &world.command())
}

/// Codex, its model asking `apply_patch` to add `file`. The model is one Codex knows (from the
/// catalog in its binary), whose tools include `apply_patch`; for a model it does not know,
/// Codex offers none.
fn run_codex_patching(world: &World, file: &Path) -> (Output, MockModel) {
    let patch = format!(
        "*** Begin Patch\n*** Add File: {}\n+hello\n*** End Patch\n",
        file.display()
    );
    run_codex_doing(world, "gpt-6.2-sol", &patch)
}

/// Codex with the world's plugins installed, its model `model` (served by the mock) asking for
/// `command` (a shell command, or a patch: see the mock).
fn run_codex_doing(world: &World, model: &str, command: &str) -> (Output, MockModel) {
    let install = [
        "install",
        "codex",
        world.plugins.to_str().unwrap(),
        "--audit-log",
        world.audit.to_str().unwrap(),
    ];
    run_codex_installed(world, model, command, &install)
}

/// [`run_codex_doing`], with the hooks `palisade install` (its arguments `install`) prints.
fn run_codex_installed(
    world: &World,
    model: &str,
    command: &str,
    install: &[&str],
) -> (Output, MockModel) {
    let codex = agent("PALISADE_CODEX", "codex");
    let hooks = palisade(install);
    // Past the bridge's budget, so the bridge's fail-closed answer comes before Codex gives up.
    let snippet = String::from_utf8_lossy(&hooks.stdout);
    assert!(snippet.contains("timeout = 15"), "{snippet}");
    let mock = MockModel::start(Api::Responses, command);
    let codex_home = world.root.join("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = format!(
        r#"model = "{model}"
model_provider = "mock"

[model_providers.mock]
name = "mock"
base_url = "http://127.0.0.1:{port}/v1"
env_key = "MOCK_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[features]
plugins = false
remote_plugin = false
apps = false
tool_suggest = false
daemon_auto_start = false
plugin_sharing = false
api_key_model_discovery = false

{hooks}"#,
        port = mock.port,
        hooks = String::from_utf8_lossy(&hooks.stdout),
    );
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    let mut command = Command::new(codex);
    command
        .args([
            "exec",
            "--skip-git-repo-check",
            "--json",
            "--dangerously-bypass-hook-trust",
            "--dangerously-bypass-approvals-and-sandbox",
            "write the marker file",
        ])
        .current_dir(&world.project)
        .env("HOME", &world.home)
        .env("CODEX_HOME", &codex_home)
        .env("PALISADE_CACHE_DIR", cache_dir())
        .envs(mock.agent_env());
    (run(command), mock)
}

/// The outputs of the shell calls, as Codex sent them back to the model.
fn codex_call_outputs(mock: &MockModel) -> Vec<String> {
    mock.model_requests()
        .iter()
        .flat_map(|r| r.body["input"].as_array().cloned().unwrap_or_default())
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["output"].to_string())
        .collect()
}

#[test]
fn codex_obeys_a_wasm_deny_and_the_model_sees_the_reason() {
    let world = World::new(true);
    let (out, mock) = run_codex(&world);
    // Codex skips untrusted hooks silently: the audit log proves the hook ran.
    let report = assert_denied(&world, &out);
    let outputs = codex_call_outputs(&mock);
    assert!(
        outputs.iter().any(|o| o.contains(DENY_REASON)),
        "the deny reason did not reach the model; call outputs: {outputs:#?}\n{report}"
    );
}

/// Codex in front of a warm `palisade serve` (`install codex --serve`: a `palisade forward`
/// command per event, since Codex runs only command hooks): the same deny, its reason read by
/// the model.
#[test]
fn codex_through_palisade_serve_obeys_a_deny() {
    let world = World::new(true);
    let server = server::Server::start(
        &world.plugins,
        &["--audit-log", world.audit.to_str().unwrap()],
        &[("PALISADE_CACHE_DIR", cache_dir().to_str().unwrap())],
    );
    let url = server.url();
    let install = [
        "install",
        "codex",
        "--serve",
        &url,
        "--token-file",
        server.token_file.to_str().unwrap(),
    ];
    let (out, mock) = run_codex_installed(&world, "mock-model", &world.command(), &install);
    let report = format!(
        "{}\nserver:\n{}",
        assert_denied(&world, &out),
        server.said()
    );
    let outputs = codex_call_outputs(&mock);
    assert!(
        outputs.iter().any(|o| o.contains(DENY_REASON)),
        "the deny reason did not reach the model; call outputs: {outputs:#?}\n{report}"
    );
}

#[test]
fn codex_runs_an_allowed_tool_and_the_model_sees_the_contexts() {
    let world = World::new(false);
    let (out, mock) = run_codex(&world);
    assert_allowed_with_contexts(&world, &out, &mock);
}

/// Codex's file edits (its `apply_patch` tool, the patch text as the call's `command`) reach
/// hooks as the kind `@file-write`: a guard matching the kind, not the tool's name, denies a
/// patch that adds a file, and the file is not written.
#[test]
fn codex_apply_patch_is_a_file_write_a_guard_can_deny() {
    let world = World::new(false);
    let example = palisade_examples::get("shell-guard").unwrap();
    std::fs::write(
        world.plugins.join("shell-guard/plugin.toml"),
        format!(
            "name = \"shell-guard\"\nwasm = \"{}\"\n\n[[hooks]]\npoint = \"pre-tool\"\n\
             capability = \"guard\"\nmatcher = \"@file-write\"\n\n[config]\n\
             extra_rules = [{{ code = \"patched\", pattern = '.*patched\\.txt.*', message = \"{DENY_REASON}\" }}]\n",
            example.wasm_file
        ),
    )
    .unwrap();
    let file = world.project.join("patched.txt");
    let (out, mock) = run_codex_patching(&world, &file);
    let report = describe(&out, &world);
    assert!(
        world.audited("hook_denied", "shell-guard/pre-tool"),
        "the guard did not deny the patch:\n{report}"
    );
    assert!(!file.exists(), "the denied patch was applied:\n{report}");
    // The model reads the reason as the patch call's output.
    let outputs: Vec<String> = mock
        .model_requests()
        .iter()
        .flat_map(|r| r.body["input"].as_array().cloned().unwrap_or_default())
        .filter(|i| i["type"] == "custom_tool_call_output")
        .map(|i| i["output"].to_string())
        .collect();
    assert!(
        outputs.iter().any(|o| o.contains(DENY_REASON)),
        "the patch call's output is not the deny reason: {outputs:#?}\n{report}"
    );
}

// --- Gemini CLI ----------------------------------------------------------------------------

/// Gemini CLI's settings for an offline run: API-key auth against the mock, no usage
/// statistics, one model (no router's extra call), no folder-trust prompt (hooks run only in a
/// trusted folder).
const GEMINI_SETTINGS: &str = r#"{
  "security": { "auth": { "selectedType": "gemini-api-key" }, "folderTrust": { "enabled": false } },
  "privacy": { "usageStatisticsEnabled": false },
  "general": { "enableAutoUpdate": false, "enableAutoUpdateNotification": false },
  "model": { "name": "gemini-2.5-flash" }
}"#;

/// Gemini CLI with `palisade install gemini` merged into its user settings.
fn run_gemini(world: &World) -> (Output, MockModel) {
    let settings = gemini_settings(world);
    palisade(&[
        "install",
        "gemini",
        world.plugins.to_str().unwrap(),
        "--settings",
        settings.to_str().unwrap(),
        "--audit-log",
        world.audit.to_str().unwrap(),
    ]);
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&settings).unwrap()).unwrap();
    assert_eq!(merged["model"]["name"], "gemini-2.5-flash", "{merged}");
    // Milliseconds, past the bridge's budget: its fail-closed answer comes first.
    assert_eq!(
        merged["hooks"]["BeforeTool"][0]["hooks"][0]["timeout"],
        15_000
    );
    gemini(world)
}

/// Gemini CLI with `install gemini --serve` in its user settings, in front of a `palisade
/// serve` of the world's plugins (`palisade forward` per event, to `POST /gemini`).
fn run_gemini_served(world: &World) -> (Output, MockModel, server::Server) {
    let server = server::Server::start(
        &world.plugins,
        &["--audit-log", world.audit.to_str().unwrap()],
        &[("PALISADE_CACHE_DIR", cache_dir().to_str().unwrap())],
    );
    let settings = gemini_settings(world);
    palisade(&[
        "install",
        "gemini",
        "--serve",
        &server.url(),
        "--token-file",
        server.token_file.to_str().unwrap(),
        "--settings",
        settings.to_str().unwrap(),
    ]);
    let (out, mock) = gemini(world);
    (out, mock, server)
}

/// The world's Gemini CLI user settings, before Palisade's hooks are merged in.
fn gemini_settings(world: &World) -> PathBuf {
    let settings = world.home.join(".gemini/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, GEMINI_SETTINGS).unwrap();
    settings
}

/// Runs Gemini CLI on the world's project, as set up, its model asking for the shell call.
fn gemini(world: &World) -> (Output, MockModel) {
    let gemini = std::env::var_os("PALISADE_GEMINI")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../target/tools/agents/node_modules/@google/gemini-cli/bundle/gemini.js")
        });
    assert!(
        gemini.exists(),
        "Gemini CLI is not installed at {}: run `bash scripts/tools.sh` (scripts/test.sh does), \
         or set PALISADE_GEMINI",
        gemini.display()
    );
    let call = serde_json::json!({
        "name": "run_shell_command",
        "args": { "command": world.command(), "description": "write the marker" },
    });
    let mock = MockModel::start(Api::Gemini, &call.to_string());
    let mut command = Command::new("node");
    command
        .arg(gemini)
        .args([
            "-p",
            "write the marker file",
            // Without it a headless run offers no shell tool at all.
            "--approval-mode",
            "yolo",
            "--output-format",
            "json",
        ])
        .current_dir(&world.project)
        .env("HOME", &world.home)
        .env("PALISADE_CACHE_DIR", cache_dir())
        .envs(mock.agent_env());
    (run(command), mock)
}

/// What the tool calls answered the model (Gemini's `functionResponse`s).
fn gemini_function_responses(mock: &MockModel) -> Vec<String> {
    mock.model_requests()
        .iter()
        .flat_map(|r| r.body["contents"].as_array().cloned().unwrap_or_default())
        .flat_map(|c| c["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p.get("functionResponse").map(Value::to_string))
        .collect()
}

#[test]
fn gemini_cli_obeys_a_wasm_deny_and_the_model_sees_the_reason() {
    let world = World::new(true);
    let (out, mock) = run_gemini(&world);
    let report = assert_denied(&world, &out);
    let responses = gemini_function_responses(&mock);
    assert!(
        responses.iter().any(|r| r.contains(DENY_REASON)),
        "the deny reason did not reach the model; tool answers: {responses:#?}\n{report}"
    );
}

/// Gemini CLI through `palisade serve` (`install gemini --serve`: a `palisade forward` per
/// event, to `POST /gemini`): the guard denies the call, in Gemini CLI's fields, and the model
/// reads why.
#[test]
fn gemini_cli_through_palisade_serve_obeys_a_deny() {
    let world = World::new(true);
    let (out, mock, server) = run_gemini_served(&world);
    let report = format!(
        "{}\nserver:\n{}",
        assert_denied(&world, &out),
        server.said()
    );
    let responses = gemini_function_responses(&mock);
    assert!(
        responses.iter().any(|r| r.contains(DENY_REASON)),
        "the deny reason did not reach the model; tool answers: {responses:#?}\n{report}"
    );
}

#[test]
fn gemini_cli_runs_an_allowed_tool_and_the_model_sees_the_contexts() {
    let world = World::new(false);
    let (out, mock) = run_gemini(&world);
    assert_allowed_with_contexts(&world, &out, &mock);
}

/// Gemini CLI's `BeforeModel` is a continuation step's pre-step: after the shell call, a guard
/// that refuses every step but the prompt's keeps the second model request from being sent,
/// and Gemini ends the turn with the guard's reason.
#[test]
fn gemini_cli_asks_prompt_submit_before_a_continuation_step_and_a_reject_ends_the_turn() {
    let world = World::new(false);
    refuse_continuations(&world);
    let (out, mock) = run_gemini(&world);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = describe(&out, &world);
    assert!(world.marker.exists(), "the tool call ran: {report}");
    assert!(
        stdout.contains("Agent execution blocked: step 2 of turn"),
        "Gemini did not report the blocked request: {report}"
    );
    assert_continuation_refused(&world, &mock, &report);
}
