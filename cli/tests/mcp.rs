//! `palisade mcp` between real software on both sides, offline: the filesystem MCP server
//! (`@modelcontextprotocol/server-filesystem`) and a server written with the official
//! TypeScript library behind it; in front, the official Rust SDK's client (`rmcp`) and the real
//! Claude Code CLI (`--mcp-config`), whose model is the loopback mock.

use crate::mock_model;

use mock_model::{Api, MockModel};
use palisade_tests::PluginDir;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::{ServiceExt, transport::TokioChildProcess};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Where scripts/tools.sh installed the MCP servers' packages.
fn mcp_tools() -> PathBuf {
    let dir = std::env::var_os("PALISADE_MCP_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tools/mcp"));
    assert!(
        filesystem_server_in(&dir).exists(),
        "the filesystem MCP server is not installed in {}: run `bash scripts/tools.sh` \
         (scripts/test.sh does), or set PALISADE_MCP_TOOLS",
        dir.display()
    );
    dir
}

fn filesystem_server_in(dir: &Path) -> PathBuf {
    dir.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
}

/// The slow test server, where node finds the MCP library beside it.
fn slow_server() -> PathBuf {
    static SCRIPT: OnceLock<PathBuf> = OnceLock::new();
    SCRIPT
        .get_or_init(|| {
            let path = mcp_tools().join("slow-server.mjs");
            let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/slow-server.mjs");
            std::fs::copy(source, &path).expect("copy the slow server");
            path
        })
        .clone()
}

fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-cache")
}

/// A project folder the filesystem server serves, with `files` in it.
struct Project {
    dir: tempfile::TempDir,
    audit: PathBuf,
}

impl Project {
    fn new(files: &[(&str, &str)]) -> Project {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(&root).unwrap();
        for (name, text) in files {
            std::fs::write(root.join(name), text).unwrap();
        }
        Project {
            audit: dir.path().join("audit.jsonl"),
            dir,
        }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root").canonicalize().unwrap()
    }

    fn file(&self, name: &str) -> String {
        self.root().join(name).display().to_string()
    }

    /// The audit log, once it has all of `wanted` (or after 10 s).
    fn audit(&self, wanted: &[&str]) -> String {
        crate::server::log_having(&self.audit, |log| wanted.iter().all(|w| log.contains(w)))
    }

    /// `palisade mcp --plugins DIR --name NAME -- SERVER…`, as a client's config has it.
    fn proxy_args(&self, plugins: &PluginDir, name: &str, server: &[String]) -> Vec<String> {
        let mut args: Vec<String> = vec![
            "mcp".into(),
            "--plugins".into(),
            plugins.path().display().to_string(),
            "--name".into(),
            name.into(),
            "--audit-log".into(),
            self.audit.display().to_string(),
            "--".into(),
        ];
        args.extend(server.iter().cloned());
        args
    }

    /// The filesystem server on this project's root.
    fn filesystem(&self) -> Vec<String> {
        vec![
            "node".into(),
            filesystem_server_in(&mcp_tools()).display().to_string(),
            self.root().display().to_string(),
        ]
    }
}

/// An rmcp client connected through `palisade mcp` to `server`.
async fn connect(
    project: &Project,
    plugins: &PluginDir,
    server: &[String],
) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_palisade"));
    command
        .args(project.proxy_args(plugins, "fs", server))
        .env("PALISADE_CACHE_DIR", cache_dir())
        .env("PALISADE_STATE_DIR", project.dir.path().join("state"));
    let transport = TokioChildProcess::new(command).expect("palisade mcp starts");
    tokio::time::timeout(Duration::from_secs(60), ().serve(transport))
        .await
        .expect("initialize answered in time")
        .expect("initialize through the proxy")
}

async fn call(client: &rmcp::Peer<RoleClient>, tool: &str, arguments: Value) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
    tokio::time::timeout(Duration::from_secs(60), client.call_tool(params))
        .await
        .expect("the call answered in time")
        .expect("the call answered")
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

fn secret_guard(plugins: &PluginDir) {
    let guard = palisade_examples::get("secret-guard").unwrap();
    palisade_examples::install_one(guard, plugins.path()).unwrap();
}

const TOKEN: &str = "ghp_5ecret7oken42";

/// The example `secret-guard` refuses the server's `read_text_file` of a `.env` (the client
/// reads why, as an error result); a file that is no secret passes, as the server sent it;
/// hooks see the tool as `mcp__fs__read_text_file`.
#[tokio::test(flavor = "multi_thread")]
async fn a_guard_denies_reading_a_secret_through_the_mcp_tool() {
    let project = Project::new(&[
        (".env", "API_KEY=sk-live-11aa"),
        ("notes.txt", "plain notes"),
    ]);
    let plugins = PluginDir::new();
    secret_guard(&plugins);
    // Runs only if the tool's name is what Claude Code would call it.
    plugins.scripted(
        "named",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"observe\"\n\
         matcher = \"mcp__fs__read_text_file\"\n",
    );
    let client = connect(&project, &plugins, &project.filesystem()).await;
    let denied = call(
        &client,
        "read_text_file",
        json!({ "path": project.file(".env") }),
    )
    .await;
    assert_eq!(denied.is_error, Some(true), "{denied:?}");
    let said = text(&denied);
    assert!(!said.contains("sk-live-11aa"), "{said}");
    assert!(said.contains(".env") && said.contains("secret"), "{said}");
    let allowed = call(
        &client,
        "read_text_file",
        json!({ "path": project.file("notes.txt") }),
    )
    .await;
    assert_ne!(allowed.is_error, Some(true), "{allowed:?}");
    assert_eq!(text(&allowed), "plain notes");
    assert_eq!(
        allowed.structured_content,
        Some(json!({ "content": "plain notes" }))
    );
    let audit = project.audit(&["\"hook_denied\"", "\"hook_id\":\"named/pre-tool\""]);
    assert!(
        audit.contains("\"hook_denied\"") && audit.contains("\"hook_id\":\"named/pre-tool\""),
        "{audit}"
    );
    client.cancel().await.unwrap();
}

/// A `post-tool` hook replaces the tool's value (the filesystem server's structured content)
/// with the token redacted: the client receives the redacted value and the content recomputed
/// from it, never the token.
#[tokio::test(flavor = "multi_thread")]
async fn a_post_tool_hook_redacts_what_the_client_receives() {
    let project = Project::new(&[("config.txt", &format!("token = {TOKEN}\nname = demo"))]);
    let plugins = PluginDir::new();
    plugins.scripted(
        "redact",
        &format!(
            "[[hooks]]\npoint = \"post-tool\"\ncapability = \"transform\"\n\
             matcher = \"mcp__fs__.*\"\n[config]\npost_tool = \"redact\"\nsecret = \"{TOKEN}\"\n"
        ),
    );
    let client = connect(&project, &plugins, &project.filesystem()).await;
    let result = call(
        &client,
        "read_text_file",
        json!({ "path": project.file("config.txt") }),
    )
    .await;
    let everything = serde_json::to_string(&result).unwrap();
    assert!(!everything.contains(TOKEN), "{everything}");
    assert_eq!(
        result.structured_content,
        Some(json!({ "content": "token = [REDACTED]\nname = demo" }))
    );
    assert!(text(&result).contains("token = [REDACTED]"), "{result:?}");
    client.cancel().await.unwrap();
}

/// A guard that never returns is stopped at its deadline and the call is denied (fail
/// closed): the proxy's single thread is not held by it.
#[tokio::test(flavor = "multi_thread")]
async fn a_guard_stuck_in_a_loop_denies_at_its_deadline() {
    let project = Project::new(&[("notes.txt", "plain notes")]);
    let plugins = PluginDir::new();
    plugins.scripted(
        "stuck",
        "[limits]\ntimeout_ms = 300\nfuel = 1_000_000_000_000\n\
         [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"loop\"\n",
    );
    let client = connect(&project, &plugins, &project.filesystem()).await;
    let started = Instant::now();
    let result = call(
        &client,
        "read_text_file",
        json!({ "path": project.file("notes.txt") }),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert!(!text(&result).contains("plain notes"), "{result:?}");
    let audit = project.audit(&["timeout"]);
    assert!(audit.contains("timeout"), "{audit}");
    client.cancel().await.unwrap();
}

/// The example `timeout` wrapper cuts a tool that takes too long off: the client gets an
/// error result in time, not the tool's answer 30 s later.
#[tokio::test(flavor = "multi_thread")]
async fn the_timeout_wrapper_stops_a_slow_tool() {
    let project = Project::new(&[]);
    let plugins = PluginDir::new();
    let timeout = palisade_examples::get("timeout").unwrap();
    palisade_examples::install_one(timeout, plugins.path()).unwrap();
    let folder = plugins.path().join("timeout");
    let manifest = std::fs::read_to_string(folder.join("plugin.toml")).unwrap();
    std::fs::write(
        folder.join("plugin.toml"),
        manifest.replace("timeout_ms = 30_000", "timeout_ms = 1_000"),
    )
    .unwrap();
    let server = vec!["node".to_string(), slow_server().display().to_string()];
    let client = connect(&project, &plugins, &server).await;
    let started = Instant::now();
    let result = call(&client, "sleep", json!({})).await;
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert!(!text(&result).contains("slept"), "{result:?}");
    let audit = project.audit(&["timeout/tool-execute"]);
    assert!(audit.contains("timeout/tool-execute"), "{audit}");
    client.cancel().await.unwrap();
}

/// Without `--name`, tool names carry the name the server gives in its `initialize` answer
/// (the filesystem server's is `secure-filesystem-server`).
#[tokio::test(flavor = "multi_thread")]
async fn hooks_see_the_server_by_the_name_it_gives_and_its_provenance() {
    let project = Project::new(&[("notes.txt", "plain notes")]);
    let plugins = PluginDir::new();
    plugins.scripted(
        "named",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"observe\"\n\
         matcher = \"mcp__secure-filesystem-server__read_text_file\"\n\
         [config]\npre_tool = \"provenance\"\n",
    );
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_palisade"));
    command
        .args(["mcp", "--plugins"])
        .arg(plugins.path())
        .arg("--audit-log")
        .arg(&project.audit)
        .arg("--")
        .args(project.filesystem())
        .env("PALISADE_CACHE_DIR", cache_dir());
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let result = call(
        &client,
        "read_text_file",
        json!({ "path": project.file("notes.txt") }),
    )
    .await;
    assert_eq!(text(&result), "plain notes");
    let audit = project.audit(&["\"hook_id\":\"named/pre-tool\""]);
    assert!(audit.contains("\"hook_id\":\"named/pre-tool\""), "{audit}");
    // Where the tool comes from, as data: the server and the tool, not a parsed name.
    assert!(
        audit.contains("provenance mcp secure-filesystem-server read_text_file"),
        "{audit}"
    );
    client.cancel().await.unwrap();
}

/// The example `retry` wrapper, matched to an MCP tool, calls the server again when its tool
/// failed: the client gets the second call's answer.
#[tokio::test(flavor = "multi_thread")]
async fn the_retry_wrapper_calls_a_failed_mcp_tool_again() {
    let project = Project::new(&[]);
    let plugins = PluginDir::new();
    let retry = palisade_examples::get("retry").unwrap();
    palisade_examples::install_one(retry, plugins.path()).unwrap();
    let manifest = plugins.path().join("retry/plugin.toml");
    let original = std::fs::read_to_string(&manifest).unwrap();
    let matched: Vec<String> = original
        .lines()
        .map(|line| match line.starts_with("matcher = ") {
            true => "matcher = \"mcp__fs__flaky\"".to_string(),
            false => line.to_string(),
        })
        .collect();
    std::fs::write(&manifest, matched.join("\n")).unwrap();
    let server = vec!["node".to_string(), slow_server().display().to_string()];
    let client = connect(&project, &plugins, &server).await;
    let result = call(&client, "flaky", json!({})).await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(text(&result), "worked on call 2");
    let audit = project.audit(&["retry/tool-execute"]);
    assert!(audit.contains("retry/tool-execute"), "{audit}");
    client.cancel().await.unwrap();
}

/// The server dies with a call in flight: that call and one still waiting get an error, the
/// proxy exits (the client's connection closes), and nothing hangs.
#[tokio::test(flavor = "multi_thread")]
async fn a_crashed_server_fails_every_pending_call_and_the_proxy_exits() {
    let project = Project::new(&[]);
    let plugins = PluginDir::new();
    plugins.scripted(
        "notes",
        "[[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\n",
    );
    let server = vec!["node".to_string(), slow_server().display().to_string()];
    let client = connect(&project, &plugins, &server).await;
    let started = Instant::now();
    let peer = client.peer().clone();
    let sleeping =
        tokio::spawn(async move { peer.call_tool(CallToolRequestParams::new("sleep")).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let crashed = client
        .peer()
        .call_tool(CallToolRequestParams::new("crash"))
        .await;
    let sleeping = tokio::time::timeout(Duration::from_secs(20), sleeping)
        .await
        .expect("the pending call answered")
        .unwrap();
    for (what, answer) in [("crash", crashed), ("sleep", sleeping)] {
        // An error result, or (the connection closed with the call open) an error.
        if let Ok(result) = answer {
            assert_eq!(result.is_error, Some(true), "{what}: {result:?}");
        }
    }
    let quit = tokio::time::timeout(Duration::from_secs(20), client.waiting())
        .await
        .expect("the proxy exited");
    assert!(quit.is_ok(), "{quit:?}");
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );
}

/// A client that takes elicitations, and accepts every one with the same content: `approve:
/// yes` (or no), a name.
struct Answering {
    /// The `content` of every accepted answer.
    content: Value,
    /// The questions' messages.
    asked: std::sync::Mutex<Vec<String>>,
}

impl Answering {
    fn with(content: Value) -> Answering {
        Answering {
            content,
            asked: Default::default(),
        }
    }
}

impl rmcp::ClientHandler for Answering {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut info = rmcp::model::ClientConfig::default();
        info.capabilities.elicitation = Some(rmcp::model::ElicitationCapability::new());
        info
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        if let rmcp::model::ElicitRequestParams::FormElicitationParams { message, .. } = request {
            self.asked.lock().unwrap().push(message);
        }
        Ok(
            rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept)
                .with_content(self.content.clone()),
        )
    }
}

/// A `pre-tool` ask becomes an elicitation to a client that takes them: its yes runs the
/// tool, its no denies it; a client that cannot be asked is denied without a question.
#[tokio::test(flavor = "multi_thread")]
async fn an_ask_is_put_to_the_client_and_only_its_yes_runs_the_tool() {
    let project = Project::new(&[("notes.txt", "plain notes")]);
    let plugins = PluginDir::new();
    plugins.scripted(
        "asker",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"ask\"\n",
    );
    let read = json!({ "path": project.file("notes.txt") });
    for yes in [true, false] {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_palisade"));
        command
            .args(project.proxy_args(&plugins, "fs", &project.filesystem()))
            .env("PALISADE_CACHE_DIR", cache_dir())
            .env("PALISADE_STATE_DIR", project.dir.path().join("state"));
        let handler = Answering::with(json!({ "approve": yes }));
        let client = handler
            .serve(TokioChildProcess::new(command).unwrap())
            .await
            .expect("initialize through the proxy");
        let result = call(&client, "read_text_file", read.clone()).await;
        let asked = client.service().asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(
            asked[0].contains("asker/pre-tool") && asked[0].contains("mcp__fs__read_text_file"),
            "{asked:?}"
        );
        if yes {
            assert_eq!(text(&result), "plain notes", "{result:?}");
        } else {
            assert_eq!(result.is_error, Some(true), "{result:?}");
            assert!(!text(&result).contains("plain notes"), "{result:?}");
        }
        client.cancel().await.unwrap();
    }
    // No elicitation capability: nobody can be asked, so the ask is a denial.
    let client = connect(&project, &plugins, &project.filesystem()).await;
    let result = call(&client, "read_text_file", read).await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    client.cancel().await.unwrap();
}

// --- Claude Code ---------------------------------------------------------------------------

/// Claude Code with the filesystem server behind `palisade mcp` (`--mcp-config`, as
/// `palisade install mcp` prints it), its model asking to call `mcp__fs__read_text_file` on
/// `file`. Returns the mock.
fn claude_reads(
    project: &Project,
    plugins: &PluginDir,
    file: &str,
) -> (std::process::Output, MockModel) {
    let claude = std::env::var_os("PALISADE_CLAUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../target/tools/agents/node_modules/.bin/claude")
        });
    assert!(
        claude.exists(),
        "Claude Code is not installed at {}: run `bash scripts/tools.sh` (scripts/test.sh does), \
         or set PALISADE_CLAUDE",
        claude.display()
    );
    let call =
        json!({ "name": "mcp__fs__read_text_file", "input": { "path": project.file(file) } });
    let mock = MockModel::start(Api::Anthropic, &call.to_string());
    // The configuration `palisade install mcp` prints.
    let mut install = vec!["install".to_string()];
    install.extend(project.proxy_args(plugins, "fs", &project.filesystem()));
    let printed = std::process::Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(&install)
        .env("PALISADE_CACHE_DIR", cache_dir())
        .output()
        .unwrap();
    assert!(printed.status.success(), "{printed:?}");
    let config: Value = serde_json::from_slice(&printed.stdout).unwrap();
    assert_eq!(config["mcpServers"]["fs"]["args"][0], "mcp", "{config}");
    let home = project.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = std::process::Command::new(claude)
        .args([
            "-p",
            "read the file",
            "--output-format",
            "json",
            "--mcp-config",
        ])
        .arg(config.to_string())
        .args(["--allowedTools", "mcp__fs__read_text_file"])
        .current_dir(project.root())
        .env("HOME", &home)
        // The server's environment is Claude Code's.
        .env("PALISADE_CACHE_DIR", cache_dir())
        .env("PALISADE_STATE_DIR", project.dir.path().join("state"))
        .envs(mock.agent_env())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    (out, mock)
}

/// The `tool_result` blocks the model was sent.
fn tool_results(mock: &MockModel, out: &std::process::Output) -> String {
    let results: Vec<String> = mock
        .model_requests()
        .iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b.to_string())
        .collect();
    assert!(
        !results.is_empty(),
        "no tool result reached the model:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    results.join("\n")
}

#[test]
fn claude_code_through_palisade_mcp_is_denied_a_secret_and_the_model_sees_why() {
    let project = Project::new(&[(".env", "API_KEY=sk-live-22bb")]);
    let plugins = PluginDir::new();
    secret_guard(&plugins);
    let (out, mock) = claude_reads(&project, &plugins, ".env");
    let results = tool_results(&mock, &out);
    assert!(!results.contains("sk-live-22bb"), "{results}");
    assert!(results.contains("secret"), "{results}");
    let audit = project.audit(&["\"hook_denied\""]);
    assert!(audit.contains("\"hook_denied\""), "{audit}");
}

#[test]
fn claude_code_through_palisade_mcp_sees_the_redacted_text() {
    let project = Project::new(&[("config.txt", &format!("token = {TOKEN}"))]);
    let plugins = PluginDir::new();
    plugins.scripted(
        "redact",
        &format!(
            "[[hooks]]\npoint = \"post-tool\"\ncapability = \"transform\"\n\
             [config]\npost_tool = \"redact\"\nsecret = \"{TOKEN}\"\n"
        ),
    );
    let (out, mock) = claude_reads(&project, &plugins, "config.txt");
    let results = tool_results(&mock, &out);
    assert!(!results.contains(TOKEN), "{results}");
    assert!(results.contains("[REDACTED]"), "{results}");
}

// --- streamable HTTP -----------------------------------------------------------------------

/// A process killed when the test ends.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The slow server on MCP's streamable-HTTP transport, and `palisade mcp --listen` in front of
/// it; returns both, the proxy's endpoint and its bearer token.
fn over_http(project: &Project, plugins: &PluginDir) -> (Running, Running, String, String) {
    use std::io::BufRead;
    let mut server = std::process::Command::new("node")
        .arg(slow_server())
        .arg("--http")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: Value = serde_json::from_str(&line).expect("the server says its port");
    let server = Running(server);
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = free.local_addr().unwrap();
    drop(free);
    let token_file = project.dir.path().join("token");
    let proxy = std::process::Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(["mcp", "--plugins"])
        .arg(plugins.path())
        .args(["--name", "slow", "--audit-log"])
        .arg(&project.audit)
        .args(["--listen", &address.to_string(), "--upstream"])
        .arg(format!("http://127.0.0.1:{}/mcp", port["port"]))
        .arg("--token-file")
        .arg(&token_file)
        .env("PALISADE_CACHE_DIR", cache_dir())
        .env("PALISADE_STATE_DIR", project.dir.path().join("state"))
        .spawn()
        .unwrap();
    let proxy = Running(proxy);
    let started = Instant::now();
    while std::net::TcpStream::connect(address).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the proxy never listened"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_string();
    (server, proxy, format!("http://{address}/mcp"), token)
}

/// Over streamable HTTP: a request without the proxy's token is refused; a guard's deny
/// answers the client at once (the server's slow tool never runs); and the real Claude Code,
/// given the proxy as an `http` server, sees a post-tool hook's redaction of the server's text.
#[tokio::test(flavor = "multi_thread")]
async fn over_streamable_http_the_pipeline_decides_and_claude_code_sees_the_redaction() {
    let project = Project::new(&[]);
    let plugins = PluginDir::new();
    plugins.scripted(
        "no-sleep",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"mcp__slow__sleep\"\n\
         [config]\npre_tool = \"deny\"\n",
    );
    plugins.scripted(
        "redact",
        "[[hooks]]\npoint = \"post-tool\"\ncapability = \"transform\"\n\
         [config]\npost_tool = \"redact\"\nsecret = \"ghp_httpT0ken99\"\n",
    );
    let (_server, _proxy, url, token) = over_http(&project, &plugins);
    let http = reqwest::Client::new();
    let post = |token: Option<&str>, body: Value| {
        let mut request = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send()
    };
    let sleep = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": { "name": "sleep", "arguments": {} } });
    assert_eq!(post(None, sleep.clone()).await.unwrap().status(), 401);
    let started = Instant::now();
    let denied = post(Some(&token), sleep)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // The client accepts an event stream, so the call is answered on one: its last event.
    let denied = denied.lines().rev().find_map(|l| l.strip_prefix("data: "));
    let denied: Value = serde_json::from_str(denied.unwrap_or_default()).expect("a JSON answer");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(denied["id"], 7, "{denied}");
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(
        denied.to_string().contains("denied mcp__slow__sleep"),
        "{denied}"
    );

    let call = json!({ "name": "mcp__slow__secret", "input": {} });
    let mock = MockModel::start(Api::Anthropic, &call.to_string());
    let config = json!({ "mcpServers": { "slow": {
        "type": "http", "url": url, "headers": { "Authorization": format!("Bearer {token}") },
    } } });
    let home = project.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let claude = std::env::var_os("PALISADE_CLAUDE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../target/tools/agents/node_modules/.bin/claude")
        });
    let out = std::process::Command::new(claude)
        .args([
            "-p",
            "show the token",
            "--output-format",
            "json",
            "--mcp-config",
        ])
        .arg(config.to_string())
        .args(["--allowedTools", "mcp__slow__secret"])
        .current_dir(project.root())
        .env("HOME", &home)
        .envs(mock.agent_env())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let results = tool_results(&mock, &out);
    assert!(!results.contains("ghp_httpT0ken99"), "{results}");
    assert!(results.contains("token = [REDACTED]"), "{results}");
}

/// The messages of an event stream, read as they come.
struct Events {
    response: reqwest::Response,
    pending: String,
}

impl Events {
    /// The next message.
    async fn next(&mut self) -> Value {
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let event: String = self.pending.drain(..end + 2).collect();
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if let Ok(message) = serde_json::from_str(&data.join("\n")) {
                    return message;
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.response.chunk())
                .await
                .expect("the stream went on in time")
                .unwrap()
                .expect("the stream has more");
            self.pending.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

/// Over streamable HTTP, an ask reaches a client that takes elicitations on the event stream
/// that answers its `tools/call`; its POSTed yes runs the tool, its no denies it.
#[tokio::test(flavor = "multi_thread")]
async fn over_streamable_http_an_ask_is_put_to_the_client_on_the_calls_stream() {
    let project = Project::new(&[]);
    let plugins = PluginDir::new();
    plugins.scripted(
        "asker",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"ask\"\n",
    );
    let (_server, _proxy, url, token) = over_http(&project, &plugins);
    let http = reqwest::Client::new();
    let post = |body: Value| {
        http.post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string())
            .send()
    };
    let initialize = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": { "elicitation": {} },
        "clientInfo": { "name": "test", "version": "1" } } });
    assert!(post(initialize).await.unwrap().status().is_success());
    for (n, yes) in [(10, true), (11, false)] {
        let call = json!({ "jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": { "name": "secret", "arguments": {} } });
        let response = post(call).await.unwrap();
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let mut events = Events {
            response,
            pending: String::new(),
        };
        let question = events.next().await;
        assert_eq!(question["method"], "elicitation/create", "{question}");
        assert!(
            question["params"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("asker/pre-tool")),
            "{question}"
        );
        let answer = json!({ "jsonrpc": "2.0", "id": question["id"], "result": {
            "action": "accept", "content": { "approve": yes } } });
        assert_eq!(post(answer).await.unwrap().status(), 202);
        let result = events.next().await;
        assert_eq!(result["id"], n, "{result}");
        let said = result["result"].to_string();
        if yes {
            assert!(said.contains("ghp_httpT0ken99"), "{result}");
        } else {
            assert_eq!(result["result"]["isError"], true, "{result}");
            assert!(!said.contains("ghp_httpT0ken99"), "{result}");
        }
    }
}

/// Over streamable HTTP, an ask's answer counts only from the MCP session that was asked: an
/// answer to the same (random) id posted in another session does not approve the call.
#[tokio::test(flavor = "multi_thread")]
async fn over_streamable_http_an_asks_answer_from_another_session_is_not_taken() {
    let project = Project::new(&[]);
    let plugins = PluginDir::new();
    plugins.scripted(
        "asker",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"ask\"\n",
    );
    let (_server, _proxy, url, token) = over_http(&project, &plugins);
    let http = reqwest::Client::new();
    let post = |body: Value, session: Option<&str>| {
        let mut request = http
            .post(&url)
            .bearer_auth(&token)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let initialize = json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": { "elicitation": {} },
        "clientInfo": { "name": "test", "version": "1" } } });
    assert!(post(initialize, None).await.unwrap().status().is_success());
    let call = json!({ "jsonrpc": "2.0", "id": 12, "method": "tools/call",
        "params": { "name": "secret", "arguments": {} } });
    let response = post(call, None).await.unwrap();
    let mut events = Events {
        response,
        pending: String::new(),
    };
    let question = events.next().await;
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let yes = json!({ "jsonrpc": "2.0", "id": question["id"], "result": {
        "action": "accept", "content": { "approve": true } } });
    let _ = post(yes.clone(), Some("another-session")).await.unwrap();
    let early = tokio::time::timeout(Duration::from_secs(2), events.next()).await;
    assert!(
        early.is_err(),
        "another session's answer approved the call: {early:?}"
    );
    assert_eq!(post(yes, None).await.unwrap().status(), 202);
    let result = events.next().await;
    assert_eq!(result["id"], 12, "{result}");
    assert!(
        result["result"].to_string().contains("ghp_httpT0ken99"),
        "{result}"
    );
}

// --- what the proxy refuses to pass on ------------------------------------------------------

/// `palisade mcp` in front of a "server" that is a shell `script`; writes `input` as the
/// client, and closes its side unless `stay` (then the proxy's own exit ends the run); returns
/// the exit status, what it said on stderr, and how long it took to exit.
fn raw_proxy(
    project: &Project,
    plugins: &PluginDir,
    script: &str,
    input: &str,
    stay: bool,
) -> (std::process::ExitStatus, String, Duration) {
    use std::io::Write;
    let stderr = project.dir.path().join("proxy-stderr.txt");
    let started = Instant::now();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(["mcp", "--name", "raw", "--plugins"])
        .arg(plugins.path())
        .args(["--", "sh", "-c", script])
        .current_dir(project.dir.path())
        .env("PALISADE_CACHE_DIR", cache_dir())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    let open = stay.then_some(stdin);
    let status = child.wait().unwrap();
    let took = started.elapsed();
    drop(open);
    (status, std::fs::read_to_string(stderr).unwrap(), took)
}

/// A `tools/call` without an id (a notification) would run at the server unjudged: it is
/// dropped, while every other message passes on.
#[test]
fn a_tools_call_without_an_id_never_reaches_the_server() {
    let project = Project::new(&[]);
    let input = concat!(
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"delete_everything"}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "\n",
    );
    let (_, stderr, _) = raw_proxy(
        &project,
        &PluginDir::new(),
        "cat > received.jsonl",
        input,
        false,
    );
    // The server (`cat`) writes what it got once its input closes, after the proxy's exit.
    let file = project.dir.path().join("received.jsonl");
    let started = Instant::now();
    let mut received = String::new();
    while !received.contains("notifications/initialized")
        && started.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(50));
        received = std::fs::read_to_string(&file).unwrap_or_default();
    }
    assert!(!received.contains("delete_everything"), "{received}");
    assert!(received.contains("notifications/initialized"), "{received}");
    assert!(
        stderr.contains("dropped a tools/call without an id"),
        "{stderr}"
    );
}

/// A server that writes a line longer than the proxy takes (64 MiB) has it refused, saying
/// why: the proxy reads past it in bounded pieces instead of holding it all, and never takes a
/// piece of it for a message of its own.
#[test]
fn a_line_over_the_bound_is_refused_whole() {
    let project = Project::new(&[]);
    let script = "head -c 70000000 /dev/zero | tr '\\0' '{'; echo; sleep 1";
    let (status, stderr, took) = raw_proxy(&project, &PluginDir::new(), script, "", true);
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr
            .matches("refused a message from the server: a line over 67108864 bytes")
            .count(),
        1,
        "{stderr}"
    );
    assert_eq!(
        stderr.matches("refused a message from the server").count(),
        1,
        "{stderr}"
    );
    assert!(took < Duration::from_secs(15), "{took:?}");
}

/// A message serde_json cannot read but JSON.parse can (a lone surrogate's escape) is judged
/// all the same, and one that is not JSON at all is not passed on: neither slips past the
/// pipeline to the server.
#[test]
fn a_message_the_proxy_cannot_read_never_reaches_the_server_unjudged() {
    let project = Project::new(&[]);
    let plugins = PluginDir::new();
    plugins.scripted(
        "deny-all",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"deny\"\n",
    );
    let input = concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"wipe","arguments":{"a":"\ud800"}}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wipe2"}"#,
        "\n",
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "\n",
    );
    let (_, stderr, _) = raw_proxy(&project, &plugins, "cat > received.jsonl", input, false);
    let file = project.dir.path().join("received.jsonl");
    let started = Instant::now();
    let mut received = String::new();
    while !received.contains("notifications/initialized")
        && started.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(50));
        received = std::fs::read_to_string(&file).unwrap_or_default();
    }
    assert!(
        received.contains("notifications/initialized"),
        "{received}\n{stderr}"
    );
    assert!(!received.contains("wipe"), "{received}");
}

/// The example `secret-guard` in shadow (`enforce = false`): the `.env` read it would refuse
/// reaches the server and its answer the client, and the audit log records `would_deny`.
#[tokio::test(flavor = "multi_thread")]
async fn a_shadow_guard_lets_the_call_through_and_records_what_it_would_deny() {
    let project = Project::new(&[(".env", "API_KEY=sk-live-11aa")]);
    let plugins = PluginDir::new();
    secret_guard(&plugins);
    let manifest = plugins.path().join("secret-guard/plugin.toml");
    let text_of = std::fs::read_to_string(&manifest).unwrap();
    let shadowed = text_of.replacen("[[hooks]]\n", "[[hooks]]\nenforce = false\n", 1);
    assert_ne!(shadowed, text_of, "the manifest has a [[hooks]] table");
    std::fs::write(&manifest, shadowed).unwrap();
    let client = connect(&project, &plugins, &project.filesystem()).await;
    let read = call(
        &client,
        "read_text_file",
        json!({ "path": project.file(".env") }),
    )
    .await;
    assert_ne!(read.is_error, Some(true), "{read:?}");
    assert_eq!(text(&read), "API_KEY=sk-live-11aa");
    client.cancel().await.unwrap();
    let audit = project.audit(&["\"event\":\"hook_shadowed\""]);
    assert!(
        audit.contains("\"event\":\"hook_shadowed\"")
            && audit.contains("\"decision\":\"would_deny\"")
            && audit.contains("\"hook_id\":\"secret-guard/pre-tool\""),
        "{audit}"
    );
    assert!(!audit.contains("\"hook_denied\""), "{audit}");
}

// --- MCP 2026-07-28 --------------------------------------------------------------------------

/// A server of MCP 2026-07-28 (stateless, `server/discover`, multi-round-trip requests) on the
/// official TypeScript library's v2, where node finds the library beside it: the command
/// `palisade mcp` starts.
pub(crate) fn modern_server() -> Vec<String> {
    static SCRIPT: OnceLock<PathBuf> = OnceLock::new();
    let script = SCRIPT.get_or_init(|| {
        let path = mcp_tools().join("modern-stdio-server.mjs");
        let source =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/modern-stdio-server.mjs");
        std::fs::copy(source, &path).expect("copy the modern server");
        path
    });
    vec!["node".into(), script.display().to_string()]
}

/// The parameters of every `tools/call` that reached the modern server (it appends each
/// message to `MODERN_SERVER_LOG`).
fn modern_calls(project: &Project) -> Vec<Value> {
    modern_requests(project, "tools/call")
}

/// The parameters of every request of `method` that reached the modern server.
fn modern_requests(project: &Project, method: &str) -> Vec<Value> {
    let log = std::fs::read_to_string(project.dir.path().join("server.jsonl")).unwrap_or_default();
    log.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|message| message["method"] == method)
        .map(|message| message["params"].clone())
        .collect()
}

/// A 2026-07-28 client (`server/discover`, no `initialize`) whose user answers every question
/// with `name`, through `palisade mcp` to the modern server.
async fn modern_client(
    project: &Project,
    plugins: &PluginDir,
    name: &str,
) -> RunningService<RoleClient, Answering> {
    modern_client_answering(project, plugins, json!({ "name": name })).await
}

/// A 2026-07-28 client whose user accepts every question with `content`, through `palisade
/// mcp` to the modern server.
async fn modern_client_answering(
    project: &Project,
    plugins: &PluginDir,
    content: Value,
) -> RunningService<RoleClient, Answering> {
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _};
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_palisade"));
    command
        .args(project.proxy_args(plugins, "modern", &modern_server()))
        .env("MODERN_SERVER_LOG", project.dir.path().join("server.jsonl"))
        .env("PALISADE_CACHE_DIR", cache_dir())
        .env("PALISADE_STATE_DIR", project.dir.path().join("state"));
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![rmcp::model::ProtocolVersion::V_2026_07_28],
    };
    let handler = Answering::with(content);
    let started = handler.serve_with_lifecycle(TokioChildProcess::new(command).unwrap(), lifecycle);
    tokio::time::timeout(Duration::from_secs(60), started)
        .await
        .expect("server/discover answered in time")
        .expect("server/discover through the proxy")
}

/// `tool` called by a 2026-07-28 client, which answers the server's questions and calls
/// again until the call completes (the SDK's `RunningService::call_tool`).
async fn modern_call(
    client: &RunningService<RoleClient, Answering>,
    tool: &str,
    arguments: Value,
) -> CallToolResult {
    let Value::Object(arguments) = arguments else {
        panic!("arguments are an object")
    };
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
    tokio::time::timeout(Duration::from_secs(60), client.call_tool(params))
        .await
        .expect("the call answered in time")
        .expect("the call answered")
}

/// A guard that denies every MCP server's question to the user (`pre-tool` over
/// `elicitation/create`, as for Claude Code's `Elicitation`).
fn question_guard(plugins: &PluginDir) {
    plugins.scripted(
        "questions",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         matcher = \"elicitation/create\"\n[config]\npre_tool = \"deny\"\n",
    );
}

/// A guard on the user's answers to MCP servers' questions: it blocks any that names
/// `mallory` (`post-tool` over `elicitation/create`, as for Claude Code's `ElicitationResult`).
fn answer_guard(plugins: &PluginDir) {
    plugins.scripted(
        "answers",
        "[[hooks]]\npoint = \"post-tool\"\ncapability = \"guard\"\n\
         matcher = \"elicitation/create\"\n[config]\npost_tool = \"block\"\n",
    );
}

/// MCP 2026-07-28 through the proxy: a client that discovers (no `initialize`) calls a tool
/// that asks its user a question in a first round (`input_required`) and finishes with the
/// answer in the retry. A guard on the answers blocks the retry's answer: the client reads why,
/// and the server never hears the answer — the retry carries the user's data, and is judged
/// as the question's result; a hook that redacts the answer has the server hear it redacted.
/// Without a guard the same rounds reach the server and finish.
#[tokio::test(flavor = "multi_thread")]
async fn a_guard_refuses_a_users_answer_in_an_mcp_retry_before_the_server_hears_it() {
    let project = Project::new(&[]);
    let plugins = PluginDir::new();
    plugins.scripted(
        "watch",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         [config]\npre_tool = \"provenance\"\n",
    );
    // No guard: both rounds reach the server, the user is asked once, the call finishes.
    let client = modern_client(&project, &plugins, "octocat").await;
    let greeted = modern_call(&client, "greet", json!({})).await;
    assert_eq!(text(&greeted), "hello octocat", "{greeted:?}");
    assert_eq!(client.service().asked.lock().unwrap().len(), 1);
    let rounds = modern_calls(&project);
    assert_eq!(rounds.len(), 2, "{rounds:?}");
    assert_eq!(
        rounds[1]["inputResponses"]["name"]["content"]["name"],
        "octocat"
    );
    client.cancel().await.unwrap();
    // Hooks saw both rounds of the call, and the question between them, from the server.
    let log = project.audit(&["provenance mcp modern elicitation/create"]);
    assert_eq!(
        log.matches("provenance mcp modern greet").count(),
        2,
        "{log}"
    );

    answer_guard(&plugins);
    std::fs::remove_file(project.dir.path().join("server.jsonl")).unwrap();
    let client = modern_client(&project, &plugins, "mallory").await;
    let refused = modern_call(&client, "greet", json!({})).await;
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    let why = text(&refused);
    assert!(
        why.contains("refused the answer to the server's question `name`"),
        "{why}"
    );
    let rounds = modern_calls(&project);
    assert_eq!(
        rounds.len(),
        1,
        "only the first round reached the server: {rounds:?}"
    );
    assert!(rounds[0].get("inputResponses").is_none(), "{rounds:?}");
    client.cancel().await.unwrap();

    // A hook that redacts the answer: the server hears the answer as the hook left it.
    let plugins = PluginDir::new();
    plugins.scripted(
        "redact",
        "[[hooks]]\npoint = \"post-tool\"\ncapability = \"transform\"\n\
         matcher = \"elicitation/create\"\n[config]\npost_tool = \"redact\"\n\
         secret = \"mallory\"\n",
    );
    std::fs::remove_file(project.dir.path().join("server.jsonl")).unwrap();
    let client = modern_client(&project, &plugins, "mallory").await;
    let greeted = modern_call(&client, "greet", json!({})).await;
    assert_eq!(text(&greeted), "hello [REDACTED]", "{greeted:?}");
    let rounds = modern_calls(&project);
    assert_eq!(
        rounds[1]["inputResponses"]["name"]["content"]["name"],
        "[REDACTED]"
    );
    client.cancel().await.unwrap();
}

/// A guard that denies an MCP server's question (`pre-tool` over `elicitation/create`) keeps it
/// from the client's user: the round answers with the reason, and nobody is asked.
#[tokio::test(flavor = "multi_thread")]
async fn a_guard_declines_a_servers_question_in_an_mcp_round() {
    let project = Project::new(&[]);
    let plugins = PluginDir::new();
    question_guard(&plugins);
    let client = modern_client(&project, &plugins, "octocat").await;
    let declined = modern_call(&client, "greet", json!({})).await;
    assert_eq!(declined.is_error, Some(true), "{declined:?}");
    assert!(
        text(&declined).contains("declined the server's question"),
        "{declined:?}"
    );
    assert!(client.service().asked.lock().unwrap().is_empty());
    // A tool that asks nothing is not touched by the guard.
    let echoed = modern_call(&client, "echo", json!({ "text": "plain" })).await;
    assert_eq!(text(&echoed), "plain", "{echoed:?}");
    client.cancel().await.unwrap();
}

/// `prompts/get` takes rounds too (MCP 2026-07-28): a server may ask the user for input before
/// it hands over a prompt, and the retry carries the user's answer. Both are judged as a
/// `tools/call`'s are: a guard on questions keeps the question from the user (the client reads
/// an error, nobody is asked); a guard on answers keeps the answer from the server, which
/// hears the first round only. Without a guard the prompt comes back after two rounds.
#[tokio::test(flavor = "multi_thread")]
async fn a_prompts_rounds_are_judged_as_a_tools_are() {
    use rmcp::model::GetPromptRequestParams;
    async fn get(
        client: &RunningService<RoleClient, Answering>,
    ) -> Result<rmcp::model::GetPromptResult, rmcp::service::ServiceError> {
        let request = client.get_prompt(GetPromptRequestParams::new("welcome"));
        tokio::time::timeout(Duration::from_secs(60), request)
            .await
            .expect("answered in time")
    }
    let project = Project::new(&[]);
    let plugins = PluginDir::new();
    let client = modern_client(&project, &plugins, "octocat").await;
    let prompt = get(&client).await.expect("the prompt");
    let said = serde_json::to_value(&prompt.messages).unwrap();
    assert_eq!(said[0]["content"]["text"], "welcome octocat", "{said}");
    assert_eq!(modern_requests(&project, "prompts/get").len(), 2);
    client.cancel().await.unwrap();

    question_guard(&plugins);
    let client = modern_client(&project, &plugins, "octocat").await;
    let refused = get(&client).await;
    let why = format!("{refused:?}");
    assert!(
        why.contains("declined the server's question `name`"),
        "{why}"
    );
    assert!(client.service().asked.lock().unwrap().is_empty());
    client.cancel().await.unwrap();

    let plugins = PluginDir::new();
    answer_guard(&plugins);
    std::fs::remove_file(project.dir.path().join("server.jsonl")).unwrap();
    let client = modern_client(&project, &plugins, "mallory").await;
    let refused = get(&client).await;
    let why = format!("{refused:?}");
    assert!(
        why.contains("refused the answer to the server's question `name`"),
        "{why}"
    );
    let rounds = modern_requests(&project, "prompts/get");
    assert_eq!(rounds.len(), 1, "only the first round: {rounds:?}");
    assert!(rounds[0].get("inputResponses").is_none(), "{rounds:?}");
    client.cancel().await.unwrap();
}

/// The same guards over MCP 2025-11-25, where the server asks its question as a request of its
/// own (`elicitation/create`, here from the same server's legacy side) in the middle of the
/// call: a guard on answers has the server hear `decline` in the user's place, and a guard on
/// questions keeps the question from the user, who is never asked.
#[tokio::test(flavor = "multi_thread")]
async fn the_same_guards_judge_a_2025_servers_question_and_its_answer() {
    let project = Project::new(&[]);
    let legacy_client = |plugins: &PluginDir| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_palisade"));
        command
            .args(project.proxy_args(plugins, "modern", &modern_server()))
            .env("PALISADE_CACHE_DIR", cache_dir())
            .env("PALISADE_STATE_DIR", project.dir.path().join("state"));
        Answering::with(json!({ "name": "mallory" }))
            .serve(TokioChildProcess::new(command).unwrap())
    };
    let plugins = PluginDir::new();
    answer_guard(&plugins);
    let client = legacy_client(&plugins)
        .await
        .expect("initialize through the proxy");
    let declined = call(&client, "greet", json!({})).await;
    assert_eq!(declined.is_error, Some(true), "{declined:?}");
    assert_eq!(text(&declined), "no name given (decline)", "{declined:?}");
    assert_eq!(client.service().asked.lock().unwrap().len(), 1);
    client.cancel().await.unwrap();

    let plugins = PluginDir::new();
    question_guard(&plugins);
    let client = legacy_client(&plugins)
        .await
        .expect("initialize through the proxy");
    let declined = call(&client, "greet", json!({})).await;
    assert_eq!(text(&declined), "no name given (decline)", "{declined:?}");
    assert!(client.service().asked.lock().unwrap().is_empty());
    client.cancel().await.unwrap();
}

/// The W3C trace context a 2026-07-28 request carries in its `_meta` reaches the audit log
/// of the call's hooks.
#[tokio::test(flavor = "multi_thread")]
async fn a_calls_trace_context_reaches_the_audit_log() {
    let project = Project::new(&[]);
    let plugins = PluginDir::new();
    plugins.scripted(
        "watch",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"allow\"\n",
    );
    let client = modern_client(&project, &plugins, "octocat").await;
    let trace = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01";
    let mut params = CallToolRequestParams::new("echo")
        .with_arguments(json!({ "text": "traced" }).as_object().unwrap().clone());
    let mut meta = rmcp::model::RequestMetaObject::default();
    meta.set_traceparent(trace);
    params.meta = Some(meta);
    let result = tokio::time::timeout(Duration::from_secs(60), client.call_tool(params))
        .await
        .expect("answered in time")
        .expect("answered");
    assert_eq!(text(&result), "traced", "{result:?}");
    let log = project.audit(&["watch/pre-tool", trace]);
    let started = log
        .lines()
        .find(|l| l.contains("hook_started") && l.contains("watch/pre-tool"))
        .unwrap_or_default();
    assert!(
        started.contains(&format!("\"trace_parent\":\"{trace}\"")),
        "{log}"
    );
    client.cancel().await.unwrap();
}

/// A client that negotiates its revision (rmcp's `Auto`: `server/discover` first, `initialize`
/// when the server does not know it) through `palisade mcp`: in front of the filesystem
/// server, which speaks only 2025-11-25, it falls back, and `secret-guard` still refuses the
/// `.env`; in front of the modern server it speaks 2026-07-28, and the calls are judged there
/// too. The proxy passes the negotiation on as it is, whichever revision each side speaks.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_that_negotiates_is_judged_in_the_revision_the_server_speaks() {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _};
    let project = Project::new(&[(".env", "API_KEY=sk-live-11aa")]);
    let plugins = PluginDir::new();
    secret_guard(&plugins);
    let negotiating = |server: Vec<String>| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_palisade"));
        command
            .args(project.proxy_args(&plugins, "fs", &server))
            .env("PALISADE_CACHE_DIR", cache_dir())
            .env("PALISADE_STATE_DIR", project.dir.path().join("state"));
        let lifecycle = ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        };
        let started = ().serve_with_lifecycle(TokioChildProcess::new(command).unwrap(), lifecycle);
        async move {
            tokio::time::timeout(Duration::from_secs(60), started)
                .await
                .expect("negotiated in time")
                .expect("negotiated through the proxy")
        }
    };
    let legacy = negotiating(project.filesystem()).await;
    let spoken = legacy.peer_info().map(|info| info.protocol_version.clone());
    assert_eq!(spoken, Some(ProtocolVersion::V_2025_11_25));
    let denied = call(
        &legacy,
        "read_text_file",
        json!({ "path": project.file(".env") }),
    )
    .await;
    assert_eq!(denied.is_error, Some(true), "{denied:?}");
    assert!(!text(&denied).contains("sk-live-11aa"), "{denied:?}");

    let modern = negotiating(modern_server()).await;
    let spoken = modern.peer_info().map(|info| info.protocol_version.clone());
    assert_eq!(spoken, Some(ProtocolVersion::V_2026_07_28));
    let echoed = call(&modern, "echo", json!({ "text": "hello" })).await;
    assert_eq!(text(&echoed), "hello", "{echoed:?}");
    let audit = project.audit(&["\"decision\":\"allow\""]);
    assert!(audit.contains("\"decision\":\"allow\""), "{audit}");
}

/// A hook's ask to a 2026-07-28 client, whose server cannot send it an `elicitation/create`,
/// is a round of Palisade's own: the call is answered `input_required` with Palisade's
/// question, and the client's retry with its user's answer runs the call when the answer is
/// yes, and is denied when it is no; the server hears neither Palisade's question nor its
/// answer. A call the user let run whose server asks for more in a round of its own (`greet`,
/// which asks the user's name) is not asked about again: its retry is the same call, and the
/// server's state and the user's answer reach the server.
#[tokio::test(flavor = "multi_thread")]
async fn an_ask_to_a_2026_client_is_a_round_of_palisades_and_only_its_yes_runs_the_tool() {
    let project = Project::new(&[]);
    let plugins = PluginDir::new();
    plugins.scripted(
        "asker",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"mcp__modern__.*\"\n\
         [config]\npre_tool = \"ask\"\n",
    );
    for yes in [true, false] {
        let _ = std::fs::remove_file(project.dir.path().join("server.jsonl"));
        let content = json!({ "approve": yes, "name": "octocat" });
        let client = modern_client_answering(&project, &plugins, content).await;
        let echoed = modern_call(&client, "echo", json!({ "text": "hello" })).await;
        let asked = client.service().asked.lock().unwrap().clone();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert!(
            asked[0].contains("asker/pre-tool") && asked[0].contains("mcp__modern__echo"),
            "{asked:?}"
        );
        let calls = modern_calls(&project);
        if yes {
            assert_eq!(text(&echoed), "hello", "{echoed:?}");
            assert_eq!(calls.len(), 1, "{calls:?}");
            assert!(calls[0].get("requestState").is_none(), "{calls:?}");
            assert!(calls[0].get("inputResponses").is_none(), "{calls:?}");
        } else {
            assert_eq!(echoed.is_error, Some(true), "{echoed:?}");
            assert!(text(&echoed).contains("approver rejected"), "{echoed:?}");
            assert!(calls.is_empty(), "{calls:?}");
        }
        client.cancel().await.unwrap();
    }
    // The server's round, then Palisade's, then the server's again with what it asked for.
    let _ = std::fs::remove_file(project.dir.path().join("server.jsonl"));
    let content = json!({ "approve": true, "name": "octocat" });
    let client = modern_client_answering(&project, &plugins, content).await;
    let greeted = modern_call(&client, "greet", json!({})).await;
    assert_eq!(text(&greeted), "hello octocat", "{greeted:?}");
    let asked = client.service().asked.lock().unwrap().clone();
    assert_eq!(
        asked.len(),
        2,
        "Palisade's question, then the server's: {asked:?}"
    );
    let calls = modern_calls(&project);
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(
        calls[1]["inputResponses"]["name"]["content"]["name"],
        "octocat"
    );
    assert!(
        calls[1]["inputResponses"].get("palisade/approve").is_none(),
        "{calls:?}"
    );
    client.cancel().await.unwrap();
}

/// A 2025-11-25 client's call that asks to run as a task (`params.task`, that revision's
/// tasks, not the extension's) runs as a plain one through the proxy: no task of that revision
/// is followed and judged, so the server never hears the ask, and answers the call itself.
#[tokio::test(flavor = "multi_thread")]
async fn a_2025_call_that_asks_for_a_task_runs_as_a_plain_one() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
    let project = Project::new(&[]);
    let plugins = PluginDir::new();
    let mut proxy = tokio::process::Command::new(env!("CARGO_BIN_EXE_palisade"))
        .args(project.proxy_args(&plugins, "modern", &modern_server()))
        .env("MODERN_SERVER_LOG", project.dir.path().join("server.jsonl"))
        .env("PALISADE_CACHE_DIR", cache_dir())
        .env("PALISADE_STATE_DIR", project.dir.path().join("state"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut input = proxy.stdin.take().unwrap();
    let mut output = tokio::io::BufReader::new(proxy.stdout.take().unwrap()).lines();
    let messages = [
        json!({ "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": { "name": "palisade-test", "version": "1" } } }),
        json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
        json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "echo", "arguments": { "text": "hello" }, "task": { "ttl": 60000 } } }),
    ];
    let mut answers = Vec::new();
    for message in messages {
        input
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
        if message.get("id").is_some() {
            let line = tokio::time::timeout(Duration::from_secs(30), output.next_line())
                .await
                .expect("an answer in time")
                .unwrap()
                .expect("the proxy answers");
            answers.push(serde_json::from_str::<Value>(&line).unwrap());
        }
    }
    let result = &answers[1]["result"];
    assert_eq!(result["content"][0]["text"], "hello", "{answers:?}");
    assert!(result.get("task").is_none(), "{answers:?}");
    let calls = modern_calls(&project);
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0].get("task").is_none(), "{calls:?}");
}
