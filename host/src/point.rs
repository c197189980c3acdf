//! Extension points and what a hook on each may be granted.
//!
//! | point | exported interface | capabilities a hook may hold |
//! |---|---|---|
//! | `session-start` | `session-start` | observe, transform (inject contexts) |
//! | `prompt-submit` | `prompt-submit` | observe, guard (reject), transform (contexts) |
//! | `pre-tool` | `pre-tool` | observe, guard (deny / ask) |
//! | `tool-guard` | `tool-guard` | observe, guard (deny) |
//! | `tool-execute` | `tool-execute` | wrap |
//! | `post-tool` | `post-tool` | observe, guard (block), transform (replace, contexts) |
//! | `tool-result` | `tool-result` | observe |
//! | `turn-stopping` | `turn-stopping` | observe, steer |
//! | the six committed facts | `committed` | observe |

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A named place in the agent's lifecycle where hooks run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Point {
    /// Once, before turn 1.
    SessionStart,
    /// Before every proposed step (pre-step).
    PromptSubmit,
    /// Before a tool call.
    PreTool,
    /// After the whole `pre-tool` waterfall: deny or abstain.
    ToolGuard,
    /// Around dispatch.
    ToolExecute,
    /// After dispatch.
    PostTool,
    /// After every transform: observe only.
    ToolResult,
    /// At the natural stop boundary of a turn.
    TurnStopping,
    /// Committed fact: a message was appended.
    MessageCommitted,
    /// Committed fact: a tool call was recorded.
    ToolCallCommitted,
    /// Committed fact: a tool result was recorded.
    ToolResultCommitted,
    /// Committed fact: a model response was recorded.
    LlmResponseCommitted,
    /// Committed fact: a turn closed.
    TurnCompleted,
    /// Committed fact: the session ended.
    SessionEnded,
}

impl Point {
    /// Every point, in lifecycle order.
    pub const ALL: [Point; 14] = [
        Point::SessionStart,
        Point::PromptSubmit,
        Point::PreTool,
        Point::ToolGuard,
        Point::ToolExecute,
        Point::PostTool,
        Point::ToolResult,
        Point::TurnStopping,
        Point::MessageCommitted,
        Point::ToolCallCommitted,
        Point::ToolResultCommitted,
        Point::LlmResponseCommitted,
        Point::TurnCompleted,
        Point::SessionEnded,
    ];

    /// The point's place in [`Point::ALL`].
    pub(crate) const fn index(self) -> usize {
        self as usize
    }

    /// The point's name, as written in manifests (`pre-tool`).
    pub fn as_str(self) -> &'static str {
        match self {
            Point::SessionStart => "session-start",
            Point::PromptSubmit => "prompt-submit",
            Point::PreTool => "pre-tool",
            Point::ToolGuard => "tool-guard",
            Point::ToolExecute => "tool-execute",
            Point::PostTool => "post-tool",
            Point::ToolResult => "tool-result",
            Point::TurnStopping => "turn-stopping",
            Point::MessageCommitted => "message-committed",
            Point::ToolCallCommitted => "tool-call-committed",
            Point::ToolResultCommitted => "tool-result-committed",
            Point::LlmResponseCommitted => "llm-response-committed",
            Point::TurnCompleted => "turn-completed",
            Point::SessionEnded => "session-ended",
        }
    }

    /// The WIT interface a component must export to serve this point.
    pub fn interface(self) -> Interface {
        match self {
            Point::SessionStart => Interface::SessionStart,
            Point::PromptSubmit => Interface::PromptSubmit,
            Point::PreTool => Interface::PreTool,
            Point::ToolGuard => Interface::ToolGuard,
            Point::ToolExecute => Interface::ToolExecute,
            Point::PostTool => Interface::PostTool,
            Point::ToolResult => Interface::ToolResult,
            Point::TurnStopping => Interface::TurnStopping,
            Point::MessageCommitted
            | Point::ToolCallCommitted
            | Point::ToolResultCommitted
            | Point::LlmResponseCommitted
            | Point::TurnCompleted
            | Point::SessionEnded => Interface::Committed,
        }
    }

    /// Whether this point is a committed fact (observe only, always).
    pub fn is_committed_fact(self) -> bool {
        self.interface() == Interface::Committed
    }

    /// The capabilities a hook on this point may be granted.
    pub fn allowed_capabilities(self) -> &'static [Capability] {
        use Capability::*;
        match self {
            Point::SessionStart => &[Observe, Transform],
            Point::PromptSubmit => &[Observe, Guard, Transform],
            Point::PreTool | Point::ToolGuard => &[Observe, Guard],
            Point::ToolExecute => &[Wrap],
            Point::PostTool => &[Observe, Guard, Transform],
            Point::TurnStopping => &[Observe, Steer],
            _ => &[Observe],
        }
    }

    /// Whether a foreground hook's failure here fails closed (unless the hook says
    /// `on_failure = "allow"`), and what "closed" is:
    ///
    /// | point | closed |
    /// |---|---|
    /// | `pre-tool`, `tool-guard` | the call is denied |
    /// | `prompt-submit` | the step is rejected |
    /// | `post-tool` | the result is blocked: replaced by an error naming the hook and the failure |
    /// | `tool-execute` | the call's outcome is an error naming the wrapper and the failure |
    ///
    /// At `session-start` and `turn-stopping` a failure is recorded and the point's safe
    /// default applies: startup goes on without that hook's contexts (session-start cannot
    /// block startup: docs/semantics.md S1.7), and the turn stops as it would have without that hook's
    /// steering. `tool-result` and the committed facts are observe-only: failures are
    /// contained there.
    pub fn fails_closed(self) -> bool {
        matches!(
            self,
            Point::PromptSubmit
                | Point::PreTool
                | Point::ToolGuard
                | Point::ToolExecute
                | Point::PostTool
        )
    }

    /// Whether a tool-name matcher means anything on this point.
    pub fn has_tool(self) -> bool {
        matches!(
            self,
            Point::PreTool
                | Point::ToolGuard
                | Point::ToolExecute
                | Point::PostTool
                | Point::ToolResult
                | Point::ToolCallCommitted
                | Point::ToolResultCommitted
        )
    }
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Point {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Point::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Point::ALL.iter().map(|p| p.as_str()).collect();
                format!("unknown point `{s}`; expected one of: {}", names.join(", "))
            })
    }
}

macro_rules! interfaces {
    (version $version:literal; $($(#[doc = $doc:literal])* $variant:ident $snake:ident $wit:literal $method:ident ($($arg:ident: $ty:ty),*) -> ($($ret:ty)?) $mdoc:literal;)*) => {
        /// An exported WIT interface of `palisade:hooks` (one per row of
        /// [`palisade_wit::foreach_interface!`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Interface {
            $(
                #[doc = concat!("`palisade:hooks/", $wit, "`")]
                $variant,
            )*
        }

        impl Interface {
            /// Every interface, in lifecycle order.
            pub const ALL: &[Interface] = &[$(Interface::$variant),*];

            /// The interface's name in the package (`pre-tool`).
            pub fn name(self) -> &'static str {
                match self {
                    $(Interface::$variant => $wit,)*
                }
            }

            /// The interface's full name, as a component exports it.
            pub fn wit_name(self) -> &'static str {
                match self {
                    $(Interface::$variant => concat!("palisade:hooks/", $wit, "@", $version),)*
                }
            }
        }
    };
}
palisade_wit::foreach_interface!(interfaces);

/// What a hook's decision is allowed to change. Granted per hook in the manifest; a component
/// can never grant itself one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Capability {
    /// Never changes the outcome: what the hook returns is recorded, not honoured.
    Observe,
    /// May veto: deny / ask (pre-tool), deny (tool-guard), reject (prompt-submit),
    /// block (post-tool).
    Guard,
    /// May add contexts, or replace a result's content or value.
    Transform,
    /// May wrap dispatch (`tool-execute`).
    Wrap,
    /// May steer a stopping turn to continue.
    Steer,
}

impl Capability {
    /// The capability's name, as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Observe => "observe",
            Capability::Guard => "guard",
            Capability::Transform => "transform",
            Capability::Wrap => "wrap",
            Capability::Steer => "steer",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Capability {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        use Capability::*;
        [Observe, Guard, Transform, Wrap, Steer]
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| {
                format!("unknown capability `{s}`; the capabilities are observe, guard, transform, wrap, steer")
            })
    }
}

/// Whether a hook is awaited on the critical path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Mode {
    /// Awaited in order; can affect the outcome (given the capability).
    #[default]
    Foreground,
    /// Off the critical path; must be `observe`; dropped (and counted) under saturation.
    Background,
}

impl Mode {
    /// The mode's name, as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Foreground => "foreground",
            Mode::Background => "background",
        }
    }
}

/// What a foreground hook's runtime failure means.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum OnFailure {
    /// Fail closed: the point denies, with a reason code naming the failure. The default.
    #[default]
    Deny,
    /// Fail open: the failure is recorded and the hook counts as having no objection.
    Allow,
}

impl OnFailure {
    /// The policy's name, as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Deny => "deny",
            OnFailure::Allow => "allow",
        }
    }
}

/// How long a plugin instance lives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum InstanceLifetime {
    /// A fresh store and instance for every call: maximum isolation, no state.
    ///
    /// From its second call on, a call usually takes a spare instance made ahead of it,
    /// after the call before (see [`HostBuilder::spare_instances`](crate::HostBuilder::spare_instances)),
    /// and pays no instantiation: one no call has used, so isolation is the same. A plugin
    /// whose instantiation makes a Palisade host call other than `config` or an HTTP
    /// request needs its invocation to instantiate; it gets no spares, nor one whose
    /// instantiation failed or overran. A call under other limits than the spare's, or that
    /// comes while the spare is still being made, instantiates for itself.
    PerCall,
    /// One instance per session, reused across its calls (state survives); a failed
    /// instance is discarded and the next call gets a fresh one. The default.
    #[default]
    PerSession,
}

impl InstanceLifetime {
    /// The lifetime's name, as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceLifetime::PerCall => "per-call",
            InstanceLifetime::PerSession => "per-session",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Point;

    /// The hooks of a point are found by its index ([`Point::index`]).
    #[test]
    fn a_points_index_is_its_place_in_all() {
        for (i, point) in Point::ALL.into_iter().enumerate() {
            assert_eq!(point.index(), i, "{point}");
        }
    }
}
