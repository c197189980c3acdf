//! `palisade logs AUDIT.jsonl`: the decision log as a person reads it.
//!
//! The audit log is what `--audit-log` writes (the bridges, `serve`, `mcp`, `acp`): one
//! lifecycle event per line. This prints the events a filter keeps, one readable line each,
//! or (`--summary`) a table per hook; `--follow` keeps reading what is appended.

use crate::output::{Tally, clip, tally_table};
use anyhow::Context as _;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Read an audit log: filter its events by session, hook, outcome and time, follow it, or
/// summarise it per hook. Or (`--facts`) read the durable fact stream.
#[derive(clap::Args)]
pub struct LogsCommand {
    /// The JSONL audit log (`--audit-log` of the bridges, `serve`, `mcp`, `acp`).
    #[arg(required_unless_present = "facts")]
    log: Option<PathBuf>,
    /// Read the fact stream (what `PALISADE_FACTS` names) instead: the embedded log's
    /// directory, or a Redis URL. One line per record — its offset, time, session,
    /// interaction id, and the fact or decision; `--outcome` takes a fact's kind
    /// (`tool-call`, …) or a decision's outcome (`deny`, …), `--hook` a decision's hook.
    #[arg(long, value_name = "DIR|URL", conflicts_with_all = ["log", "summary"])]
    facts: Option<String>,
    /// With `--facts`: read from this record's offset on (default: the first).
    #[arg(
        long,
        value_name = "OFFSET",
        requires = "facts",
        conflicts_with = "group"
    )]
    from: Option<String>,
    /// With `--facts`: read as this consumer group, from where it left off; each record
    /// printed is acknowledged, so the group is not given it again.
    #[arg(long, value_name = "NAME", requires = "facts")]
    group: Option<String>,
    /// With `--group`: this consumer's name in the group (Redis shares a group's records
    /// among its consumers).
    #[arg(
        long,
        value_name = "NAME",
        requires = "group",
        default_value = "palisade-logs"
    )]
    consumer: String,
    /// With `--facts`: each record as one JSON line (with its `offset` and `next`).
    #[arg(long, requires = "facts")]
    json: bool,
    /// Only this session's events.
    #[arg(long)]
    session: Option<String>,
    /// Only this hook's (`plugin/point`) or plugin's events.
    #[arg(long)]
    hook: Option<String>,
    /// Only events of these outcomes (repeatable): `deny`, `fail`, `fail-closed`, `shadow`,
    /// a completed hook's decision (`allow`, `ask`, `none`, …), `log`, `started`, `not-applied`
    /// (a post-tool decision the agent could not apply), `agent`
    /// (the agent's events a bridge recorded with `--record`), `lost` (the log's own record of
    /// lines it could not take: its reader stopped, or its disk failed).
    #[arg(long)]
    outcome: Vec<String>,
    /// Only events at or after this time: milliseconds since the epoch, or an age (`90s`,
    /// `15m`, `2h`, `7d`).
    #[arg(long)]
    since: Option<String>,
    /// Only events before this time (as `--since`).
    #[arg(long)]
    until: Option<String>,
    /// Keep reading what is appended to the log (until interrupted).
    #[arg(long, short)]
    follow: bool,
    /// A table per hook instead of the events — calls, p50, p95, p99, max, fuel, denials,
    /// failures, shadowed: the table `palisade replay` prints per plugin.
    #[arg(long, conflicts_with = "follow")]
    summary: bool,
}

impl LogsCommand {
    /// Prints the log as asked.
    pub async fn execute(self) -> anyhow::Result<ExitCode> {
        let now = now_ms();
        let since = self
            .since
            .as_deref()
            .map(|t| time(t, now))
            .transpose()
            .context("--since")?;
        let until = self
            .until
            .as_deref()
            .map(|t| time(t, now))
            .transpose()
            .context("--until")?;
        if let Some(facts) = &self.facts {
            let filter = crate::facts::Filter {
                session: self.session.clone(),
                hook: self.hook.clone(),
                outcomes: self.outcome.clone(),
                since,
                until,
            };
            let group = self
                .group
                .clone()
                .map(|group| (group, self.consumer.clone()));
            let stream = crate::facts::stream(facts);
            return crate::facts::logs(stream, self.from, group, self.follow, self.json, filter)
                .await;
        }
        let log = self.log.clone().unwrap_or_default();
        let filter = Filter {
            session: self.session.clone(),
            hook: self.hook.clone(),
            outcomes: self.outcome.clone(),
            since,
            until,
        };
        let file = std::fs::File::open(&log)
            .with_context(|| format!("cannot open the audit log {}", log.display()))?;
        let mut reader = BufReader::new(file);
        let mut stats: BTreeMap<String, Tally> = BTreeMap::new();
        let mut line = String::new();
        let mut number = 0;
        let mut unreadable = 0;
        loop {
            line.clear();
            let read = reader
                .read_line(&mut line)
                .with_context(|| format!("reading {}", log.display()))?;
            if read == 0 || !line.ends_with('\n') {
                if !self.follow {
                    break;
                }
                // A line being written: read it again once it is whole.
                let at = reader.stream_position()? - read as u64;
                tokio::time::sleep(Duration::from_millis(200)).await;
                match std::fs::metadata(&log) {
                    // Another file at the path: the log was rotated; read the new one from
                    // its start.
                    Ok(now) if !same_file(&now, reader.get_ref()) => {
                        reader = BufReader::new(std::fs::File::open(&log).with_context(|| {
                            format!("cannot open the audit log {}", log.display())
                        })?);
                    }
                    // The same file, shorter: truncated; read it again from its start.
                    Ok(now) if now.len() < at => {
                        reader.seek(SeekFrom::Start(0))?;
                    }
                    // The same file, or none yet after a rotation: go on where it was.
                    _ => {
                        reader.seek(SeekFrom::Start(at))?;
                    }
                }
                continue;
            }
            number += 1;
            let Ok(event) = serde_json::from_str::<Value>(&line) else {
                unreadable += 1;
                eprintln!(
                    "{}:{number}: not a lifecycle event (skipped)",
                    crate::output::printable(&log.display().to_string())
                );
                continue;
            };
            if !filter.keeps(&event) {
                continue;
            }
            if self.summary {
                count(stats.entry(str_of(&event, "hook_id")).or_default(), &event);
            } else {
                println!("{}", describe(&event));
            }
        }
        if self.summary {
            stats.retain(|_, t| !t.durations.is_empty());
            print!("{}", tally_table("HOOK", &stats));
        }
        Ok(if unreadable > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
    }
}

/// Whether `path_meta` (what the log's path names now) is the file `open` reads.
fn same_file(path_meta: &std::fs::Metadata, open: &std::fs::File) -> bool {
    use std::os::unix::fs::MetadataExt;
    open.metadata()
        .is_ok_and(|m| m.dev() == path_meta.dev() && m.ino() == path_meta.ino())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A time given as milliseconds since the epoch, or as an age before `now`.
fn time(text: &str, now: u64) -> anyhow::Result<u64> {
    let text = text.trim();
    if let Ok(ms) = text.parse::<u64>() {
        return Ok(ms);
    }
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(0));
    let scale = match unit {
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => anyhow::bail!(
            "`{text}` is neither milliseconds since the epoch nor an age like 90s, 15m, 2h or 7d"
        ),
    };
    let number: u64 = number
        .parse()
        .with_context(|| format!("`{text}`: the age needs a number before its unit"))?;
    Ok(now.saturating_sub(number.saturating_mul(scale)))
}

struct Filter {
    session: Option<String>,
    hook: Option<String>,
    outcomes: Vec<String>,
    since: Option<u64>,
    until: Option<u64>,
}

impl Filter {
    fn keeps(&self, event: &Value) -> bool {
        let at = event["at_ms"].as_u64().unwrap_or(0);
        if event["event"] == "audit_lines_lost" {
            // Lines of any session or hook may be among those lost: whoever reads a part of
            // the log learns that it has a gap.
            return (self.outcomes.is_empty() || self.outcomes.iter().any(|o| o == "lost"))
                && self.since.is_none_or(|t| at >= t)
                && self.until.is_none_or(|t| at < t);
        }
        self.session
            .as_ref()
            .is_none_or(|s| event["session_id"].as_str() == Some(s))
            && self.hook.as_ref().is_none_or(|h| {
                event["hook_id"].as_str() == Some(h) || event["plugin"].as_str() == Some(h)
            })
            && (self.outcomes.is_empty()
                || self
                    .outcomes
                    .iter()
                    .any(|o| outcomes(event).contains(&o.as_str())))
            && self.since.is_none_or(|t| at >= t)
            && self.until.is_none_or(|t| at < t)
    }
}

fn str_of(event: &Value, field: &str) -> String {
    event[field].as_str().unwrap_or("?").to_string()
}

/// The outcomes an event answers to in `--outcome`.
fn outcomes(event: &Value) -> Vec<&str> {
    match event["event"].as_str().unwrap_or_default() {
        "hook_started" => vec!["started"],
        "hook_denied" => vec!["deny"],
        "hook_failed" if event["failed_closed"] == true => vec!["fail", "fail-closed"],
        "hook_failed" => vec!["fail"],
        "hook_shadowed" => vec!["shadow"],
        "hook_not_applied" => vec!["not-applied"],
        "hook_completed" => vec![event["decision"].as_str().unwrap_or("?")],
        "plugin_log" => vec!["log"],
        "agent_event" => vec!["agent"],
        "audit_lines_lost" => vec!["lost"],
        _ => vec![],
    }
}

/// One event as one readable line: its time, session, kind, hook and what it says.
fn describe(event: &Value) -> String {
    let at = event["at_ms"].as_u64().unwrap_or(0);
    if event["event"] == "agent_event" {
        // A bridge's recording of the agent's event (`--record`).
        let input = &event["input"];
        return clip(
            &format!(
                "{}.{:03} {} {:<15} {} {} {}",
                at / 1000,
                at % 1000,
                input["session_id"].as_str().unwrap_or("?"),
                "agent_event",
                str_of(event, "dialect"),
                input["hook_event_name"].as_str().unwrap_or("?"),
                input["tool_name"].as_str().unwrap_or_default()
            ),
            400,
        );
    }
    if event["event"] == "audit_lines_lost" {
        return clip(
            &format!(
                "{}.{:03} {:<15} {} line(s) of this log are missing: {}",
                at / 1000,
                at % 1000,
                "audit_lines_lost",
                event["lines"].as_u64().unwrap_or(0),
                str_of(event, "why")
            ),
            400,
        );
    }
    let head = format!(
        "{}.{:03} {} {:<15} {}",
        at / 1000,
        at % 1000,
        str_of(event, "session_id"),
        str_of(event, "event"),
        str_of(event, "hook_id")
    );
    let us = event["duration_us"].as_u64().unwrap_or(0);
    let said = match event["event"].as_str().unwrap_or_default() {
        "hook_completed" => format!(
            "{}{} in {us} µs",
            str_of(event, "decision"),
            if event["honoured"] == false {
                " (recorded, not honoured)"
            } else {
                ""
            }
        ),
        "hook_denied" => format!(
            "{} in {us} µs: {}",
            str_of(event, "reason_code"),
            str_of(event, "message")
        ),
        "hook_failed" => format!(
            "{} after {us} µs: {}{}",
            str_of(event, "reason"),
            str_of(event, "detail"),
            if event["failed_closed"] == true {
                " — fails closed"
            } else {
                ""
            }
        ),
        "hook_shadowed" => format!(
            "{} {} in {us} µs: {} (shadow: not enforced)",
            str_of(event, "decision"),
            str_of(event, "reason_code"),
            str_of(event, "message")
        ),
        "hook_not_applied" => format!(
            "{}: not applied by the agent: {}",
            str_of(event, "decision"),
            str_of(event, "message")
        ),
        "plugin_log" => format!("[{}] {}", str_of(event, "level"), str_of(event, "message")),
        _ => String::new(),
    };
    clip(&format!("{head} {said}"), 400)
}

/// Counts one finished invocation (`hook_completed`, `hook_denied`, `hook_failed`,
/// `hook_shadowed`) into `tally`; other events count nothing.
fn count(tally: &mut Tally, event: &Value) {
    let kind = event["event"].as_str().unwrap_or_default();
    match kind {
        "hook_denied" => tally.denied += 1,
        "hook_failed" => tally.failed += 1,
        "hook_shadowed" => tally.shadowed += 1,
        "hook_completed" => {}
        _ => return,
    }
    tally
        .durations
        .push(event["duration_us"].as_u64().unwrap_or(0));
    tally.fuel += event["fuel_consumed"].as_u64().unwrap_or(0);
}

#[cfg(test)]
mod tests {
    use super::{Filter, describe, time};
    use crate::output::Tally;

    /// The log's record of lines it lost concerns every session and hook: a reader who filters
    /// by them still learns of the gap; `--outcome lost` finds it.
    #[test]
    fn a_record_of_lost_lines_shows_whatever_the_session_or_hook() {
        let lost = serde_json::json!({
            "event": "audit_lines_lost", "at_ms": 5_000, "lines": 12,
            "why": "dropped: more than 8 MiB of lines waited for the log to take them",
        });
        let filter = |outcomes: &[&str], since| Filter {
            session: Some("s1".into()),
            hook: Some("shell-guard".into()),
            outcomes: outcomes.iter().map(|o| o.to_string()).collect(),
            since,
            until: None,
        };
        assert!(filter(&[], None).keeps(&lost));
        assert!(filter(&["lost"], Some(5_000)).keeps(&lost));
        assert!(!filter(&["deny"], None).keeps(&lost));
        assert!(!filter(&[], Some(5_001)).keeps(&lost));
        let said = describe(&lost);
        assert!(
            said.contains("audit_lines_lost 12 line(s) of this log are missing: dropped: more"),
            "{said}"
        );
    }

    #[test]
    fn times_are_epoch_milliseconds_or_ages() {
        let now = 10_000_000;
        assert_eq!(time("1234", now).unwrap(), 1234);
        assert_eq!(time("90s", now).unwrap(), now - 90_000);
        assert_eq!(time("15m", now).unwrap(), now - 900_000);
        assert_eq!(time("2h", now).unwrap(), now - 7_200_000);
        assert_eq!(time("7d", now).unwrap(), 0);
        assert!(time("yesterday", now).is_err());
        assert!(time("m", now).is_err());
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let tally = |durations: Vec<u64>| Tally {
            durations,
            ..Tally::default()
        };
        let hundred = tally((1..=100).rev().collect());
        assert_eq!(hundred.quantile(0.5), 50);
        assert_eq!(hundred.quantile(0.99), 99);
        assert_eq!(tally(vec![7]).quantile(0.99), 7);
        assert_eq!(tally(vec![]).quantile(0.5), 0);
    }
}
