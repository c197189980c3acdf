//! The recorded session file: one JSON event per line, read into [`Recorded`] events, one
//! list per session.

use anyhow::Context as _;
use palisade::{SessionSource, ToolCall, ToolOutcome};
use serde::Deserialize;
use std::path::Path;

/// One recorded event.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case", deny_unknown_fields)]
pub(crate) enum Recorded {
    SessionStart {
        source: SessionSource,
    },
    Prompt {
        turn: u32,
        text: String,
    },
    ToolCall {
        call: ToolCall,
        result: ToolOutcome,
        /// The agent that ran the tool (`claude-code`, `codex`, `gemini`), for a recording a
        /// bridge made: its protocol decides what of post-tool's answer it could apply.
        #[serde(default)]
        agent: Option<String>,
    },
    Stop {
        turn: u32,
        #[serde(default)]
        step: u32,
        #[serde(default)]
        last_assistant_message: Option<String>,
    },
    SessionEnd {
        reason: String,
    },
}

/// The sessions of a recording (JSON Lines; blank and `//` lines skipped), each with its id:
/// either session events (one session, its id the file's name: its facts' ids are its own,
/// and the same in every replay of it), or an audit log a bridge wrote with `--record` — its
/// `agent_event` lines, by session, made into session events
/// ([`palisade::bridge::session_events`]); its lifecycle events are skipped.
pub(crate) fn sessions(text: &str, name: &str) -> anyhow::Result<Vec<(String, Vec<Recorded>)>> {
    const LIFECYCLE: [&str; 7] = [
        "hook_started",
        "hook_completed",
        "hook_failed",
        "hook_denied",
        "hook_shadowed",
        "hook_not_applied",
        "plugin_log",
    ];
    let mut recorded = Vec::new();
    let mut agent: Vec<(String, Vec<(palisade::bridge::Dialect, serde_json::Value)>)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.trim_start().starts_with("//") {
            continue;
        }
        let at = || format!("{name}:{}", i + 1);
        let value: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}: not JSON (see `palisade replay --help`)", at()))?;
        let kind = value["event"].as_str().unwrap_or_default();
        if LIFECYCLE.contains(&kind) {
            continue;
        }
        if kind == "agent_event" {
            let dialect = value["dialect"]
                .as_str()
                .and_then(palisade::bridge::Dialect::from_name)
                .with_context(|| {
                    format!("{}: an agent_event names no dialect palisade knows", at())
                })?;
            let session = value["input"]["session_id"]
                .as_str()
                .unwrap_or("unknown-session")
                .to_string();
            let input = value["input"].clone();
            match agent.iter_mut().find(|(id, _)| *id == session) {
                Some((_, events)) => events.push((dialect, input)),
                None => agent.push((session, vec![(dialect, input)])),
            }
            continue;
        }
        let event: Recorded = serde_json::from_value(value).with_context(|| {
            format!(
                "{}: not a session event (see `palisade replay --help`)",
                at()
            )
        })?;
        recorded.push(event);
    }
    if !agent.is_empty() {
        if !recorded.is_empty() {
            anyhow::bail!(
                "{name} mixes session events and recorded agent events: keep them in files of \
                 their own"
            );
        }
        return agent
            .into_iter()
            .map(|(id, events)| {
                let recorded = palisade::bridge::session_events(&events)
                    .into_iter()
                    .map(serde_json::from_value)
                    .collect::<Result<Vec<Recorded>, _>>()
                    .with_context(|| format!("{name}: session {id}"))?;
                Ok((id, recorded))
            })
            .collect();
    }
    let id = Path::new(name).file_stem().map_or_else(
        || "replay".to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    Ok(vec![(id, recorded)])
}
