//! `palisade run DIR --point P --input FILE`.

use anyhow::{Context, bail};
use palisade::events::StderrSink;
use palisade::{Event, EventKind, EventSink, Host, Point, ToolCall, ToolOutcome};
use serde::Deserialize;
use std::io::Read;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum EventFormat {
    /// One readable line per event.
    Text,
    /// One JSON object per line.
    Jsonl,
    /// No events.
    None,
}

/// Lifecycle events as readable lines on standard error.
pub struct TextSink;

impl EventSink for TextSink {
    fn emit(&self, event: &Event) {
        eprintln!("{}", describe(event));
    }
}

/// One event as a readable line.
pub fn describe(event: &Event) -> String {
    let head = format!("{:<15} {}", event.kind.name(), event.hook_id);
    match &event.kind {
        EventKind::HookStarted => format!("{head} ({})", event.invocation_id),
        EventKind::HookCompleted {
            duration_us,
            fuel_consumed,
            decision,
            honoured,
        } => format!(
            "{head} {decision}{} in {duration_us} µs, {fuel_consumed} fuel",
            if *honoured {
                ""
            } else {
                " (recorded, not honoured)"
            }
        ),
        EventKind::HookFailed {
            duration_us,
            reason,
            detail,
            failed_closed,
            ..
        } => format!(
            "{head} {reason} after {duration_us} µs: {detail}{}",
            if *failed_closed {
                " — fails closed"
            } else {
                ""
            }
        ),
        EventKind::HookDenied {
            duration_us,
            fuel_consumed,
            reason_code,
            message,
        } => format!("{head} {reason_code} in {duration_us} µs, {fuel_consumed} fuel: {message}"),
        EventKind::PluginLog { level, message } => format!("{head} [{level}] {message}"),
        _ => head,
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolResultInput {
    call: ToolCall,
    outcome: ToolOutcome,
}

pub async fn run(
    dir: &Path,
    point: &str,
    input: &Path,
    events: EventFormat,
) -> anyhow::Result<ExitCode> {
    let point: Point = point.parse().map_err(anyhow::Error::msg)?;
    let text = if input == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading standard input")?;
        text
    } else {
        std::fs::read_to_string(input).with_context(|| format!("reading {}", input.display()))?
    };
    let mut builder = Host::builder();
    match events {
        EventFormat::Text => builder = builder.event_sink(Arc::new(TextSink)),
        EventFormat::Jsonl => builder = builder.event_sink(Arc::new(StderrSink)),
        EventFormat::None => {}
    }
    let host = builder.build()?;
    let plugins = host.load_dir(dir)?;
    let session = plugins.session("palisade-run");
    let parse_error = |e: serde_json::Error| {
        anyhow::anyhow!("{}: not a valid `{point}` input: {e}", input.display())
    };
    let output = match point {
        Point::PreTool => {
            let call: ToolCall = serde_json::from_str(&text).map_err(parse_error)?;
            serde_json::to_value(session.pre_tool(&call).await)?
        }
        Point::ToolResult => {
            let input: ToolResultInput = serde_json::from_str(&text).map_err(parse_error)?;
            session.tool_result(&input.call, &input.outcome).await;
            session.drain_background().await;
            serde_json::json!({ "decision": "none" })
        }
        other => bail!(
            "`palisade run` does not dispatch `{other}` yet; it dispatches pre-tool and tool-result"
        ),
    };
    session.drain_background().await;
    println!("{}", serde_json::to_string_pretty(&output)?);
    Ok(ExitCode::SUCCESS)
}
