//! `palisade`: check a plugin directory, run one dispatch, or see a demo.

mod bridge;
mod cases;
mod check;
mod demo;
mod new;
mod output;
mod progress;
mod replay;
mod run;
mod serve;
mod token;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// A WebAssembly plugin host for sandboxed agent hooks.
#[derive(Parser)]
#[command(name = "palisade", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate every plugin of a directory and print what each hook may do.
    Check {
        /// The plugin directory (one folder per plugin, each with a plugin.toml).
        dir: PathBuf,
    },
    /// Run one dispatch of a point and print the decision as JSON.
    Run {
        /// The plugin directory.
        dir: PathBuf,
        /// The point to dispatch: session-start, prompt-submit, pre-tool, tool-guard,
        /// post-tool, tool-result, turn-stopping, or a committed fact (message-committed,
        /// tool-call-committed, tool-result-committed, llm-response-committed,
        /// turn-completed, session-ended).
        #[arg(long)]
        point: String,
        /// The input JSON file (`-` for standard input); its shape depends on the point
        /// (see `docs/cli.md`, or give a wrong one to see them all).
        #[arg(long)]
        input: PathBuf,
        /// How lifecycle events are written to standard error.
        #[arg(long, value_enum, default_value_t = run::EventFormat::Text)]
        events: run::EventFormat,
    },
    /// Run a recorded session (JSONL) through the plugins: a timeline and a latency table.
    ///
    /// Each line is one event: {"event": "session-start", "source": "startup"},
    /// {"event": "prompt", "turn": 1, "text": "…"}, {"event": "tool-call", "call": {…},
    /// "result": {…}}, {"event": "stop", "turn": 1, "step": 3, "last_assistant_message": "…"},
    /// {"event": "session-end", "reason": "…"}.
    Replay {
        /// The plugin directory.
        dir: PathBuf,
        /// The recorded session.
        session: PathBuf,
        /// Output format.
        #[arg(long, value_enum, default_value_t = replay::Format::Text)]
        format: replay::Format,
        /// How asks are answered.
        #[arg(long, value_enum, default_value_t = replay::Approve::Never)]
        approve: replay::Approve,
    },
    /// Replay a bundled session through the bundled example plugins.
    Demo,
    /// Run a plugin author's test cases: each line of CASES.jsonl is
    /// {"name": "…", "point": "pre-tool", "input": {…}, "expect": {…}}, where `input` is what
    /// `palisade run` takes and `expect` the fields its output must have. Prints pass/fail per
    /// case with each hook's latency; exits 1 if any case fails.
    Test {
        /// The plugin directory.
        dir: PathBuf,
        /// The cases, one JSON object per line (`#` lines are comments).
        cases: PathBuf,
    },
    /// Create a plugin folder that builds and passes `check` and `test` as generated: a
    /// pre-tool guard, its manifest, build script, test cases and the WIT contract.
    New {
        /// The folder to create; its last part is the plugin's name (e.g. `my-guard`).
        path: PathBuf,
        /// The language of the hook.
        #[arg(long, value_enum, default_value = "rust")]
        lang: new::Lang,
    },
    /// Claude Code's hook command: reads one hook event (JSON) on stdin, runs the plugins,
    /// answers in Claude Code's JSON. See `palisade install claude-code`.
    ClaudeCode(BridgeArgs),
    /// Codex's hook command: as `claude-code`, in Codex's dialect.
    Codex(BridgeArgs),
    /// A long-running HTTP hook server: warm plugin instances, one Palisade session per agent
    /// session (per-session plugin state lasts across events). Reload with SIGHUP or --watch.
    Serve(ServeArgs),
    /// A command hook that forwards its event (stdin) to `palisade serve` at URL and answers
    /// what the server answered: for events an agent sends only to command hooks.
    Forward {
        /// The server's endpoint, e.g. http://127.0.0.1:8719/claude-code.
        url: String,
        /// The file holding the server's bearer token [default: the one `palisade serve`
        /// uses, ~/.config/palisade/serve-token].
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        /// The event's budget in milliseconds: past it, the event gets its fail-closed answer.
        #[arg(long, default_value_t = bridge::DEFAULT_BUDGET_MS, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
        budget_ms: u64,
    },
    /// Register Palisade as an agent's hook command.
    #[command(subcommand)]
    Install(Install),
}

#[derive(clap::Args)]
struct BridgeArgs {
    /// The plugin directory.
    dir: PathBuf,
    /// Append every lifecycle event to this JSONL audit log.
    #[arg(long)]
    audit_log: Option<PathBuf>,
    /// Print the time spent loading and dispatching on stderr.
    #[arg(long)]
    timings: bool,
    /// The event's budget in milliseconds: reading it, loading the plugins and every
    /// foreground hook. When it runs out, the event gets its fail-closed answer.
    #[arg(long, default_value_t = bridge::DEFAULT_BUDGET_MS, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    budget_ms: u64,
}

#[derive(Args)]
struct ServeArgs {
    /// The plugin directory.
    #[arg(long)]
    plugins: PathBuf,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1:8719")]
    listen: std::net::SocketAddr,
    /// The file holding the bearer token every request must send (`Authorization: Bearer
    /// ...`); created with a random token when missing, and refused if others can read it
    /// [default: $XDG_CONFIG_HOME/palisade/serve-token, else ~/.config/palisade/serve-token].
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Seconds a session may stay idle before it is evicted.
    #[arg(long, default_value_t = 1800.0)]
    idle_timeout: f64,
    /// Live sessions at most; beyond it, the least recently used idle one is evicted.
    #[arg(long, default_value_t = 1024)]
    max_sessions: usize,
    /// Requests handled at once; others wait up to 5 s, then get 503.
    #[arg(long, default_value_t = 64)]
    max_concurrency: usize,
    /// Largest request body, in bytes (a hook event); larger gets 413.
    #[arg(long, default_value_t = palisade::DEFAULT_PAYLOAD_MAX_BYTES)]
    payload_max_bytes: usize,
    /// Open connections at most; more are closed as they arrive.
    #[arg(long, default_value_t = 256)]
    max_connections: usize,
    /// Seconds a client may take to send a request's headers, and then its body (and a
    /// kept-alive connection may sit idle): a slow client cannot hold a connection.
    #[arg(long, default_value_t = 10.0)]
    read_timeout: f64,
    /// Reload when the plugin directory changes (as on SIGHUP).
    #[arg(long)]
    watch: bool,
    /// Append lifecycle events to this JSONL audit log.
    #[arg(long)]
    audit_log: Option<PathBuf>,
}

impl ServeArgs {
    fn into_options(self) -> anyhow::Result<serve::Options> {
        let token_file = token::path_or_default(self.token_file.as_deref())?;
        let (token, created) = token::ensure(&token_file)?;
        if !(self.idle_timeout > 0.0 && self.idle_timeout.is_finite()) {
            anyhow::bail!("--idle-timeout must be a positive number of seconds");
        }
        let read_timeout = std::time::Duration::try_from_secs_f64(self.read_timeout)
            .ok()
            .filter(|t| !t.is_zero())
            .ok_or_else(|| {
                anyhow::anyhow!("--read-timeout must be a positive number of seconds")
            })?;
        Ok(serve::Options {
            plugins: self.plugins,
            listen: self.listen,
            token,
            token_file,
            token_created: created,
            idle_timeout: std::time::Duration::try_from_secs_f64(self.idle_timeout)?,
            read_timeout,
            max_sessions: self.max_sessions.max(1),
            max_concurrency: self.max_concurrency.max(1),
            payload_max_bytes: self.payload_max_bytes.max(1),
            max_connections: self.max_connections.max(1),
            watch: self.watch,
            audit_log: self.audit_log,
        })
    }
}

#[derive(Subcommand)]
enum Install {
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
        /// Install http hooks that POST to `palisade serve` at this base URL
        /// (e.g. http://127.0.0.1:8719) instead of a command per event.
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

/// The compiled-component cache: `$PALISADE_CACHE_DIR`, else `$XDG_CACHE_HOME/palisade`, else
/// `~/.cache/palisade`; `None` when `PALISADE_CACHE_DIR=off` (or there is no home).
pub fn cache_dir() -> Option<PathBuf> {
    match std::env::var_os("PALISADE_CACHE_DIR") {
        Some(dir) if dir == "off" => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => match (std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
            (Some(cache), _) => Some(PathBuf::from(cache).join("palisade")),
            (None, Some(home)) => Some(PathBuf::from(home).join(".cache/palisade")),
            (None, None) => None,
        },
    }
}

/// A host builder with the compiled-component cache of [`cache_dir`], that shows progress
/// while components compile.
pub fn host_builder() -> palisade::HostBuilder {
    quiet_host_builder().on_compile(progress::observer())
}

/// [`host_builder`] without progress: for the bridges, whose stderr belongs to the agent.
pub fn quiet_host_builder() -> palisade::HostBuilder {
    let builder = palisade::Host::builder();
    match cache_dir() {
        Some(dir) => builder.cache_dir(dir),
        None => builder,
    }
}

impl From<BridgeArgs> for bridge::Options {
    fn from(args: BridgeArgs) -> Self {
        bridge::Options {
            dir: args.dir,
            audit_log: args.audit_log,
            timings: args.timings,
            budget: std::time::Duration::from_millis(args.budget_ms),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A bridge run serves one event and exits: one thread is enough, and starting workers
    // would only add to the agent's wait.
    let mut builder = match cli.command {
        Command::ClaudeCode(_) | Command::Codex(_) | Command::Forward { .. } => {
            tokio::runtime::Builder::new_current_thread()
        }
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Check { dir } => check::check(&dir),
            Command::Run {
                dir,
                point,
                input,
                events,
            } => run::run(&dir, &point, &input, events).await,
            Command::Replay {
                dir,
                session,
                format,
                approve,
            } => replay::replay(&dir, &session, format, approve).await,
            Command::Demo => demo::demo().await,
            Command::Test { dir, cases } => cases::test(&dir, &cases).await,
            Command::New { path, lang } => new::new(&path, lang).map(|()| ExitCode::SUCCESS),
            Command::ClaudeCode(args) => {
                bridge::bridge(palisade::bridge::Dialect::ClaudeCode, args.into()).await
            }
            Command::Codex(args) => {
                bridge::bridge(palisade::bridge::Dialect::Codex, args.into()).await
            }
            Command::Install(Install::ClaudeCode {
                dir,
                settings,
                audit_log,
                serve,
                token_file,
            }) => match (dir, serve) {
                (_, Some(url)) => bridge::install_claude_code_serve(
                    &url,
                    settings.as_deref(),
                    token_file.as_deref(),
                ),
                (Some(dir), None) => {
                    bridge::install_claude_code(&dir, settings.as_deref(), audit_log.as_deref())
                }
                (None, None) => Err(anyhow::anyhow!("name the plugin directory, or --serve URL")),
            },
            Command::Serve(args) => serve::serve(args.into_options()?).await,
            Command::Forward {
                url,
                token_file,
                budget_ms,
            } => {
                bridge::forward(
                    &url,
                    token_file.as_deref(),
                    std::time::Duration::from_millis(budget_ms),
                )
                .await
            }
            Command::Install(Install::Codex { dir, audit_log }) => {
                bridge::install_codex(&dir, audit_log.as_deref())
            }
        }
    });
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {}", output::indented(&format!("{err:#}")));
            ExitCode::FAILURE
        }
    }
}
