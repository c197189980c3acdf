//! `path-guard` in Rust. The same plugin is written in Python, JavaScript and C beside this
//! one (`example-plugins/languages/`), and `cases.jsonl` there expects the same decisions of
//! all four.
//!
//! Every string of a tool call's arguments (keys and values) is checked against the patterns
//! of `[config]` (plain substrings): strings that contain an `except` pattern are skipped; the
//! first `deny` pattern (in the order of the list) that a remaining string contains denies the
//! call (`protected-path`); failing that, the first `ask` pattern found asks the user.

use palisade_sdk::{Config, Deny, Plugin, PreTool, PreToolDecision, Prepare, ToolCall, export};
use serde_json::{Value, json};

/// Every string of `value`, keys included.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(fields) => {
            for (key, v) in fields {
                out.push(key.clone());
                strings(v, out);
            }
        }
        _ => {}
    }
}

/// The first pattern of `patterns` that one of `strings` contains.
fn found<'a>(patterns: &'a [String], strings: &[&String]) -> Option<&'a str> {
    patterns
        .iter()
        .map(String::as_str)
        .find(|p| !p.is_empty() && strings.iter().any(|s| s.contains(p)))
}

/// `[config]`: the phrases that deny, that ask, and that exempt a string from both.
struct PathGuard {
    deny: Vec<String>,
    ask: Vec<String>,
    except: Vec<String>,
}

impl Plugin for PathGuard {
    fn new(config: &Config) -> Self {
        PathGuard {
            deny: config.get("deny").unwrap_or_default(),
            ask: config.get("ask").unwrap_or_default(),
            except: config.get("except").unwrap_or_default(),
        }
    }
}

impl PreTool for PathGuard {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        let PathGuard { deny, ask, except } = self;
        let mut all = Vec::new();
        strings(&call.args(), &mut all);
        let checked: Vec<&String> = all
            .iter()
            .filter(|s| {
                !except
                    .iter()
                    .any(|e| !e.is_empty() && s.contains(e.as_str()))
            })
            .collect();
        if let Some(pattern) = found(deny, &checked) {
            return PreToolDecision::Deny(
                Deny::new(
                    "protected-path",
                    format!(
                        "Refused: {} would touch a protected path (\"{pattern}\"). Work without \
                         it, or ask the user to change path-guard's deny list.",
                        call.name
                    ),
                )
                .with_payload(&json!({ "pattern": pattern })),
            );
        }
        if let Some(pattern) = found(ask, &checked) {
            return PreToolDecision::ask(format!(
                "{} would touch \"{pattern}\"; allow it?",
                call.name
            ));
        }
        PreToolDecision::Allow
    }
}

// `Prepare`: the lists are read from [config] (`Plugin::new`) before the instance's first
// call — for a per-call instance, on the one made ahead of its call — not in the call.
impl Prepare for PathGuard {}

export!(PathGuard: PreTool + Prepare);
