//! Running one hook: instantiate (or reuse) its plugin's instance, arm its limits, call the
//! export of its point, and turn whatever went wrong into a typed [`Failure`].

use crate::failure::{Failure, FailureReason};
use crate::manifest::Limits;
use crate::plugin::Wasm;
use crate::runtime::sandbox::bindings::exports::palisade::hooks as ex;
use crate::runtime::sandbox::{CallContext, MAX_LOG_LINES_PER_CALL, NextLayer, State, wit};
use std::sync::Arc;
use wasmtime::component::Instance as ComponentInstance;
use wasmtime::{Engine, Store, Trap, UpdateDeadline};

/// What a hook is asked, per point. Owned (shared) data, so a background invocation can
/// take it along.
#[derive(Clone)]
pub(crate) enum Request {
    SessionStart(wit::SessionSource),
    PromptSubmit(Arc<wit::PreStep>),
    PreTool(Arc<wit::ToolCall>),
    ToolGuard(Arc<wit::ToolCall>),
    PostTool(Arc<wit::ToolCall>, Arc<wit::ToolOutcome>),
    ToolResult(Arc<wit::ToolCall>, Arc<wit::ToolOutcome>),
    TurnStopping(Arc<wit::StopEvent>),
    Committed(Arc<wit::Observation>),
    ToolExecute(Arc<wit::ToolCall>, NextLayer),
}

/// What a hook answered, per point.
pub(crate) enum Response {
    SessionStart(Vec<String>),
    PromptSubmit(wit::PreStepDecision),
    PreTool(wit::PreToolDecision),
    ToolGuard(wit::GuardDecision),
    PostTool(wit::PostToolDecision),
    TurnStopping(Option<String>),
    ToolExecute(wit::ToolOutcome),
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

fn deny_bytes(deny: &wit::Deny) -> usize {
    deny.reason_code.len() + deny.message.len() + deny.payload.as_ref().map_or(0, String::len)
}

fn blocks_bytes(blocks: &[wit::ContentBlock]) -> usize {
    blocks
        .iter()
        .map(|block| {
            ELEMENT_BYTES
                + match block {
                    wit::ContentBlock::Text(text) | wit::ContentBlock::Json(text) => text.len(),
                    wit::ContentBlock::Image(image) => image.media_type.len() + image.data.len(),
                }
        })
        .fold(0, usize::saturating_add)
}

/// The size of a tool outcome, counted as [`Response::answer_bytes`] counts one.
pub(crate) fn outcome_bytes(outcome: &wit::ToolOutcome) -> usize {
    blocks_bytes(&outcome.content_blocks)
        .saturating_add(outcome.value.as_ref().map_or(0, String::len))
}

impl Response {
    /// The size of everything the hook handed back (texts, JSON, content, list elements), in
    /// bytes: what the host may go on to parse, copy and forward. Bounded by the hook's
    /// `payload_max_bytes` before anything reads it.
    pub fn answer_bytes(&self) -> usize {
        match self {
            Response::SessionStart(contexts) => texts(contexts),
            Response::PromptSubmit(wit::PreStepDecision::Enter(contexts)) => texts(contexts),
            Response::PromptSubmit(wit::PreStepDecision::Reject(deny))
            | Response::PreTool(wit::PreToolDecision::Deny(deny))
            | Response::ToolGuard(wit::GuardDecision::Deny(deny)) => deny_bytes(deny),
            Response::PreTool(wit::PreToolDecision::Ask(ask)) => ask.reason.len(),
            Response::PreTool(wit::PreToolDecision::Allow)
            | Response::ToolGuard(wit::GuardDecision::Abstain)
            | Response::Observed => 0,
            Response::PostTool(decision) => {
                let action = match &decision.action {
                    wit::PostToolAction::Accept => 0,
                    wit::PostToolAction::Block(text) | wit::PostToolAction::ReplaceValue(text) => {
                        text.len()
                    }
                    wit::PostToolAction::ReplaceContent(blocks) => blocks_bytes(blocks),
                };
                action.saturating_add(texts(&decision.contexts))
            }
            Response::TurnStopping(steering) => steering.as_ref().map_or(0, String::len),
            Response::ToolExecute(outcome) => outcome_bytes(outcome),
        }
    }

    /// The decision in short, for lifecycle events.
    pub fn name(&self) -> &'static str {
        match self {
            Response::SessionStart(contexts) if contexts.is_empty() => "none",
            Response::SessionStart(_) => "contexts",
            Response::PromptSubmit(wit::PreStepDecision::Enter(_)) => "enter",
            Response::PromptSubmit(wit::PreStepDecision::Reject(_)) => "reject",
            Response::PreTool(wit::PreToolDecision::Allow) => "allow",
            Response::PreTool(wit::PreToolDecision::Deny(_)) => "deny",
            Response::PreTool(wit::PreToolDecision::Ask(_)) => "ask",
            Response::ToolGuard(wit::GuardDecision::Abstain) => "abstain",
            Response::ToolGuard(wit::GuardDecision::Deny(_)) => "deny",
            Response::PostTool(d) => match d.action {
                wit::PostToolAction::Accept => "accept",
                wit::PostToolAction::Block(_) => "block",
                wit::PostToolAction::ReplaceContent(_) => "replace-content",
                wit::PostToolAction::ReplaceValue(_) => "replace-value",
            },
            Response::TurnStopping(Some(_)) => "steer",
            Response::TurnStopping(None) => "none",
            Response::ToolExecute(o) if o.is_error => "error",
            Response::ToolExecute(_) => "outcome",
            Response::Observed => "none",
        }
    }
}

/// A live plugin instance and its store.
pub(crate) struct Instance {
    store: Store<State>,
    instance: ComponentInstance,
    /// Export functions already looked up, so a reused instance skips the lookup.
    guests: Guests,
}

#[derive(Default)]
struct Guests {
    session_start: Option<ex::session_start::Guest>,
    prompt_submit: Option<ex::prompt_submit::Guest>,
    pre_tool: Option<ex::pre_tool::Guest>,
    tool_guard: Option<ex::tool_guard::Guest>,
    tool_execute: Option<ex::tool_execute::Guest>,
    post_tool: Option<ex::post_tool::Guest>,
    tool_result: Option<ex::tool_result::Guest>,
    turn_stopping: Option<ex::turn_stopping::Guest>,
    committed: Option<ex::committed::Guest>,
}

/// The cost of one invocation.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cost {
    pub fuel: u64,
}

impl Instance {
    /// Instantiates `plugin` under `limits` (instantiation runs guest code too).
    pub async fn new(
        engine: &Engine,
        plugin: &Wasm,
        state: State,
        limits: &Limits,
    ) -> Result<(Instance, Cost), Failure> {
        let mut store = Store::new(engine, state);
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_callback(|ctx| {
            if ctx.data().call.clock.expired() {
                Ok(UpdateDeadline::Interrupt)
            } else {
                // Let the executor run other tasks while a long hook computes.
                Ok(UpdateDeadline::Yield(1))
            }
        });
        arm(&mut store, limits);
        let result = plugin.pre.instantiate_async(&mut store).await;
        let cost = spent(&store, limits);
        match result {
            Ok(instance) => Ok((
                Instance {
                    store,
                    instance,
                    guests: Guests::default(),
                },
                cost,
            )),
            Err(err) => Err(classify(
                err,
                store.data().limiter.hit,
                limits,
                "instantiation",
            )),
        }
    }

    /// Prepares the instance for a new invocation.
    pub fn begin(&mut self, call: CallContext, limits: &Limits) {
        self.store.data_mut().call = call;
        arm(&mut self.store, limits);
    }

    /// Calls the export of `request`'s point.
    pub async fn call(
        &mut self,
        plugin: &Wasm,
        request: &Request,
        limits: &Limits,
    ) -> (Result<Response, Failure>, Cost) {
        let Instance {
            store,
            instance,
            guests,
        } = self;
        // Looks the export's functions up (once per instance), then calls it; a component
        // without the export (which loading already refuses) or whose export fails to load is
        // `unavailable`.
        macro_rules! call {
            ($exports:ident, $method:ident ( $($arg:expr),* ) => $response:expr) => {{
                if guests.$exports.is_none() {
                    let Some(indices) = &plugin.exports.$exports else {
                        return (Err(missing()), Cost::default());
                    };
                    match indices.load(&mut *store, &*instance) {
                        Ok(guest) => guests.$exports = Some(guest),
                        Err(e) => return (Err(unavailable(e)), Cost::default()),
                    }
                }
                let guest = guests.$exports.as_ref().expect("looked up above");
                guest.$method(&mut *store, $($arg),*).await.map($response)
            }};
        }
        let result: wasmtime::Result<Response> = match request {
            Request::SessionStart(source) => {
                call!(session_start, call_on_session_start(*source) => Response::SessionStart)
            }
            Request::PromptSubmit(step) => {
                call!(prompt_submit, call_on_prompt_submit(step) => Response::PromptSubmit)
            }
            Request::PreTool(call) => call!(pre_tool, call_on_pre_tool(call) => Response::PreTool),
            Request::ToolGuard(call) => {
                call!(tool_guard, call_on_tool_guard(call) => Response::ToolGuard)
            }
            Request::PostTool(call, outcome) => {
                call!(post_tool, call_on_post_tool(call, outcome) => Response::PostTool)
            }
            Request::ToolResult(call, outcome) => {
                call!(tool_result, call_on_tool_result(call, outcome) => |()| Response::Observed)
            }
            Request::TurnStopping(event) => {
                call!(turn_stopping, call_on_turn_stopping(event) => Response::TurnStopping)
            }
            Request::Committed(observation) => {
                call!(committed, call_on_committed(observation) => |()| Response::Observed)
            }
            Request::ToolExecute(call, next) => {
                store.data_mut().next = Some(next.clone());
                let result =
                    call!(tool_execute, call_on_tool_execute(call) => Response::ToolExecute);
                store.data_mut().next = None;
                result
            }
        };
        let result = result
            .map_err(|e| classify(e, store.data().limiter.hit, limits, "call"))
            .and_then(|response| {
                // A hook may hand back as much as it was given: a redaction returns content
                // the size of the tool's, a wrapper passes on what `next()` returned.
                let given = match request {
                    Request::PostTool(_, outcome) => outcome_bytes(outcome),
                    Request::ToolExecute(..) => store.data().call.next_bytes,
                    _ => 0,
                };
                within_bound(response, limits.payload_max_bytes.max(given))
            });
        store.data_mut().report_output();
        (result, spent(store, limits))
    }
}

/// Refuses an answer larger than the hook's `payload_max_bytes`, before anything parses,
/// copies or forwards it: a hook capped at 64 MiB of memory must not make the host hold
/// gigabytes of parsed JSON.
fn within_bound(response: Response, bound: usize) -> Result<Response, Failure> {
    let bytes = response.answer_bytes();
    if bytes > bound {
        return Err(Failure::new(
            FailureReason::InvalidResponse,
            format!(
                "the answer (`{}`) is {bytes} bytes, over payload_max_bytes ({})",
                response.name(),
                bound
            ),
        ));
    }
    Ok(response)
}

fn missing() -> Failure {
    Failure::new(FailureReason::Unavailable, "the component lacks the export")
}

fn unavailable(e: wasmtime::Error) -> Failure {
    Failure::new(FailureReason::Unavailable, format!("{e:#}"))
}

fn arm(store: &mut Store<State>, limits: &Limits) {
    let data = store.data_mut();
    data.limiter.memory_bytes = limits.memory_bytes;
    data.limiter.hit = false;
    data.call.logs_left = MAX_LOG_LINES_PER_CALL;
    // Fuel metering is enabled on the engine, so this cannot fail.
    let _ = store.set_fuel(limits.fuel);
    store.set_epoch_deadline(1);
}

fn spent(store: &Store<State>, limits: &Limits) -> Cost {
    Cost {
        fuel: limits.fuel.saturating_sub(store.get_fuel().unwrap_or(0)),
    }
}

/// Turns a wasmtime error into a typed failure.
fn classify(err: wasmtime::Error, limit_hit: bool, limits: &Limits, phase: &str) -> Failure {
    if limit_hit {
        return Failure::new(
            FailureReason::MemoryLimit,
            format!(
                "exceeded its memory cap of {} MiB during {phase}",
                limits.memory_bytes / (1024 * 1024)
            ),
        );
    }
    match err.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => Failure::new(
            FailureReason::OutOfFuel,
            format!("used up its fuel ({}) during {phase}", limits.fuel),
        ),
        Some(Trap::Interrupt) => Failure::new(
            FailureReason::Timeout,
            format!(
                "passed its deadline of {} ms during {phase}",
                limits.timeout.as_millis()
            ),
        ),
        Some(trap) => Failure::new(
            FailureReason::Trap,
            format!("trapped during {phase}: {trap}"),
        ),
        None => Failure::new(
            FailureReason::Trap,
            format!("failed during {phase}: {err:#}"),
        ),
    }
}
