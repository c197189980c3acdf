//! Turns: a prompt through `prompt-submit`, and the agent's answer through `turn-stopping`,
//! whose steering continues the same editor turn.

use super::{INVALID_PARAMS, Proxy, id_key, lock, schema};
use palisade::agent::MAX_CONTINUATIONS;
use palisade::{Message, PreStepDecision, StopEvent, TurnOutcome};
use serde_json::{Value, json};
use std::sync::Arc;

/// A prompt the agent is working on for the editor.
pub(super) struct Turn {
    /// The editor's request, which the last of the agent's answers settles.
    editor_id: Value,
    /// The id of the proxy's that the editor's request is in flight under.
    editor_own: Value,
    session_id: String,
    /// How many times steering continued it.
    continuations: u32,
}

/// Text blocks, as ACP content.
fn text_blocks<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vec<Value> {
    texts
        .into_iter()
        .map(|text| {
            serde_json::to_value(schema::ContentBlock::Text(schema::TextContent::new(text)))
                .expect("content serializes")
        })
        .collect()
}

/// What `turn-stopping` made of a turn's natural stop.
enum Steered {
    /// A follow-up prompt went to the agent.
    Continued,
    /// The turn closes; with what to commit, unless already committed.
    Closed(Option<TurnOutcome>),
    /// The editor cancelled while the continuation was judged.
    Cancelled,
}

fn stop(reason: schema::StopReason) -> schema::PromptResponse {
    schema::PromptResponse::new(reason)
}

impl Proxy {
    /// `session/prompt`: `prompt-submit` decides whether it reaches the agent.
    /// `own` is the proxy's id for the editor's request `id`.
    /// `cancel` is the prompt's, made as it was read.
    pub(super) async fn prompt(
        self: Arc<Self>,
        id: Value,
        own: Value,
        mut message: Value,
        cancel: palisade::Signal,
    ) {
        let request: schema::PromptRequest = match serde_json::from_value(message["params"].clone())
        {
            Ok(request) => request,
            Err(e) => {
                self.to_agent.answered(&own);
                let why = format!("session/prompt: the parameters do not match ACP v1: {e}");
                return self.editor.error(&id, INVALID_PARAMS, why, None);
            }
        };
        let session_id = request.session_id.0.to_string();
        let (lifecycle, start) = self.with_session(&session_id, |s| {
            s.said.clear();
            let start = (!s.started).then_some(s.source);
            s.started = true;
            (s.lifecycle.clone(), start)
        });
        if let Some(source) = start {
            let contexts = lifecycle.session_start(source).await;
            self.with_session(&session_id, |s| s.start_contexts.extend(contexts));
        }
        let text: Vec<&str> = request
            .prompt
            .iter()
            .filter_map(|block| match block {
                schema::ContentBlock::Text(text) => Some(text.text.as_str()),
                _ => None,
            })
            .collect();
        let claimed = vec![Message::user(text.join("\n"))];
        lifecycle.open_turn_durably(None).await;
        let decision = lifecycle.pre_step_until(1, claimed.clone(), &cancel).await;
        let (messages, more) = match decision {
            None => {
                self.to_agent.answered(&own);
                return self.editor.result(&id, stop(schema::StopReason::Cancelled));
            }
            Some(PreStepDecision::Reject(denial)) => {
                self.to_agent.answered(&own);
                self.notice(
                    &session_id,
                    format!(
                        "Palisade: `{}` rejected this prompt ({}): {}",
                        denial.hook_id, denial.reason_code, denial.message
                    ),
                );
                return self.editor.result(&id, stop(schema::StopReason::EndTurn));
            }
            Some(PreStepDecision::Enter { messages, contexts }) => (messages, contexts),
        };
        lifecycle.messages(messages.clone());
        // The session-start contexts go with the first prompt that enters.
        let mut contexts =
            self.with_session(&session_id, |s| std::mem::take(&mut s.start_contexts));
        contexts.extend(more);
        let blocks = message["params"]["prompt"].take();
        let mut prompt: Vec<Value> = blocks.as_array().cloned().unwrap_or_default();
        if messages != claimed {
            // A transform reshaped the batch: its messages replace the prompt's text.
            prompt.retain(|b| b["type"] != "text");
            prompt.extend(text_blocks(messages.iter().map(|m| m.text.as_str())));
        }
        prompt.extend(text_blocks(contexts.iter().map(|c| c.text.as_str())));
        message["params"]["prompt"] = Value::Array(prompt);
        message["id"] = own.clone();
        lock(&self.turns).insert(
            id_key(&own),
            Turn {
                editor_id: id,
                editor_own: own,
                session_id,
                continuations: 0,
            },
        );
        self.agent.send(&message);
    }

    /// The agent answered a prompt of `turn`: `turn-stopping` at `end_turn`, whose steering
    /// goes back to the agent as a follow-up prompt; the editor gets the last answer.
    pub(super) async fn turn_answered(self: Arc<Self>, turn: Turn, mut message: Value) {
        let lifecycle = self.lifecycle(&turn.session_id);
        let reason = message["result"]
            .get("stopReason")
            .and_then(|r| serde_json::from_value::<schema::StopReason>(r.clone()).ok());
        let outcome = match reason {
            Some(schema::StopReason::EndTurn) => match self.steer(&turn).await {
                Steered::Continued => return,
                Steered::Closed(outcome) => outcome,
                Steered::Cancelled => {
                    message["result"]["stopReason"] = json!(schema::StopReason::Cancelled);
                    Some(TurnOutcome::Interrupted)
                }
            },
            Some(schema::StopReason::Cancelled) => Some(TurnOutcome::Interrupted),
            Some(_) => Some(TurnOutcome::Completed),
            None => Some(TurnOutcome::Failed),
        };
        if let Some(outcome) = outcome {
            lifecycle.turn_completed(outcome);
        }
        self.to_agent.answered(&turn.editor_own);
        message["id"] = turn.editor_id;
        self.editor.send(&message);
    }

    /// `turn-stopping` at the agent's natural stop: steering sends the agent a follow-up
    /// prompt (the turn goes on), else the turn closes.
    async fn steer(self: &Arc<Self>, turn: &Turn) -> Steered {
        let (lifecycle, cancel, said) = self.with_session(&turn.session_id, |s| {
            (
                s.lifecycle.clone(),
                s.cancel.clone(),
                std::mem::take(&mut s.said),
            )
        });
        let event = StopEvent {
            turn: lifecycle.turn(),
            step: turn.continuations + 1,
            last_assistant_message: (!said.is_empty()).then_some(said),
            continuations: turn.continuations,
        };
        let steering = lifecycle.stopping(&event, false).await;
        if steering.is_empty() || turn.continuations >= MAX_CONTINUATIONS {
            return Steered::Closed(Some(TurnOutcome::Completed));
        }
        let claimed: Vec<Message> = steering
            .iter()
            .map(|s| Message::user(s.content.clone()))
            .collect();
        let step = turn.continuations + 2;
        let (messages, contexts) = match lifecycle.pre_step_until(step, claimed, &cancel).await {
            Some(PreStepDecision::Enter { messages, contexts }) => (messages, contexts),
            // The continuation rejected: its turn closed blocked (committed), and ends with
            // the agent's answer.
            Some(PreStepDecision::Reject(denial)) => {
                self.notice(
                    &turn.session_id,
                    format!(
                        "Palisade: `{}` rejected a continuation ({}): {}",
                        denial.hook_id, denial.reason_code, denial.message
                    ),
                );
                return Steered::Closed(None);
            }
            None => return Steered::Cancelled,
        };
        lifecycle.messages(messages.clone());
        for s in &steering {
            self.notice(
                &turn.session_id,
                format!(
                    "Palisade: `{}` continues the turn: {}",
                    s.hook_id, s.content
                ),
            );
        }
        let mut prompt = text_blocks(messages.iter().map(|m| m.text.as_str()));
        prompt.extend(text_blocks(contexts.iter().map(|c| c.text.as_str())));
        let id = crate::jsonrpc::relay::own_id();
        lock(&self.turns).insert(
            id_key(&id),
            Turn {
                editor_id: turn.editor_id.clone(),
                editor_own: turn.editor_own.clone(),
                session_id: turn.session_id.clone(),
                continuations: turn.continuations + 1,
            },
        );
        self.agent.send(&json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": schema::AGENT_METHOD_NAMES.session_prompt,
            "params": { "sessionId": turn.session_id, "prompt": prompt },
        }));
        Steered::Continued
    }
}
