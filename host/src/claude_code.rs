//! Claude Code's hook protocol, which Codex speaks too: the event a hook reads and the answer
//! it gives.
//!
//! One set of types for every place the protocol crosses: the bridges read [`HookEvent`]s and
//! answer [`HookAnswer`]s (as does `palisade serve`); a command or HTTP hook with
//! `protocol = "claude-code"` is sent a [`HookEvent`] (with Palisade's own fields beside it)
//! and its answer is read as a [`HookAnswer`], refusing any field the protocol does not have.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One hook event, as the agent writes it to a hook command's stdin (or POSTs it to an HTTP
/// hook). Every field but the event's name depends on the event; fields this type does not
/// name are kept in [`HookEvent::other`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HookEvent {
    /// `SessionStart`, `UserPromptSubmit`, `PreToolUse`, `PostToolUse`, `Stop`,
    /// `SubagentStop`, `SessionEnd`, ...
    pub hook_event_name: String,
    /// The agent's session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Claude Code's id of the prompt's turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_id: Option<String>,
    /// Codex's id of the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// `SessionStart`: `startup`, `resume`, `clear` or `compact`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// `UserPromptSubmit`: the user's prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The tool events: the tool's name (`mcp__<server>__<tool>` for an MCP tool).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// The tool events: the call's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_input: Option<Value>,
    /// The tool events: the call's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// `PostToolUse`: the tool's result (an object from Claude Code, a string from Codex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_response: Option<Value>,
    /// `Stop`: whether the agent already continues because a stop hook said so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_hook_active: Option<bool>,
    /// `Stop`: the assistant's last message, where the agent sends it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_assistant_message: Option<String>,
    /// `SessionEnd`: why the session ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Every other field (`transcript_path`, `cwd`, `permission_mode`, ...; and, on the way
    /// to a command or HTTP hook, Palisade's own).
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Read in one pass, each field taken as it comes and every other one kept in `other` (what
/// `#[serde(flatten)]` would do, without first buffering the whole event): a server reads one
/// per request. As for any JSON object, a name given twice keeps its last value; a named
/// field's `null` is its absence. A field added to [`HookEvent`] is named here too, or it is
/// read into `other`: `an_event_reads_the_same_from_text_and_from_json` sets every field and
/// fails until it is.
impl<'de> Deserialize<'de> for HookEvent {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{Error, MapAccess, Visitor};
        use std::fmt;

        /// A field's name: one [`HookEvent`] names (read without a copy), or another.
        enum Field {
            HookEventName,
            SessionId,
            PromptId,
            TurnId,
            Source,
            Prompt,
            ToolName,
            ToolInput,
            ToolUseId,
            ToolResponse,
            StopHookActive,
            LastAssistantMessage,
            Reason,
            Other(String),
        }

        impl<'de> Deserialize<'de> for Field {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct Name;
                impl Visitor<'_> for Name {
                    type Value = Field;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        f.write_str("a field name")
                    }
                    fn visit_str<E: Error>(self, name: &str) -> Result<Field, E> {
                        Ok(match name {
                            "hook_event_name" => Field::HookEventName,
                            "session_id" => Field::SessionId,
                            "prompt_id" => Field::PromptId,
                            "turn_id" => Field::TurnId,
                            "source" => Field::Source,
                            "prompt" => Field::Prompt,
                            "tool_name" => Field::ToolName,
                            "tool_input" => Field::ToolInput,
                            "tool_use_id" => Field::ToolUseId,
                            "tool_response" => Field::ToolResponse,
                            "stop_hook_active" => Field::StopHookActive,
                            "last_assistant_message" => Field::LastAssistantMessage,
                            "reason" => Field::Reason,
                            other => Field::Other(other.to_string()),
                        })
                    }
                }
                deserializer.deserialize_identifier(Name)
            }
        }

        struct Event;

        impl<'de> Visitor<'de> for Event {
            type Value = HookEvent;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a hook event: a JSON object with a `hook_event_name`")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<HookEvent, A::Error> {
                let mut event = HookEvent::default();
                let mut name = None;
                while let Some(field) = map.next_key::<Field>()? {
                    match field {
                        Field::HookEventName => name = Some(map.next_value::<String>()?),
                        Field::SessionId => event.session_id = map.next_value()?,
                        Field::PromptId => event.prompt_id = map.next_value()?,
                        Field::TurnId => event.turn_id = map.next_value()?,
                        Field::Source => event.source = map.next_value()?,
                        Field::Prompt => event.prompt = map.next_value()?,
                        Field::ToolName => event.tool_name = map.next_value()?,
                        Field::ToolInput => event.tool_input = map.next_value()?,
                        Field::ToolUseId => event.tool_use_id = map.next_value()?,
                        Field::ToolResponse => event.tool_response = map.next_value()?,
                        Field::StopHookActive => event.stop_hook_active = map.next_value()?,
                        Field::LastAssistantMessage => {
                            event.last_assistant_message = map.next_value()?
                        }
                        Field::Reason => event.reason = map.next_value()?,
                        Field::Other(key) => {
                            let value = map.next_value()?;
                            event.other.insert(key, value);
                        }
                    }
                }
                event.hook_event_name =
                    name.ok_or_else(|| Error::missing_field("hook_event_name"))?;
                Ok(event)
            }
        }

        deserializer.deserialize_map(Event)
    }
}

impl HookEvent {
    /// The event named `hook_event_name`, with no other field.
    pub fn new(hook_event_name: impl Into<String>) -> HookEvent {
        HookEvent {
            hook_event_name: hook_event_name.into(),
            ..HookEvent::default()
        }
    }

    /// The agent's id for the event's turn, where it gives one.
    pub fn turn_key(&self) -> Option<&str> {
        self.prompt_id.as_deref().or(self.turn_id.as_deref())
    }
}

/// A hook's answer. Only these fields: anything else is refused when a hook's answer is read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HookAnswer {
    /// `false` stops the agent (with [`HookAnswer::stop_reason`]).
    #[serde(rename = "continue", default, skip_serializing_if = "Option::is_none")]
    pub keep_going: Option<bool>,
    /// Why the agent stops, with `continue: false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Hide the hook's output from the transcript.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suppress_output: Option<bool>,
    /// A message for the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_message: Option<String>,
    /// The top-level decision: `block` (a prompt, a tool's result, a stop) or the legacy
    /// `approve`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// Why, with [`HookAnswer::decision`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The event's own answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_specific_output: Option<HookSpecificOutput>,
}

impl HookAnswer {
    /// `{"decision": "block", "reason": reason}`.
    pub fn block(reason: impl Into<String>) -> HookAnswer {
        HookAnswer {
            decision: Some(Decision::Block),
            reason: Some(reason.into()),
            ..HookAnswer::default()
        }
    }

    /// `PreToolUse`'s permission decision, with its reason.
    pub fn permission(decision: Permission, reason: impl Into<String>) -> HookAnswer {
        HookAnswer::permission_at("PreToolUse", decision, reason)
    }

    /// A permission decision with its reason, at `event` (`PreToolUse`,
    /// `PreSkillShellCommand`): the answer names the event it answers.
    pub fn permission_at(
        event: &str,
        decision: Permission,
        reason: impl Into<String>,
    ) -> HookAnswer {
        HookAnswer {
            hook_specific_output: Some(HookSpecificOutput {
                permission_decision: Some(decision),
                permission_decision_reason: Some(reason.into()),
                ..HookSpecificOutput::new(event)
            }),
            ..HookAnswer::default()
        }
    }

    /// `PermissionRequest`'s denial: the agent denies the call instead of asking its user.
    pub fn permission_request_denied(message: impl Into<String>) -> HookAnswer {
        HookAnswer {
            hook_specific_output: Some(HookSpecificOutput {
                decision: Some(PermissionRequestDecision {
                    behavior: Permission::Deny,
                    message: Some(message.into()),
                }),
                ..HookSpecificOutput::new("PermissionRequest")
            }),
            ..HookAnswer::default()
        }
    }

    /// Declines an MCP server's question to the user (`Elicitation`): the user never sees it,
    /// the server hears `decline`, and the user reads `message`.
    pub fn elicitation_declined(message: impl Into<String>) -> HookAnswer {
        HookAnswer {
            system_message: Some(message.into()),
            hook_specific_output: Some(HookSpecificOutput {
                action: Some(ElicitationAction::Decline),
                ..HookSpecificOutput::new("Elicitation")
            }),
            ..HookAnswer::default()
        }
    }

    /// Context for the model, on `event` (`SessionStart`, `UserPromptSubmit`, `PostToolUse`).
    pub fn context(event: &str, context: impl Into<String>) -> HookAnswer {
        HookAnswer::default().with_context(event, context)
    }

    /// This answer, with context for the model on `event`.
    pub fn with_context(mut self, event: &str, context: impl Into<String>) -> HookAnswer {
        self.hook_specific_output = Some(HookSpecificOutput {
            additional_context: Some(context.into()),
            ..HookSpecificOutput::new(event)
        });
        self
    }
}

/// [`HookAnswer::decision`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Block the prompt, the tool's result or the stop.
    Block,
    /// Legacy: allow a tool call.
    Approve,
}

/// The event-specific part of a [`HookAnswer`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HookSpecificOutput {
    /// The event answered; must be the event asked, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_event_name: Option<String>,
    /// `PreToolUse`: allow, deny or ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_decision: Option<Permission>,
    /// Why, with the permission decision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permission_decision_reason: Option<String>,
    /// Context for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<String>,
    /// `PostToolUse`: the tool's output the model reads instead of its own, in the tool's own
    /// output shape (Claude Code ignores one of another shape).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_tool_output: Option<Value>,
    /// `PermissionRequest` (Claude Code, Codex): the answer to the permission dialog the agent
    /// is about to show.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<PermissionRequestDecision>,
    /// `Elicitation`, `ElicitationResult` (Claude Code): the answer to an MCP server's
    /// question to the user, given in the user's place (Palisade answers only `decline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<ElicitationAction>,
    /// With `action: accept`: the content answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
}

/// [`HookSpecificOutput::action`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitationAction {
    /// Answer with content.
    Accept,
    /// Decline the question: the server hears `{"action": "decline"}`.
    Decline,
    /// Cancel it.
    Cancel,
}

/// [`HookSpecificOutput::decision`]: what the agent does instead of asking its user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionRequestDecision {
    /// `deny` (Palisade never answers `allow`: its guards object or abstain).
    pub behavior: Permission,
    /// Why, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl HookSpecificOutput {
    /// The output of `event`, with nothing in it yet.
    pub fn new(event: &str) -> HookSpecificOutput {
        HookSpecificOutput {
            hook_event_name: Some(event.to_string()),
            ..HookSpecificOutput::default()
        }
    }
}

/// `PreToolUse`'s permission decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// Allow the call (skipping the agent's own permission prompt).
    Allow,
    /// Deny it.
    Deny,
    /// Ask the user.
    Ask,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An event reads the same straight from its text (what `palisade serve` does) as from a
    /// JSON tree (the bridges, replay): each named field in its place, `null` as absent, the
    /// last of a name given twice, every other field in `other`.
    #[test]
    fn an_event_reads_the_same_from_text_and_from_json() {
        let text = r#"{"session_id":"s","hook_event_name":"PreToolUse","cwd":"/w",
            "tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"t1",
            "prompt":null,"prompt_id":"p","turn_id":"u","source":"startup","reason":"r",
            "tool_response":"out","stop_hook_active":true,"last_assistant_message":"m",
            "permission_mode":"default","cwd":"/last","hook_event_name":"PreToolUse"}"#;
        let expected = HookEvent {
            hook_event_name: "PreToolUse".into(),
            session_id: Some("s".into()),
            prompt_id: Some("p".into()),
            turn_id: Some("u".into()),
            source: Some("startup".into()),
            prompt: None,
            tool_name: Some("Bash".into()),
            tool_input: Some(json!({ "command": "ls" })),
            tool_use_id: Some("t1".into()),
            tool_response: Some(json!("out")),
            stop_hook_active: Some(true),
            last_assistant_message: Some("m".into()),
            reason: Some("r".into()),
            other: serde_json::from_value(json!({ "cwd": "/last", "permission_mode": "default" }))
                .unwrap(),
        };
        assert_eq!(serde_json::from_str::<HookEvent>(text).unwrap(), expected);
        let tree: Value = serde_json::from_str(text).unwrap();
        assert_eq!(HookEvent::deserialize(&tree).unwrap(), expected);
        // And it writes back as it was read (the fields a command hook is sent).
        assert_eq!(
            serde_json::from_value::<HookEvent>(serde_json::to_value(&expected).unwrap()).unwrap(),
            expected
        );
        for refused in [r#"{"session_id":"s"}"#, "[]", r#"{"hook_event_name":1}"#] {
            assert!(
                serde_json::from_str::<HookEvent>(refused).is_err(),
                "{refused}"
            );
        }
        let wrong_type = r#"{"hook_event_name":"PreToolUse","tool_name":7}"#;
        assert!(serde_json::from_str::<HookEvent>(wrong_type).is_err());
    }

    #[test]
    fn answers_serialize_as_claude_code_reads_them() {
        assert_eq!(
            serde_json::to_value(HookAnswer::permission(Permission::Deny, "no")).unwrap(),
            json!({ "hookSpecificOutput": { "hookEventName": "PreToolUse",
                "permissionDecision": "deny", "permissionDecisionReason": "no" } })
        );
        assert_eq!(
            serde_json::to_value(HookAnswer::block("stop").with_context("PostToolUse", "c"))
                .unwrap(),
            json!({ "decision": "block", "reason": "stop", "hookSpecificOutput": {
                "hookEventName": "PostToolUse", "additionalContext": "c" } })
        );
    }

    #[test]
    fn an_event_keeps_the_fields_it_does_not_name() {
        let raw = json!({ "hook_event_name": "PreToolUse", "session_id": "s", "cwd": "/w",
            "tool_name": "Bash", "tool_input": { "command": "ls" } });
        let event: HookEvent = serde_json::from_value(raw.clone()).unwrap();
        assert_eq!(event.tool_name.as_deref(), Some("Bash"));
        assert_eq!(event.other["cwd"], "/w");
        assert_eq!(serde_json::to_value(&event).unwrap(), raw);
    }

    #[test]
    fn an_answer_with_a_field_the_protocol_lacks_is_refused() {
        for answer in [
            json!({ "patches": [] }),
            json!({ "hookSpecificOutput": { "updatedInput": {} } }),
        ] {
            assert!(serde_json::from_value::<HookAnswer>(answer).is_err());
        }
    }
}
