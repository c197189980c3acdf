//! `palisade install AGENT|zed|mcp`: register Palisade as an agent's hook command (a
//! subcommand per agent of [`Dialect::ALL`], its settings entry from its module in
//! [`palisade::agents`]), as the agent server an editor starts in front of an ACP agent
//! (`zed`), or as the MCP server a client starts in front of the real one (`mcp`).

use crate::hook_io::DEFAULT_BUDGET_MS;
use palisade::agents::{Event, HookTarget};
use palisade::bridge::Dialect;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// How `install AGENT --serve` has the agent reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HookType {
    /// `http` when the agent on PATH takes http hooks, else `command`.
    Auto,
    /// The agent POSTs each event itself.
    Http,
    /// A `palisade forward` process per event.
    Command,
}

/// The environment variable an http hook takes the server's bearer token from.
const TOKEN_VAR: &str = "PALISADE_SERVE_TOKEN";

/// `palisade install AGENT`'s arguments, the same for every agent.
#[derive(clap::Args, Debug)]
pub struct HookInstall {
    /// The plugin directory (not with --serve: the server has its own).
    #[arg(required_unless_present = "serve", conflicts_with = "serve")]
    dir: Option<PathBuf>,
    /// The settings file to merge into (created if missing; other hooks are kept), where the
    /// agent's settings are JSON.
    #[arg(long)]
    settings: Option<PathBuf>,
    /// Have the hook command append lifecycle events to this JSONL audit log.
    #[arg(long, conflicts_with = "serve")]
    audit_log: Option<PathBuf>,
    /// Install hooks that hand each event to `palisade serve` at this base URL (e.g.
    /// http://127.0.0.1:8719) instead of running the plugins per event.
    #[arg(long, value_name = "URL")]
    serve: Option<String>,
    /// With --serve: the file holding the server's bearer token, created when missing
    /// [default: the one `palisade serve` uses, ~/.config/palisade/serve-token].
    #[arg(long, value_name = "FILE", requires = "serve")]
    token_file: Option<PathBuf>,
    /// With --serve: how the agent reaches the server. `http`: it POSTs each event itself
    /// (Claude Code 2.1.63 and later), with the token from the environment variable
    /// PALISADE_SERVE_TOKEN; an event that takes no http hook (Claude Code's `SessionStart`)
    /// runs a forward. `command`: a `palisade forward` process per event, the token read from
    /// the file. `auto`: `http` when the agent on PATH takes http hooks, else `command`.
    #[arg(long, value_enum, default_value_t = HookType::Auto, requires = "serve")]
    hook_type: HookType,
    /// Also register the agent's events that run no point, so that the audit log records
    /// that each happened (an `agent_event` line naming it; its content only with
    /// `--record`). Needs --audit-log (with --serve, the server's).
    #[arg(long)]
    observe: bool,
}

/// `palisade install AGENT`: a subcommand for each agent of [`Dialect::ALL`], with
/// [`HookInstall`]'s arguments.
pub type AgentInstall = super::PerAgent<HookInstall>;

impl super::AgentArgs for HookInstall {
    fn about(dialect: Dialect) -> String {
        let (title, settings) = (dialect.spec().title(), dialect.spec().settings());
        match settings.mergeable {
            true => format!(
                "Print the hooks snippet of {title}'s {}, or merge it into --settings FILE",
                settings.file
            ),
            false => format!("Print the hooks snippet of {title}'s {}", settings.file),
        }
    }
}

/// Register Palisade as an agent's hook command.
#[derive(clap::Subcommand)]
pub enum InstallCommand {
    /// Each agent's hooks (`palisade install claude-code DIR`, …).
    #[command(flatten)]
    Agent(AgentInstall),
    /// Print Zed's `agent_servers` entry that starts `palisade acp` in front of an ACP agent,
    /// or merge it into --settings FILE (Zed's settings.json).
    Zed {
        /// The plugin directory.
        #[arg(long)]
        plugins: PathBuf,
        /// The agent's name in Zed's agent panel.
        #[arg(long, default_value = "Guarded agent")]
        name: String,
        /// Zed's settings file to merge into (created if missing; other settings are kept).
        #[arg(long)]
        settings: Option<PathBuf>,
        /// Have `palisade acp` append lifecycle events to this JSONL audit log.
        #[arg(long)]
        audit_log: Option<PathBuf>,
        /// The ACP agent's command and its arguments (after `--`), e.g.
        /// `npx @agentclientprotocol/claude-agent-acp`.
        #[arg(last = true, required = true)]
        agent: Vec<String>,
    },
    /// Print the `mcpServers` entry (Claude Code's .mcp.json, Gemini CLI's, Cursor's, Claude
    /// Desktop's settings) that starts `palisade mcp` in front of an MCP server, or merge it
    /// into --settings FILE.
    Mcp {
        /// The plugin directory.
        #[arg(long)]
        plugins: PathBuf,
        /// The server's name: the entry's key, and `mcp__NAME__TOOL` in hooks' tool names.
        #[arg(long)]
        name: String,
        /// The client's settings file to merge into (created if missing; other servers and
        /// settings are kept).
        #[arg(long)]
        settings: Option<PathBuf>,
        /// Have `palisade mcp` append lifecycle events to this JSONL audit log.
        #[arg(long)]
        audit_log: Option<PathBuf>,
        /// The MCP server's command and its arguments (after `--`), e.g.
        /// `npx @modelcontextprotocol/server-filesystem ~/project`.
        #[arg(last = true, required = true)]
        server: Vec<String>,
    },
}

impl InstallCommand {
    /// Prints or merges the hook configuration.
    pub fn execute(self) -> anyhow::Result<ExitCode> {
        match self {
            InstallCommand::Agent(agent) => install(agent.dialect, agent.args),
            InstallCommand::Zed {
                plugins,
                name,
                settings,
                audit_log,
                agent,
            } => {
                let settings = settings.as_deref();
                let args = proxy_args("acp", &plugins, &[], audit_log.as_deref(), &agent)?;
                register(&plugins, ZED, &name, settings, args, &agent)
            }
            InstallCommand::Mcp {
                plugins,
                name,
                settings,
                audit_log,
                server,
            } => {
                let named = ["--name".to_string(), name.clone()];
                let args = proxy_args("mcp", &plugins, &named, audit_log.as_deref(), &server)?;
                register(&plugins, MCP, &name, settings.as_deref(), args, &server)
            }
        }
    }
}

/// The events of `dialect` worth registering: those that run a point the plugins have a hook
/// on — for an event always about one tool ([`palisade::agents::Meaning::tool`]), a hook whose
/// matcher takes that tool.
fn events_for(plugins: &palisade::Plugins, dialect: Dialect) -> Vec<&'static Event> {
    dialect
        .hooked_events()
        .filter(|event| {
            let points = event.meaning.points();
            let tool = event.meaning.tool();
            plugins
                .iter()
                .flat_map(|plugin| plugin.manifest().hooks.iter())
                .any(|hook| {
                    points.contains(&hook.point) && tool.is_none_or(|t| hook.matches_tool(t))
                })
        })
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

/// `palisade install AGENT`: its hooks for the plugins of a folder, or forwarded to a server.
fn install(dialect: Dialect, args: HookInstall) -> anyhow::Result<ExitCode> {
    let spec = dialect.spec();
    if args.settings.is_some() && !spec.settings().mergeable {
        anyhow::bail!(
            "{}'s hooks are in {}, which install does not edit: leave out --settings, and add \
             the printed snippet there",
            spec.title(),
            spec.settings().file
        );
    }
    if args.observe && args.serve.is_none() && args.audit_log.is_none() {
        anyhow::bail!(
            "--observe records the events in the audit log: give --audit-log FILE (or --serve \
             URL, a server with --audit-log)"
        );
    }
    let settings = args.settings.as_deref();
    let observed: Vec<&'static Event> = match args.observe {
        true => dialect.observed_events().collect(),
        false => Vec::new(),
    };
    match (args.dir, args.serve) {
        (_, Some(base)) => install_serve(
            dialect,
            &base,
            settings,
            args.token_file.as_deref(),
            args.hook_type,
            &observed,
        ),
        (Some(dir), None) => install_dir(
            dialect,
            &dir,
            settings,
            args.audit_log.as_deref(),
            &observed,
        ),
        (None, None) => Err(anyhow::anyhow!("name the plugin directory, or --serve URL")),
    }
}

/// `palisade install AGENT DIR [--settings FILE]`: a hook command on each of the agent's
/// events the plugins' points need, with the agent's timeout past the bridge's budget, so
/// that the bridge's fail-closed answer arrives before the agent gives up (and allows).
fn install_dir(
    dialect: Dialect,
    dir: &Path,
    settings: Option<&Path>,
    audit_log: Option<&Path>,
    observed: &[&'static Event],
) -> anyhow::Result<ExitCode> {
    let plugins = crate::cache::host_builder().build()?.load_dir(dir)?;
    let command = hook_command(dialect.name(), dir, audit_log)?;
    let mut hooks = serde_json::Map::new();
    for event in events_for(&plugins, dialect)
        .into_iter()
        .chain(observed.iter().copied())
    {
        let target = HookTarget::Command(&command);
        if let Some(entry) = dialect
            .spec()
            .hook_entry(event, target, install_timeout_secs())
        {
            hooks.insert(event.name.to_string(), Value::Array(vec![entry]));
        }
    }
    let code = merge_settings(dialect, hooks, settings, &command, None)?;
    if let Some(note) = dialect.spec().settings().note {
        eprintln!("{note}");
    }
    match settings {
        Some(_) => println!("{}", precompiled(&plugins)),
        // Standard output is the snippet.
        None => eprintln!("{}", precompiled(&plugins)),
    }
    Ok(code)
}

/// The endpoint of `dialect` at the server `base`, the `palisade forward` command that posts
/// to it, and the server's token file (whether it was created now).
fn forward_to(
    base: &str,
    dialect: &str,
    token_file: Option<&Path>,
) -> anyhow::Result<(String, String, PathBuf, bool)> {
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        anyhow::bail!("--serve takes the server's base URL, such as http://127.0.0.1:8719");
    }
    let url = format!("{}/{dialect}", base.trim_end_matches('/'));
    let token_file = crate::token::path_or_default(token_file)?;
    let (_, created) = crate::token::ensure(&token_file)?;
    let exe = std::env::current_exe()?;
    let command = format!(
        "{} forward {} --token-file {}",
        shell_quote(&exe.to_string_lossy()),
        shell_quote(&url),
        shell_quote(&token_file.to_string_lossy())
    );
    Ok((url, command, token_file, created))
}

fn said_where_the_token_is(token_file: &Path, created: bool) {
    eprintln!(
        "the server's bearer token is in {}{}: start the server with --token-file {0} if \
         that is not its default",
        token_file.display(),
        if created { " (created now)" } else { "" }
    );
}

/// The `timeout` (seconds) that `install` writes for each hook: the default budget plus 5 s.
fn install_timeout_secs() -> u64 {
    DEFAULT_BUDGET_MS.div_ceil(1000) + 5
}

/// Prints the hooks snippet, or merges it into the settings file `settings`: Palisade's own
/// entries are replaced, every other hook and setting is kept, and the file is replaced
/// atomically. Adds what `allow` says to the lists that restrict http hooks.
fn merge_settings(
    dialect: Dialect,
    hooks: serde_json::Map<String, Value>,
    settings: Option<&Path>,
    what: &str,
    allow: Option<HttpAllowed>,
) -> anyhow::Result<ExitCode> {
    let file = dialect.spec().settings().file;
    let Some(path) = settings else {
        println!("{}", dialect.spec().snippet(&hooks));
        if let Some(allow) = &allow {
            eprintln!(
                "where settings restrict http hooks, allow {} in `allowedHttpHookUrls` and {} \
                 in `httpHookAllowedEnvVars`",
                allow.url, allow.env_var
            );
        }
        match dialect.spec().settings().mergeable {
            true => eprintln!("add this to {file} (or pass --settings FILE to merge it there)"),
            false => eprintln!("add this to {file}"),
        }
        return Ok(ExitCode::SUCCESS);
    };
    let mut settings = read_settings(path)?;
    let root = settings.as_object_mut().expect("read_settings checks");
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
        list.retain(|entry| !is_palisade_entry(entry, dialect.name()));
        list.extend(entries.as_array().cloned().unwrap_or_default());
        added.push(event);
    }
    if let Some(allow) = allow {
        for (key, value) in [
            ("allowedHttpHookUrls", allow.url.as_str()),
            ("httpHookAllowedEnvVars", allow.env_var),
        ] {
            match root.get_mut(key) {
                None => {}
                Some(Value::Array(list)) => {
                    if !list.iter().any(|v| v == value) {
                        list.push(Value::from(value));
                    }
                }
                Some(_) => anyhow::bail!("`{key}` in {} is not a list", path.display()),
            }
        }
    }
    let written = write_settings(path, &settings)?;
    println!("{written}: Palisade runs on {} ({what})", added.join(", "));
    Ok(ExitCode::SUCCESS)
}

/// A JSON settings file as an object (`{}` when it does not exist yet).
fn read_settings(path: &Path) -> anyhow::Result<Value> {
    let settings: Value = match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{} is not plain JSON ({e}): fix it, or leave out --settings and add the \
                 printed entry by hand",
                path.display()
            )
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
        Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
    };
    if !settings.is_object() {
        anyhow::bail!("{} is not a JSON object", path.display());
    }
    Ok(settings)
}

/// Replaces the settings file atomically and returns how to name it in a message.
///
/// The new text goes to a temporary file beside it, of a random name, created afresh with
/// `O_CREAT | O_EXCL | O_NOFOLLOW` (a file or a link someone left in the folder is never
/// written through) and given the file's own permission mode (0600 for a new file: settings
/// can hold keys); it is synced, renamed over the file, and the rename is synced. A settings
/// file that is a symbolic link (a dotfile manager's) is written through on purpose: the file
/// it leads to is replaced, keeping that file's mode, and the link stays.
fn write_settings(path: &Path, settings: &Value) -> anyhow::Result<String> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let target = resolved(path)?;
    let dir = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| anyhow::anyhow!("cannot create the folder {}: {e}", dir.display()))?;
    let mode = match std::fs::metadata(&target) {
        Ok(meta) if meta.is_file() => meta.permissions().mode() & 0o777,
        Ok(_) => anyhow::bail!("{} is not a regular file", target.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0o600,
        Err(e) => anyhow::bail!("cannot read {}: {e}", target.display()),
    };
    let mut random = [0u8; 8];
    getrandom::fill(&mut random).map_err(|e| anyhow::anyhow!("no random bytes: {e}"))?;
    let mut name = std::ffi::OsString::from(".");
    name.push(target.file_name().unwrap_or_default());
    name.push(format!(".palisade-{:016x}.tmp", u64::from_le_bytes(random)));
    let tmp = target.with_file_name(name);
    let text = serde_json::to_string_pretty(settings)? + "\n";
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", tmp.display()))?;
    let written = std::io::Write::write_all(&mut file, text.as_bytes())
        .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(mode)))
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, &target));
    drop(file);
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        anyhow::bail!("cannot write {}: {e}", target.display());
    }
    std::fs::File::open(&dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| {
            anyhow::anyhow!(
                "{} is written, but its folder could not be synced: {e}",
                target.display()
            )
        })?;
    Ok(if target == path {
        path.display().to_string()
    } else {
        format!("{} (a link to {})", path.display(), target.display())
    })
}

/// `path` with its symbolic links followed (a relative link is read from the link's folder),
/// so that the file they lead to is the one replaced, even one not created yet.
fn resolved(path: &Path) -> anyhow::Result<PathBuf> {
    let mut path = path.to_path_buf();
    // The kernel's own limit on the links of a path.
    for _ in 0..40 {
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&path)
                    .map_err(|e| anyhow::anyhow!("cannot read the link {}: {e}", path.display()))?;
                path = match path.parent() {
                    Some(parent) => parent.join(link),
                    None => link,
                };
            }
            Ok(_) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(path),
            Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
        }
    }
    anyhow::bail!("{}: too many levels of symbolic links", path.display())
}

/// Loading the plugins compiled their components into the cache: say so, since it is why the
/// agent's first event does not wait for a compiler.
fn precompiled(plugins: &palisade::Plugins) -> String {
    let components = plugins.iter().filter(|p| p.wasm_path().is_some()).count();
    match crate::cache::cache_dir() {
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

/// `palisade install AGENT --serve URL`: hooks that hand each event to `palisade serve`
/// (`POST /AGENT`) with the server's bearer token, as `hook_type` says.
///
/// An `http` hook costs the agent a POST; a `forward` command hook a process per event, which
/// reads the token from the owner-only file the server reads. An http hook takes its token
/// from an environment variable (`PALISADE_SERVE_TOKEN`), which every process the agent starts
/// inherits — its shell tool's, its MCP servers' — where a forward's token stays in its file
/// (which processes of the same user can read too). Without the variable, the agent sends no
/// token and the server refuses the event: guarded events fail closed (`onFailure: block`).
/// An agent that runs no http hooks gets forwards. The token file is created when missing.
fn install_serve(
    dialect: Dialect,
    base: &str,
    settings: Option<&Path>,
    token_file: Option<&Path>,
    hook_type: HookType,
    observed: &[&'static Event],
) -> anyhow::Result<ExitCode> {
    let spec = dialect.spec();
    let (url, command, token_file, created) = forward_to(base, dialect.name(), token_file)?;
    let http = match (hook_type, spec.settings().http_hooks) {
        (HookType::Command, _) | (HookType::Auto, None) => false,
        (HookType::Http, Some(_)) => true,
        (HookType::Http, None) => anyhow::bail!(
            "{} runs no http hooks: leave out --hook-type (each event is forwarded by a \
             `palisade forward` command)",
            spec.title()
        ),
        (HookType::Auto, Some((program, since))) => match installed_version(program) {
            Ok(version) if version >= since => true,
            Ok((major, minor, patch)) => {
                let (a, b, c) = since;
                eprintln!(
                    "{} {major}.{minor}.{patch} runs no http hooks ({a}.{b}.{c} and later do): \
                     installing command hooks that forward each event",
                    spec.title()
                );
                false
            }
            Err(why) => {
                eprintln!(
                    "{why}: installing command hooks that forward each event (--hook-type http \
                     for http hooks)"
                );
                false
            }
        },
    };
    let mut hooks = serde_json::Map::new();
    let timeout = install_timeout_secs();
    for event in dialect.hooked_events().chain(observed.iter().copied()) {
        let posted = HookTarget::Http {
            url: &url,
            token_var: TOKEN_VAR,
        };
        let entry = match http {
            true => spec.hook_entry(event, posted, timeout),
            false => None,
        };
        // An event that takes no http hook runs a forward.
        let entry =
            entry.or_else(|| spec.hook_entry(event, HookTarget::Command(&command), timeout));
        if let Some(entry) = entry {
            hooks.insert(event.name.to_string(), Value::Array(vec![entry]));
        }
    }
    let allow = http.then(|| HttpAllowed {
        url: url.clone(),
        env_var: TOKEN_VAR,
    });
    let what = match http {
        true => format!("posted to {url}"),
        false => format!("forwarded to {url}"),
    };
    let code = merge_settings(dialect, hooks, settings, &what, allow)?;
    if let Some(note) = spec.settings().note {
        eprintln!("{note}");
    }
    said_where_the_token_is(&token_file, created);
    if http {
        eprintln!(
            "{} sends the token from ${TOKEN_VAR}: start it with {TOKEN_VAR}=\"$(cat {})\" {} \
             — without it the server refuses every event, and guarded ones are blocked",
            spec.title(),
            shell_quote(&token_file.to_string_lossy()),
            spec.settings()
                .http_hooks
                .map_or("", |(program, _)| program),
        );
    }
    Ok(code)
}

/// The version of the agent's `program` on PATH (`program --version`), or why there is none.
fn installed_version(program: &str) -> Result<(u64, u64, u64), String> {
    let out = std::process::Command::new(program)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("no `{program}` on PATH to ask which hooks it runs ({e})"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split_whitespace().next().unwrap_or_default();
    let mut parts = version.split('.').map(|p| p.parse::<u64>());
    match (parts.next(), parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor)), Some(Ok(patch))) => Ok((major, minor, patch)),
        _ => Err(format!(
            "`{program} --version` printed no version Palisade reads ({:?})",
            text.trim()
        )),
    }
}

/// What a settings file must allow for Palisade's http hooks, where it restricts them: the
/// URL (`allowedHttpHookUrls`) and the token's variable (`httpHookAllowedEnvVars`). Added to
/// a list the file has; a file without one restricts nothing, and gets none.
struct HttpAllowed {
    url: String,
    env_var: &'static str,
}

/// A proxy's arguments: `acp|mcp --plugins DIR [EXTRA…] [--audit-log FILE] -- CHILD…`, with the
/// plugin directory and the log absolute (the client starts it from a directory of its own).
fn proxy_args(
    command: &str,
    dir: &Path,
    extra: &[String],
    audit_log: Option<&Path>,
    child: &[String],
) -> anyhow::Result<Vec<String>> {
    let dir = std::fs::canonicalize(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
    let mut args = vec![
        command.to_string(),
        "--plugins".into(),
        dir.display().to_string(),
    ];
    args.extend(extra.iter().cloned());
    if let Some(log) = audit_log {
        args.extend([
            "--audit-log".into(),
            std::path::absolute(log)?.display().to_string(),
        ]);
    }
    args.push("--".into());
    args.extend(child.iter().cloned());
    Ok(args)
}

/// A client whose settings name the programs it starts, by name, under one key.
struct Registry {
    /// The settings' key: `agent_servers`, `mcpServers`.
    key: &'static str,
    /// Where the settings are, for the hint.
    settings: &'static str,
    /// What the child is, for the message.
    child: &'static str,
}

const ZED: Registry = Registry {
    key: "agent_servers",
    settings: "Zed's settings.json (~/.config/zed/settings.json)",
    child: "agent",
};

const MCP: Registry = Registry {
    key: "mcpServers",
    settings: "the client's MCP settings (Claude Code: .mcp.json; Gemini CLI: \
               ~/.gemini/settings.json; Cursor: ~/.cursor/mcp.json)",
    child: "MCP server",
};

/// `palisade install zed|mcp`: the entry that starts this `palisade` with `args`, under
/// `registry.key` as `name`, printed or merged into `settings`. The plugins are loaded first,
/// so a broken directory is reported now rather than when the client starts the proxy.
fn register(
    dir: &Path,
    registry: Registry,
    name: &str,
    settings: Option<&Path>,
    args: Vec<String>,
    child: &[String],
) -> anyhow::Result<ExitCode> {
    let plugins = crate::cache::host_builder().build()?.load_dir(dir)?;
    let exe = std::env::current_exe()?;
    let entry = serde_json::json!({ "command": exe.display().to_string(), "args": args });
    let Some(path) = settings else {
        let snippet = serde_json::json!({ registry.key: { name: entry } });
        println!("{}", serde_json::to_string_pretty(&snippet)?);
        eprintln!(
            "add this to {} (or pass --settings FILE to merge it there)",
            registry.settings
        );
        return Ok(ExitCode::SUCCESS);
    };
    let mut settings = read_settings(path)?;
    let entries = settings
        .as_object_mut()
        .expect("read_settings checks")
        .entry(registry.key)
        .or_insert_with(|| serde_json::json!({}));
    let Some(entries) = entries.as_object_mut() else {
        anyhow::bail!("`{}` in {} is not an object", registry.key, path.display());
    };
    // Re-installing under the same name replaces the entry; the others are kept.
    entries.insert(name.to_string(), entry);
    let written = write_settings(path, &settings)?;
    println!(
        "{written}: the {} \"{name}\" runs `{}` behind Palisade",
        registry.child,
        child.join(" ")
    );
    println!("{}", precompiled(&plugins));
    Ok(ExitCode::SUCCESS)
}
