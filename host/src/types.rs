//! The data that crosses between the embedder and the hooks: tool calls, outcomes and the
//! typed decisions. These are the host-side forms; [`crate::runtime::sandbox`] converts them to and from
//! the WIT types at the component boundary.

use crate::failure::FailureReason;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A proposed tool call. Sealed before any hook runs: no hook can change it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The model's id for this call.
    #[serde(default)]
    pub tool_use_id: String,
    /// The tool's name, as the model called it.
    pub name: String,
    /// The arguments: a JSON object.
    #[serde(default)]
    pub arguments: Value,
    /// Where the tool comes from, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
}

impl ToolCall {
    /// A call of `name` with `arguments` and no provenance.
    pub fn new(tool_use_id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            tool_use_id: tool_use_id.into(),
            name: name.into(),
            arguments,
            provenance: None,
        }
    }
}

/// Where a tool comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Provenance {
    /// Built into the agent.
    Builtin,
    /// Served by an MCP server.
    Mcp {
        /// The server's name.
        server: String,
        /// The tool's name on that server.
        tool: String,
    },
    /// Contributed by an agent plugin.
    Plugin {
        /// The plugin's name.
        name: String,
    },
}

/// One block of a tool's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// Structured data.
    Json {
        /// The value.
        value: Value,
    },
    /// An image.
    Image {
        /// Its media type.
        media_type: String,
        /// Its bytes.
        data: Vec<u8>,
    },
}

/// The normalized outcome of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ToolOutcome {
    /// What the model sees, in order.
    #[serde(default)]
    pub content_blocks: Vec<ContentBlock>,
    /// Whether the call failed.
    #[serde(default)]
    pub is_error: bool,
    /// The canonical value, when the tool has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
}

impl ToolOutcome {
    /// A successful outcome with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutcome {
            content_blocks: vec![ContentBlock::Text { text: text.into() }],
            is_error: false,
            value: None,
        }
    }

    /// A failed outcome with one text block.
    pub fn error(text: impl Into<String>) -> Self {
        ToolOutcome {
            is_error: true,
            ..ToolOutcome::text(text)
        }
    }
}

/// A denial, with the id of the hook that made it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Denial {
    /// The hook that denied (`plugin/point`).
    pub hook_id: String,
    /// A stable machine-readable code. A fail-closed failure uses `hook-failure:<reason>`.
    pub reason_code: String,
    /// A sentence for the model and the user.
    pub message: String,
    /// Structured detail, when the hook gave any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// Set when the denial is a hook's failure failing closed, not its decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureReason>,
}

/// A request to ask the user before the call runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskRequest {
    /// The hook that asked.
    pub hook_id: String,
    /// Why, for the approver.
    pub reason: String,
}

/// The aggregated `pre-tool` decision.
///
/// The first deny wins and short-circuits the remaining hooks; otherwise an ask (the first
/// one) outranks allow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "kebab-case")]
pub enum PreToolDecision {
    /// Every hook allowed (or none ran).
    Allow,
    /// A guard denied, or failed closed.
    Deny(Denial),
    /// A guard asked and none denied.
    Ask(AskRequest),
}

impl PreToolDecision {
    /// Whether the call may run without asking.
    pub fn is_allow(&self) -> bool {
        matches!(self, PreToolDecision::Allow)
    }

    /// The denial, if this is one.
    pub fn denial(&self) -> Option<&Denial> {
        match self {
            PreToolDecision::Deny(denial) => Some(denial),
            _ => None,
        }
    }
}

/// A context a hook contributed: model-facing text, sourced to the hook. Each becomes its own
/// message where the point appends contexts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Context {
    /// The hook that contributed it.
    pub hook_id: String,
    /// The text.
    pub text: String,
}

/// How a session began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SessionSource {
    /// A fresh or forked session.
    Startup,
    /// A persisted session reloaded.
    Resume,
    /// Reserved: the conversation was cleared.
    Clear,
    /// Reserved: the conversation was compacted.
    Compact,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// The user.
    User,
    /// The model.
    Assistant,
    /// The system.
    System,
}

/// A message of the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its text.
    pub text: String,
}

impl Message {
    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            text: text.into(),
        }
    }
}

/// A proposed step: the batch of messages the loop claimed for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreStep {
    /// The claimed batch; empty for a tool continuation with no new input.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// The turn, from 1.
    pub turn: u32,
    /// The step within the turn, from 1.
    pub step: u32,
}

/// The aggregated `prompt-submit` decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "kebab-case")]
pub enum PreStepDecision {
    /// Open the step with the complete batch: `messages`, then `contexts`, the current
    /// request's context included (docs/semantics.md S1.12).
    Enter {
        /// The batch's messages: the claimed ones, or the batch a `transform` hook reshaped
        /// them into (`enter-batch`).
        messages: Vec<Message>,
        /// Contexts from `transform` hooks, in hook order, each sourced to its hook.
        contexts: Vec<Context>,
    },
    /// Open no step: the turn closes as blocked, with no model-visible message.
    Reject(Denial),
}

/// The natural stop boundary of a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopEvent {
    /// The turn about to close.
    pub turn: u32,
    /// The steps taken in it.
    pub step: u32,
    /// The model's last text, if any.
    #[serde(default)]
    pub last_assistant_message: Option<String>,
    /// How many times hooks already steered this turn on.
    #[serde(default)]
    pub continuations: u32,
}

/// The answer of the `tool-guard` waterfall.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "kebab-case")]
pub enum GuardDecision {
    /// No guard objected.
    Abstain,
    /// A guard vetoed the call (or failed closed).
    Deny(Denial),
}

/// The pre-dispatch policy of a call, resolved: `pre-tool`, then any ask through the
/// approver, then `tool-guard`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "kebab-case")]
pub enum Authorization {
    /// The call may run. `approved_by` is set when an ask was approved (once).
    Allowed {
        /// The hook whose ask was approved, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        approved_by: Option<String>,
    },
    /// The call must not run.
    Denied(Denial),
}

/// What the embedder's approver answered to an ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Approval {
    /// Run this call, once. The only answer that lets the call continue.
    AllowedOnce,
    /// The user refused.
    Rejected,
    /// The question was cancelled (the user or the turn went away).
    Cancelled,
    /// No one could be asked (no approval channel, or a call with no agent behind it).
    Unavailable,
    /// The user is asked in a round of the agent's own protocol (an MCP 2026-07-28
    /// `input_required` answer): this call ends denied, and the agent's next call carries the
    /// answer.
    Deferred,
}

/// The `post-tool` waterfall's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PostToolResult {
    /// The outcome after every honoured transform (or the block's feedback).
    pub outcome: ToolOutcome,
    /// Set when a guard blocked the result: the hook and its feedback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<Denial>,
    /// Contexts to append after the batch's results settle, in hook order. After a block,
    /// only the blocking decision's contexts.
    pub contexts: Vec<Context>,
    /// The last hook whose replacement changed the outcome, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaced_by: Option<String>,
}

impl PostToolResult {
    /// `outcome` as it is, where `post-tool` did not run (a final failure).
    pub fn untouched(outcome: ToolOutcome) -> PostToolResult {
        PostToolResult {
            outcome,
            blocked: None,
            contexts: Vec::new(),
            replaced_by: None,
        }
    }
}

/// Steering content a `turn-stopping` hook returned: the turn continues with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Steering {
    /// The hook that steered.
    pub hook_id: String,
    /// The model-facing content.
    pub content: String,
}

/// A tool result as committed: identity, provenance and outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolResult {
    /// The call it answers.
    pub tool_use_id: String,
    /// The tool.
    pub name: String,
    /// Where the tool comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// The outcome.
    pub outcome: ToolOutcome,
}

/// A provider-run (server-side) tool block of a model response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ServerToolContent {
    /// A web search.
    WebSearch {
        /// The query.
        query: String,
        /// The result URLs, in order.
        result_urls: Vec<String>,
    },
    /// Code execution.
    CodeExecution {
        /// The code.
        code: String,
        /// Its output.
        output: String,
    },
    /// Anything else, as the provider's JSON.
    Other {
        /// The block.
        value: Value,
    },
}

/// A model response, as committed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmResponse {
    /// The model.
    pub model: String,
    /// Its text.
    #[serde(default)]
    pub text: String,
    /// The tool calls it proposed.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Server-tool blocks, typed.
    #[serde(default)]
    pub server_tool_content: Vec<ServerToolContent>,
    /// Why it stopped.
    pub stop_reason: String,
}

/// Provider-native server-tool blocks projected into typed kinds, in order (docs/semantics.md
/// S2.14): a `server_tool_use` block and its result block (`tool_use_id`) become one
/// [`ServerToolContent::WebSearch`] (the query, the results' URLs) or
/// [`ServerToolContent::CodeExecution`] (the code, its output); any other block, or a use
/// without its result, is kept as [`ServerToolContent::Other`].
pub(crate) fn project_server_tools(blocks: &[Value]) -> Vec<ServerToolContent> {
    let result_of = |id: &Value| {
        blocks
            .iter()
            .find(|b| b["tool_use_id"] == *id && b["type"] != "server_tool_use")
    };
    let is_result_of_a_use = |block: &Value| {
        block.get("tool_use_id").is_some()
            && blocks
                .iter()
                .any(|b| b["type"] == "server_tool_use" && b["id"] == block["tool_use_id"])
    };
    let mut projected = Vec::new();
    for block in blocks {
        if is_result_of_a_use(block) {
            continue;
        }
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let typed = match (block["type"].as_str(), block["name"].as_str()) {
            (Some("server_tool_use"), Some("web_search")) => {
                result_of(&block["id"]).map(|result| ServerToolContent::WebSearch {
                    query: text(&block["input"]["query"]),
                    result_urls: result["content"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|r| r["url"].as_str().map(str::to_string))
                        .collect(),
                })
            }
            (Some("server_tool_use"), Some("code_execution")) => {
                result_of(&block["id"]).map(|result| {
                    let out = &result["content"];
                    let output = [text(&out["stdout"]), text(&out["stderr"])]
                        .into_iter()
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join("\n");
                    ServerToolContent::CodeExecution {
                        code: text(&block["input"]["code"]),
                        output,
                    }
                })
            }
            _ => None,
        };
        projected.push(typed.unwrap_or_else(|| ServerToolContent::Other {
            value: block.clone(),
        }));
    }
    projected
}

/// How a turn ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TurnOutcome {
    /// The model finished.
    Completed,
    /// A prompt-submit hook rejected the step.
    Blocked,
    /// Interrupted.
    Interrupted,
    /// Failed.
    Failed,
}

/// A committed fact. Each kind is one committed-fact point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum CommittedFact {
    /// `message-committed`
    Message {
        /// The message.
        message: Message,
    },
    /// `tool-call-committed`
    ToolCall {
        /// The call.
        call: ToolCall,
    },
    /// `tool-result-committed`
    ToolResult {
        /// The result.
        result: ToolResult,
    },
    /// `llm-response-committed`
    LlmResponse {
        /// The response.
        response: LlmResponse,
    },
    /// `turn-completed`
    TurnCompleted {
        /// How the turn ended.
        outcome: TurnOutcome,
    },
    /// `session-ended`
    SessionEnded {
        /// Why.
        reason: String,
    },
}

/// One committed observation: the fact, its turn and its idempotency key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    /// Unique per fact; observers use it to make side effects idempotent (post-commit hooks
    /// are best-effort: a crash may lose or replay one).
    pub interaction_id: String,
    /// The turn (0 outside a turn).
    #[serde(default)]
    pub turn: u32,
    /// The fact.
    pub fact: CommittedFact,
}

impl Observation {
    /// The committed-fact point this observation is dispatched to.
    pub fn point(&self) -> crate::point::Point {
        use crate::point::Point;
        match self.fact {
            CommittedFact::Message { .. } => Point::MessageCommitted,
            CommittedFact::ToolCall { .. } => Point::ToolCallCommitted,
            CommittedFact::ToolResult { .. } => Point::ToolResultCommitted,
            CommittedFact::LlmResponse { .. } => Point::LlmResponseCommitted,
            CommittedFact::TurnCompleted { .. } => Point::TurnCompleted,
            CommittedFact::SessionEnded { .. } => Point::SessionEnded,
        }
    }

    /// The tool name a matcher sees, for the tool facts.
    pub fn tool_name(&self) -> Option<&str> {
        match &self.fact {
            CommittedFact::ToolCall { call } => Some(&call.name),
            CommittedFact::ToolResult { result } => Some(&result.name),
            _ => None,
        }
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
