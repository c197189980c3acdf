//! `palisade install claude-code|codex`: register Palisade as an agent's hook command.

use crate::hook_io::DEFAULT_BUDGET_MS;
use palisade::bridge;
use palisade::claude_code::SettingsEntry;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Register Palisade as an agent's hook command.
#[derive(clap::Subcommand)]
pub enum InstallCommand {
    /// Print the hooks snippet of .claude/settings.json, or merge it into --settings FILE.
    ClaudeCode {
        /// The plugin directory (not with --serve: the server has its own).
        #[arg(required_unless_present = "serve", conflicts_with = "serve")]
        dir: Option<PathBuf>,
        /// The settings file to merge into (created if missing; other hooks are kept).
        #[arg(long)]
        settings: Option<PathBuf>,
        /// Have the hook command append lifecycle events to this JSONL audit log.
        #[arg(long, conflicts_with = "serve")]
        audit_log: Option<PathBuf>,
        /// Install command hooks that forward each event to `palisade serve` at this base
        /// URL (e.g. http://127.0.0.1:8719) instead of running the plugins per event.
        #[arg(long, value_name = "URL")]
        serve: Option<String>,
        /// With --serve: the file holding the server's bearer token, created when missing
        /// [default: the one `palisade serve` uses, ~/.config/palisade/serve-token].
        #[arg(long, value_name = "FILE", requires = "serve")]
        token_file: Option<PathBuf>,
    },
    /// Print the hooks snippet of Codex's config.toml.
    Codex {
        /// The plugin directory.
        dir: PathBuf,
        /// Have the hook command append lifecycle events to this JSONL audit log.
        #[arg(long)]
        audit_log: Option<PathBuf>,
    },
}

impl InstallCommand {
    /// Prints or merges the hook configuration.
    pub fn execute(self) -> anyhow::Result<ExitCode> {
        match self {
            InstallCommand::ClaudeCode {
                dir,
                settings,
                audit_log,
                serve,
                token_file,
            } => match (dir, serve) {
                (_, Some(url)) => {
                    install_claude_code_serve(&url, settings.as_deref(), token_file.as_deref())
                }
                (Some(dir), None) => {
                    install_claude_code(&dir, settings.as_deref(), audit_log.as_deref())
                }
                (None, None) => Err(anyhow::anyhow!("name the plugin directory, or --serve URL")),
            },
            InstallCommand::Codex { dir, audit_log } => install_codex(&dir, audit_log.as_deref()),
        }
    }
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
fn install_claude_code(
    dir: &Path,
    settings: Option<&Path>,
    audit_log: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let plugins = crate::cache::host_builder().build()?.load_dir(dir)?;
    let command = hook_command("claude-code", dir, audit_log)?;
    let mut hooks = serde_json::Map::new();
    for event in events_for(&plugins) {
        hooks.insert(event.to_string(), command_entry(event, &command));
    }
    let code = merge_settings(hooks, settings, &command)?;
    if settings.is_some() {
        println!("{}", precompiled(&plugins));
    }
    Ok(code)
}

/// Claude Code's settings entry that runs `command` on `event`, for every tool. The agent's own
/// timeout for the hook process is the bridge's budget and a margin, so the bridge's
/// fail-closed answer arrives before the agent gives up (and allows).
fn command_entry(event: &str, command: &str) -> Value {
    let entry = SettingsEntry::command(event, command, install_timeout_secs());
    Value::Array(vec![serde_json::to_value(entry).unwrap_or_default()])
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

/// `palisade install claude-code --serve URL`: a command hook per event, `palisade forward
/// URL --token-file FILE`, that POSTs the event to `palisade serve` with the server's bearer
/// token. Command hooks, not http hooks: an http hook can only send a token written into the
/// settings or taken from an environment variable (which the agent's own shell tool inherits
/// and can print); a forward reads it from the owner-only file the server reads. The token file
/// is created when missing.
fn install_claude_code_serve(
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
        hooks.insert(event.to_string(), command_entry(event, &command));
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
fn install_codex(dir: &Path, audit_log: Option<&Path>) -> anyhow::Result<ExitCode> {
    let plugins = crate::cache::host_builder().build()?.load_dir(dir)?;
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
