//! Lifecycle events: one record per step of every hook invocation.
//!
//! Every invocation emits `hook_started`, then exactly one of `hook_completed`, `hook_failed`,
//! `hook_denied` or (a shadow hook's, `enforce = false`) `hook_shadowed`. Plugins' log lines
//! arrive as `plugin_log`. The embedder receives them through an [`EventSink`];
//! [`JsonlSink`](crate::JsonlSink) writes an audit log, on a thread of its own.
//!
//! An event the agent reported from one of its sub-agents ([`in_subagent`]) names that
//! sub-agent on every event of its hooks (`agent_id`, `agent_type`), background ones too; a
//! request that carried a W3C trace context ([`in_trace`]) names it (`trace_parent`).

use crate::failure::FailureReason;
use crate::point::Point;
use serde::Serialize;
use std::future::Future;
use std::sync::Arc;

use std::time::{SystemTime, UNIX_EPOCH};

/// A sub-agent of the agent (Claude Code's and Codex's `agent_id` and `agent_type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubAgent {
    /// The agent's id for it.
    pub id: String,
    /// Its kind (`general-purpose`, `Explore`, ...), when the agent says.
    pub kind: Option<String>,
}

/// Who the hooks being run serve, beyond the session: the sub-agent whose event it is, and
/// the W3C trace context (`traceparent`) of the request that asked, when the caller sent one
/// (MCP 2026-07-28's `_meta`). Every event its hooks emit names both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Caller {
    agent: Option<SubAgent>,
    trace_parent: Option<String>,
}

tokio::task_local! {
    static CALLER: Arc<Caller>;
}

/// Runs `work` — the hooks of one agent event — as the sub-agent `agent`'s, when there is one:
/// every event its hooks emit names it, those of background hooks it starts too.
pub async fn in_subagent<F: Future>(agent: Option<SubAgent>, work: F) -> F::Output {
    match agent {
        Some(agent) => as_caller(Some(amended(|c| c.agent = Some(agent))), work).await,
        None => work.await,
    }
}

/// Runs `work` for a request that carried the W3C trace context `trace_parent` (a
/// `traceparent` header's value), when it did: every event its hooks emit names it, and
/// their OpenTelemetry spans join that trace. A value that is not a well-formed
/// `traceparent` is ignored, as W3C has it.
pub async fn in_trace<F: Future>(trace_parent: Option<&str>, work: F) -> F::Output {
    match trace_parent.filter(|t| is_trace_parent(t)) {
        Some(trace) => {
            let caller = amended(|c| c.trace_parent = Some(trace.to_string()));
            as_caller(Some(caller), work).await
        }
        None => work.await,
    }
}

/// The caller being served now, with `change` made to it.
fn amended(change: impl FnOnce(&mut Caller)) -> Arc<Caller> {
    let mut caller = current_caller().as_deref().cloned().unwrap_or_default();
    change(&mut caller);
    Arc::new(caller)
}

/// Whether `value` is a W3C `traceparent` of version 00: `00-` 32 hex digits (not all zero)
/// `-` 16 hex digits (not all zero) `-` 2 hex digits.
pub fn is_trace_parent(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    let hex = |part: &str, len: usize| {
        part.len() == len && part.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    let nonzero = |part: &str| part.bytes().any(|b| b != b'0');
    matches!(parts.as_slice(), [version, trace, span, flags]
        if *version == "00" && hex(trace, 32) && nonzero(trace) && hex(span, 16)
            && nonzero(span) && hex(flags, 2))
}

/// An interaction id of `session` (`{session}:…`) as a sub-agent's, when one is being served
/// ([`in_subagent`]): `{session}:agent-{agent_id}:…`, so the facts and decisions of a
/// sub-agent's events say whose they are; the id as it is otherwise.
pub(crate) fn scoped_to_subagent(session: &str, id: String) -> String {
    let Some(caller) = current_caller() else {
        return id;
    };
    let (Some(agent), Some(rest)) = (&caller.agent, id.strip_prefix(session)) else {
        return id;
    };
    match rest.strip_prefix(':') {
        Some(rest) => format!("{session}:agent-{}:{rest}", agent.id),
        None => id,
    }
}

/// Who the hooks being run serve ([`in_subagent`], [`in_trace`]), if anyone in particular.
pub(crate) fn current_caller() -> Option<Arc<Caller>> {
    CALLER.try_with(Arc::clone).ok()
}

/// Runs `work` for `caller`: for work that goes on in a task of its own, with what
/// [`current_caller`] said where it was started.
pub(crate) async fn as_caller<F: Future>(caller: Option<Arc<Caller>>, work: F) -> F::Output {
    match caller {
        Some(caller) => CALLER.scope(caller, work).await,
        None => work.await,
    }
}

/// Receives lifecycle events. Called inline on the dispatch path: keep it cheap, or hand the
/// event to a queue.
pub trait EventSink: Send + Sync {
    /// Handles one event.
    fn emit(&self, event: &Event);

    /// Handles the report of one dispatch of a point that ran at least one hook, once it is
    /// decided (after the events of its foreground hooks; its background hooks may still be
    /// running). Ignored unless a sink wants it (OpenTelemetry's span per dispatch).
    fn dispatched(&self, dispatch: &Dispatch) {
        let _ = dispatch;
    }

    /// What the sink wants besides the end of every invocation, which it is always sent.
    /// Asked once, when a host is built with the sink; everything unless the sink says
    /// otherwise. What no sink wants is not made: a sink that only counts outcomes
    /// ([`Interest::ENDS`]) spares every call its `hook_started` event, and every dispatch
    /// its clock reads and report.
    fn interest(&self) -> Interest {
        Interest::ALL
    }
}

/// What an [`EventSink`] is sent besides the end of each invocation (`hook_completed`,
/// `hook_denied`, `hook_failed`, `hook_shadowed`), which every sink is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interest {
    /// `hook_started`, before each hook runs.
    pub started: bool,
    /// `plugin_log`: what plugins log (and a command hook's standard error).
    pub logs: bool,
    /// [`EventSink::dispatched`]: each dispatch's report.
    pub dispatches: bool,
}

impl Interest {
    /// Every event and every dispatch's report.
    pub const ALL: Interest = Interest {
        started: true,
        logs: true,
        dispatches: true,
    };
    /// The ends of invocations only.
    pub const ENDS: Interest = Interest {
        started: false,
        logs: false,
        dispatches: false,
    };

    /// What either wants.
    pub fn or(self, other: Interest) -> Interest {
        Interest {
            started: self.started || other.started,
            logs: self.logs || other.logs,
            dispatches: self.dispatches || other.dispatches,
        }
    }
}

/// One dispatch of one point: the parent of its hooks' events (same `invocation_id`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Dispatch {
    /// The session.
    pub session_id: String,
    /// Shared with the events of the dispatch's hooks.
    pub invocation_id: String,
    /// The point.
    pub point: Point,
    /// When it began.
    pub started: SystemTime,
    /// Wall time until it was decided, in microseconds.
    pub duration_us: u64,
    /// How it ended: `continue` (every hook let it go on; the point's answer is composed from
    /// theirs), `deny` (an honoured denial stopped it), `final` (a hook's answer ended it: a
    /// tool-execute wrapper's outcome), `fail-closed` (a failure denied it), or `cancelled`
    /// (whoever awaited it stopped waiting).
    pub outcome: &'static str,
    /// The hook whose answer or failure ended it (for `deny`, `final` and `fail-closed`).
    pub decided_by: Option<String>,
    /// The hooks it started: foreground and background.
    pub hooks: u32,
    /// The W3C `traceparent` of the request it ran for, when its caller sent one
    /// ([`in_trace`]).
    pub trace_parent: Option<String>,
}

/// One lifecycle event.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Event {
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
    /// Milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The session the invocation belongs to.
    pub session_id: String,
    /// Shared by every hook of one dispatch of one point.
    pub invocation_id: String,
    /// The hook (`plugin/point`).
    pub hook_id: String,
    /// The plugin.
    pub plugin: String,
    /// The point.
    pub point: Point,
    /// The sub-agent whose event ran the hook, when the agent reported one ([`in_subagent`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// That sub-agent's kind, when the agent said.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_type: Option<String>,
    /// The W3C `traceparent` of the request the hook ran for, when its caller sent one
    /// ([`in_trace`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_parent: Option<String>,
}

/// The fields of an event or a dispatch that name whom its hooks served ([`current_caller`]).
pub(crate) struct CallerFields {
    pub(crate) agent_id: Option<String>,
    pub(crate) agent_type: Option<String>,
    pub(crate) trace_parent: Option<String>,
}

/// The W3C `traceparent` of the request being served now ([`in_trace`]), if it sent one.
pub(crate) fn current_trace_parent() -> Option<String> {
    current_caller()?.trace_parent.clone()
}

impl CallerFields {
    /// Those of the hooks being run now.
    pub(crate) fn now() -> CallerFields {
        let caller = current_caller();
        let agent = caller.as_ref().and_then(|c| c.agent.as_ref());
        CallerFields {
            agent_id: agent.map(|a| a.id.clone()),
            agent_type: agent.and_then(|a| a.kind.clone()),
            trace_parent: caller.as_ref().and_then(|c| c.trace_parent.clone()),
        }
    }
}

/// What happened, with the details of that kind of event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// The hook is about to run.
    HookStarted,
    /// The hook returned a decision that is not a denial (or a denial not honoured).
    HookCompleted {
        /// Wall time of the invocation, in microseconds.
        duration_us: u64,
        /// Fuel the invocation consumed.
        fuel_consumed: u64,
        /// The decision, in short (`allow`, `ask`, `deny`, `none`, ...).
        decision: String,
        /// False when the decision was recorded but not honoured (an observer's, or one
        /// needing a capability the hook lacks).
        honoured: bool,
    },
    /// The hook failed.
    HookFailed {
        /// Wall time of the invocation, in microseconds.
        duration_us: u64,
        /// Fuel the invocation consumed.
        fuel_consumed: u64,
        /// The typed reason.
        reason: FailureReason,
        /// What happened.
        detail: String,
        /// True when the failure made its point deny (fail closed).
        failed_closed: bool,
    },
    /// The hook denied, and the denial was honoured.
    HookDenied {
        /// Wall time of the invocation, in microseconds.
        duration_us: u64,
        /// Fuel the invocation consumed.
        fuel_consumed: u64,
        /// The hook's reason code.
        reason_code: String,
        /// The hook's message.
        message: String,
    },
    /// A shadow hook (`enforce = false`) answered something that would have changed the
    /// outcome, or failed where an enforced hook fails closed; nothing was changed.
    HookShadowed {
        /// Wall time of the invocation, in microseconds.
        duration_us: u64,
        /// Fuel the invocation consumed.
        fuel_consumed: u64,
        /// What it would have done: `would_deny`, `would_ask`, `would_reject`,
        /// `would_block`, `would_replace-content`, `would_steer`, … (`would_deny` for a
        /// failure).
        decision: String,
        /// The reason code of a would-be refusal (`hook-failure:<reason>` for a failure;
        /// empty when the answer has none).
        reason_code: String,
        /// Its message, reason or steering text (a failure's detail).
        message: String,
        /// The failure, when it failed.
        failure: Option<FailureReason>,
    },
    /// The agent could not apply what the hook decided — a `post-tool` replacement or block
    /// that its hook protocol cannot carry for its own tools — and kept its own result, which
    /// is what `tool-result` and the committed result show.
    HookNotApplied {
        /// What the hook decided: `block`, `replace`.
        decision: String,
        /// What the agent did instead.
        message: String,
    },
    /// A line the plugin logged through the host.
    PluginLog {
        /// `trace`, `debug`, `info`, `warn` or `error`.
        level: &'static str,
        /// The line.
        message: String,
    },
}

impl EventKind {
    /// The event's name (`hook_started`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::HookStarted => "hook_started",
            EventKind::HookCompleted { .. } => "hook_completed",
            EventKind::HookFailed { .. } => "hook_failed",
            EventKind::HookDenied { .. } => "hook_denied",
            EventKind::HookShadowed { .. } => "hook_shadowed",
            EventKind::HookNotApplied { .. } => "hook_not_applied",
            EventKind::PluginLog { .. } => "plugin_log",
        }
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Writes every event as one JSON line to standard error.
#[derive(Debug, Default)]
pub struct StderrSink;

impl EventSink for StderrSink {
    fn emit(&self, event: &Event) {
        if let Ok(line) = serde_json::to_string(event) {
            eprintln!("{line}");
        }
    }

    fn interest(&self) -> Interest {
        Interest {
            dispatches: false,
            ..Interest::ALL
        }
    }
}
