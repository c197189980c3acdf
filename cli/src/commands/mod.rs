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
