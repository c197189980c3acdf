//! What a hook is asked and what it answers, in the host's own types: the vocabulary between
//! the dispatch rules above (`session`, `points/`, `pipeline`) and the runtimes below
//! (`runtime/`: wasm components, command and HTTP hooks).
//!
//! A runtime turns a [`Request`] into its own form (WIT values, a JSON event) and its hook's
//! answer back into an [`Answer`]; nothing above `runtime/` sees a runtime's types, so the
//! dispatch rules can be exercised with a fake runtime (`session::tests`).
//!
//! An answer keeps the shape of the point's WIT answer, JSON texts unparsed: the dispatch rule
//! that reads it first checks what the hook may answer (its capabilities), then parses, so an
//! answer the hook was not granted is refused as such, whatever its JSON.

use crate::failure::{Failure, FailureReason};
use crate::types::{
    ContentBlock, Denial, Message, Observation, PreStep, SessionSource, StopEvent, ToolCall,
    ToolOutcome,
};
use serde_json::Value;
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

/// A boxed future, as the host's callback traits return it.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The rest of a tool chain, as a `tool-execute` wrapper's `next()` reaches it: called with
/// the wrapper's optional shorter deadline (ms), it returns the normalized outcome.
pub(crate) type NextLayer =
    Arc<dyn Fn(Option<u32>) -> BoxFuture<'static, ToolOutcome> + Send + Sync>;

/// A payload's form for the runtime that needs one of its own (the wasm runtime's WIT value,
/// `runtime::convert`): made once per dispatch, however many hooks it is handed to.
pub(crate) trait Project {
    /// The payload as that runtime takes it.
    type Projection: Send + Sync;
    /// Makes it.
    fn project(&self) -> Self::Projection;
}

impl<T: Project> Project for &T {
    type Projection = T::Projection;
    fn project(&self) -> T::Projection {
        (**self).project()
    }
}

/// A payload handed to every hook of one dispatch, with its projection ([`Project`]) once a
/// hook needs it.
pub(crate) struct Shared<T: Project> {
    value: T,
    projection: OnceLock<T::Projection>,
}

impl<T: Project> Shared<T> {
    pub fn new(value: T) -> Arc<Shared<T>> {
        Arc::new(Shared::of(value))
    }

    fn of(value: T) -> Shared<T> {
        Shared {
            value,
            projection: OnceLock::new(),
        }
    }

    /// The payload as [`Project`] makes it, made at the first call.
    pub fn projected(&self) -> &T::Projection {
        self.projection.get_or_init(|| self.value.project())
    }
}

impl<T: Project> Deref for Shared<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

/// A tool call as a dispatch hands it to its hooks: the caller's own (borrowed for the
/// dispatch, as `pre-tool` and `tool-guard` take it: no copy on the hot path) or shared.
pub(crate) enum Payload<'a, T: Project> {
    Borrowed(&'a Lent<'a, T>),
    Owned(Arc<Shared<T>>),
}

/// A caller's value lent to one dispatch ([`Payload::Borrowed`]). The first background hook
/// that needs a copy of its own makes it; the others share that copy.
pub(crate) struct Lent<'a, T: Project> {
    shared: Shared<&'a T>,
    copy: OnceLock<Arc<Shared<T>>>,
}

impl<'a, T: Project> Lent<'a, T> {
    pub fn new(value: &'a T) -> Self {
        Lent {
            shared: Shared::of(value),
            copy: OnceLock::new(),
        }
    }
}

impl<T: Project> Payload<'_, T> {
    /// The payload as [`Project`] makes it (see [`Shared::projected`]).
    pub fn projected(&self) -> &T::Projection {
        match self {
            Payload::Borrowed(lent) => lent.shared.projected(),
            Payload::Owned(shared) => shared.projected(),
        }
    }
}

impl<T: Project + Clone> Payload<'_, T> {
    /// The payload as a task that outlives the dispatch (a background hook) takes it: a
    /// borrowed one is copied, once per dispatch.
    pub fn to_owned(&self) -> Payload<'static, T> {
        match self {
            Payload::Borrowed(lent) => Payload::Owned(
                lent.copy
                    .get_or_init(|| Shared::new(lent.shared.value.clone()))
                    .clone(),
            ),
            Payload::Owned(shared) => Payload::Owned(shared.clone()),
        }
    }
}

impl<T: Project> Clone for Payload<'_, T> {
    fn clone(&self) -> Self {
        match self {
            Payload::Borrowed(lent) => Payload::Borrowed(lent),
            Payload::Owned(shared) => Payload::Owned(shared.clone()),
        }
    }
}

impl<T: Project> Deref for Payload<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        match self {
            Payload::Borrowed(lent) => lent.shared.value,
            Payload::Owned(shared) => &shared.value,
        }
    }
}

impl<T: Project> From<Arc<Shared<T>>> for Payload<'static, T> {
    fn from(shared: Arc<Shared<T>>) -> Self {
        Payload::Owned(shared)
    }
}

/// What a hook is asked, per point. Shared data, so a background invocation can take it along
/// ([`Request::to_owned`]).
#[derive(Clone)]
pub(crate) enum Request<'a> {
    SessionStart(SessionSource),
    PromptSubmit(Arc<Shared<PreStep>>),
    PreTool(Payload<'a, ToolCall>),
    ToolGuard(Payload<'a, ToolCall>),
    PostTool(Arc<Shared<ToolCall>>, Arc<Shared<ToolOutcome>>),
    ToolResult(Arc<Shared<ToolCall>>, Arc<Shared<ToolOutcome>>),
    TurnStopping(Arc<Shared<StopEvent>>),
    Committed(Arc<Shared<Observation>>),
    ToolExecute(Payload<'a, ToolCall>, NextLayer),
}

impl Request<'_> {
    /// The request as a task that outlives the dispatch (a background hook) takes it.
    pub fn to_owned(&self) -> Request<'static> {
        match self {
            Request::SessionStart(source) => Request::SessionStart(*source),
            Request::PromptSubmit(step) => Request::PromptSubmit(step.clone()),
            Request::PreTool(call) => Request::PreTool(call.to_owned()),
            Request::ToolGuard(call) => Request::ToolGuard(call.to_owned()),
            Request::PostTool(call, outcome) => Request::PostTool(call.clone(), outcome.clone()),
            Request::ToolResult(call, outcome) => {
                Request::ToolResult(call.clone(), outcome.clone())
            }
            Request::TurnStopping(event) => Request::TurnStopping(event.clone()),
            Request::Committed(observation) => Request::Committed(observation.clone()),
            Request::ToolExecute(call, next) => Request::ToolExecute(call.to_owned(), next.clone()),
        }
    }
}

/// A hook's refusal, as it wrote it (`payload`: JSON text).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Deny {
    pub reason_code: String,
    pub message: String,
    pub payload: Option<String>,
}

/// A `prompt-submit` answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PreStepDecision {
    Enter(Vec<String>),
    /// The complete batch the step opens with.
    EnterBatch(Vec<Message>),
    Reject(Deny),
}

/// A `pre-tool` answer (`Ask`: the reason).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PreToolDecision {
    Allow,
    Deny(Deny),
    Ask(String),
}

/// A `tool-guard` answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum GuardDecision {
    Abstain,
    Deny(Deny),
}

/// A content block a hook returned (`Json`: JSON text).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Block {
    Text(String),
    Json(String),
    Image { media_type: String, data: Vec<u8> },
}

/// A `post-tool` answer's action (`ReplaceValue`: JSON text).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PostToolAction {
    Accept,
    Block(String),
    ReplaceContent(Vec<Block>),
    ReplaceValue(String),
}

/// A `post-tool` answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PostToolDecision {
    pub action: PostToolAction,
    pub contexts: Vec<String>,
}

/// A `tool-execute` wrapper's outcome (`value`: JSON text).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcome {
    pub content_blocks: Vec<Block>,
    pub is_error: bool,
    pub value: Option<String>,
}

/// What a hook answered, per point.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    SessionStart(Vec<String>),
    PromptSubmit(PreStepDecision),
    PreTool(PreToolDecision),
    ToolGuard(GuardDecision),
    PostTool(PostToolDecision),
    TurnStopping(Option<String>),
    ToolExecute(Outcome),
    /// The observe-only points answer nothing.
    Observed,
}

/// What one element of a returned list counts toward the answer's size, besides its text:
/// so that a list of a million empty strings is as large as it is to the host.
const ELEMENT_BYTES: usize = 16;

fn texts<'a>(texts: impl IntoIterator<Item = &'a String>) -> usize {
    texts
        .into_iter()
        .map(|t| t.len().saturating_add(ELEMENT_BYTES))
        .fold(0, usize::saturating_add)
}

fn deny_bytes(deny: &Deny) -> usize {
    deny.reason_code.len() + deny.message.len() + deny.payload.as_ref().map_or(0, String::len)
}

fn blocks_bytes(blocks: &[Block]) -> usize {
    blocks
        .iter()
        .map(|block| {
            ELEMENT_BYTES
                + match block {
                    Block::Text(text) | Block::Json(text) => text.len(),
                    Block::Image { media_type, data } => media_type.len() + data.len(),
                }
        })
        .fold(0, usize::saturating_add)
}

impl Answer {
    /// What the answer would change, if anything, as a shadow hook's event records it: the
    /// decision (`would_deny`, `would_ask`, …), and a refusal's reason code and message.
    /// `None` for an answer that changes nothing (an allow, an abstention, no contexts).
    pub fn effect(&self) -> Option<(String, String, String)> {
        let would = |reason_code: &str, message: &str| {
            Some((
                format!("would_{}", self.name()),
                reason_code.to_string(),
                message.to_string(),
            ))
        };
        match self {
            Answer::SessionStart(contexts)
            | Answer::PromptSubmit(PreStepDecision::Enter(contexts))
                if contexts.is_empty() =>
            {
                None
            }
            Answer::PreTool(PreToolDecision::Allow)
            | Answer::ToolGuard(GuardDecision::Abstain)
            | Answer::TurnStopping(None)
            | Answer::Observed => None,
            Answer::PostTool(PostToolDecision {
                action: PostToolAction::Accept,
                contexts,
            }) if contexts.is_empty() => None,
            Answer::PromptSubmit(PreStepDecision::Reject(deny))
            | Answer::PreTool(PreToolDecision::Deny(deny))
            | Answer::ToolGuard(GuardDecision::Deny(deny)) => {
                would(&deny.reason_code, &deny.message)
            }
            Answer::PreTool(PreToolDecision::Ask(reason)) => would("", reason),
            Answer::PostTool(PostToolDecision {
                action: PostToolAction::Block(reason),
                ..
            }) => would("", reason),
            Answer::TurnStopping(Some(steering)) => would("", steering),
            _ => would("", ""),
        }
    }

    /// The size of everything the hook handed back (texts, JSON, content, list elements), in
    /// bytes: what the host may go on to parse, copy and forward. Bounded by the hook's
    /// `payload_max_bytes` before anything reads it.
    pub fn answer_bytes(&self) -> usize {
        match self {
            Answer::SessionStart(contexts) => texts(contexts),
            Answer::PromptSubmit(PreStepDecision::Enter(contexts)) => texts(contexts),
            Answer::PromptSubmit(PreStepDecision::EnterBatch(messages)) => {
                texts(messages.iter().map(|m| &m.text))
            }
            Answer::PromptSubmit(PreStepDecision::Reject(deny))
            | Answer::PreTool(PreToolDecision::Deny(deny))
            | Answer::ToolGuard(GuardDecision::Deny(deny)) => deny_bytes(deny),
            Answer::PreTool(PreToolDecision::Ask(reason)) => reason.len(),
            Answer::PreTool(PreToolDecision::Allow)
            | Answer::ToolGuard(GuardDecision::Abstain)
            | Answer::Observed => 0,
            Answer::PostTool(decision) => {
                let action = match &decision.action {
                    PostToolAction::Accept => 0,
                    PostToolAction::Block(text) | PostToolAction::ReplaceValue(text) => text.len(),
                    PostToolAction::ReplaceContent(blocks) => blocks_bytes(blocks),
                };
                action.saturating_add(texts(&decision.contexts))
            }
            Answer::TurnStopping(steering) => steering.as_ref().map_or(0, String::len),
            Answer::ToolExecute(outcome) => blocks_bytes(&outcome.content_blocks)
                .saturating_add(outcome.value.as_ref().map_or(0, String::len)),
        }
    }

    /// The decision in short, for lifecycle events.
    pub fn name(&self) -> &'static str {
        match self {
            Answer::SessionStart(contexts) if contexts.is_empty() => "none",
            Answer::SessionStart(_) => "contexts",
            Answer::PromptSubmit(PreStepDecision::Enter(_)) => "enter",
            Answer::PromptSubmit(PreStepDecision::EnterBatch(_)) => "enter-batch",
            Answer::PromptSubmit(PreStepDecision::Reject(_)) => "reject",
            Answer::PreTool(PreToolDecision::Allow) => "allow",
            Answer::PreTool(PreToolDecision::Deny(_)) => "deny",
            Answer::PreTool(PreToolDecision::Ask(_)) => "ask",
            Answer::ToolGuard(GuardDecision::Abstain) => "abstain",
            Answer::ToolGuard(GuardDecision::Deny(_)) => "deny",
            Answer::PostTool(d) => match d.action {
                PostToolAction::Accept => "accept",
                PostToolAction::Block(_) => "block",
                PostToolAction::ReplaceContent(_) => "replace-content",
                PostToolAction::ReplaceValue(_) => "replace-value",
            },
            Answer::TurnStopping(Some(_)) => "steer",
            Answer::TurnStopping(None) => "none",
            Answer::ToolExecute(o) if o.is_error => "error",
            Answer::ToolExecute(_) => "outcome",
            Answer::Observed => "none",
        }
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
pub(crate) fn parse_blocks(blocks: Vec<Block>) -> Result<Vec<ContentBlock>, Failure> {
    blocks
        .into_iter()
        .map(|block| {
            Ok(match block {
                Block::Text(text) => ContentBlock::Text { text },
                Block::Json(json) => ContentBlock::Json {
                    value: parse_json("a json content block", &json)?,
                },
                Block::Image { media_type, data } => ContentBlock::Image { media_type, data },
            })
        })
        .collect()
}

impl Deny {
    /// The denial of hook `hook_id`, with its payload parsed.
    pub fn parse(self, hook_id: &str) -> Result<Denial, Failure> {
        Ok(Denial {
            hook_id: hook_id.to_string(),
            payload: match &self.payload {
                None => None,
                Some(text) => Some(parse_json("the deny payload", text)?),
            },
            reason_code: self.reason_code,
            message: self.message,
            failure: None,
        })
    }
}

impl Outcome {
    /// The outcome, with its JSON parsed.
    pub fn parse(self) -> Result<ToolOutcome, Failure> {
        Ok(ToolOutcome {
            content_blocks: parse_blocks(self.content_blocks)?,
            is_error: self.is_error,
            value: match &self.value {
                None => None,
                Some(text) => Some(parse_json("the outcome's value", text)?),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lent_payload_is_copied_once_per_dispatch() {
        let call = ToolCall::new("t1", "Bash", serde_json::json!({"command": "ls"}));
        let lent = Lent::new(&call);
        let payload = Payload::Borrowed(&lent);
        let (Payload::Owned(first), Payload::Owned(second)) =
            (payload.to_owned(), payload.clone().to_owned())
        else {
            panic!("a background hook's copy is owned")
        };
        assert!(
            Arc::ptr_eq(&first, &second),
            "each background hook copied the call again"
        );
        assert_eq!(first.value, call);
    }
}
