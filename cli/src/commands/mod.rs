//! One module per command of `palisade`, each a `…Command` (its arguments) with `execute`.
//!
//! - Authoring: [`new`], [`check`], [`test`](mod@test), [`run`], [`replay`], [`demo`].
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

use clap::{Args, FromArgMatches};
use palisade::bridge::Dialect;

/// The arguments of a command that has a subcommand per agent ([`PerAgent`]), and its help
/// for each.
pub trait AgentArgs: Args + FromArgMatches {
    /// The help of the subcommand for `dialect`.
    fn about(dialect: Dialect) -> String;
}

/// A subcommand per agent of [`Dialect::ALL`], named as the agent (`claude-code`, …), each
/// with `T`'s arguments: which one was given, and its arguments.
#[derive(Debug)]
pub struct PerAgent<T> {
    /// The agent the subcommand names.
    pub dialect: Dialect,
    /// Its arguments.
    pub args: T,
}

impl<T: AgentArgs> FromArgMatches for PerAgent<T> {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        let Some((name, args)) = matches.subcommand() else {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::MissingSubcommand,
                "name the agent",
            ));
        };
        let Some(dialect) = Dialect::from_name(name) else {
            return Err(clap::Error::raw(
                clap::error::ErrorKind::InvalidSubcommand,
                format!("`{name}` is not an agent Palisade speaks to"),
            ));
        };
        let args = T::from_arg_matches(args)?;
        Ok(PerAgent { dialect, args })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = PerAgent::from_arg_matches(matches)?;
        Ok(())
    }
}

impl<T: AgentArgs> clap::Subcommand for PerAgent<T> {
    fn augment_subcommands(command: clap::Command) -> clap::Command {
        Dialect::ALL.iter().fold(command, |command, &dialect| {
            let sub = T::augment_args(clap::Command::new(dialect.name()));
            command.subcommand(sub.about(T::about(dialect)))
        })
    }

    fn augment_subcommands_for_update(command: clap::Command) -> clap::Command {
        PerAgent::<T>::augment_subcommands(command)
    }

    fn has_subcommand(name: &str) -> bool {
        Dialect::from_name(name).is_some()
    }
}
