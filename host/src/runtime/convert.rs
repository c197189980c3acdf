//! Conversions between the host's types and the WIT types at the component boundary: a
//! request's payload to WIT (made once per dispatch: [`Project`], see [`crate::hook::Shared`]),
//! a component's answer back to [`crate::hook::Answer`].

use crate::hook::Project;
use crate::runtime::bindings::wit;
use crate::types::{
    CommittedFact, ContentBlock, LlmResponse, Message, Observation, PreStep, Provenance, Role,
    ServerToolContent, SessionSource, StopEvent, ToolCall, ToolOutcome, ToolResult, TurnOutcome,
};
use serde_json::Value;

/// A JSON value as text: written straight into a buffer (`Value`'s `Display` goes through
/// the formatter, a call per token: the larger part of a small call's conversion).
fn json_text(value: &Value) -> String {
    // A `Value` always serializes: its keys are strings.
    serde_json::to_string(value).unwrap_or_default()
}

/// Each payload's WIT value, as the wasm runtime hands it to a component.
macro_rules! projections {
    ($($payload:ty => $wit:ty: $convert:ident;)*) => {
        $(impl Project for $payload {
            type Projection = $wit;
            fn project(&self) -> $wit {
                $convert(self)
            }
        })*
    };
}

projections! {
    ToolCall => wit::ToolCall: to_wit_call;
    ToolOutcome => wit::ToolOutcome: to_wit_outcome;
    PreStep => wit::PreStep: to_wit_step;
    StopEvent => wit::StopEvent: to_wit_stop;
    Observation => wit::Observation: to_wit_observation;
}

fn to_wit_call(call: &ToolCall) -> wit::ToolCall {
    wit::ToolCall {
        tool_use_id: call.tool_use_id.clone(),
        name: call.name.clone(),
        arguments: json_text(&call.arguments),
        provenance: call.provenance.as_ref().map(|p| match p {
            Provenance::Builtin => wit::Provenance::Builtin,
            Provenance::Mcp { server, tool } => wit::Provenance::Mcp(wit::McpTool {
                server: server.clone(),
                tool: tool.clone(),
            }),
            Provenance::Plugin { name } => wit::Provenance::Plugin(name.clone()),
        }),
    }
}

pub(crate) fn to_wit_outcome(outcome: &ToolOutcome) -> wit::ToolOutcome {
    wit::ToolOutcome {
        content_blocks: outcome.content_blocks.iter().map(to_wit_block).collect(),
        is_error: outcome.is_error,
        value: outcome.value.as_ref().map(json_text),
    }
}

fn to_wit_block(block: &ContentBlock) -> wit::ContentBlock {
    match block {
        ContentBlock::Text { text } => wit::ContentBlock::Text(text.clone()),
        ContentBlock::Json { value } => wit::ContentBlock::Json(json_text(value)),
        ContentBlock::Image { media_type, data } => wit::ContentBlock::Image(wit::Image {
            media_type: media_type.clone(),
            data: data.clone(),
        }),
    }
}

pub(crate) fn to_wit_source(source: SessionSource) -> wit::SessionSource {
    match source {
        SessionSource::Startup => wit::SessionSource::Startup,
        SessionSource::Resume => wit::SessionSource::Resume,
        SessionSource::Clear => wit::SessionSource::Clear,
        SessionSource::Compact => wit::SessionSource::Compact,
    }
}

fn from_wit_message(message: wit::Message) -> Message {
    Message {
        role: match message.role {
            wit::Role::User => Role::User,
            wit::Role::Assistant => Role::Assistant,
            wit::Role::System => Role::System,
        },
        text: message.text,
    }
}

fn to_wit_message(message: &Message) -> wit::Message {
    wit::Message {
        role: match message.role {
            Role::User => wit::Role::User,
            Role::Assistant => wit::Role::Assistant,
            Role::System => wit::Role::System,
        },
        text: message.text.clone(),
    }
}

fn to_wit_step(step: &PreStep) -> wit::PreStep {
    wit::PreStep {
        messages: step.messages.iter().map(to_wit_message).collect(),
        turn: step.turn,
        step: step.step,
    }
}

fn to_wit_stop(event: &StopEvent) -> wit::StopEvent {
    wit::StopEvent {
        turn: event.turn,
        step: event.step,
        last_assistant_message: event.last_assistant_message.clone(),
        continuations: event.continuations,
    }
}

fn to_wit_result(result: &ToolResult) -> wit::ToolResult {
    let identity = to_wit_call(&ToolCall {
        tool_use_id: result.tool_use_id.clone(),
        name: result.name.clone(),
        arguments: Value::Null,
        provenance: result.provenance.clone(),
    });
    wit::ToolResult {
        tool_use_id: identity.tool_use_id,
        name: identity.name,
        provenance: identity.provenance,
        outcome: to_wit_outcome(&result.outcome),
    }
}

fn to_wit_response(response: &LlmResponse) -> wit::LlmResponse {
    wit::LlmResponse {
        model: response.model.clone(),
        text: response.text.clone(),
        tool_calls: response.tool_calls.iter().map(to_wit_call).collect(),
        server_tool_content: response
            .server_tool_content
            .iter()
            .map(|block| match block {
                ServerToolContent::WebSearch { query, result_urls } => {
                    wit::ServerToolContent::WebSearch(wit::WebSearch {
                        query: query.clone(),
                        result_urls: result_urls.clone(),
                    })
                }
                ServerToolContent::CodeExecution { code, output } => {
                    wit::ServerToolContent::CodeExecution(wit::CodeExecution {
                        code: code.clone(),
                        output: output.clone(),
                    })
                }
                ServerToolContent::Other { value } => {
                    wit::ServerToolContent::Other(json_text(value))
                }
            })
            .collect(),
        stop_reason: response.stop_reason.clone(),
    }
}

fn to_wit_observation(observation: &Observation) -> wit::Observation {
    wit::Observation {
        interaction_id: observation.interaction_id.clone(),
        turn: observation.turn,
        fact: match &observation.fact {
            CommittedFact::Message { message } => {
                wit::CommittedFact::Message(to_wit_message(message))
            }
            CommittedFact::ToolCall { call } => wit::CommittedFact::ToolCall(to_wit_call(call)),
            CommittedFact::ToolResult { result } => {
                wit::CommittedFact::ToolResult(to_wit_result(result))
            }
            CommittedFact::LlmResponse { response } => {
                wit::CommittedFact::LlmResponse(to_wit_response(response))
            }
            CommittedFact::TurnCompleted { outcome } => {
                wit::CommittedFact::TurnCompleted(match outcome {
                    TurnOutcome::Completed => wit::TurnOutcome::Completed,
                    TurnOutcome::Blocked => wit::TurnOutcome::Blocked,
                    TurnOutcome::Interrupted => wit::TurnOutcome::Interrupted,
                    TurnOutcome::Failed => wit::TurnOutcome::Failed,
                })
            }
            CommittedFact::SessionEnded { reason } => {
                wit::CommittedFact::SessionEnded(reason.clone())
            }
        },
    }
}

/// A hook's answer, from the WIT values it returned to the host's own ([`crate::hook`]):
/// moved, not copied, and not parsed (the dispatch rules parse what they honour).
pub(crate) mod from_wit {
    use crate::hook;
    use crate::runtime::bindings::wit;

    fn deny(d: wit::Deny) -> hook::Deny {
        hook::Deny {
            reason_code: d.reason_code,
            message: d.message,
            payload: d.payload,
        }
    }

    fn block(b: wit::ContentBlock) -> hook::Block {
        match b {
            wit::ContentBlock::Text(text) => hook::Block::Text(text),
            wit::ContentBlock::Json(json) => hook::Block::Json(json),
            wit::ContentBlock::Image(image) => hook::Block::Image {
                media_type: image.media_type,
                data: image.data,
            },
        }
    }

    pub(crate) fn step_decision(d: wit::PreStepDecision) -> hook::PreStepDecision {
        match d {
            wit::PreStepDecision::Enter(contexts) => hook::PreStepDecision::Enter(contexts),
            wit::PreStepDecision::EnterBatch(messages) => hook::PreStepDecision::EnterBatch(
                messages
                    .into_iter()
                    .map(crate::runtime::convert::from_wit_message)
                    .collect(),
            ),
            wit::PreStepDecision::Reject(d) => hook::PreStepDecision::Reject(deny(d)),
        }
    }

    pub(crate) fn pre_tool(d: wit::PreToolDecision) -> hook::PreToolDecision {
        match d {
            wit::PreToolDecision::Allow => hook::PreToolDecision::Allow,
            wit::PreToolDecision::Deny(d) => hook::PreToolDecision::Deny(deny(d)),
            wit::PreToolDecision::Ask(ask) => hook::PreToolDecision::Ask(ask.reason),
        }
    }

    pub(crate) fn guard(d: wit::GuardDecision) -> hook::GuardDecision {
        match d {
            wit::GuardDecision::Abstain => hook::GuardDecision::Abstain,
            wit::GuardDecision::Deny(d) => hook::GuardDecision::Deny(deny(d)),
        }
    }

    pub(crate) fn post_tool(d: wit::PostToolDecision) -> hook::PostToolDecision {
        hook::PostToolDecision {
            action: match d.action {
                wit::PostToolAction::Accept => hook::PostToolAction::Accept,
                wit::PostToolAction::Block(feedback) => hook::PostToolAction::Block(feedback),
                wit::PostToolAction::ReplaceContent(blocks) => {
                    hook::PostToolAction::ReplaceContent(blocks.into_iter().map(block).collect())
                }
                wit::PostToolAction::ReplaceValue(json) => hook::PostToolAction::ReplaceValue(json),
            },
            contexts: d.contexts,
        }
    }

    pub(crate) fn outcome(o: wit::ToolOutcome) -> hook::Outcome {
        hook::Outcome {
            content_blocks: o.content_blocks.into_iter().map(block).collect(),
            is_error: o.is_error,
            value: o.value,
        }
    }
}

/// The size of a tool outcome, counted as [`Answer::answer_bytes`](crate::hook::Answer::answer_bytes) counts one: what a hook
/// handed that outcome may hand back.
pub(crate) fn outcome_bytes(outcome: &wit::ToolOutcome) -> usize {
    outcome
        .content_blocks
        .iter()
        .map(|block| {
            16 + match block {
                wit::ContentBlock::Text(text) | wit::ContentBlock::Json(text) => text.len(),
                wit::ContentBlock::Image(image) => image.media_type.len() + image.data.len(),
            }
        })
        .fold(0, usize::saturating_add)
        .saturating_add(outcome.value.as_ref().map_or(0, String::len))
}
