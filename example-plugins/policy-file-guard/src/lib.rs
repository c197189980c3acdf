//! `policy-file-guard`: denies shell commands that contain a phrase of a deny list the security
//! team maintains outside the plugin — `/policy/deny.txt`, one phrase per line (`#` comments),
//! in a folder the manifest grants read-only (`files`). The list is read at every call, so an
//! edit takes effect at once, with no reload; a list that cannot be read denies (fails
//! closed): a guard without its policy must not allow everything.

use palisade_sdk::{Config, Plugin, PreTool, PreToolDecision, ToolCall, export, log};

/// Where the manifest's `files` grant puts the team's folder.
const DENY_LIST: &str = "/policy/deny.txt";

struct PolicyFileGuard;

impl Plugin for PolicyFileGuard {
    fn new(_config: &Config) -> Self {
        PolicyFileGuard
    }
}

impl PreTool for PolicyFileGuard {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        let list = match std::fs::read_to_string(DENY_LIST) {
            Ok(list) => list,
            Err(err) => {
                return PreToolDecision::deny(
                    "policy-unreadable",
                    format!("Refused: the deny list {DENY_LIST} cannot be read ({err})."),
                );
            }
        };
        let command = call.arguments.clone();
        let hit = list
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.starts_with('#'))
            .find(|phrase| command.contains(phrase));
        match hit {
            Some(phrase) => {
                log::info(&format!("{} matches the deny list: {phrase}", call.name));
                PreToolDecision::deny(
                    "policy-deny-list",
                    format!("Refused by the team's deny list: the command contains `{phrase}`."),
                )
            }
            None => PreToolDecision::Allow,
        }
    }
}

export!(PolicyFileGuard: PreTool);
