//! `post-tool`: after dispatch, also of a failed call. Hooks run as a waterfall over the
//! outcome: each sees the outcome as the hooks before it left it.
//!
//! | answer | needs | effect |
//! |---|---|---|
//! | accept | — | keeps the outcome |
//! | block(feedback) | `guard` | the model sees the feedback as an error; stops the waterfall |
//! | replace-content | `transform` | new presentation; the canonical value is kept |
//! | replace-value | `transform` | new canonical value (valid JSON, and valid for the tool's output declaration when run by the tool pipeline); the presentation is recomputed from it |
//! | contexts | `transform` | appended, in hook order, after the batch's results settle |
//!
//! A decision is honoured whole or not at all. After a block, only the blocking decision's
//! contexts survive; a guard that fails closed blocks with no contexts.

use crate::claude_code::HookEvent;
use crate::failure::{Failure, FailureReason};
use crate::hook::{self, Answer, Request, Shared, parse_blocks, parse_json};
use crate::manifest::HookSpec;
use crate::plugin::HookRef;
use crate::point::{Capability, Point};
use crate::point_wire::{ClaudeReply, PointWire, kind};
use crate::runtime::external::{native, wire};
use crate::session::{Session, Verdict};
use crate::types::{Context, Denial, PostToolResult, ToolCall, ToolOutcome, project_value};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;

/// A tool's output declaration, as a check of a value.
type OutputCheck = dyn Fn(&Value) -> Result<(), String> + Send + Sync;

struct State {
    outcome: ToolOutcome,
    /// The outcome as the next hook is handed it.
    shared: Arc<Shared<ToolOutcome>>,
    contexts: Vec<Context>,
    /// The last hook whose replacement changed the outcome.
    replaced_by: Option<String>,
}

impl Session {
    /// Runs the `post-tool` hooks that match `call`'s tool over `outcome`.
    pub async fn post_tool(&self, call: &ToolCall, outcome: &ToolOutcome) -> PostToolResult {
        self.post_tool_checked(call, outcome, None).await
    }

    /// [`Session::post_tool`], where a replaced value must also pass `output` (the tool's
    /// output declaration): a replacement that does not is the replacing hook's
    /// `invalid-response` (failing closed), not the tool's error.
    pub(crate) async fn post_tool_checked(
        &self,
        call: &ToolCall,
        outcome: &ToolOutcome,
        output: Option<&OutputCheck>,
    ) -> PostToolResult {
        let shared_call = Shared::new(call.clone());
        let mut state = State {
            outcome: outcome.clone(),
            shared: Shared::new(outcome.clone()),
            contexts: Vec::new(),
            replaced_by: None,
        };
        let blocked = self
            .waterfall(
                Point::PostTool,
                Some(&call.name),
                &mut state,
                |s| Request::PostTool(shared_call.clone(), s.shared.clone()),
                |s, hook, spec, response| {
                    let Answer::PostTool(decision) = response else {
                        unreachable!("a post-tool request gets a post-tool response")
                    };
                    judge(s, hook, spec, decision, &call.name, output)
                },
                |denial| denial,
            )
            .await;
        match blocked {
            None => PostToolResult {
                outcome: state.outcome,
                blocked: None,
                contexts: state.contexts,
                replaced_by: state.replaced_by,
            },
            Some(denial) => PostToolResult {
                outcome: ToolOutcome::error(denial.message.clone()),
                // A failure that fails closed supplies no contexts.
                contexts: if denial.failure.is_some() {
                    Vec::new()
                } else {
                    state.contexts
                },
                blocked: Some(denial),
                replaced_by: state.replaced_by,
            },
        }
    }
}

/// One hook's answer, judged: what it needs, then its effect on the state of the waterfall.
fn judge(
    s: &mut State,
    hook: &HookRef,
    spec: &HookSpec,
    decision: hook::PostToolDecision,
    tool: &str,
    output: Option<&OutputCheck>,
) -> Verdict<Denial> {
    let needed = match decision.action {
        hook::PostToolAction::Accept => None,
        hook::PostToolAction::Block(_) => Some(Capability::Guard),
        _ => Some(Capability::Transform),
    };
    let missing = needed
        .into_iter()
        .chain((!decision.contexts.is_empty()).then_some(Capability::Transform))
        .find(|c| !spec.has(*c));
    if let Some(capability) = missing {
        return Verdict::NotGranted(capability);
    }
    let contexts = decision.contexts.into_iter().map(|text| Context {
        hook_id: hook.id.to_string(),
        text,
    });
    match decision.action {
        hook::PostToolAction::Accept => {}
        hook::PostToolAction::Block(feedback) => {
            s.contexts = contexts.collect();
            return Verdict::Denied {
                reason_code: "blocked".into(),
                message: feedback.clone(),
                then: Denial {
                    hook_id: hook.id.to_string(),
                    reason_code: "blocked".into(),
                    message: feedback,
                    payload: None,
                    failure: None,
                },
            };
        }
        hook::PostToolAction::ReplaceContent(blocks) => {
            match parse_blocks(blocks) {
                Ok(blocks) => s.outcome.content_blocks = blocks,
                Err(failure) => return Verdict::Invalid(failure),
            }
            s.shared = Shared::new(s.outcome.clone());
            s.replaced_by = Some(hook.id.to_string());
        }
        hook::PostToolAction::ReplaceValue(json) => {
            let value = match parse_json("the replacement value", &json) {
                Ok(value) => value,
                Err(failure) => return Verdict::Invalid(failure),
            };
            if let Some(Err(problem)) = output.map(|validate| validate(&value)) {
                return Verdict::Invalid(Failure::new(
                    FailureReason::InvalidResponse,
                    format!(
                        "the replacement value does not match {}'s output \
                         declaration: {problem}",
                        tool
                    ),
                ));
            }
            s.outcome.content_blocks = project_value(&value);
            s.outcome.value = Some(value);
            s.shared = Shared::new(s.outcome.clone());
            s.replaced_by = Some(hook.id.to_string());
        }
    }
    s.contexts.extend(contexts);
    Verdict::Completed {
        honoured: spec.capabilities.iter().any(|c| *c != Capability::Observe),
    }
}

/// What `post-tool` hooks receive and answer on the wire: the call and its outcome (Claude
/// Code's `tool_response` is the canonical value); accept with contexts, block (`decision:
/// "block"`, with contexts); a replacement only in the palisade protocol.
impl PointWire for kind::PostTool {
    fn claude_event(&self, _: Point) -> &'static str {
        "PostToolUse"
    }

    fn claude_fields(&self, request: &Request<'_>, event: &mut HookEvent) {
        if let Request::PostTool(call, outcome) = request {
            wire::call_outcome_event(event, call, outcome);
        }
    }

    fn claude_answer(&self, reply: &ClaudeReply<'_>) -> Result<Answer, Failure> {
        reply.no_permission()?;
        let action = match reply.blocked() {
            Some(reason) => hook::PostToolAction::Block(reason),
            None => hook::PostToolAction::Accept,
        };
        Ok(Answer::PostTool(hook::PostToolDecision {
            action,
            contexts: reply.contexts.clone(),
        }))
    }

    fn native_input(&self, request: &Request<'_>) -> Value {
        match request {
            Request::PostTool(call, outcome) => native::call_outcome_input(call, outcome),
            _ => Value::Null,
        }
    }

    fn native_answer(&self, point: Point, decision: Value) -> Result<Answer, Failure> {
        #[derive(Deserialize)]
        #[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
        enum BlockJson {
            Text {
                text: String,
            },
            Json {
                value: Value,
            },
            Image {
                media_type: String,
                /// Standard base64.
                data: String,
            },
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "kebab-case", deny_unknown_fields)]
        enum ActionJson {
            Accept,
            Block(String),
            ReplaceContent(Vec<BlockJson>),
            ReplaceValue(Value),
        }
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct PostToolJson {
            action: ActionJson,
            #[serde(default)]
            contexts: Vec<String>,
        }
        let block = |block: BlockJson| -> Result<hook::Block, Failure> {
            Ok(match block {
                BlockJson::Text { text } => hook::Block::Text(text),
                BlockJson::Json { value } => hook::Block::Json(value.to_string()),
                BlockJson::Image { media_type, data } => hook::Block::Image {
                    media_type,
                    data: base64::engine::general_purpose::STANDARD
                        .decode(data.as_bytes())
                        .map_err(|e| {
                            native::invalid(format!("an image block's `data` is not base64: {e}"))
                        })?,
                },
            })
        };
        let answer: PostToolJson = native::decision(point, decision)?;
        let action = match answer.action {
            ActionJson::Accept => hook::PostToolAction::Accept,
            ActionJson::Block(message) => hook::PostToolAction::Block(message),
            ActionJson::ReplaceContent(blocks) => hook::PostToolAction::ReplaceContent(
                blocks.into_iter().map(block).collect::<Result<_, _>>()?,
            ),
            ActionJson::ReplaceValue(value) => {
                hook::PostToolAction::ReplaceValue(value.to_string())
            }
        };
        Ok(Answer::PostTool(hook::PostToolDecision {
            action,
            contexts: answer.contexts,
        }))
    }

    fn neutral(&self, contexts: Vec<String>) -> Answer {
        Answer::PostTool(hook::PostToolDecision {
            action: hook::PostToolAction::Accept,
            contexts,
        })
    }

    fn veto(&self, message: String, _: &str) -> Option<Answer> {
        Some(Answer::PostTool(hook::PostToolDecision {
            action: hook::PostToolAction::Block(message),
            contexts: vec![],
        }))
    }

    #[cfg(any(test, feature = "fuzzing"))]
    fn sample(&self, _: Point) -> Request<'static> {
        let outcome = Shared::new(ToolOutcome::text("out"));
        Request::PostTool(crate::point_wire::sample_call(), outcome)
    }
}

/// The input of [`Session::run_json`] here (and at `tool-result`).
pub(super) const INPUT: &str = "post-tool, tool-result {\"call\": {tool call}, \"outcome\": {\"content_blocks\": [{\"type\": \"text\", \"text\": \"…\"}], \"is_error\": false}}";

pub(super) fn run_json<'a>(
    session: &'a Session,
    input: &str,
) -> serde_json::Result<super::input::RunJson<'a>> {
    let input: super::input::CallAndOutcome = serde_json::from_str(input)?;
    Ok(Box::pin(async move {
        super::input::json(session.post_tool(&input.call, &input.outcome).await)
    }))
}
