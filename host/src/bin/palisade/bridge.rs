//! `palisade claude-code DIR` and `palisade codex DIR`: Palisade as an agent's hook command.

use palisade::bridge::{self, Dialect, Reply};
use palisade::{EventSink, JsonlSink};
use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The largest hook event read from stdin.
const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;
/// The default budget of one bridged event: well under the agents' hook timeouts (Claude
/// Code's is 60 s or more), so a slow or stuck plugin is answered for, not waited out.
pub const DEFAULT_BUDGET_MS: u64 = 10_000;
/// What the budget keeps back for writing the answer.
const ANSWER_MARGIN: Duration = Duration::from_millis(50);
/// The longest the process waits for observers once it has answered.
const MAX_DRAIN: Duration = Duration::from_secs(2);

pub struct Options {
    pub dir: PathBuf,
    pub audit_log: Option<PathBuf>,
    pub timings: bool,
    pub budget: Duration,
}

/// Records what the bridge is doing, so that a budget that runs out can name it.
#[derive(Default)]
struct Doing(Mutex<String>);

impl Doing {
    fn set(&self, what: impl Into<String>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = what.into();
    }

    fn get(&self) -> String {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Passes events on, and remembers the hook that started last.
struct Watch {
    doing: Arc<Doing>,
    inner: Option<Arc<dyn EventSink>>,
}

impl EventSink for Watch {
    fn emit(&self, event: &palisade::Event) {
        if let palisade::EventKind::HookStarted = event.kind {
            self.doing
                .set(format!("running the hook `{}`", event.hook_id));
        }
        if let Some(inner) = &self.inner {
            inner.emit(event);
        }
    }
}

/// One bridged event, answered within `options.budget`: reading it, loading (and compiling)
/// the plugins and every foreground hook all count. When the budget runs out, the event's
/// fail-closed answer goes out, naming what overran. The answer is written and flushed
/// before observers are awaited; they get what is left of the budget (at most
/// [`MAX_DRAIN`]), and what they have not finished then is cut off and recorded as dropped.
/// The process exits within the budget whatever the plugins do: an agent waits for the hook
/// process to exit, not only for its output.
pub async fn bridge(dialect: Dialect, options: Options) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let budget = options.budget;
    let deadline = started + budget;
    let doing = Arc::new(Doing::default());
    doing.set("reading the hook event on stdin");
    let event = Arc::new(Mutex::new(String::new()));
    let work = {
        let doing = doing.clone();
        let event = event.clone();
        async move {
            let raw = read_stdin().await;
            let input: Value =
                match raw.and_then(|raw| serde_json::from_slice(&raw).map_err(|e| e.to_string())) {
                    Ok(input) => input,
                    // Without the event name, nothing says whether blocking is safe: block, since
                    // the most likely caller of a guard is a tool call.
                    Err(e) => {
                        return Err(bridge::failure(
                            "PreToolUse",
                            &format!("cannot read the hook event on stdin: {e}"),
                        ));
                    }
                };
            let name = input
                .get("hook_event_name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            *event.lock().unwrap_or_else(|e| e.into_inner()) = name.clone();
            let mut sink: Option<Arc<dyn EventSink>> = None;
            if let Some(path) = &options.audit_log {
                match JsonlSink::open(path) {
                    Ok(audit) => sink = Some(Arc::new(audit)),
                    Err(e) => {
                        return Err(bridge::failure(
                            &name,
                            &format!("cannot open the audit log {}: {e}", path.display()),
                        ));
                    }
                }
            }
            let watch = Arc::new(Watch {
                doing: doing.clone(),
                inner: sink,
            });
            doing.set(format!(
                "loading the plugins of {} (compiling any not in the cache)",
                options.dir.display()
            ));
            let dir = options.dir.clone();
            let points = bridge::points_for(&name);
            // Loading blocks (it may compile): on a thread of its own, so the budget can
            // still answer.
            let loaded = tokio::task::spawn_blocking(move || {
                crate::quiet_host_builder()
                    .event_sink(watch)
                    .build()
                    .map_err(anyhow::Error::from)
                    .and_then(|host| Ok(host.load_dir_for(&dir, points)?))
            })
            .await
            .map_err(anyhow::Error::from)
            .and_then(|loaded| loaded);
            let plugins = match loaded {
                Ok(plugins) => plugins,
                Err(e) => {
                    return Err(bridge::failure(
                        &name,
                        &format!(
                            "cannot load the plugins of {}: {e:#}",
                            options.dir.display()
                        ),
                    ));
                }
            };
            let loaded = started.elapsed();
            let session_id = input
                .get("session_id")
                .and_then(Value::as_str)
                .unwrap_or("unknown-session")
                .to_string();
            let lifecycle = palisade::Lifecycle::new(plugins.session(session_id));
            let reply = bridge::handle_in(&lifecycle, dialect, &input).await;
            if options.timings {
                eprintln!(
                    "palisade: {name}: read and loaded {} plugins in {:.2} ms, ran {} in {:.2} ms",
                    plugins.iter().count(),
                    loaded.as_secs_f64() * 1e3,
                    if reply.points.is_empty() {
                        "nothing".to_string()
                    } else {
                        reply.points.join(", ")
                    },
                    (started.elapsed() - loaded).as_secs_f64() * 1e3,
                );
            }
            Ok((reply, lifecycle))
        }
    };
    let answer_by = deadline
        .checked_sub(ANSWER_MARGIN)
        .unwrap_or(deadline)
        .into();
    match tokio::time::timeout_at(answer_by, work).await {
        Ok(Ok((reply, lifecycle))) => {
            write(&reply);
            // Observers get what is left of the budget, and no more than MAX_DRAIN.
            let left = deadline.saturating_duration_since(Instant::now());
            lifecycle
                .session()
                .drain_background_for(left.min(MAX_DRAIN))
                .await;
            std::process::exit(reply.exit_code)
        }
        Ok(Err(early)) => answer(early),
        Err(_) => {
            let event = event.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let event = if event.is_empty() {
                "PreToolUse".to_string()
            } else {
                event
            };
            answer(bridge::failure(
                &event,
                &format!(
                    "the event's budget of {} ms ran out while {}; refused, since what \
                     the plugins decide could not be known in time (raise --budget-ms, or \
                     the hook's timeout_ms)",
                    budget.as_millis(),
                    doing.get()
                ),
            ))
        }
    }
}

/// The hook event on stdin, at most [`MAX_INPUT_BYTES`], read on a blocking thread (so a
/// budget around it can still answer).
async fn read_stdin() -> Result<Vec<u8>, String> {
    tokio::task::spawn_blocking(|| {
        let mut raw = Vec::new();
        std::io::stdin()
            .take(MAX_INPUT_BYTES)
            .read_to_end(&mut raw)
            .map(|_| raw)
    })
    .await
    .map_err(|e| e.to_string())
    .and_then(|read| read.map_err(|e| e.to_string()))
}

/// Writes the reply: the JSON on stdout, flushed, and the message on stderr.
fn write(reply: &Reply) {
    if let Some(json) = &reply.stdout {
        let mut out = std::io::stdout().lock();
        let _ = serde_json::to_writer(&mut out, json);
        let _ = writeln!(out);
        let _ = out.flush();
    }
    if let Some(message) = &reply.stderr {
        eprintln!("{message}");
    }
}

/// Writes the reply and exits at once: the observers are drained and the audit log is
/// flushed line by line, so tearing the engine and its compiled code down would only add to
/// the agent's wait.
fn answer(reply: Reply) -> ! {
    write(&reply);
    std::process::exit(reply.exit_code)
}

/// The events worth registering: those that run a point the plugins subscribe to.
fn events_for(plugins: &palisade::Plugins) -> Vec<&'static str> {
    let points: std::collections::BTreeSet<palisade::Point> = plugins
        .iter()
        .flat_map(|p| p.manifest().hooks.iter().map(|h| h.point))
        .collect();
    bridge::EVENTS
        .iter()
        .copied()
        .filter(|event| bridge::points_for(event).iter().any(|p| points.contains(p)))
        .collect()
}

fn shell_quote(text: &str) -> String {
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c))
    {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

fn hook_command(dialect: &str, dir: &Path, audit_log: Option<&Path>) -> anyhow::Result<String> {
    let exe = std::env::current_exe()?;
    let dir = std::fs::canonicalize(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    let mut command = format!(
        "{} {dialect} {}",
        shell_quote(&exe.to_string_lossy()),
        shell_quote(&dir.to_string_lossy())
    );
    if let Some(log) = audit_log {
        // Absolute: the agent runs the hook from its own working directory.
        let log = std::path::absolute(log)?;
        command.push_str(&format!(
            " --audit-log {}",
            shell_quote(&log.to_string_lossy())
        ));
    }
    Ok(command)
}

/// `palisade install claude-code DIR [--settings FILE]`.
pub fn install_claude_code(
    dir: &Path,
    settings: Option<&Path>,
    audit_log: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let plugins = crate::host_builder().build()?.load_dir(dir)?;
    let command = hook_command("claude-code", dir, audit_log)?;
    let mut hooks = serde_json::Map::new();
    for event in events_for(&plugins) {
        // The agent's own timeout for the hook process: the bridge's budget and a margin, so
        // the bridge's fail-closed answer arrives before the agent gives up (and allows).
        let mut entry = serde_json::json!({ "hooks": [{
            "type": "command",
            "command": command,
            "timeout": install_timeout_secs(),
        }] });
        if matches!(event, "PreToolUse" | "PostToolUse") {
            entry["matcher"] = "*".into();
        }
        hooks.insert(event.to_string(), Value::Array(vec![entry]));
    }
    let code = merge_settings(hooks, settings, &command)?;
    if settings.is_some() {
        println!("{}", precompiled(&plugins));
    }
    Ok(code)
}

/// The `timeout` (seconds) that `install` writes for each hook: the default budget plus 5 s.
fn install_timeout_secs() -> u64 {
    DEFAULT_BUDGET_MS.div_ceil(1000) + 5
}

/// Prints the hooks snippet, or merges it into the settings file `settings`: Palisade's own
/// entries are replaced, every other hook and setting is kept, and the file is replaced
/// atomically.
fn merge_settings(
    hooks: serde_json::Map<String, Value>,
    settings: Option<&Path>,
    what: &str,
) -> anyhow::Result<ExitCode> {
    let Some(path) = settings else {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "hooks": hooks }))?
        );
        eprintln!("add this to .claude/settings.json (or pass --settings FILE to merge it there)");
        return Ok(ExitCode::SUCCESS);
    };
    let mut settings: Value = match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{} is not JSON: {e}; fix it first", path.display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
        Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
    };
    let Some(root) = settings.as_object_mut() else {
        anyhow::bail!("{} is not a JSON object", path.display());
    };
    let existing = root.entry("hooks").or_insert_with(|| serde_json::json!({}));
    let Some(existing) = existing.as_object_mut() else {
        anyhow::bail!("`hooks` in {} is not an object", path.display());
    };
    let mut added = Vec::new();
    for (event, entries) in hooks {
        let list = existing
            .entry(event.clone())
            .or_insert_with(|| Value::Array(vec![]));
        let Some(list) = list.as_array_mut() else {
            anyhow::bail!("`hooks.{event}` in {} is not a list", path.display());
        };
        // Re-installing replaces Palisade's own entry; other hooks are kept as they are.
        list.retain(|entry| !is_palisade_entry(entry, "claude-code"));
        list.extend(entries.as_array().cloned().unwrap_or_default());
        added.push(event);
    }
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    // Written next to the file, then renamed over it: a crash never leaves half a file.
    let tmp = path.with_extension("json.palisade-tmp");
    std::fs::write(&tmp, serde_json::to_string_pretty(&settings)? + "\n")?;
    std::fs::rename(&tmp, path)?;
    println!(
        "{}: Palisade runs on {} ({what})",
        path.display(),
        added.join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

/// Loading the plugins compiled their components into the cache: say so, since it is why the
/// agent's first event does not wait for a compiler.
fn precompiled(plugins: &palisade::Plugins) -> String {
    let components = plugins.iter().filter(|p| p.wasm_path().is_some()).count();
    match crate::cache_dir() {
        Some(dir) => format!(
            "{components} component(s) compiled into the cache at {}: the first event will not wait for them",
            dir.display()
        ),
        None => "the component cache is off (PALISADE_CACHE_DIR=off): every event compiles its components".into(),
    }
}

fn is_palisade_entry(entry: &Value, dialect: &str) -> bool {
    entry["hooks"].as_array().is_some_and(|hooks| {
        hooks.iter().any(|h| {
            h["command"].as_str().is_some_and(|c| {
                c.contains("palisade")
                    && (c.contains(&format!(" {dialect} "))
                        || c.contains(" forward ") && c.contains(&format!("/{dialect}")))
            }) || h["type"] == "http"
                && h["url"]
                    .as_str()
                    .is_some_and(|u| u.ends_with(&format!("/{dialect}")))
        })
    })
}

/// `palisade install claude-code --serve URL`: a command hook per event, `palisade forward
/// URL --token-file FILE`, that POSTs the event to `palisade serve` with the server's bearer
/// token. Command hooks, not http hooks: an http hook can only send a token written into the
/// settings or taken from an environment variable (which the agent's own shell tool inherits
/// and can print); a forward reads it from the owner-only file the server reads. The token file
/// is created when missing.
pub fn install_claude_code_serve(
    base: &str,
    settings: Option<&Path>,
    token_file: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        anyhow::bail!("--serve takes the server's base URL, such as http://127.0.0.1:8719");
    }
    let url = format!("{}/claude-code", base.trim_end_matches('/'));
    let token_file = crate::token::path_or_default(token_file)?;
    let (_, created) = crate::token::ensure(&token_file)?;
    let exe = std::env::current_exe()?;
    let command = format!(
        "{} forward {} --token-file {}",
        shell_quote(&exe.to_string_lossy()),
        shell_quote(&url),
        shell_quote(&token_file.to_string_lossy())
    );
    let mut hooks = serde_json::Map::new();
    for event in bridge::EVENTS {
        let mut entry = serde_json::json!({ "hooks": [{
            "type": "command",
            "command": command,
            "timeout": install_timeout_secs(),
        }] });
        if matches!(event, "PreToolUse" | "PostToolUse") {
            entry["matcher"] = "*".into();
        }
        hooks.insert(event.to_string(), Value::Array(vec![entry]));
    }
    let code = merge_settings(hooks, settings, &format!("forwarded to {url}"))?;
    eprintln!(
        "the server's bearer token is in {}{}: start the server with --token-file {0} if \
         that is not its default",
        token_file.display(),
        if created { " (created now)" } else { "" }
    );
    Ok(code)
}

/// `palisade install codex DIR`: the `config.toml` snippet.
pub fn install_codex(dir: &Path, audit_log: Option<&Path>) -> anyhow::Result<ExitCode> {
    let plugins = crate::host_builder().build()?.load_dir(dir)?;
    let command = hook_command("codex", dir, audit_log)?;
    let quoted = serde_json::to_string(&command)?;
    for event in events_for(&plugins) {
        // No matcher: every tool (Palisade's own matchers decide).
        println!("[[hooks.{event}]]");
        // A timeout past the bridge's budget: its fail-closed answer arrives first.
        println!(
            "[[hooks.{event}.hooks]]\ntype = \"command\"\ncommand = {quoted}\ntimeout = {}\n",
            install_timeout_secs()
        );
    }
    eprintln!(
        "add this to $CODEX_HOME/config.toml; Codex runs only trusted hooks: trust them when it asks"
    );
    eprintln!("{}", precompiled(&plugins));
    Ok(ExitCode::SUCCESS)
}

/// `palisade forward URL`: POSTs the hook event on stdin to `palisade serve` and answers what
/// it answered, as a command hook. For the events an agent sends only to command hooks
/// (Claude Code's `SessionStart`).
pub async fn forward(
    url: &str,
    token_file: Option<&Path>,
    budget: Duration,
) -> anyhow::Result<ExitCode> {
    let event = Arc::new(Mutex::new(String::new()));
    let work = forward_within(url, token_file, event.clone());
    let reply = match tokio::time::timeout(budget, work).await {
        Ok(reply) => reply,
        Err(_) => {
            let event = event.lock().unwrap_or_else(|e| e.into_inner()).clone();
            bridge::failure(
                &event,
                &format!(
                    "the event's budget of {} ms ran out {} (raise --budget-ms, or the hooks' \
                     timeout_ms)",
                    budget.as_millis(),
                    if event.is_empty() {
                        "while reading the hook event on stdin".to_string()
                    } else {
                        format!("waiting for palisade serve at {url}")
                    }
                ),
            )
        }
    };
    answer(reply)
}

/// The work of [`forward`]; `event` is set to the event's name as soon as it is known.
async fn forward_within(url: &str, token_file: Option<&Path>, event: Arc<Mutex<String>>) -> Reply {
    let input = match read_stdin().await {
        Ok(raw) => raw,
        Err(e) => {
            return bridge::failure(
                "PreToolUse",
                &format!("cannot read the hook event on stdin: {e}"),
            );
        }
    };
    // Without the event's name nothing says blocking is safe: block, as the bridge does.
    let name = serde_json::from_slice::<Value>(&input)
        .ok()
        .and_then(|v| v["hook_event_name"].as_str().map(str::to_string))
        .unwrap_or_else(|| "PreToolUse".to_string());
    *event.lock().unwrap_or_else(|e| e.into_inner()) = name.clone();
    let fail = |why: String| bridge::failure(&name, &why);
    let token = match crate::token::path_or_default(token_file)
        .and_then(|file| crate::token::read(&file))
    {
        Ok(token) => token,
        Err(e) => return fail(format!("{e:#}")),
    };
    // No timeout of its own: the budget around the whole forward answers for a slow server,
    // naming it.
    let client = reqwest::Client::builder()
        .no_proxy()
        // Loading the built-in root certificates costs time in every process; a plain-http
        // URL (the usual loopback server) has no use for them.
        .tls_built_in_root_certs(url.starts_with("https:"))
        .build();
    let client = match client {
        Ok(client) => client,
        Err(e) => return fail(format!("cannot make an HTTP client: {e}")),
    };
    let sent = client
        .post(url)
        .header("content-type", "application/json")
        .bearer_auth(token)
        .body(input)
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        Err(e) => return fail(format!("palisade serve at {url} did not answer: {e}")),
    };
    let status = response.status();
    let body = match response.text().await {
        Ok(body) => body,
        Err(e) => return fail(format!("reading the answer of {url}: {e}")),
    };
    if !status.is_success() {
        return fail(format!(
            "palisade serve answered {status}: {}",
            palisade::events::printable(body.trim())
        ));
    }
    let stdout = match body.trim() {
        "" => None,
        text => match serde_json::from_str(text) {
            Ok(json) => Some(json),
            Err(e) => return fail(format!("palisade serve answered something not JSON: {e}")),
        },
    };
    Reply {
        stdout,
        stderr: None,
        exit_code: 0,
        points: Vec::new(),
    }
}
