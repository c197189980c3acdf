//! Conversions between the host-side types and the WIT types at the component boundary.
//!
//! Host → guest is total. Guest → host can fail: JSON a hook returns is parsed, and invalid
//! JSON is an `invalid-response` failure.

use crate::failure::{Failure, FailureReason};
use crate::runtime::sandbox::wit;
use crate::types::{
    CommittedFact, ContentBlock, Denial, LlmResponse, Message, Observation, PreStep, Provenance,
    Role, ServerToolContent, SessionSource, StopEvent, ToolCall, ToolOutcome, ToolResult,
    TurnOutcome,
};
use serde_json::Value;

pub(crate) fn to_wit_call(call: &ToolCall) -> wit::ToolCall {
    wit::ToolCall {
        tool_use_id: call.tool_use_id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.to_string(),
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
        value: outcome.value.as_ref().map(|v| v.to_string()),
    }
}

fn to_wit_block(block: &ContentBlock) -> wit::ContentBlock {
    match block {
        ContentBlock::Text { text } => wit::ContentBlock::Text(text.clone()),
        ContentBlock::Json { value } => wit::ContentBlock::Json(value.to_string()),
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

pub(crate) fn to_wit_step(step: &PreStep) -> wit::PreStep {
    wit::PreStep {
        messages: step.messages.iter().map(to_wit_message).collect(),
        turn: step.turn,
        step: step.step,
    }
}

pub(crate) fn to_wit_stop(event: &StopEvent) -> wit::StopEvent {
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
                    wit::ServerToolContent::Other(value.to_string())
                }
            })
            .collect(),
        stop_reason: response.stop_reason.clone(),
    }
}

pub(crate) fn to_wit_observation(observation: &Observation) -> wit::Observation {
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

fn invalid(what: &str, err: serde_json::Error) -> Failure {
    Failure::new(
        FailureReason::InvalidResponse,
        format!("{what} is not valid JSON: {err}"),
    )
}

/// JSON text a hook returned, parsed.
pub(crate) fn parse_json(what: &str, text: &str) -> Result<Value, Failure> {
    serde_json::from_str(text).map_err(|e| invalid(what, e))
}

/// Content blocks a hook returned, with their JSON parsed.
pub(crate) fn from_wit_blocks(blocks: &[wit::ContentBlock]) -> Result<Vec<ContentBlock>, Failure> {
    blocks
        .iter()
        .map(|block| {
            Ok(match block {
                wit::ContentBlock::Text(text) => ContentBlock::Text { text: text.clone() },
                wit::ContentBlock::Json(json) => ContentBlock::Json {
                    value: parse_json("a json content block", json)?,
                },
                wit::ContentBlock::Image(image) => ContentBlock::Image {
                    media_type: image.media_type.clone(),
                    data: image.data.clone(),
                },
            })
        })
        .collect()
}

/// A hook's deny, with its payload parsed.
pub(crate) fn from_wit_deny(hook_id: &str, deny: &wit::Deny) -> Result<Denial, Failure> {
    Ok(Denial {
        hook_id: hook_id.to_string(),
        reason_code: deny.reason_code.clone(),
        message: deny.message.clone(),
        payload: match &deny.payload {
            None => None,
            Some(text) => Some(parse_json("the deny payload", text)?),
        },
        failure: None,
    })
}

/// The denial a hook's failure produces when it fails closed.
pub(crate) fn failed_closed(hook_id: &str, failure: &Failure) -> Denial {
    Denial {
        hook_id: hook_id.to_string(),
        reason_code: failure.reason.reason_code(),
        message: format!(
            "the policy hook `{hook_id}` failed ({failure}), so this is refused; \
             it is not a judgement of the request itself"
        ),
        payload: None,
        failure: Some(failure.reason),
    }
}

/// The presentation of a canonical value: a string is shown as text, anything else as JSON.
pub(crate) fn project_value(value: &Value) -> Vec<ContentBlock> {
    match value {
        Value::String(text) => vec![ContentBlock::Text { text: text.clone() }],
        other => vec![ContentBlock::Json {
            value: other.clone(),
        }],
    }
}
