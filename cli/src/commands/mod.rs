//! One module per command of `palisade`, each a `…Command` (its arguments) with `execute`.
//!
//! - Authoring: [`new`], [`check`], [`test`], [`run`], [`replay`], [`demo`].
//! - Agents: [`acp`] (an Agent Client Protocol proxy in front of an ACP agent), [`mcp`] (a
//!   Model Context Protocol proxy in front of an MCP server), [`bridge`] (`claude-code`,
//!   `codex`, `gemini`: a hook command per event), [`serve`] (a
//!   long-running hook server), [`forward`] (a hook command that hands its event to
//!   `serve`), [`install`] (registers one of them in an agent's settings).

pub mod acp;
pub mod bridge;
pub mod check;
pub mod demo;
pub mod diff;
pub mod forward;
pub mod install;
pub mod logs;
pub mod mcp;
pub mod new;
pub mod replay;
pub mod run;
pub mod serve;
pub mod test;

use palisade::bridge::Dialect;

/// A subcommand per agent of [`Dialect::ALL`], named as the agent (`claude-code`, …), each
/// with the arguments `augment` adds and the help `about` writes for it.
pub fn per_agent(
    command: clap::Command,
    augment: fn(clap::Command) -> clap::Command,
    about: fn(Dialect) -> String,
) -> clap::Command {
    Dialect::ALL.iter().fold(command, |command, &dialect| {
        let sub = augment(clap::Command::new(dialect.name()));
        command.subcommand(sub.about(about(dialect)))
    })
}

/// The agent a [`per_agent`] subcommand names, and its arguments.
pub fn agent_of(matches: &clap::ArgMatches) -> Result<(Dialect, &clap::ArgMatches), clap::Error> {
    let Some((name, args)) = matches.subcommand() else {
        return Err(clap::Error::raw(
            clap::error::ErrorKind::MissingSubcommand,
            "name the agent",
        ));
    };
    match Dialect::from_name(name) {
        Some(dialect) => Ok((dialect, args)),
        None => Err(clap::Error::raw(
            clap::error::ErrorKind::InvalidSubcommand,
            format!("`{name}` is not an agent Palisade speaks to"),
        )),
    }
}
