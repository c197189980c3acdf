//! The lifecycle driver: where an agent's events become Palisade's points, and where the
//! facts an agent commits get their turn numbers and interaction ids.
//!
//! Every driver of a session goes through a [`Lifecycle`]: the Claude Code and Codex bridges
//! (and `palisade serve`, which keeps one per agent session), `palisade replay`, and
//! [`crate::agent::Agent`]. A new agent dialect maps its events onto these calls and nothing
//! else, so the order of points, the facts committed and their ids are the same whatever the
//! agent: an agent that reports its events (a bridge, a proxy) uses [`Lifecycle::prompt`],
//! [`Lifecycle::authorize`] and [`Lifecycle::tool_finished`] — the one tool step, whatever
//! the door — and [`Lifecycle::stopping`]; a loop that runs its steps and tools through
//! Palisade uses [`Lifecycle::pre_step`] and [`Lifecycle::execute`] instead.
//!
//! **Interaction ids** (the idempotency key of side effects: docs/semantics.md S2.31) are
//! derived from the session id and the fact's own identity, never from a counter
//! of the process that happens to run — so the same fact gets the same id in every process,
//! after a resume and in a replay, and two facts never share one:
//!
//! | fact | id |
//! |---|---|
//! | a message | `{session}:turn-{turn}:message-{k}` (`k`: its place among the turn's messages) |
//! | a message before a turn (session-start contexts) | `{session}:turn-{next turn}:{source}:message-{k}` |
//! | a tool call / its result | `{session}:tool-call:{tool_use_id}` / `{session}:tool-result:{tool_use_id}` |
//! | a model response | `{session}:turn-{turn}:step-{step}:llm-response` |
//! | a turn's end | `{session}:turn-{turn}:completed` |
//! | the session's end | `{session}:session-ended` |
//!
//! The decisions it makes are recorded beside the facts on the host's fact stream
//! ([`crate::facts`]), under ids made the same way: `{session}:tool-decision:{tool_use_id}`
//! (a call's tool step), `{session}:turn-{turn}:step-{step}:prompt-submit` (a step's), and
//! `{session}:turn-{turn}:step-{step}:stop-{n}` (a stop's, `n` its number among the turn's
//! stops by a durable counter; `subagent-stop-…` for a subagent's). A fact or decision of an
//! event the agent reported from a sub-agent ([`crate::events::in_subagent`]) has
//! `agent-{agent_id}:` after `{session}:` (`{session}:agent-{agent_id}:tool-call:{tool_use_id}`):
//! the sub-agent's work is in its agent's session, under ids that say whose it is.
//!
//! `{turn}` is the agent's own id for the turn where it gives one (Claude Code's `prompt_id`,
//! Codex's `turn_id`), else the turn's number. A driver whose turns the agent gives no id
//! (ACP, a bridge whose agent sends none) numbers them by the session's durable turn counter
//! in the host's state store ([`Lifecycle::open_turn_durably`],
//! [`Lifecycle::in_turn_durably`]): a process per event, a second proxy on a loaded session
//! and a restarted server all go on from the session's last turn, so no turn-scoped id
//! repeats. Otherwise turn numbers count the turns this lifecycle has seen
//! ([`Lifecycle::resumed`] continues a count).

pub use crate::agents::AgentApplies;
use crate::facts::Decision;
use crate::pipeline::{ToolExecution, ToolRegistry, ToolRequest};
use crate::point::Point;
use crate::session::Session;
use crate::signal::Signal;
use crate::types::{
    AskRequest, CommittedFact, Context, Denial, GuardDecision, LlmResponse, Message, Observation,
    PostToolResult, PreStep, PreStepDecision, PreToolDecision, SessionSource, Steering, StopEvent,
    ToolCall, ToolOutcome, ToolResult, TurnOutcome,
};
use std::sync::Mutex;

impl State {
    /// Opens the next turn; returns its number.
    fn open(&mut self, key: Option<&str>) -> u32 {
        self.turns += 1;
        self.key = key.map(str::to_string);
        self.messages = 0;
        self.anonymous_calls = 0;
        self.start = None;
        self.turns
    }

    /// The current turn's key for ids: the agent's id for it, or its number.
    fn key(&self) -> String {
        self.key.clone().unwrap_or_else(|| self.turns.to_string())
    }
}

/// One agent session's lifecycle: the session, the turn it is in, and the facts it commits.
#[derive(Debug)]
pub struct Lifecycle {
    session: Session,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// Turns opened so far (with those of the session before a resume).
    turns: u32,
    /// The current turn's key: the agent's id for it, or its number.
    key: Option<String>,
    /// Messages committed in the current turn so far.
    messages: u32,
    /// The session-start whose messages come before the next turn, and how many it committed.
    start: Option<(SessionSource, u32)>,
    /// Tool calls without an id, numbered within the turn.
    anonymous_calls: u32,
}

impl Lifecycle {
    /// The lifecycle of a new session.
    pub fn new(session: Session) -> Lifecycle {
        Lifecycle::resumed(session, 0)
    }

    /// The lifecycle of a session resumed after `turns` turns: turn numbers go on from there.
    pub fn resumed(session: Session, turns: u32) -> Lifecycle {
        Lifecycle {
            session,
            state: Mutex::new(State {
                turns,
                ..State::default()
            }),
        }
    }

    /// The Palisade session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The current turn's number (0 before the first).
    pub fn turn(&self) -> u32 {
        self.state().turns
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `session-start`: its contexts, for the caller to inject (and commit with
    /// [`Lifecycle::messages`], as messages before the next turn).
    pub async fn session_start(&self, source: SessionSource) -> Vec<Context> {
        self.state().start = Some((source, 0));
        self.session.session_start(source).await
    }

    /// Opens the next turn; `key` is the agent's own id for it, if it has one. Returns the
    /// turn's number.
    pub fn open_turn(&self, key: Option<&str>) -> u32 {
        self.state().open(key)
    }

    /// Opens the next turn as [`Lifecycle::open_turn`] does; without a `key` of the agent's,
    /// numbered by the session's durable turn counter (in the host's state store), so that
    /// the turn's number and its facts' interaction ids never repeat across the processes
    /// that serve the session or across restarts. When the store cannot be reached, the turn
    /// gets a random key: its ids are unique, though no later process can reproduce them.
    pub async fn open_turn_durably(&self, key: Option<&str>) -> u32 {
        if key.is_some() {
            return self.open_turn(key);
        }
        match self.counted_turns(1).await {
            Ok(turns) => {
                let mut state = self.state();
                state.turns = turns.saturating_sub(1);
                state.open(None)
            }
            Err(_) => self.open_turn(Some(&random_key())),
        }
    }

    /// Makes a turn current as [`Lifecycle::in_turn`] does; in a process that has seen no
    /// turn of the session and has no `key`, the turn the session's durable counter is in (a
    /// new one if the counter has none), not a turn 1 of its own.
    pub async fn in_turn_durably(&self, key: Option<&str>) -> u32 {
        if key.is_some() || self.turn() > 0 {
            return self.in_turn(key);
        }
        match self.counted_turns(0).await {
            Ok(0) => self.open_turn_durably(None).await,
            Ok(turns) => {
                let mut state = self.state();
                state.turns = turns;
                state.key = None;
                turns
            }
            Err(_) => self.open_turn(Some(&random_key())),
        }
    }

    /// The session's durable turn counter after adding `add`.
    async fn counted_turns(&self, add: i64) -> Result<u32, crate::state::StateUnavailable> {
        let store = &self.session.shared.plugins.host.inner.state;
        store.counter(self.session.id(), "turns", add).await
    }

    /// The number of this stop among the current turn's, by the session's durable counter of
    /// them (a random key when the store cannot be reached): the stops of one step — a
    /// subagent's, a continued turn's bridged a process per event, whose agent says only
    /// whether it continued — each get a decision record of their own on the fact stream.
    /// Counted only when there is a stream.
    async fn stop_number(&self) -> Option<String> {
        self.session.shared.plugins.host.inner.facts.as_ref()?;
        Some(match self.turn_counter("stops").await {
            Ok(n) => n.to_string(),
            Err(_) => random_key(),
        })
    }

    /// The number of the model request the agent is about to make in the current turn, by
    /// the session's durable counter of them: for an agent that reports each request to a
    /// hook process of its own (Gemini CLI's `BeforeModel`). The turn's first request is its
    /// step 1, the prompt's; each later one is a tool continuation.
    pub async fn next_step(&self) -> Result<u32, crate::state::StateUnavailable> {
        self.turn_counter("steps").await
    }

    /// The number of the tool continuation the agent is about to make in the current turn,
    /// by the session's durable counter of them: for an agent that reports only the model
    /// requests after a batch of tool calls (Claude Code's `PostToolBatch`). The first is
    /// step 2 (the prompt's step is 1).
    pub async fn next_continuation(&self) -> Result<u32, crate::state::StateUnavailable> {
        Ok(self.turn_counter("continuations").await? + 1)
    }

    /// Records that the agent could not take the contexts the hooks of `point` contributed
    /// (`tool`: the call's name, at a tool's point; `instead`: what the agent did), one
    /// `hook_not_applied` per context: an agent whose model requests a hook can block but not
    /// add to, say.
    pub fn contexts_not_applied(
        &self,
        point: Point,
        tool: Option<&str>,
        contexts: &[Context],
        instead: &str,
    ) {
        for context in contexts {
            self.session
                .not_applied_at(point, tool, &context.hook_id, "context", instead);
        }
    }

    /// The session's durable counter `what` of the current turn, after adding one.
    async fn turn_counter(&self, what: &str) -> Result<u32, crate::state::StateUnavailable> {
        let key = {
            let turn = self.state().key();
            // A key within the store's bound, whatever the agent's turn id.
            match turn.len() > 200 {
                true => format!("{what}:{}", crate::digest::sha256_hex(turn.as_bytes())),
                false => format!("{what}:{turn}"),
            }
        };
        let store = &self.session.shared.plugins.host.inner.state;
        store.counter(self.session.id(), &key, 1).await
    }

    /// Makes the turn the agent calls `key` the current one: opened if it is not (a process
    /// that sees only this event of the turn), kept if it is. Without a key, the current turn
    /// (opened if there is none).
    pub fn in_turn(&self, key: Option<&str>) -> u32 {
        let mut state = self.state();
        if state.turns > 0 && (key.is_none() || state.key.as_deref() == key) {
            state.turns
        } else {
            state.open(key)
        }
    }

    /// The current turn's number, and the id of `what` in it.
    fn in_current_turn(&self, what: impl std::fmt::Display) -> (u32, String) {
        let state = self.state();
        (
            state.turns,
            format!("{}:turn-{}:{what}", self.session.id(), state.key()),
        )
    }

    fn commit(&self, turn: u32, interaction_id: String, fact: CommittedFact) {
        let session = self.session.id();
        let interaction_id = crate::events::scoped_to_subagent(session, interaction_id);
        self.session.commit(Observation {
            interaction_id,
            turn,
            fact,
        });
    }

    /// A prompt from the agent's user: opens the turn (`key`: the agent's own id for it), runs
    /// `prompt-submit` on step 1 with the prompt; on enter the prompt is committed, on reject
    /// the turn closes blocked (committed), with no step and no model-visible message
    /// (docs/semantics.md S1.49).
    pub async fn prompt(&self, key: Option<&str>, text: impl Into<String>) -> PreStepDecision {
        self.open_turn(key);
        let decision = self.pre_step(1, vec![Message::user(text)]).await;
        if let PreStepDecision::Enter { messages, .. } = &decision {
            // The batch that entered: the prompt, or what a hook reshaped it into.
            self.messages(messages.clone());
        }
        decision
    }

    /// A proposed step of the current turn: `prompt-submit` with the batch it claimed (empty
    /// for a tool continuation). On reject the turn closes blocked (committed), with no step;
    /// on enter the caller appends the complete batch it returns (the messages, then the
    /// contexts) and commits it ([`Lifecycle::messages`]).
    pub async fn pre_step(&self, step: u32, claimed: Vec<Message>) -> PreStepDecision {
        let pre_step = self.proposed(step, claimed);
        let decision = self.session.prompt_submit(&pre_step).await;
        self.decided(step, &decision);
        decision
    }

    /// [`Lifecycle::pre_step`] with the request's cancellation signal (docs/semantics.md
    /// S1.10). `None` when the signal
    /// fired before the decision: the hook in flight was cut off, no step opens, and the turn
    /// closes interrupted (committed).
    pub async fn pre_step_until(
        &self,
        step: u32,
        claimed: Vec<Message>,
        signal: &Signal,
    ) -> Option<PreStepDecision> {
        let pre_step = self.proposed(step, claimed);
        let Some(decision) = self.session.prompt_submit_until(&pre_step, signal).await else {
            self.turn_completed(TurnOutcome::Interrupted);
            return None;
        };
        self.decided(step, &decision);
        Some(decision)
    }

    fn proposed(&self, step: u32, claimed: Vec<Message>) -> PreStep {
        PreStep {
            messages: claimed,
            turn: self.turn(),
            step,
        }
    }

    fn decided(&self, step: u32, decision: &PreStepDecision) {
        self.session.stream_decision(|| {
            let (turn, id) = self.in_current_turn(format_args!("step-{step}:prompt-submit"));
            (id, turn, Decision::of_pre_step(decision))
        });
        if let PreStepDecision::Reject(_) = decision {
            self.turn_completed(TurnOutcome::Blocked);
        }
    }

    /// A tool call of the current turn through Palisade's whole pipeline (an agent whose
    /// tools Palisade runs): committed as recorded before any policy runs on it, and its
    /// final result committed after.
    pub async fn execute(&self, tools: &ToolRegistry, request: ToolRequest) -> ToolExecution {
        self.tool_call(&request.call());
        let execution = self.session.execute(tools, request).await;
        self.tool_result(ToolResult {
            tool_use_id: execution.call.tool_use_id.clone(),
            name: execution.call.name.clone(),
            provenance: execution.call.provenance.clone(),
            outcome: execution.outcome.clone(),
        });
        execution
    }

    /// Before a tool call the agent runs itself: the call committed as recorded, `pre-tool`,
    /// an ask answered as `asks` says, then `tool-guard`, which can still veto an allowed,
    /// approved or asked call. An ask never becomes an allow: it is approved once by the
    /// session's approver, returned for the agent to ask its user, or denied.
    pub async fn authorize(&self, call: &ToolCall, asks: AskPolicy) -> ToolStep {
        let step = self.tool_step(call, asks).await;
        self.session.stream_decision(|| {
            let id = self.call_id("tool-decision", &call.tool_use_id);
            (id, self.turn(), step_decision(&step))
        });
        step
    }

    /// The call's final invariants checked again, alone: `tool-guard` over `call`, which the
    /// agent is about to put to its user (a bridged `PermissionRequest`). Nothing is committed
    /// (the call was, at its tool step), and pre-tool does not run twice (a counting guard
    /// would count the call twice). Never an ask: a tool guard denies or abstains.
    pub async fn guard_again(&self, call: &ToolCall) -> ToolStep {
        let decision = match self.session.tool_guard(call).await {
            GuardDecision::Deny(denial) => ToolDecision::Denied(denial),
            GuardDecision::Abstain => ToolDecision::Allowed { approved_by: None },
        };
        ToolStep {
            decision,
            points: vec![Point::ToolGuard],
        }
    }

    async fn tool_step(&self, call: &ToolCall, asks: AskPolicy) -> ToolStep {
        self.tool_call(call);
        let mut points = vec![Point::ToolCallCommitted, Point::PreTool];
        let step = |decision, points| ToolStep { decision, points };
        let (ask, approved_by) = match self.session.pre_tool(call).await {
            PreToolDecision::Allow => (None, None),
            PreToolDecision::Deny(denial) => return step(ToolDecision::Denied(denial), points),
            PreToolDecision::Ask(ask) => match asks {
                AskPolicy::Approver => match self.session.resolve_ask(call, &ask).await {
                    Ok(()) => (None, Some(ask.hook_id)),
                    Err(denial) => return step(ToolDecision::Denied(denial), points),
                },
                AskPolicy::Agent => (Some(ask), None),
                AskPolicy::Deny => {
                    let denial = unanswerable(call, &ask);
                    return step(ToolDecision::Denied(denial), points);
                }
            },
        };
        points.push(Point::ToolGuard);
        let decision = match (self.session.tool_guard(call).await, ask) {
            (GuardDecision::Deny(denial), _) => ToolDecision::Denied(denial),
            (GuardDecision::Abstain, Some(ask)) => ToolDecision::Ask(ask),
            (GuardDecision::Abstain, None) => ToolDecision::Allowed { approved_by },
        };
        step(decision, points)
    }

    /// After a tool call ran (or was refused) outside Palisade's pipeline — an agent's own
    /// tool: `post-tool` over `outcome`, then `tool-result` with the final outcome (its
    /// foreground observers awaited), then the result committed. Returns what `post-tool` decided.
    pub async fn tool_finished(&self, call: &ToolCall, outcome: &ToolOutcome) -> PostToolResult {
        let result = self.session.post_tool(call, outcome).await;
        self.tool_observed(call, &result.outcome).await;
        result
    }

    /// After a tool the agent ran itself and reported (a bridged `PostToolUse`): `post-tool`
    /// over `outcome`, then `tool-result` and the committed result with what the agent
    /// actually keeps — as `applies` says its protocol carries post-tool's answer back — never
    /// a result its model did not read. A replacement or block the agent cannot apply is
    /// recorded as `hook_not_applied` and returned with what `post-tool` decided (for the
    /// agent's answer).
    pub async fn tool_reported(
        &self,
        call: &ToolCall,
        outcome: &ToolOutcome,
        applies: AgentApplies,
    ) -> Reported {
        let post = self.session.post_tool(call, outcome).await;
        let applied = matches!(
            (&post.blocked, applies),
            (Some(_), AgentApplies::Blocks) | (None, AgentApplies::Replacements)
        );
        let kept = if applied { &post.outcome } else { outcome };
        let not_applied = if *kept == post.outcome {
            None
        } else {
            match (&post.blocked, &post.replaced_by) {
                (Some(block), _) => Some(NotApplied {
                    hook_id: block.hook_id.clone(),
                    decision: "block",
                }),
                (None, Some(hook)) => Some(NotApplied {
                    hook_id: hook.clone(),
                    decision: "replace",
                }),
                (None, None) => None,
            }
        };
        if let Some(not) = &not_applied {
            let instead = match not.decision {
                "block" => {
                    "the agent keeps the tool's result; its model reads the block's feedback \
                     beside it"
                }
                _ => {
                    "the agent's hook protocol cannot carry a replaced result back for its \
                     own tools: its model reads the tool's own result"
                }
            };
            self.session
                .not_applied(call, &not.hook_id, not.decision, instead);
        }
        self.tool_observed(call, kept).await;
        Reported { post, not_applied }
    }

    /// A call the tool step denied, as its error outcome: through `post-tool` when the denial
    /// is a hook's decision (every resolved decision reaches it); straight to `tool-result`
    /// when it is a hook's failure failing closed — a final failure, which no transform may
    /// rewrite (docs/semantics.md, "The tool pipeline").
    pub async fn tool_denied(&self, call: &ToolCall, denial: &Denial) -> PostToolResult {
        let outcome = ToolOutcome::error(denial.message.clone());
        if denial.failure.is_none() {
            return self.tool_finished(call, &outcome).await;
        }
        self.tool_observed(call, &outcome).await;
        PostToolResult::untouched(outcome)
    }

    /// A tool call's final outcome, past `post-tool` or where none applies (a call the agent
    /// ran and reported after the fact): `tool-result` (its foreground observers awaited), then
    /// the result committed. [`Lifecycle::tool_finished`] ends with it.
    pub async fn tool_observed(&self, call: &ToolCall, outcome: &ToolOutcome) {
        self.session.tool_result(call, outcome).await;
        self.tool_result(ToolResult {
            tool_use_id: call.tool_use_id.clone(),
            name: call.name.clone(),
            provenance: call.provenance.clone(),
            outcome: outcome.clone(),
        });
    }

    /// The natural stop boundary of the current turn: `turn-stopping`. With no steering and
    /// `closes` (a main agent's stop, not a subagent's), the turn completes (committed).
    pub async fn stopping(&self, event: &StopEvent, closes: bool) -> Vec<Steering> {
        let steering = self.session.turn_stopping(event).await;
        let number = self.stop_number().await.unwrap_or_default();
        self.session.stream_decision(|| {
            let stop = if closes { "stop" } else { "subagent-stop" };
            let what = format_args!("step-{}:{stop}-{number}", event.step);
            let (turn, id) = self.in_current_turn(what);
            (id, turn, Decision::of_stop(&steering))
        });
        if steering.is_empty() && closes {
            self.turn_completed(TurnOutcome::Completed);
        }
        steering
    }

    /// Commits `messages`, in order, as entered into the transcript: in the current turn, or
    /// before the next one after a session-start.
    pub fn messages(&self, messages: impl IntoIterator<Item = Message>) {
        let session = self.session.id().to_string();
        for message in messages {
            let (turn, id) = {
                let mut state = self.state();
                let next = state.turns + 1;
                match &mut state.start {
                    Some((source, k)) => {
                        let id =
                            format!("{session}:turn-{next}:{}:message-{k}", source_name(*source));
                        *k += 1;
                        (state.turns, id)
                    }
                    None => {
                        let k = state.messages;
                        state.messages += 1;
                        (
                            state.turns,
                            format!("{session}:turn-{}:message-{k}", state.key()),
                        )
                    }
                }
            };
            self.commit(turn, id, CommittedFact::Message { message });
        }
    }

    /// Commits the model's response at `step` of the current turn.
    pub fn llm_response(&self, step: u32, response: LlmResponse) {
        let (turn, id) = self.in_current_turn(format_args!("step-{step}:llm-response"));
        self.commit(turn, id, CommittedFact::LlmResponse { response });
    }

    /// Commits a tool call as recorded — before any policy runs on it (docs/semantics.md
    /// S1.64).
    pub fn tool_call(&self, call: &ToolCall) {
        let id = self.call_id("tool-call", &call.tool_use_id);
        self.commit(
            self.turn(),
            id,
            CommittedFact::ToolCall { call: call.clone() },
        );
    }

    /// Commits a tool call's final result.
    pub fn tool_result(&self, result: ToolResult) {
        let id = self.call_id("tool-result", &result.tool_use_id);
        self.commit(self.turn(), id, CommittedFact::ToolResult { result });
    }

    fn call_id(&self, what: &str, tool_use_id: &str) -> String {
        let session = self.session.id();
        if !tool_use_id.is_empty() {
            // `{session}:{what}:{tool_use_id}`, made for every call: one sized copy, no `format!`.
            return [session, ":", what, ":", tool_use_id].concat();
        }
        // No id from the agent: the call's place in its turn.
        let mut state = self.state();
        if what == "tool-call" {
            state.anonymous_calls += 1;
        }
        format!(
            "{session}:turn-{}:{what}-{}",
            state.key(),
            state.anonymous_calls
        )
    }

    /// Commits the end of the current turn.
    pub fn turn_completed(&self, outcome: TurnOutcome) {
        let (turn, id) = self.in_current_turn("completed");
        self.commit(turn, id, CommittedFact::TurnCompleted { outcome });
    }

    /// Commits the end of the session.
    pub fn session_ended(&self, reason: impl Into<String>) {
        let id = format!("{}:session-ended", self.session.id());
        self.commit(
            self.turn(),
            id,
            CommittedFact::SessionEnded {
                reason: reason.into(),
            },
        );
    }
}

fn source_name(source: SessionSource) -> &'static str {
    match source {
        SessionSource::Startup => "startup",
        SessionSource::Resume => "resume",
        SessionSource::Clear => "clear",
        SessionSource::Compact => "compact",
    }
}

/// A tool call's step as the fact stream records it: decided by the last point that ran.
pub(crate) fn step_decision(step: &ToolStep) -> Decision {
    let point = step.points.last().copied().unwrap_or(Point::PreTool);
    match &step.decision {
        ToolDecision::Allowed { approved_by } => Decision {
            hook_id: approved_by.clone(),
            ..Decision::new(point, "allow")
        },
        ToolDecision::Ask(ask) => Decision {
            hook_id: Some(ask.hook_id.clone()),
            message: Some(ask.reason.clone()),
            ..Decision::new(point, "ask")
        },
        ToolDecision::Denied(denial) => Decision::denied(point, "deny", denial),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call the agent named is identified by its session, the point and the agent's id;
    /// one it did not name, by its place in the turn.
    #[test]
    fn a_named_call_is_identified_by_session_point_and_the_agents_id() {
        let dir = tempfile::tempdir().unwrap();
        let plugins = crate::Host::new().unwrap().load_dir(dir.path()).unwrap();
        let lifecycle = Lifecycle::new(plugins.session("s-1"));
        assert_eq!(
            lifecycle.call_id("tool-call", "toolu_01"),
            "s-1:tool-call:toolu_01"
        );
        assert_eq!(
            lifecycle.call_id("tool-result", "toolu_01"),
            "s-1:tool-result:toolu_01"
        );
        assert!(lifecycle.call_id("tool-call", "").starts_with("s-1:"));
    }
}

/// Who answers a `pre-tool` hook's ask, in [`Lifecycle::authorize`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AskPolicy {
    /// The session's [`Approver`](crate::Approver): only "allowed once" lets the call run;
    /// no approver, or any other answer, is a denial.
    Approver,
    /// The agent, which asks its user itself: [`ToolDecision::Ask`] once `tool-guard`
    /// abstained.
    Agent,
    /// No one can be asked: a denial.
    Deny,
}

/// What [`Lifecycle::tool_reported`] decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Reported {
    /// What `post-tool` decided.
    pub post: PostToolResult,
    /// The decision of it the agent could not apply, if any.
    pub not_applied: Option<NotApplied>,
}

/// A `post-tool` decision the agent could not apply: it kept its own result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotApplied {
    /// The hook that decided.
    pub hook_id: String,
    /// `block` or `replace`.
    pub decision: &'static str,
}

/// What [`Lifecycle::authorize`] decided before a call runs.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ToolDecision {
    /// The call may run; `approved_by` names the hook whose ask was approved, if any.
    Allowed {
        /// The hook whose ask the approver allowed once.
        approved_by: Option<String>,
    },
    /// The agent must ask its user before the call runs.
    Ask(AskRequest),
    /// The call must not run.
    Denied(Denial),
}

/// The tool step's decision, and the points it ran, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolStep {
    /// What was decided.
    pub decision: ToolDecision,
    /// The points that ran (the committed tool call first).
    pub points: Vec<Point>,
}

/// A key no other process makes, `r` and 64 random bits: for a turn, a stop or a call the
/// agent gives no id of its own, when no durable counter can number it.
pub(crate) fn random_key() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    format!("r{:016x}", hasher.finish())
}

/// The denial of an ask that no one can answer.
fn unanswerable(call: &ToolCall, ask: &AskRequest) -> Denial {
    Denial {
        hook_id: ask.hook_id.clone(),
        reason_code: "approval-unavailable".into(),
        message: format!(
            "{} (`{}` asks for approval before {} runs, and no one can be asked here, so the \
             call is denied)",
            ask.reason, ask.hook_id, call.name
        ),
        payload: None,
        failure: None,
    }
}
