//! What differs per point when a request crosses to a command or HTTP hook and its answer comes
//! back: one [`PointWire`] per interface, implemented in `points/<point>.rs` beside the point's
//! rule, found here by interface ([`of`]). The wire formats keep what every point shares (the
//! envelope, the checks every answer meets, the JSON of a tool call):
//! `runtime/external/wire.rs` (Claude Code's hook protocol) and `runtime/external/native.rs`
//! (the palisade protocol).
//!
//! Sits on the vocabulary (`hook`, `point`, `claude_code`, `failure`); the wire formats and the
//! fuzzing harness use it; the points implement it.

use crate::claude_code::{Decision, HookAnswer, HookEvent, HookSpecificOutput, Permission};
use crate::failure::{Failure, FailureReason};
use crate::hook::{self, Answer, Request};
use crate::point::{Interface, Point};
use serde_json::Value;

/// One interface's projections onto the two wire formats of command and HTTP hooks.
pub(crate) trait PointWire: Sync {
    /// Claude Code's name for the event at `point`, where it has one; Palisade's (PascalCase)
    /// otherwise. See `docs/runtimes.md` for the table.
    fn claude_event(&self, point: Point) -> &'static str;

    /// The request's own fields on Claude Code's event (the envelope is the wire's).
    fn claude_fields(&self, request: &Request<'_>, event: &mut HookEvent);

    /// Whether plain text a hook prints (not a JSON object) is context, as Claude Code makes
    /// it at `SessionStart` and `UserPromptSubmit`; elsewhere it is ignored.
    fn plain_text_is_context(&self) -> bool {
        false
    }

    /// The answer a Claude Code answer gives, once the checks every answer meets have passed
    /// (`continue`, `hookEventName`, `updatedToolOutput`).
    fn claude_answer(&self, reply: &ClaudeReply<'_>) -> Result<Answer, Failure>;

    /// The request's `input` in the palisade protocol.
    fn native_input(&self, request: &Request<'_>) -> Value;

    /// The answer `decision` (not null) gives in the palisade protocol; refused at an
    /// observer, which answers nothing.
    fn native_answer(&self, point: Point, _decision: Value) -> Result<Answer, Failure> {
        Err(invalid(format!(
            "`{point}` takes no decision: an observer answers nothing"
        )))
    }

    /// The answer of a hook that said nothing but, maybe, `contexts`: allow, abstain, enter,
    /// accept, no steering; nothing at an observer.
    fn neutral(&self, _contexts: Vec<String>) -> Answer {
        Answer::Observed
    }

    /// The point's veto (deny, reject, block, steer) with `message` and `reason_code`, where
    /// it has one.
    fn veto(&self, _message: String, _reason_code: &str) -> Option<Answer> {
        None
    }

    /// The point's veto with `message`, or nothing where it has none: what a blocking exit
    /// answers.
    fn refusal(&self, message: String, reason_code: &str) -> Answer {
        self.veto(message, reason_code)
            .unwrap_or_else(|| self.neutral(Vec::new()))
    }

    /// The answer of a hook that stopped the agent (`continue: false`): the veto, or nothing
    /// where the point has none.
    fn stopped(&self, message: String) -> Answer {
        self.refusal(message, "stop")
    }

    /// A request at `point`, for the fuzzed decoders and the wire formats' tests.
    #[cfg(any(test, feature = "fuzzing"))]
    fn sample(&self, point: Point) -> Request<'static>;
}

/// A Claude Code answer, as [`PointWire::claude_answer`] reads it.
pub(crate) struct ClaudeReply<'a> {
    pub point: Point,
    pub hook_id: &'a str,
    pub answer: &'a HookAnswer,
    pub specific: &'a HookSpecificOutput,
    /// `hookSpecificOutput.additionalContext`, when given.
    pub contexts: Vec<String>,
}

impl ClaudeReply<'_> {
    /// The refusal of `field`, which this point does not take.
    pub fn refuse(&self, field: &str) -> Failure {
        invalid(format!(
            "`{field}` is not an answer `{}` takes at `{}`",
            of(self.point.interface()).claude_event(self.point),
            self.point
        ))
    }

    /// Refuses contexts, at a point that takes none.
    pub fn no_contexts(&self) -> Result<(), Failure> {
        match self.contexts.is_empty() {
            true => Ok(()),
            false => Err(self.refuse("hookSpecificOutput.additionalContext")),
        }
    }

    /// Refuses a `decision`, at a point that takes none.
    pub fn no_decision(&self) -> Result<(), Failure> {
        match self.answer.decision {
            None => Ok(()),
            Some(_) => Err(self.refuse("decision")),
        }
    }

    /// Refuses a permission (`permissionDecision`, its reason, `decision: "approve"`), at a
    /// point that is not a tool's.
    pub fn no_permission(&self) -> Result<(), Failure> {
        if self.specific.permission_decision.is_some() {
            return Err(self.refuse("hookSpecificOutput.permissionDecision"));
        }
        if self.specific.permission_decision_reason.is_some() {
            return Err(self.refuse("hookSpecificOutput.permissionDecisionReason"));
        }
        if self.answer.decision == Some(Decision::Approve) {
            return Err(self.refuse("decision: \"approve\""));
        }
        Ok(())
    }

    /// The reason of `decision: "block"`, when the answer blocks.
    pub fn blocked(&self) -> Option<String> {
        (self.answer.decision == Some(Decision::Block)).then(|| {
            self.answer
                .reason
                .clone()
                .filter(|r| !r.trim().is_empty())
                .unwrap_or_else(|| format!("blocked by `{}`", self.hook_id))
        })
    }

    /// A tool's permission, no contexts: `permissionDecision` (or the legacy `decision`),
    /// with its reason or one naming the hook.
    pub fn tool_permission(&self) -> Result<ToolPermission, Failure> {
        self.no_contexts()?;
        let (permission, reason) = self.permission();
        let hook_id = self.hook_id;
        Ok(match permission {
            Some(Permission::Deny) => ToolPermission::Deny(deny(
                reason.unwrap_or_else(|| format!("denied by `{hook_id}`")),
                "deny",
            )),
            Some(Permission::Ask) => {
                ToolPermission::Ask(reason.unwrap_or_else(|| format!("`{hook_id}` asks")))
            }
            _ => ToolPermission::Allow,
        })
    }

    fn permission(&self) -> (Option<Permission>, Option<String>) {
        let permission = match (self.specific.permission_decision, self.answer.decision) {
            (Some(p), _) => Some(p),
            (None, Some(Decision::Block)) => Some(Permission::Deny),
            (None, Some(Decision::Approve)) => Some(Permission::Allow),
            (None, None) => None,
        };
        let reason = self
            .specific
            .permission_decision_reason
            .clone()
            .or(self.answer.reason.clone())
            .filter(|r| !r.trim().is_empty());
        (permission, reason)
    }
}

/// A tool's permission, as [`ClaudeReply::tool_permission`] reads it.
pub(crate) enum ToolPermission {
    Allow,
    Deny(hook::Deny),
    Ask(String),
}

macro_rules! kinds {
    (version $version:literal; $($(#[doc = $doc:literal])* $variant:ident $snake:ident $wit:literal $method:ident ($($arg:ident: $ty:ty),*) -> ($($ret:ty)?) $mdoc:literal;)*) => {
        /// One type per interface, which `points/<point>.rs` implements [`PointWire`] for.
        pub(crate) mod kind {
            $(
                #[doc = concat!("`", $wit, "`")]
                pub(crate) struct $variant;
            )*
        }

        /// The interface's [`PointWire`].
        pub(crate) fn of(interface: Interface) -> &'static dyn PointWire {
            match interface {
                $(Interface::$variant => &kind::$variant,)*
            }
        }

        impl Request<'_> {
            /// The interface whose hooks are asked.
            pub fn interface(&self) -> Interface {
                match self {
                    $(Request::$variant { .. } => Interface::$variant,)*
                }
            }
        }
    };
}
palisade_wit::foreach_interface!(kinds);

/// An answer that is not one: `invalid-response`, which fails closed.
pub(crate) fn invalid(detail: impl Into<String>) -> Failure {
    Failure::new(FailureReason::InvalidResponse, detail)
}

/// A refusal with `message`, under `reason_code`.
pub(crate) fn deny(message: String, reason_code: &str) -> hook::Deny {
    hook::Deny {
        reason_code: reason_code.to_string(),
        message,
        payload: None,
    }
}

/// A tool call, for [`PointWire::sample`].
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn sample_call() -> std::sync::Arc<hook::Shared<crate::types::ToolCall>> {
    hook::Shared::new(crate::types::ToolCall::new(
        "t",
        "Bash",
        serde_json::json!({}),
    ))
}

impl Request<'_> {
    /// The projections of the request's interface.
    pub fn wire(&self) -> &'static dyn PointWire {
        of(self.interface())
    }
}
