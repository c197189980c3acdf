//! `palisade`: write, check and test hook plugins; run them for an agent (a hook command per
//! event, or a server); replay recorded sessions through them.
//!
//! Each command is a module of [`commands`]; what they share: the component cache
//! ([`cache`]), a command hook's stdin and answer ([`hook_io`]), the server's token
//! ([`token`]), tables and progress on the terminal ([`output`], [`progress`]).

mod ahead;
mod audit;
mod cache;
mod commands;
mod facts;
mod hook_io;
mod http_front;
mod jsonrpc;
mod metrics;
mod output;
mod progress;
mod said;
mod telemetry;
mod token;

use clap::{Parser, Subcommand};
use commands::acp::AcpCommand;
use commands::bridge::HookCommand;
use commands::check::CheckCommand;
use commands::demo::DemoCommand;
use commands::diff::DiffCommand;
use commands::forward::ForwardCommand;
use commands::install::InstallCommand;
use commands::logs::LogsCommand;
use commands::mcp::McpCommand;
use commands::new::NewCommand;
use commands::replay::ReplayCommand;
use commands::run::RunCommand;
use commands::serve::ServeCommand;
use commands::test::TestCommand;
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
    Check(CheckCommand),
    Run(RunCommand),
    Replay(ReplayCommand),
    Diff(DiffCommand),
    Logs(LogsCommand),
    Demo(DemoCommand),
    Test(TestCommand),
    New(NewCommand),
    /// Each agent's hook command (`palisade claude-code DIR`, …).
    #[command(flatten)]
    Hook(HookCommand),
    Serve(ServeCommand),
    /// An Agent Client Protocol proxy: an editor starts it as its agent; it starts the real
    /// agent (after `--`; without it, it is one proxy of a conductor chain) and runs the
    /// plugins on prompts, permission requests and the tools the agent asks the editor to run.
    Acp(AcpCommand),
    /// A Model Context Protocol proxy: a client starts it as an MCP server; it starts the
    /// real server (after `--`) and runs every `tools/call` through the plugins' tool
    /// pipeline.
    Mcp(McpCommand),
    /// A command hook that forwards its event (stdin) to `palisade serve` at URL and answers
    /// what the server answered: for events an agent sends only to command hooks.
    Forward(ForwardCommand),
    #[command(subcommand)]
    Install(InstallCommand),
}

impl Command {
    async fn execute(self) -> anyhow::Result<ExitCode> {
        match self {
            Command::Check(c) => c.execute(),
            Command::Run(c) => c.execute().await,
            Command::Replay(c) => c.execute().await,
            Command::Diff(c) => c.execute().await,
            Command::Logs(c) => c.execute().await,
            Command::Demo(c) => c.execute().await,
            Command::Test(c) => c.execute().await,
            Command::New(c) => c.execute(),
            Command::Hook(c) => c.execute().await,
            Command::Serve(c) => c.execute().await,
            Command::Acp(c) => c.execute().await,
            Command::Mcp(c) => c.execute().await,
            Command::Forward(c) => c.execute().await,
            Command::Install(c) => c.execute(),
        }
    }
}

/// When the reader of standard output goes away (`palisade replay … | head`), the process stops
/// quietly with the status of a process killed by SIGPIPE, as a Unix tool does, instead of
/// panicking at the next line it prints (Rust ignores SIGPIPE, so a write fails instead).
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info.payload_as_str().unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            audit::flush(audit::EXIT_FLUSH);
            telemetry::shutdown();
            std::process::exit(141);
        }
        default(info)
    }));
}

/// The static build's allocator (`scripts/install-static.sh`): musl's own takes one lock for
/// every thread's allocations and gives pages back eagerly, which slows loading plugins.
/// mimalloc, built without transparent huge pages: a hook process lives milliseconds, and
/// zeroing huge pages for it costs more than the event.
#[cfg(target_env = "musl")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    quiet_on_broken_pipe();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let mut cli = Cli::parse_from(args);
    // A hook command: the signals its agent ends it with wait for its event, which says
    // whether they end it (before any thread starts: threads inherit the mask).
    if let Command::Hook(_) | Command::Forward(_) = &cli.command {
        hook_io::hold_the_agents_signals();
    }
    // The commands that serve an agent export their lifecycle when OTEL_* says so; the
    // others (replay, diff, test, …) rehearse, and export nothing.
    match &cli.command {
        Command::Hook(_) => telemetry::init(true),
        Command::Serve(_) | Command::Acp(_) | Command::Mcp(_) | Command::Run(_) => {
            telemetry::init(false)
        }
        _ => {}
    }
    // A hook command's host is finished on that thread from here, while the runtime is built.
    if let Command::Hook(hook) = &mut cli.command {
        hook.begin();
    }
    // A hook command serves one event and exits: one thread is enough, and starting workers
    // would only add to the agent's wait. The stdio MCP proxy serves one client, whose calls
    // cost fewer hops between threads on one.
    let mut builder = match &cli.command {
        Command::Hook(_) | Command::Forward(_) => tokio::runtime::Builder::new_current_thread(),
        Command::Mcp(mcp) if mcp.over_stdio() => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(cli.command.execute()) {
        Ok(code) => code,
        Err(err) => {
            // What the command said before the error, then the error.
            said::flush(audit::EXIT_FLUSH);
            eprintln!("error: {}", output::indented(&format!("{err:#}")));
            ExitCode::FAILURE
        }
    };
    audit::flush(audit::EXIT_FLUSH);
    said::flush(audit::EXIT_FLUSH);
    telemetry::shutdown();
    code
}
