//! The durable fact stream ([`palisade::facts`]) from the command line.
//!
//! The commands that serve an agent (`claude-code`, `codex`, `gemini`, `serve`, `mcp`, `acp`)
//! append every committed fact and decision to the stream `PALISADE_FACTS` names: an
//! environment variable, so that it holds for the hook commands an agent runs as for the
//! servers. `palisade logs --facts` and `palisade replay --facts` read it. A stream is a
//! directory (the embedded log) or a Redis URL. Every stream a command opened is flushed
//! before it exits ([`flush`]); a bridged event flushes its own before it answers
//! ([`flush_before_answering`]).

use crate::output::clip;
use anyhow::Context as _;
use palisade::facts::FactStream;
use palisade::facts::{Entry, StoredFact};
use serde_json::json;
use std::sync::OnceLock;
use std::time::Duration;

/// The environment variable naming the stream the serving commands append to.
pub const ENV: &str = "PALISADE_FACTS";
/// Records read at once.
const BATCH: usize = 512;
/// How long `logs --facts --follow` waits for records before it looks again.
const FOLLOW_WAIT: Duration = Duration::from_secs(1);

/// The stream `PALISADE_FACTS` names, opened once for the process (a server's reloads
/// append to the same one), flushed at exit.
static FROM_ENV: OnceLock<Option<FactStream>> = OnceLock::new();

/// The stream `spec` names: a Redis URL (`redis://…`, `rediss://…`, `redis+unix://…`), else
/// the embedded log's directory.
pub fn stream(spec: &str) -> FactStream {
    if crate::cache::is_redis_url(spec) {
        FactStream::redis(spec)
    } else {
        FactStream::embedded(spec)
    }
}

/// The stream `PALISADE_FACTS` names, if it is set.
fn from_env() -> Option<&'static FactStream> {
    FROM_ENV
        .get_or_init(|| {
            let spec = std::env::var(ENV).ok()?;
            let spec = spec.trim();
            (!spec.is_empty()).then(|| stream(spec))
        })
        .as_ref()
}

/// `builder`, appending to the stream `PALISADE_FACTS` names when it is set.
pub fn appending(builder: palisade::HostBuilder) -> palisade::HostBuilder {
    match from_env() {
        Some(stream) => builder.fact_stream(stream.clone()),
        None => builder,
    }
}

/// Waits, `within` at most, until the stream the command appends to (if any, and if it was
/// opened) has acknowledged what it was given.
pub fn flush_before_answering(within: Duration) -> Result<(), palisade::facts::FactStreamError> {
    match FROM_ENV.get() {
        Some(Some(stream)) => stream.flush(within),
        _ => Ok(()),
    }
}

/// [`flush_before_answering`] at exit: says on standard error what a stream did not take.
pub fn flush(within: Duration) {
    if let Err(e) = flush_before_answering(within) {
        eprintln!("palisade: warning: {e}");
    }
}

/// What `palisade logs --facts` keeps.
pub struct Filter {
    pub session: Option<String>,
    /// Matches a decision's hook (or its plugin).
    pub hook: Option<String>,
    /// A fact's kind (`tool-call`, …) or a decision's outcome (`deny`, …).
    pub outcomes: Vec<String>,
    pub since: Option<u64>,
    pub until: Option<u64>,
}

impl Filter {
    fn keeps(&self, stored: &StoredFact) -> bool {
        let record = &stored.record;
        let (kind, hook) = match &record.entry {
            Entry::Fact(fact) => (fact_kind(fact), None),
            Entry::Decision(d) => (d.outcome.clone(), d.hook_id.as_deref()),
            _ => (String::new(), None),
        };
        self.session
            .as_ref()
            .is_none_or(|s| *s == record.session_id)
            && self.hook.as_ref().is_none_or(|h| {
                hook.is_some_and(|hook| hook == h || hook.split('/').next() == Some(h))
            })
            && (self.outcomes.is_empty() || self.outcomes.contains(&kind))
            && self.since.is_none_or(|t| record.at_ms >= t)
            && self.until.is_none_or(|t| record.at_ms < t)
    }
}

/// A committed fact's kind (`tool-call`, `message`, …).
fn fact_kind(fact: &palisade::CommittedFact) -> String {
    serde_json::to_value(fact)
        .ok()
        .and_then(|v| v["kind"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// One record as one readable line: its offset, time, session, interaction id, and what it
/// records.
fn describe(stored: &StoredFact) -> String {
    let record = &stored.record;
    let said = match &record.entry {
        Entry::Fact(fact) => {
            let kind = fact_kind(fact);
            let what = match fact {
                palisade::CommittedFact::Message { message } => message.text.clone(),
                palisade::CommittedFact::ToolCall { call } => {
                    format!("{} {}", call.name, call.arguments)
                }
                palisade::CommittedFact::ToolResult { result } => format!(
                    "{}{}",
                    result.name,
                    if result.outcome.is_error {
                        " (error)"
                    } else {
                        ""
                    }
                ),
                palisade::CommittedFact::LlmResponse { response } => response.text.clone(),
                palisade::CommittedFact::TurnCompleted { outcome } => {
                    format!("{outcome:?}").to_lowercase()
                }
                palisade::CommittedFact::SessionEnded { reason } => reason.clone(),
            };
            format!("fact {kind} {what}")
        }
        Entry::Decision(d) => {
            let mut line = format!("decision {} {}", d.point, d.outcome);
            for part in [&d.hook_id, &d.reason_code, &d.message]
                .into_iter()
                .flatten()
            {
                line.push(' ');
                line.push_str(part);
            }
            line
        }
        _ => String::new(),
    };
    clip(
        &format!(
            "@{} {}.{:03} {} {} {said}",
            stored.offset,
            record.at_ms / 1000,
            record.at_ms % 1000,
            record.session_id,
            record.interaction_id
        ),
        400,
    )
}

/// `palisade logs --facts`: the stream's records from `from` (or, in `group`, where the group
/// left off), one line each (`json`: as JSON), those `filter` keeps; `follow` keeps reading.
/// In a group, each record is acknowledged once printed.
pub async fn logs(
    stream: FactStream,
    from: Option<String>,
    group: Option<(String, String)>,
    follow: bool,
    json: bool,
    filter: Filter,
) -> anyhow::Result<std::process::ExitCode> {
    tokio::task::spawn_blocking(move || {
        let print = |stored: &StoredFact| {
            if !filter.keeps(stored) {
                return;
            }
            if json {
                let line = serde_json::to_string(stored).unwrap_or_default();
                println!("{}", crate::output::json_printable(&line));
            } else {
                println!("{}", describe(stored));
            }
        };
        let wait = if follow { FOLLOW_WAIT } else { Duration::ZERO };
        match group {
            Some((group, consumer)) => {
                let mut reader = stream.consumer(&group, &consumer)?;
                loop {
                    let records = reader.next(BATCH, wait)?;
                    if records.is_empty() && !follow {
                        break;
                    }
                    for stored in &records {
                        print(stored);
                        reader.ack(stored)?;
                    }
                }
            }
            None => {
                let mut at = from.unwrap_or_else(|| "0".into());
                loop {
                    let records = stream.read(&at, BATCH, wait)?;
                    let Some(last) = records.last() else {
                        if follow {
                            continue;
                        }
                        break;
                    };
                    at = last.next.clone();
                    records.iter().for_each(print);
                }
            }
        }
        Ok(std::process::ExitCode::SUCCESS)
    })
    .await?
}

/// The events of session `session` in the stream, from `from` on, as `palisade replay` reads
/// them: its prompts (the first user message of each turn), each tool call with the result
/// committed for it (none when its step denied it: the tool never ran), each completed turn's
/// stop, and its end.
pub fn recorded(
    stream: &FactStream,
    session: &str,
    from: Option<&str>,
) -> anyhow::Result<Vec<crate::commands::replay::Recorded>> {
    let mut events: Vec<serde_json::Value> = Vec::new();
    // The `tool-call` event of each call id, by its place in `events`.
    let mut calls = std::collections::HashMap::new();
    let mut prompted = std::collections::HashSet::new();
    let decided = format!("{session}:tool-decision:");
    let mut at = from.unwrap_or("0").to_string();
    loop {
        let records = stream.read(&at, BATCH, Duration::ZERO)?;
        let Some(last) = records.last() else { break };
        at = last.next.clone();
        for stored in records {
            let record = stored.record;
            if record.session_id != session {
                continue;
            }
            let fact = match record.entry {
                Entry::Fact(fact) => fact,
                Entry::Decision(d) => {
                    // A denied call never ran: its committed result is the denial's, not
                    // the tool's.
                    if let Some(id) = record.interaction_id.strip_prefix(&decided)
                        && d.outcome == "deny"
                    {
                        calls.remove(id);
                    }
                    continue;
                }
                _ => continue,
            };
            match fact {
                palisade::CommittedFact::Message { message }
                    if message.role == palisade::Role::User
                        && record.turn > 0
                        && prompted.insert(record.turn) =>
                {
                    events.push(json!({
                        "event": "prompt", "turn": record.turn, "text": message.text,
                    }));
                }
                palisade::CommittedFact::ToolCall { call } => {
                    calls.insert(call.tool_use_id.clone(), events.len());
                    let result = palisade::ToolOutcome::default();
                    events.push(json!({"event": "tool-call", "call": call, "result": result}));
                }
                palisade::CommittedFact::ToolResult { result } => {
                    if let Some(&at) = calls.get(&result.tool_use_id) {
                        events[at]["result"] = serde_json::to_value(&result.outcome)?;
                    }
                }
                palisade::CommittedFact::TurnCompleted {
                    outcome: palisade::TurnOutcome::Completed,
                } => events.push(json!({"event": "stop", "turn": record.turn})),
                palisade::CommittedFact::SessionEnded { reason } => {
                    events.push(json!({"event": "session-end", "reason": reason}));
                }
                _ => {}
            }
        }
    }
    if events.is_empty() {
        anyhow::bail!(
            "{} holds no record of the session `{session}`{}",
            stream.describe(),
            from.map_or(String::new(), |f| format!(" from offset {f} on"))
        );
    }
    events
        .into_iter()
        .map(serde_json::from_value)
        .collect::<Result<_, _>>()
        .with_context(|| format!("the session `{session}` of {}", stream.describe()))
}
