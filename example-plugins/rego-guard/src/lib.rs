//! `rego-guard`: a guard whose policy is Rego, read from files the manifest grants read-only
//! (`/policy`): every `*.rego` file is a module of one policy, and every `*.json` or `*.yaml`
//! file beside them is data, under its file's name (`data.deny_list` for `deny_list.json`).
//! The Rego interpreter (regorus) runs inside the plugin, so the policy runs under the
//! plugin's fuel, deadline and memory: a pathological rule stops there and fails closed.
//!
//! The policy answers in package `palisade`, for the request in `input` (docs/policies.md):
//!
//! - `deny`: a set of objects `{"reason_code": ..., "message": ...}` (or of strings, the
//!   message alone): any member denies, the first in Rego's order is the answer;
//! - `ask` (pre-tool only): a set of reasons to ask the user.
//!
//! The policy is read when the instance starts and read again when a file of the folder
//! changes (its size or time), so an edit takes effect on the next call. A policy that
//! cannot be read or parsed, or whose rules fail to evaluate, denies every call, saying which
//! file and line (fails closed: a guard without its policy must not allow everything).

use palisade_sdk::{
    Config, Deny, Plugin, PreStep, PreStepDecision, PreTool, PreToolDecision, PromptSubmit,
    Provenance, ToolCall, WatchedFolder, export, log,
};
use serde_json::{Value, json};

/// Where the manifest's `files` grant puts the policy folder.
const POLICY: &str = "/policy";
/// The version of the input document's shape (docs/policies.md).
const INPUT_VERSION: u32 = 1;
/// The answers' rules, defined empty beside the policy's own.
const ANSWERS: &str = "package palisade\n\nimport rego.v1\n\n\
    deny contains x if {\n\tx := 0\n\tfalse\n}\n\nask contains x if {\n\tx := 0\n\tfalse\n}\n";

struct RegoGuard {
    /// The policy as last read, or why it cannot be used.
    policy: Result<regorus::Engine, String>,
    /// The policy folder, watched for edits.
    folder: WatchedFolder,
}

impl Plugin for RegoGuard {
    fn new(_config: &Config) -> Self {
        let folder = WatchedFolder::new(POLICY);
        RegoGuard {
            policy: load(&folder),
            folder,
        }
    }
}

/// The policy of `folder`: its modules and data in one engine, or why it cannot be used (the
/// file, and the line when the parser names one).
fn load(folder: &WatchedFolder) -> Result<regorus::Engine, String> {
    let mut engine = regorus::Engine::new();
    // `deny` and `ask` are defined, empty, for a policy that has rules of only one of them:
    // a rule the policy does not define is then no answer, not an error.
    engine
        .add_policy("palisade-answers.rego".into(), ANSWERS.into())
        .map_err(|e| format!("the plugin's own module is not valid Rego: {e}"))?;
    let mut modules = 0;
    for path in folder.files() {
        let name = path.display().to_string();
        let extension = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or_default();
        match extension {
            "rego" => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("the policy file {name} cannot be read: {e}"))?;
                engine
                    .add_policy(name.clone(), text)
                    .map_err(|e| format!("the policy file {name} is not valid Rego: {e}"))?;
                modules += 1;
            }
            "json" | "yaml" | "yml" => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("the data file {name} cannot be read: {e}"))?;
                let value = match extension {
                    "json" => regorus::Value::from_json_str(&text),
                    _ => regorus::Value::from_yaml_str(&text),
                }
                .and_then(|value| value.to_json_str())
                .map_err(|e| format!("the data file {name} cannot be parsed: {e}"))?;
                // Under the file's name: `data.branches` for branches.json.
                let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("data");
                let data = format!("{{{}: {value}}}", Value::from(stem));
                engine
                    .add_data_json(&data)
                    .map_err(|e| format!("the data file {name} does not fit the data: {e}"))?;
            }
            _ => {}
        }
    }
    if modules == 0 {
        return Err(format!(
            "the policy folder {} holds no .rego file",
            folder.path().display()
        ));
    }
    Ok(engine)
}

impl RegoGuard {
    /// The policy, read again when a file of the folder changed.
    fn policy(&mut self) -> Result<&mut regorus::Engine, String> {
        if self.folder.changed() {
            log::info("the policy changed: reading it again");
            self.policy = load(&self.folder);
        }
        self.policy.as_mut().map_err(|why| why.clone())
    }

    /// The policy, given `input` as the request it judges (once, for every rule asked).
    fn judging(&mut self, input: &Value) -> Result<&mut regorus::Engine, String> {
        let engine = self.policy()?;
        let input = regorus::Value::from_json_str(&input.to_string())
            .map_err(|e| format!("the request cannot be given to the policy: {e}"))?;
        engine.set_input(input);
        Ok(engine)
    }
}

/// `data.palisade.RULE` for the request `engine` was given.
fn rule(engine: &mut regorus::Engine, rule: &str) -> Result<regorus::Value, String> {
    engine
        .eval_rule(format!("data.palisade.{rule}"))
        .map_err(|e| format!("the policy's `{rule}` failed to evaluate: {e}"))
}

/// The first denial of `data.palisade.deny` for the request `engine` was given, if any; a
/// policy that cannot answer is a denial of its own.
fn denied(engine: &mut regorus::Engine) -> Option<Deny> {
    match rule(engine, "deny") {
        Ok(value) => first(&value).map(|member| denial(&member)),
        Err(why) => Some(policy_error(why)),
    }
}

/// The denial of a policy that cannot answer.
fn policy_error(why: String) -> Deny {
    Deny::new("policy-error", format!("Refused: {why}"))
}

/// The first member of a set (or array) the policy answered; none for `undefined` or empty.
fn first(value: &regorus::Value) -> Option<Value> {
    let json = value.to_json_str().ok()?;
    let value: Value = serde_json::from_str(&json).ok()?;
    match value {
        Value::Array(members) => members.into_iter().next(),
        _ => None,
    }
}

/// A member of `deny` as a denial: an object with `reason_code` and `message`, or a string
/// (the message).
fn denial(member: &Value) -> Deny {
    match member {
        Value::String(message) => Deny::new("policy-deny", message.clone()),
        _ => Deny::new(
            member["reason_code"].as_str().unwrap_or("policy-deny"),
            member["message"]
                .as_str()
                .unwrap_or("Refused by the Rego policy."),
        ),
    }
}

/// The input document of a tool call (version [`INPUT_VERSION`], docs/policies.md).
fn call_input(point: &str, call: &ToolCall) -> Value {
    let provenance = match &call.provenance {
        Some(Provenance::Builtin) => json!({ "kind": "builtin" }),
        Some(Provenance::Mcp(tool)) => {
            json!({ "kind": "mcp", "server": tool.server, "tool": tool.tool })
        }
        Some(Provenance::Plugin(name)) => json!({ "kind": "plugin", "plugin": name }),
        None => Value::Null,
    };
    json!({
        "version": INPUT_VERSION,
        "point": point,
        "tool": {
            "name": call.name,
            "kind": call.kind().map(|kind| kind.name()),
            "tool_use_id": call.tool_use_id,
            "arguments": call.args(),
            "provenance": provenance,
        },
    })
}

impl PreTool for RegoGuard {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        let engine = match self.judging(&call_input("pre-tool", &call)) {
            Ok(engine) => engine,
            Err(why) => return PreToolDecision::Deny(policy_error(why)),
        };
        if let Some(deny) = denied(engine) {
            return PreToolDecision::Deny(deny);
        }
        match rule(engine, "ask") {
            Ok(value) => match first(&value) {
                Some(Value::String(reason)) => PreToolDecision::ask(reason),
                Some(other) => PreToolDecision::ask(other.to_string()),
                None => PreToolDecision::Allow,
            },
            Err(why) => PreToolDecision::Deny(policy_error(why)),
        }
    }
}

impl PromptSubmit for RegoGuard {
    fn on_prompt_submit(&mut self, step: PreStep) -> PreStepDecision {
        let messages: Vec<Value> = step
            .messages
            .iter()
            .map(|m| json!({ "text": m.text }))
            .collect();
        let input = json!({
            "version": INPUT_VERSION,
            "point": "prompt-submit",
            "turn": step.turn,
            "step": step.step,
            "messages": messages,
        });
        let denial = match self.judging(&input) {
            Ok(engine) => denied(engine),
            Err(why) => Some(policy_error(why)),
        };
        match denial {
            Some(deny) => PreStepDecision::Reject(deny),
            None => PreStepDecision::Enter(Vec::new()),
        }
    }
}

export!(RegoGuard: PreTool + PromptSubmit);
