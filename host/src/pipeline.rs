//! The tool pipeline: every call an agent makes goes through
//!
//! `pre-tool → (approval) → tool-guard → tool-execute wrappers → core dispatch → post-tool →
//! finalize-content → tool-result`
//!
//! for tools the embedder registers in a [`ToolRegistry`].
//!
//! - **Identity is sealed first.** Before any policy runs, the call's input is snapshotted,
//!   its arguments frozen into an immutable [`ToolCall`] and an opaque [`CallToken`] assigned.
//!   No phase can change them (only the cancellation of the inner call may change around
//!   dispatch), so the audit log, the result and the tool body agree on what ran. A nested
//!   call carries only its parent's token.
//! - **Everything is normalized.** A failed or panicking tool, an unknown tool, invalid input,
//!   an invalid canonical value, a failed wrapper, a trap in any plugin: each becomes an
//!   `is_error` outcome, never an error escaping the turn. `post-tool` hooks see failed tools
//!   too, and every resolved decision (a denial included) still reaches `post-tool`; a failed
//!   hook (pre-tool, tool-guard, the outermost wrapper) is a final failure, which skips
//!   `post-tool` and goes straight to `finalize-content` and `tool-result`.
//! - **`finalize_content` runs exactly once per call**, after normalization — also after
//!   failures that bypassed later phases — and may replace the content only.
//! - **Contexts**: deferred contexts (from nested calls and [`ToolContext::defer_context`])
//!   come before the `post-tool` decision contexts of an accepted call; a block keeps only the
//!   contexts the blocking decision supplied.

use crate::hook::{Answer, BoxFuture, NextLayer, Request, Shared};
use crate::point::{Capability, Point};
use crate::session::{Judged, Session, Verdict};
use crate::types::{
    Authorization, ContentBlock, Context, Denial, Provenance, ToolCall, ToolOutcome, project_value,
};
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An opaque, unique handle of one tool call. Nested calls carry their parent's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CallToken(u64);

impl fmt::Display for CallToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "call-{:08x}", self.0)
    }
}

static NEXT_TOKEN: AtomicU64 = AtomicU64::new(1);

/// What a tool body receives.
#[derive(Debug)]
pub struct ToolInvocation {
    /// The sealed call.
    pub call: Arc<ToolCall>,
    /// Its token.
    pub token: CallToken,
    /// Nested dispatch and deferred contexts.
    pub context: ToolContext,
}

/// A tool body's handle on the pipeline: run nested calls, defer contexts.
#[derive(Clone)]
pub struct ToolContext {
    session: Session,
    registry: ToolRegistry,
    token: CallToken,
    deferred: Arc<Mutex<Vec<Context>>>,
    terminal: Arc<AtomicBool>,
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

impl ToolContext {
    /// Runs a nested call through the whole pipeline. Its contexts are deferred into this
    /// call's, in order, and survive its failure.
    pub async fn execute(&self, request: ToolRequest) -> ToolExecution {
        let request = ToolRequest {
            parent: Some(self.token),
            ..request
        };
        let execution = self.session.execute(&self.registry, request).await;
        self.lock().extend(execution.contexts.iter().cloned());
        execution
    }

    /// Adds a context to append when the batch settles, sourced to `source`.
    pub fn defer_context(&self, source: impl Into<String>, text: impl Into<String>) {
        self.lock().push(Context {
            hook_id: source.into(),
            text: text.into(),
        });
    }

    /// Marks this call's result terminal: when its batch settles, the turn ends — no further
    /// step, no steering (docs/semantics.md S1.67). Monotonic: nothing after the tool, no hook and no later call, unmarks it.
    pub fn end_turn(&self) {
        self.terminal.store(true, Ordering::Relaxed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Context>> {
        self.deferred.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A tool body: the call in, an outcome or an error message out.
pub type ToolBody =
    Arc<dyn Fn(ToolInvocation) -> BoxFuture<'static, Result<ToolOutcome, String>> + Send + Sync>;
/// Checks a JSON value (input or canonical output); `Err` says what is wrong.
pub type Validator = Arc<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;
/// Computes a tool's final content from its normalized outcome; `None` keeps it.
pub type FinalizeContent =
    Arc<dyn Fn(&ToolCall, &ToolOutcome) -> Option<Vec<ContentBlock>> + Send + Sync>;

/// A tool the embedder registers.
#[derive(Clone)]
pub struct Tool {
    name: String,
    body: ToolBody,
    input: Option<Validator>,
    output: Option<Validator>,
    finalize_content: Option<FinalizeContent>,
}

impl fmt::Debug for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Tool {
    /// A tool named `name` whose body is `body`.
    pub fn new<F, Fut>(name: impl Into<String>, body: F) -> Tool
    where
        F: Fn(ToolInvocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutcome, String>> + Send + 'static,
    {
        Tool {
            name: name.into(),
            body: Arc::new(move |invocation| Box::pin(body(invocation))),
            input: None,
            output: None,
            finalize_content: None,
        }
    }

    /// Validates the arguments before the body runs; invalid input is an error outcome.
    pub fn input(
        mut self,
        validator: impl Fn(&Value) -> Result<(), String> + Send + Sync + 'static,
    ) -> Tool {
        self.input = Some(Arc::new(validator));
        self
    }

    /// Validates the canonical value of every outcome (the body's, a wrapper's, a
    /// `post-tool` replacement's); an invalid value is an error outcome.
    pub fn output(
        mut self,
        validator: impl Fn(&Value) -> Result<(), String> + Send + Sync + 'static,
    ) -> Tool {
        self.output = Some(Arc::new(validator));
        self
    }

    /// The tool's last-mile content invariant: runs exactly once per call, after everything
    /// else, and may only replace the content.
    pub fn finalize_content(
        mut self,
        f: impl Fn(&ToolCall, &ToolOutcome) -> Option<Vec<ContentBlock>> + Send + Sync + 'static,
    ) -> Tool {
        self.finalize_content = Some(Arc::new(f));
        self
    }
}

/// The tools an agent offers. Cheap to clone.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: Arc<HashMap<String, Tool>>,
}

impl fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<_> = self.tools.keys().collect();
        names.sort();
        f.debug_struct("ToolRegistry")
            .field("tools", &names)
            .finish()
    }
}

impl ToolRegistry {
    /// A registry of `tools`.
    pub fn new(tools: impl IntoIterator<Item = Tool>) -> ToolRegistry {
        ToolRegistry {
            tools: Arc::new(tools.into_iter().map(|t| (t.name.clone(), t)).collect()),
        }
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&Tool> {
        self.tools.get(name)
    }
}

/// A call as the model proposed it, before the registry seals it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolRequest {
    /// The model's id for the call.
    pub tool_use_id: String,
    /// The tool.
    pub name: String,
    /// The input.
    pub input: Value,
    /// Where the tool comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// The token of the call this one is nested in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<CallToken>,
}

impl ToolRequest {
    /// The call this request proposes, as it will be sealed.
    pub fn call(&self) -> ToolCall {
        ToolCall {
            tool_use_id: self.tool_use_id.clone(),
            name: self.name.clone(),
            arguments: self.input.clone(),
            provenance: self.provenance.clone(),
        }
    }

    /// A top-level request.
    pub fn new(tool_use_id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        ToolRequest {
            tool_use_id: tool_use_id.into(),
            name: name.into(),
            input,
            provenance: None,
            parent: None,
        }
    }
}

/// Everything the pipeline decided about one call.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolExecution {
    /// The call's token.
    pub token: CallToken,
    /// The parent call's token, for a nested call.
    pub parent: Option<CallToken>,
    /// The sealed call.
    pub call: Arc<ToolCall>,
    /// The pre-dispatch policy's answer.
    pub authorization: Authorization,
    /// The final outcome: what the model sees.
    pub outcome: ToolOutcome,
    /// Set when a `post-tool` guard blocked the result.
    pub blocked: Option<Denial>,
    /// Contexts to append when the batch settles, in order.
    pub contexts: Vec<Context>,
    /// The tool marked its result terminal ([`ToolContext::end_turn`]): the turn ends when
    /// the batch settles.
    pub terminal: bool,
}

impl Session {
    /// Runs `request` through the whole tool pipeline (docs/semantics.md, "The tool pipeline").
    pub async fn execute(&self, registry: &ToolRegistry, request: ToolRequest) -> ToolExecution {
        // Seal the identity: freeze the arguments, assign the token.
        let token = CallToken(NEXT_TOKEN.fetch_add(1, Ordering::Relaxed));
        let call = Arc::new(ToolCall {
            tool_use_id: request.tool_use_id,
            name: request.name,
            arguments: request.input,
            provenance: request.provenance,
        });
        let deferred = Arc::new(Mutex::new(Vec::new()));
        let terminal = Arc::new(AtomicBool::new(false));
        let tool = registry.get(&call.name);

        let authorization = self.authorize(&call).await;
        // A failed hook (its failure failing closed) makes a final failure: it skips
        // post-tool, whose transforms could hide it, and goes straight to finalize-content
        // and tool-result. A hook's decision, a denial included, reaches post-tool.
        let (outcome, final_failure) = match &authorization {
            Authorization::Denied(denial) => (
                ToolOutcome::error(denial.message.clone()),
                denial.failure.is_some(),
            ),
            Authorization::Allowed { .. } => {
                let wrappers: Vec<_> = self
                    .matching(Point::ToolExecute, Some(&call.name))
                    .map(|(hook, _)| hook.clone())
                    .collect();
                let context = ToolContext {
                    // The tool's nested calls run while these wrappers are mid-invocation.
                    session: if wrappers.is_empty() {
                        self.clone()
                    } else {
                        self.holding(wrappers.iter().map(|hook| hook.plugin))
                    },
                    registry: registry.clone(),
                    token,
                    deferred: deferred.clone(),
                    terminal: terminal.clone(),
                };
                self.wrapped(call.clone(), token, context, wrappers).await
            }
        };
        let outcome = normalize_value(tool, outcome);
        let post = if final_failure {
            crate::PostToolResult::untouched(outcome)
        } else {
            self.post_tool_checked(&call, &outcome, tool.and_then(|t| t.output.as_deref()))
                .await
        };
        let mut outcome = normalize_value(tool, post.outcome);
        if let Some(finalize) = tool.and_then(|t| t.finalize_content.as_ref()) {
            // Content only: the error flag, the value and the contexts are not its to change.
            // Contained: a panic in it is this call's error, not the caller's crash; the
            // content it was to vouch for is withheld.
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                finalize(&call, &outcome)
            })) {
                Ok(Some(content)) => outcome.content_blocks = content,
                Ok(None) => {}
                Err(_) => {
                    outcome = ToolOutcome::error(format!(
                        "{}'s finalize_content failed (it panicked); its content is withheld",
                        call.name
                    ));
                }
            }
        }
        self.tool_result(&call, &outcome).await;

        let contexts = if post.blocked.is_some() {
            post.contexts
        } else {
            let mut contexts =
                std::mem::take(&mut *deferred.lock().unwrap_or_else(|e| e.into_inner()));
            contexts.extend(post.contexts);
            contexts
        };
        ToolExecution {
            token,
            parent: request.parent,
            call,
            authorization,
            outcome,
            blocked: post.blocked,
            contexts,
            terminal: terminal.load(Ordering::Relaxed),
        }
    }

    /// The `tool-execute` wrappers of the call's tool, outermost first, around core
    /// dispatch. A wrapper's own deadline stops while it waits in `next()` (the tool's time
    /// is not the wrapper's), so the whole wrapped execution has a deadline of its own
    /// ([`HostBuilder::wrapped_execution_deadline`](crate::HostBuilder::wrapped_execution_deadline)):
    /// past it, the outcome is an error and the tool is cancelled. Also returns whether the
    /// outcome is a wrapper's failure: the outermost one's, or the deadline's.
    async fn wrapped(
        &self,
        call: Arc<ToolCall>,
        token: CallToken,
        context: ToolContext,
        wrappers: Vec<crate::plugin::HookRef>,
    ) -> (ToolOutcome, bool) {
        let wrapped = !wrappers.is_empty();
        let chain = Arc::new(Chain {
            session: self.clone(),
            shared_call: Shared::new((*call).clone()),
            call,
            token,
            context,
            wrappers,
        });
        if !wrapped {
            return (Chain::layer(chain, 0, None).await, false);
        }
        let deadline = self.shared.plugins.host.inner.wrapped_deadline;
        let name = chain.call.name.clone();
        match tokio::time::timeout(deadline, chain.wrap(&chain, 0)).await {
            Ok(wrapped) => wrapped,
            Err(_) => (
                ToolOutcome::error(format!(
                    "{name} with its tool-execute wrappers passed the overall deadline of a \
                     wrapped execution ({} s); the tool was cancelled",
                    deadline.as_secs_f64()
                )),
                true,
            ),
        }
    }
}

/// One call's wrapper chain: layer `i` is wrapper `i`, the last layer is core dispatch.
struct Chain {
    session: Session,
    call: Arc<ToolCall>,
    /// The call as a wrapper is handed it.
    shared_call: Arc<Shared<ToolCall>>,
    token: CallToken,
    context: ToolContext,
    wrappers: Vec<crate::plugin::HookRef>,
}

impl Chain {
    fn layer(
        chain: Arc<Chain>,
        index: usize,
        timeout_ms: Option<u32>,
    ) -> BoxFuture<'static, ToolOutcome> {
        Box::pin(async move {
            let run = async {
                match chain.wrappers.get(index) {
                    None => chain.dispatch().await,
                    Some(_) => chain.wrap(&chain, index).await.0,
                }
            };
            match timeout_ms {
                None => run.await,
                Some(ms) => match tokio::time::timeout(Duration::from_millis(ms.into()), run).await
                {
                    Ok(outcome) => outcome,
                    Err(_) => ToolOutcome::error(format!(
                        "{} timed out after {ms} ms (a tool-execute wrapper's deadline)",
                        chain.call.name
                    )),
                },
            }
        })
    }

    /// Runs wrapper `index`; its `next()` reaches layer `index + 1`. Also returns whether the
    /// wrapper failed (the outcome is its failure, not its answer).
    async fn wrap(&self, chain: &Arc<Chain>, index: usize) -> (ToolOutcome, bool) {
        let hook = &self.wrappers[index];
        let inner = chain.clone();
        let next: NextLayer =
            Arc::new(move |timeout_ms| Chain::layer(inner.clone(), index + 1, timeout_ms));
        let request = Request::ToolExecute(self.shared_call.clone().into(), next);
        let inv = self.session.begin(Point::ToolExecute);
        let mut report = self.session.report(inv);
        report.hooks = 1;
        let judged = self
            .session
            .judge_one(hook, inv, &request, |_, spec, response| {
                let Answer::ToolExecute(outcome) = response else {
                    unreachable!("a tool-execute request gets a tool-execute response")
                };
                if !spec.has(Capability::Wrap) {
                    return Verdict::NotGranted(Capability::Wrap);
                }
                match outcome.parse() {
                    Ok(outcome) => Verdict::Final(outcome),
                    Err(failure) => Verdict::Invalid(failure),
                }
            })
            .await;
        match judged {
            Judged::Stop(outcome) => {
                report.end("final", Some(hook));
                (outcome, false)
            }
            Judged::FailedClosed(denial) => {
                report.end("fail-closed", Some(hook));
                (ToolOutcome::error(denial.message), true)
            }
            Judged::Continue => {
                // Its failure does not fail closed, but nothing else runs the tool.
                report.end("fail-closed", Some(hook));
                let failed = format!(
                    "the tool-execute wrapper `{}` failed, so {} has no outcome",
                    hook.id, self.call.name
                );
                (ToolOutcome::error(failed), true)
            }
        }
    }

    /// Core dispatch: validate, run the body (isolated: a panic is an error outcome), and
    /// normalize what it returns.
    async fn dispatch(&self) -> ToolOutcome {
        let Some(tool) = self.context.registry.get(&self.call.name) else {
            return ToolOutcome::error(format!("unknown tool `{}`", self.call.name));
        };
        if let Some(validate) = &tool.input
            && let Err(problem) = validate(&self.call.arguments)
        {
            return ToolOutcome::error(format!("invalid input for {}: {problem}", self.call.name));
        }
        let body = (tool.body)(ToolInvocation {
            call: self.call.clone(),
            token: self.token,
            context: self.context.clone(),
        });
        let task = AbortOnDrop(tokio::spawn(body));
        let outcome = match task.wait().await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(message)) => ToolOutcome::error(message),
            Err(panic) => ToolOutcome::error(format!("{} failed: {panic}", self.call.name)),
        };
        // A wrapper's `next()` gets the canonical result, already normalized (docs/semantics.md
        // S1.32).
        normalize_value(Some(tool), outcome)
    }
}

/// A spawned tool body, aborted if the pipeline stops waiting for it (a wrapper's deadline).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    async fn wait(mut self) -> Result<T, String> {
        (&mut self.0).await.map_err(|e| {
            if e.is_panic() {
                "the tool panicked".to_string()
            } else {
                "the tool was cancelled".to_string()
            }
        })
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Checks the canonical value against the tool's output declaration, and derives the
/// presentation from it where there is none.
fn normalize_value(tool: Option<&Tool>, mut outcome: ToolOutcome) -> ToolOutcome {
    if let (Some(value), Some(validate)) = (&outcome.value, tool.and_then(|t| t.output.as_ref()))
        && let Err(problem) = validate(value)
    {
        return ToolOutcome::error(format!("the tool produced an invalid value: {problem}"));
    }
    if outcome.content_blocks.is_empty()
        && let Some(value) = &outcome.value
    {
        outcome.content_blocks = project_value(value);
    }
    outcome
}
