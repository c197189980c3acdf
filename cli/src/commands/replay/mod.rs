//! `palisade replay DIR SESSION.jsonl`: a recorded session through the plugins.
//!
//! The session file has one JSON event per line:
//!
//! | event | fields | dispatches |
//! |---|---|---|
//! | `session-start` | `source` (`startup`, `resume`, …) | `session-start` |
//! | `prompt` | `turn`, `text` | `prompt-submit` (step 1 of the turn) |
//! | `tool-call` | `call` (a tool call), `result` (its recorded outcome) | `pre-tool` → approval → `tool-guard`; if allowed, `post-tool` and `tool-result` on the recorded result (the tool is not run again) |
//! | `stop` | `turn`, `step`, `last_assistant_message` | `turn-stopping` |
//! | `session-end` | `reason` | `session-ended` |
//!
//! Committed facts (`message-committed`, `tool-call-committed`, …) are dispatched as a live
//! agent would commit them. Asks are answered by `--approve` (`never`, the default, or
//! `always`).

mod recorded;
mod report;

pub(crate) use recorded::{Recorded, sessions};
use report::{HookRun, hook_runs, plugin_stats, print_text, tallies};

use anyhow::Context as _;
use palisade::agent::text_of;
use palisade::events::{Event, EventKind, EventSink};
use palisade::{
    Approval, Approver, AskPolicy, AskRequest, BoxFuture, Lifecycle, PreStepDecision, StopEvent,
    ToolCall, ToolDecision, ToolOutcome,
};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Run a recorded session (JSONL) through the plugins: a timeline and a latency table.
///
/// Each line is one event: {"event": "session-start", "source": "startup"},
/// {"event": "prompt", "turn": 1, "text": "…"}, {"event": "tool-call", "call": {…},
/// "result": {…}}, {"event": "stop", "turn": 1, "step": 3, "last_assistant_message": "…"},
/// {"event": "session-end", "reason": "…"}.
#[derive(clap::Args)]
pub struct ReplayCommand {
    /// The plugin directory.
    dir: PathBuf,
    /// The recorded session.
    #[arg(required_unless_present = "facts")]
    session: Option<PathBuf>,
    /// Replay a session from the fact stream instead (what `PALISADE_FACTS` names): the
    /// embedded log's directory, or a Redis URL. Its prompts, tool calls with their committed
    /// results, completed turns and end become the events above.
    #[arg(
        long,
        value_name = "DIR|URL",
        conflicts_with = "session",
        requires = "session_id"
    )]
    facts: Option<String>,
    /// With `--facts`: the session to replay.
    #[arg(long = "session", value_name = "ID", requires = "facts")]
    session_id: Option<String>,
    /// With `--facts`: from this record's offset on (default: the first).
    #[arg(long, value_name = "OFFSET", requires = "facts")]
    from: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
    /// How asks are answered.
    #[arg(long, value_enum, default_value_t = Approve::Never)]
    approve: Approve,
}

impl ReplayCommand {
    /// Replays the session and prints its timeline.
    pub async fn execute(self) -> anyhow::Result<ExitCode> {
        if let Some(facts) = &self.facts {
            let stream = crate::facts::stream(facts);
            let id = self.session_id.clone().unwrap_or_default();
            let recorded = crate::facts::recorded(&stream, &id, self.from.as_deref())?;
            let name = format!("session {id} of {}", stream.describe());
            return replay_session(&self.dir, &id, recorded, &name, self.format, self.approve)
                .await;
        }
        let session = self.session.clone().unwrap_or_default();
        replay(&self.dir, &session, self.format, self.approve).await
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// A timeline and a latency table.
    Text,
    /// One JSON document.
    Json,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Approve {
    /// Every ask is rejected.
    Never,
    /// Every ask is approved once.
    Always,
}

struct Fixed(Approval);

impl Approver for Fixed {
    fn approve<'a>(&'a self, _: &'a ToolCall, _: &'a AskRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async move { self.0 })
    }
}

/// Keeps every finished hook invocation.
#[derive(Default)]
struct Collect(Mutex<Vec<Event>>);

impl EventSink for Collect {
    fn emit(&self, event: &Event) {
        if !matches!(event.kind, EventKind::HookStarted) {
            self.0.lock().unwrap().push(event.clone());
        }
    }
}

impl Collect {
    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

/// One line of the timeline.
#[derive(Serialize)]
pub(crate) struct Step {
    pub index: usize,
    pub event: String,
    pub subject: String,
    pub outcome: String,
    pub by: Option<String>,
    pub reason: Option<String>,
    /// What the outcome carried: the tool result after post-tool, the prompt's messages and
    /// contexts, the contexts of a session start, the steering (for `palisade diff`).
    #[serde(skip)]
    pub detail: String,
    micros: u128,
    hooks: Vec<HookRun>,
}

async fn replay(
    dir: &Path,
    session_file: &Path,
    format: Format,
    approve: Approve,
) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(session_file)
        .with_context(|| format!("reading {}", session_file.display()))?;
    replay_text(
        dir,
        &text,
        &session_file.display().to_string(),
        format,
        approve,
    )
    .await
}

pub async fn replay_text(
    dir: &Path,
    text: &str,
    name: &str,
    format: Format,
    approve: Approve,
) -> anyhow::Result<ExitCode> {
    let mut sessions = sessions(text, name)?;
    if sessions.len() != 1 {
        let ids: Vec<_> = sessions.iter().map(|(id, _)| id.as_str()).collect();
        anyhow::bail!(
            "{name} holds {} sessions ({}): `palisade replay` replays one (`palisade diff` \
             replays each)",
            sessions.len(),
            ids.join(", ")
        );
    }
    let (session_id, recorded) = sessions.remove(0);
    replay_session(dir, &session_id, recorded, name, format, approve).await
}

/// Replays session `session_id`'s `recorded` events (from `name`) and prints its timeline.
async fn replay_session(
    dir: &Path,
    session_id: &str,
    recorded: Vec<Recorded>,
    name: &str,
    format: Format,
    approve: Approve,
) -> anyhow::Result<ExitCode> {
    let steps = steps(dir, session_id, recorded, approve).await?;
    let tallies = tallies(&steps);

    match format {
        Format::Json => {
            let doc = serde_json::json!({ "timeline": steps, "plugins": plugin_stats(&tallies) });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        Format::Text => print_text(name, &steps, &tallies),
    }
    Ok(ExitCode::SUCCESS)
}

/// The timeline of session `session_id`'s `recorded` events through the plugins of `dir`.
pub(crate) async fn steps(
    dir: &Path,
    session_id: &str,
    recorded: Vec<Recorded>,
    approve: Approve,
) -> anyhow::Result<Vec<Step>> {
    let sink = Arc::new(Collect::default());
    // A replay is the same every time: state starts empty and is forgotten.
    let host = crate::cache::host_builder()
        .state(palisade::state::StateStore::memory())
        .event_sink(sink.clone())
        .build()?;
    let plugins = host.load_dir(dir)?;
    let approval = match approve {
        Approve::Never => Approval::Rejected,
        Approve::Always => Approval::AllowedOnce,
    };
    let lifecycle = Lifecycle::new(
        plugins
            .session(session_id)
            .with_approver(Arc::new(Fixed(approval))),
    );
    let mut replayer = Replayer {
        lifecycle: &lifecycle,
        detail: String::new(),
    };

    let mut steps = Vec::new();
    for (index, event) in recorded.into_iter().enumerate() {
        let started = Instant::now();
        let (event, subject, outcome, by, reason) = replayer.dispatch(event).await;
        let detail = std::mem::take(&mut replayer.detail);
        let micros = started.elapsed().as_micros();
        lifecycle.session().drain_background().await;
        let events = sink.take();
        let hooks = hook_runs(&events);
        steps.push(Step {
            index: index + 1,
            event,
            subject,
            outcome,
            by,
            reason,
            detail,
            micros,
            hooks,
        });
    }
    Ok(steps)
}

struct Replayer<'a> {
    lifecycle: &'a Lifecycle,
    /// What the last event's outcome carried (see [`Step::detail`]).
    detail: String,
}

type Line = (String, String, String, Option<String>, Option<String>);

impl Replayer<'_> {
    async fn dispatch(&mut self, event: Recorded) -> Line {
        match event {
            Recorded::SessionStart { source } => {
                let contexts = self.lifecycle.session_start(source).await;
                self.detail = texts(contexts.iter().map(|c| c.text.as_str()));
                let outcome = format!("{} context(s)", contexts.len());
                (
                    "session-start".into(),
                    format!("{source:?}").to_lowercase(),
                    outcome,
                    None,
                    None,
                )
            }
            Recorded::Prompt { turn, text } => self.prompt(turn, text).await,
            Recorded::ToolCall {
                call,
                result,
                agent,
            } => {
                let agent = agent
                    .as_deref()
                    .and_then(palisade::bridge::Dialect::from_name);
                self.tool_call(call, result, agent).await
            }
            Recorded::Stop {
                turn,
                step,
                last_assistant_message,
            } => self.stop(turn, step, last_assistant_message).await,
            Recorded::SessionEnd { reason } => {
                self.lifecycle.session_ended(reason.clone());
                ("session-end".into(), reason, "ended".into(), None, None)
            }
        }
    }

    /// A prompt: `prompt-submit` on its turn's first step.
    async fn prompt(&mut self, turn: u32, text: String) -> Line {
        match self
            .lifecycle
            .prompt(Some(&turn.to_string()), text.clone())
            .await
        {
            PreStepDecision::Enter { messages, contexts } => {
                let reshaped = !matches!(&messages[..], [m] if m.text == text);
                self.detail = format!(
                    "messages: {}; contexts: {}",
                    texts(messages.iter().map(|m| m.text.as_str())),
                    texts(contexts.iter().map(|c| c.text.as_str()))
                );
                (
                    "prompt".into(),
                    text,
                    format!(
                        "enter{} (+{} context)",
                        if reshaped { " reshaped" } else { "" },
                        contexts.len()
                    ),
                    None,
                    None,
                )
            }
            PreStepDecision::Reject(denial) => (
                "prompt".into(),
                text,
                "REJECT".into(),
                Some(denial.hook_id),
                Some(denial.reason_code),
            ),
        }
    }

    /// A tool call: authorized, then post-tool over the recorded result (or the denial).
    async fn tool_call(
        &mut self,
        call: ToolCall,
        result: ToolOutcome,
        agent: Option<palisade::bridge::Dialect>,
    ) -> Line {
        let subject = format!("{} {}", call.name, subject_of(&call));
        // Every resolved decision reaches post-tool (docs/semantics.md), a denial as its error
        // outcome, and a failed hook's denial does not; the recorded result stands for what
        // the tool returned. An ask goes to the
        // replay's approver (`--approve`).
        let step = self.lifecycle.authorize(&call, AskPolicy::Approver).await;
        let denied = match step.decision {
            ToolDecision::Denied(denial) => Err(denial),
            ToolDecision::Allowed { approved_by } => Ok(approved_by),
            // None comes back with this policy: whatever else it is, it is not an allow.
            other => {
                let message = format!("the tool step decided {other:?}, which is not an allow");
                Err(palisade::Denial {
                    hook_id: "palisade".into(),
                    reason_code: "approval-unavailable".into(),
                    message,
                    payload: None,
                    failure: None,
                })
            }
        };
        // A recorded agent's tool: what the agent would keep of post-tool's answer.
        let (post, not_applied) = match (&denied, agent) {
            (Err(denial), _) => (self.lifecycle.tool_denied(&call, denial).await, None),
            (Ok(_), Some(agent)) => {
                let reported = self
                    .lifecycle
                    .tool_reported(&call, &result, agent.spec().applies(result.value.as_ref()))
                    .await;
                let not_applied = reported.not_applied.map(|not| {
                    format!(
                        "{} by {} not applied by {}",
                        not.decision,
                        not.hook_id,
                        agent.name()
                    )
                });
                (reported.post, not_applied)
            }
            (Ok(_), None) => (self.lifecycle.tool_finished(&call, &result).await, None),
        };
        self.detail = format!(
            "result: {}; contexts: {}{}",
            text_of(&post.outcome),
            texts(post.contexts.iter().map(|c| c.text.as_str())),
            not_applied
                .as_deref()
                .map_or(String::new(), |not| format!("; {not}"))
        );
        let (outcome, by, reason) = match (denied, post.blocked) {
            (Err(denial), _) => (
                "DENY".to_string(),
                Some(denial.hook_id),
                Some(format!("{}: {}", denial.reason_code, denial.message)),
            ),
            (Ok(_), Some(block)) => (
                "BLOCK".to_string(),
                Some(block.hook_id),
                Some(block.message),
            ),
            (Ok(approved_by), None) => (
                if approved_by.is_some() {
                    "allow (approved)"
                } else {
                    "allow"
                }
                .to_string(),
                approved_by,
                None,
            ),
        };
        // What the recorded agent could not apply shows beside what was decided.
        let outcome = match not_applied {
            Some(not) => format!("{outcome} ({not})"),
            None => outcome,
        };
        ("tool-call".into(), subject, outcome, by, reason)
    }

    /// The turn's stop boundary: turn-stopping, which may steer.
    async fn stop(&mut self, turn: u32, step: u32, last_assistant_message: Option<String>) -> Line {
        self.lifecycle.in_turn(Some(&turn.to_string()));
        let event = StopEvent {
            turn: self.lifecycle.turn(),
            step,
            last_assistant_message,
            continuations: 0,
        };
        let steering = self.lifecycle.stopping(&event, true).await;
        if steering.is_empty() {
            (
                "stop".into(),
                format!("turn {turn}"),
                "close".into(),
                None,
                None,
            )
        } else {
            let by = steering
                .iter()
                .map(|s| s.hook_id.clone())
                .collect::<Vec<_>>()
                .join(", ");
            let content = steering
                .iter()
                .map(|s| s.content.clone())
                .collect::<Vec<_>>()
                .join(" / ");
            self.detail = content.clone();
            (
                "stop".into(),
                format!("turn {turn}"),
                "STEER".into(),
                Some(by),
                Some(content),
            )
        }
    }
}

/// `items`, each quoted, separated by commas.
fn texts<'a>(items: impl Iterator<Item = &'a str>) -> String {
    items
        .map(|t| format!("{t:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn subject_of(call: &ToolCall) -> String {
    ["command", "cmd", "file_path", "path", "url"]
        .iter()
        .find_map(|key| call.arguments.get(*key).and_then(|v| v.as_str()))
        .map(str::to_string)
        .unwrap_or_else(|| text_of(&ToolOutcome::text(call.arguments.to_string())))
}
