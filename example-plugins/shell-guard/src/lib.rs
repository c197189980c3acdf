//! `shell-guard`: denies destructive shell commands and allows everything else.
//!
//! Built-in rules (each can be disabled by its code in `[config] disable`): deleting the
//! filesystem root or the home directory, formatting a disk, `dd` onto a disk device, fork
//! bombs, piping a download into a shell, force-pushing to `main`/`master`. Operators add
//! their own rules in `[config] extra_rules`.

use palisade_sdk::{Config, Plugin, PreTool, PreToolDecision, ToolCall, export, log};
use regex_lite::Regex;
use serde::Deserialize;

/// One rule: a regular expression over the whole command, and what to tell the model.
#[derive(Deserialize)]
struct Rule {
    code: String,
    pattern: String,
    message: String,
}

const BUILT_IN: &[(&str, &str, &str)] = &[
    (
        "destructive-delete",
        r"\brm\s+(-\S+\s+)*(--\s+)?(/|/\*|~|~/|~/\*|\$HOME/?|\$\{HOME\}/?)(\s|$|[;&|])",
        "Refused: this deletes the filesystem root or the home directory. Delete the specific \
         path you mean instead (for example `rm -rf ./build`).",
    ),
    (
        "disk-format",
        r"\bmkfs(\.\w+)?\b",
        "Refused: formatting a filesystem destroys a disk. Ask the user to do this by hand if \
         it is really needed.",
    ),
    (
        "raw-disk-write",
        r"\bdd\b.*\bof=/dev/(sd|hd|vd|xvd|nvme|mmcblk|disk)",
        "Refused: `dd` onto a disk device overwrites the disk. Write to a regular file instead.",
    ),
    (
        "fork-bomb",
        r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:",
        "Refused: this is a fork bomb; it would exhaust the machine.",
    ),
    (
        "pipe-to-shell",
        r"\b(curl|wget)\b[^|]*\|\s*(sudo\s+)?(ba|z|da|k|fi)?sh\b",
        "Refused: piping a download straight into a shell runs unreviewed code. Download the \
         script to a file, show it, and run it only after review.",
    ),
    (
        "force-push-main",
        r"\bgit\s+push\b(.*\s)?(--force\S*|-f)(\s.*)?\s\+?(main|master)\b|\bgit\s+push\b.*\s\+?(main|master)\b.*\s(--force\S*|-f)\b|\bgit\s+push\b.*\s\+(main|master)\b",
        "Refused: force-pushing to main/master rewrites shared history. Push to a branch and \
         open a pull request instead.",
    ),
];

struct Compiled {
    code: String,
    re: Regex,
    message: String,
}

/// The rules in force: the built-in ones not disabled, then the operator's, compiled.
fn rules(config: &Config) -> Vec<Compiled> {
    let disabled: Vec<String> = config.get("disable").unwrap_or_default();
    let extra: Vec<Rule> = config.get("extra_rules").unwrap_or_default();
    BUILT_IN
        .iter()
        .map(|(code, pattern, message)| Rule {
            code: code.to_string(),
            pattern: pattern.to_string(),
            message: message.to_string(),
        })
        .filter(|rule| !disabled.contains(&rule.code))
        .chain(extra)
        .filter_map(|rule| match Regex::new(&rule.pattern) {
            Ok(re) => Some(Compiled {
                code: rule.code,
                re,
                message: rule.message,
            }),
            Err(err) => {
                log::error(&format!(
                    "rule `{}` has an invalid pattern: {err}",
                    rule.code
                ));
                None
            }
        })
        .collect()
}

/// The shell command of a call: `command` (Claude Code's Bash) or `cmd` (Codex), as a
/// string or an argv array.
fn command_of(call: &ToolCall) -> Option<String> {
    let args = call.args();
    let value = args.get("command").or_else(|| args.get("cmd"))?;
    match value {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.as_str())
                .collect::<Vec<_>>()
                .join(" "),
        ),
        _ => None,
    }
}

struct ShellGuard {
    /// Compiled once per instance, from the plugin's `[config]`.
    rules: Vec<Compiled>,
}

impl Plugin for ShellGuard {
    fn new(config: &Config) -> Self {
        ShellGuard {
            rules: rules(config),
        }
    }
}

impl PreTool for ShellGuard {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        let Some(command) = command_of(&call) else {
            return PreToolDecision::Allow;
        };
        match self.rules.iter().find(|rule| rule.re.is_match(&command)) {
            Some(rule) => PreToolDecision::deny(rule.code.clone(), rule.message.clone()),
            None => PreToolDecision::Allow,
        }
    }
}

export!(ShellGuard: PreTool);
