//! `palisade run DIR --point P --input FILE`.

use anyhow::Context;
use palisade::events::StderrSink;
use palisade::events::{Event, EventKind, EventSink};
use palisade::{Point, Session};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Run one dispatch of a point and print the decision as JSON.
#[derive(clap::Args)]
pub struct RunCommand {
    /// The plugin directory.
    dir: PathBuf,
    /// The point to dispatch: session-start, prompt-submit, pre-tool, tool-guard,
    /// post-tool, tool-result, turn-stopping, or a committed fact (message-committed,
    /// tool-call-committed, tool-result-committed, llm-response-committed,
    /// turn-completed, session-ended).
    #[arg(long)]
    point: String,
    /// The input JSON file (`-` for standard input); its shape depends on the point
    /// (see `docs/cli.md`, or give a wrong one to see them all).
    #[arg(long)]
    input: PathBuf,
    /// How lifecycle events are written to standard error.
    #[arg(long, value_enum, default_value_t = EventFormat::Text)]
    events: EventFormat,
}

impl RunCommand {
    /// Dispatches the point once and prints the outcome.
    pub async fn execute(self) -> anyhow::Result<ExitCode> {
        run(&self.dir, &self.point, &self.input, self.events).await
    }
}

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

/// One event as a readable line: exactly one, whatever a plugin put in its messages.
pub fn describe(event: &Event) -> String {
    crate::output::printable(&describe_raw(event)).into_owned()
}

fn describe_raw(event: &Event) -> String {
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
        EventKind::HookShadowed {
            duration_us,
            fuel_consumed,
            decision,
            reason_code,
            message,
            ..
        } => format!(
            "{head} {decision}{}{} in {duration_us} µs, {fuel_consumed} fuel: {message} \
             (shadow: not enforced)",
            if reason_code.is_empty() { "" } else { " " },
            reason_code
        ),
        EventKind::PluginLog { level, message } => format!("{head} [{level}] {message}"),
        _ => head,
    }
}

async fn run(
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
    // A try-out of one event: state starts empty and is forgotten, and no spare instance is
    // made for a next call that never comes.
    let mut builder = crate::cache::host_builder()
        .state(palisade::state::StateStore::memory())
        .spare_instances(false);
    let sink: Option<Arc<dyn EventSink>> = match events {
        EventFormat::Text => Some(Arc::new(TextSink)),
        EventFormat::Jsonl => Some(Arc::new(StderrSink)),
        EventFormat::None => None,
    };
    if let Some(sink) = crate::telemetry::with(sink) {
        builder = builder.event_sink(sink);
    }
    let host = builder.build()?;
    let plugins = host.load_dir(dir)?;
    let session = plugins.session("palisade-run");
    let output = session.run_json(point, &text).map_err(|e| {
        anyhow::anyhow!(
            "{}: not a valid `{point}` input: {e}\nthe input of each point:\n{}",
            input.display(),
            Session::json_inputs()
        )
    })?;
    let output = output.await.map_err(anyhow::Error::msg)?;
    session.drain_background().await;
    println!("{}", serde_json::to_string_pretty(&output)?);
    Ok(ExitCode::SUCCESS)
}
