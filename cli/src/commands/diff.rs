//! `palisade diff OLD_DIR NEW_DIR SESSION.jsonl…`: every recorded session through both plugin
//! sets, and every event whose outcome differs.
//!
//! Each session is replayed as `palisade replay` replays it (state empty, asks answered by
//! `--approve`), once through each set. An event differs when its outcome (allow, DENY,
//! REJECT, BLOCK, STEER, …), the hook that decided it, its reason, or what it carried (the tool
//! result after post-tool, the prompt's messages and contexts, the steering) differs. A change
//! is one of:
//!
//! - `loosened`: the old set refused (DENY, REJECT, BLOCK) and the new one lets it through;
//! - `tightened`: the old set let it through and the new one refuses;
//! - `changed`: anything else (another hook or reason, other content, steering, contexts).
//!
//! The exit status is 1 when a change of a `--fail-on` class appears (default: `loosened`,
//! so that CI stops a policy change that lets through what the old policy refused), 0
//! otherwise; 2 when a session cannot be read or a set cannot load.

use super::replay::{self, Approve, Step};
use crate::output::printable;
use anyhow::Context as _;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

/// Compare two plugin sets over recorded sessions: every event whose outcome differs.
#[derive(clap::Args)]
pub struct DiffCommand {
    /// The plugin directory in force.
    old: PathBuf,
    /// The plugin directory proposed.
    new: PathBuf,
    /// Recorded sessions: the JSONL `palisade replay` reads, or audit logs a bridge wrote
    /// with `--record` (each session in it replayed).
    #[arg(required = true)]
    sessions: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// How asks are answered, in both replays.
    #[arg(long, value_enum, default_value_t = Approve::Never)]
    approve: Approve,
    /// The classes of change that make the exit status 1 (repeatable; `none`: never).
    #[arg(long = "fail-on", value_enum, default_values_t = [FailOn::Loosened])]
    fail_on: Vec<FailOn>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// The changes, then the counts by hook and reason.
    Text,
    /// One JSON document.
    Json,
}

/// A class of change.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum FailOn {
    /// What the old set refused, the new one lets through.
    Loosened,
    /// What the old set let through, the new one refuses.
    Tightened,
    /// Another decider, reason or content.
    Changed,
    /// Any change.
    Any,
    /// Never fail.
    None,
}

/// One event whose outcome differs.
#[derive(Serialize)]
struct Change {
    session: String,
    index: usize,
    event: String,
    subject: String,
    kind: FailOn,
    old: Side,
    new: Side,
}

/// An event's outcome through one plugin set.
#[derive(Serialize, PartialEq)]
struct Side {
    outcome: String,
    by: Option<String>,
    reason: Option<String>,
    detail: String,
}

impl Side {
    fn of(step: &Step) -> Side {
        Side {
            outcome: step.outcome.clone(),
            by: step.by.clone(),
            reason: step.reason.clone(),
            detail: step.detail.clone(),
        }
    }

    fn refused(&self) -> bool {
        matches!(self.outcome.as_str(), "DENY" | "REJECT" | "BLOCK")
    }

    /// The reason code of a refusal (`code: message` in the timeline), else the reason.
    fn reason_code(&self) -> String {
        let reason = self.reason.clone().unwrap_or_default();
        match reason.split_once(": ") {
            Some((code, _)) if !code.contains(' ') => code.to_string(),
            _ => reason,
        }
    }

    /// The outcome, its hook and its reason as one line, every part made printable.
    fn summary(&self) -> String {
        let mut text = printable(&self.outcome).into_owned();
        if let Some(by) = &self.by {
            text.push_str(&format!(" by {}", printable(by)));
        }
        if let Some(reason) = &self.reason {
            text.push_str(&format!(" ({})", crate::output::clip(reason, 60)));
        }
        text
    }
}

impl DiffCommand {
    /// Replays every session through both sets and prints what differs. A session that
    /// cannot be read or a set that cannot load exits 2, never 0 or 1: a gate that cannot
    /// decide does not pass, and is not taken for a change found.
    pub async fn execute(self) -> anyhow::Result<ExitCode> {
        match self.compare().await {
            Ok(code) => Ok(code),
            Err(err) => {
                eprintln!("error: {}", crate::output::indented(&format!("{err:#}")));
                Ok(ExitCode::from(2))
            }
        }
    }

    async fn compare(self) -> anyhow::Result<ExitCode> {
        let mut changes = Vec::new();
        let mut events = 0;
        let mut replayed = 0;
        for session in &self.sessions {
            let text = std::fs::read_to_string(session)
                .with_context(|| format!("cannot read the session {}", session.display()))?;
            let file = session.display().to_string();
            let recorded = replay::sessions(&text, &file)?;
            let several = recorded.len() > 1;
            for (id, recorded) in recorded {
                // One session per file is named by the file; several (an audit log) by file and id.
                let name = if several {
                    format!("{file}#{id}")
                } else {
                    file.clone()
                };
                let old = replay::steps(&self.old, &id, recorded.clone(), self.approve)
                    .await
                    .with_context(|| format!("replaying {name} through {}", self.old.display()))?;
                let new = replay::steps(&self.new, &id, recorded, self.approve)
                    .await
                    .with_context(|| format!("replaying {name} through {}", self.new.display()))?;
                events += old.len();
                replayed += 1;
                for (before, after) in old.iter().zip(&new) {
                    let (old_side, new_side) = (Side::of(before), Side::of(after));
                    if old_side == new_side {
                        continue;
                    }
                    let kind = match (old_side.refused(), new_side.refused()) {
                        (true, false) => FailOn::Loosened,
                        (false, true) => FailOn::Tightened,
                        _ => FailOn::Changed,
                    };
                    changes.push(Change {
                        session: name.clone(),
                        index: before.index,
                        event: before.event.clone(),
                        subject: before.subject.clone(),
                        kind,
                        old: old_side,
                        new: new_side,
                    });
                }
            }
        }
        let groups = groups(&changes);
        match self.format {
            Format::Json => {
                let doc = serde_json::json!({
                    "sessions": replayed,
                    "events": events,
                    "changes": changes,
                    "groups": groups,
                });
                let doc = serde_json::to_string_pretty(&doc)?;
                println!("{}", crate::output::json_printable(&doc));
            }
            Format::Text => print_text(replayed, events, &changes, &groups),
        }
        let fails = changes.iter().any(|c| {
            self.fail_on
                .iter()
                .any(|f| *f == FailOn::Any || *f == c.kind)
        });
        Ok(if fails {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
    }
}

/// The changes counted by class, hook and reason code: the hook and reason that decide the
/// new outcome, or the old one's when the new set lets it through.
#[derive(Serialize)]
struct Group {
    kind: FailOn,
    hook: String,
    reason_code: String,
    count: usize,
}

fn groups(changes: &[Change]) -> Vec<Group> {
    let mut counts: BTreeMap<(FailOn, String, String), usize> = BTreeMap::new();
    for change in changes {
        let side = if change.new.by.is_some() || change.old.by.is_none() {
            &change.new
        } else {
            &change.old
        };
        let hook = side.by.clone().unwrap_or_else(|| "-".into());
        *counts
            .entry((change.kind, hook, side.reason_code()))
            .or_default() += 1;
    }
    counts
        .into_iter()
        .map(|((kind, hook, reason_code), count)| Group {
            kind,
            hook,
            reason_code,
            count,
        })
        .collect()
}

fn kind_name(kind: FailOn) -> &'static str {
    match kind {
        FailOn::Loosened => "loosened",
        FailOn::Tightened => "tightened",
        FailOn::Changed => "changed",
        FailOn::Any => "any",
        FailOn::None => "none",
    }
}

fn print_text(sessions: usize, events: usize, changes: &[Change], groups: &[Group]) {
    println!(
        "{} of {events} event(s) in {sessions} session(s) differ",
        changes.len()
    );
    if changes.is_empty() {
        return;
    }
    println!();
    // A recorded session names its file, its session ids and its events: printed escaped, so
    // that none of them can restyle the terminal or start a line of its own.
    for change in changes {
        println!(
            "{}:{} {} {}: {} -> {} [{}]",
            printable(&change.session),
            change.index,
            printable(&change.event),
            crate::output::clip(&change.subject, 50),
            change.old.summary(),
            change.new.summary(),
            kind_name(change.kind)
        );
        if change.old.outcome == change.new.outcome && change.old.detail != change.new.detail {
            println!(
                "    was: {}\n    now: {}",
                crate::output::clip(&change.old.detail, 100),
                crate::output::clip(&change.new.detail, 100)
            );
        }
    }
    println!();
    let mut rows = vec![
        ["CHANGE", "HOOK", "REASON", "EVENTS"]
            .map(String::from)
            .to_vec(),
    ];
    for group in groups {
        rows.push(vec![
            kind_name(group.kind).to_string(),
            group.hook.clone(),
            if group.reason_code.is_empty() {
                "-".to_string()
            } else {
                group.reason_code.clone()
            },
            group.count.to_string(),
        ]);
    }
    print!("{}", crate::output::table(&rows));
}
