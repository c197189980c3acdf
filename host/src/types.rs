//! The data that crosses between the embedder and the hooks: tool calls, outcomes and the
//! typed decisions. These are the host-side forms; [`crate::sandbox`] converts them to and from
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
