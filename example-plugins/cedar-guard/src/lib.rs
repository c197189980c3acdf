//! `cedar-guard`: a guard whose policy is Cedar, read from files the manifest grants read-only
//! (`/policy`, every `*.cedar` file). The Cedar engine runs inside the plugin, so the policy
//! runs under the plugin's fuel, deadline and memory.
//!
//! A request is put to the policy as Cedar's tuple (docs/policies.md, and the schema,
//! `palisade.cedarschema`): the principal is the session's agent, the action the point
//! (`pre-tool`, `prompt-submit`), the resource the tool (with its name and kind) or the
//! prompt, the context what the call's arguments say (its command, path, URL) or the prompt's
//! text. Every policy is validated against that schema when it is read: a policy that names
//! an attribute no request has is refused, naming its file and line.
//!
//! What the policy decides: a call is allowed unless a `forbid` policy applies (the plugin
//! adds the `permit` of everything, so that a team writes only what it forbids). The first
//! applying `forbid` (by file, then place) denies with its `@reason_code` and `@message`
//! annotations, or asks the user, when it has an `@ask` annotation. A policy that cannot be
//! read or validated, or whose evaluation errs, denies: a guard without its policy must not
//! allow everything.

use cedar_policy::{
    Authorizer, Context, Decision, Entities, EntityUid, Policy, PolicyId, PolicySet, Request,
    Schema, ValidationMode, Validator,
};
use palisade_sdk::{
    Config, Deny, Plugin, PreStep, PreStepDecision, PreTool, PreToolDecision, PromptSubmit,
    Provenance, ToolCall, WatchedFolder, export, log,
};
use serde_json::{Value, json};
use std::str::FromStr;

/// Where the manifest's `files` grant puts the policy folder.
const POLICY: &str = "/policy";
/// The schema of the requests, which every policy is validated against.
const SCHEMA: &str = include_str!("palisade.cedarschema");

/// The policies as read: each with the file and line it came from.
struct Policies {
    set: PolicySet,
    /// Where each policy is, by its id: `file:line`.
    places: Vec<(PolicyId, String)>,
}

struct CedarGuard {
    schema: Schema,
    /// The policies as last read, or why they cannot be used.
    policies: Result<Policies, String>,
    /// The policy folder, watched for edits.
    folder: WatchedFolder,
}

impl Plugin for CedarGuard {
    fn new(_config: &Config) -> Self {
        let schema = Schema::from_cedarschema_str(SCHEMA)
            .map(|(schema, _)| schema)
            .expect("the request schema is valid Cedar");
        let folder = WatchedFolder::new(POLICY);
        let policies = load(&schema, &folder);
        CedarGuard {
            schema,
            policies,
            folder,
        }
    }
}

/// Where each statement of a Cedar file starts (its first character that is not space or a
/// comment), in order: a policy's place in its file.
fn statement_starts(text: &str) -> Vec<usize> {
    let bytes = text.as_bytes();
    let (mut starts, mut at, mut open) = (Vec::new(), 0, false);
    while at < bytes.len() {
        match bytes[at] {
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                while at < bytes.len() && bytes[at] != b'\n' {
                    at += 1;
                }
                continue;
            }
            b if b.is_ascii_whitespace() => {}
            b'"' => {
                if !open {
                    starts.push(at);
                    open = true;
                }
                at += 1;
                while at < bytes.len() && bytes[at] != b'"' {
                    at += if bytes[at] == b'\\' { 2 } else { 1 };
                }
            }
            b';' => open = false,
            _ if !open => {
                starts.push(at);
                open = true;
            }
            _ => {}
        }
        at += 1;
    }
    starts
}

/// The line of byte `offset` in `text`, from 1.
fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// The first place a diagnostic of Cedar's points at in `text`: `:LINE`, or nothing.
fn place_of(diagnostic: &dyn miette::Diagnostic, text: &str) -> String {
    let offset = diagnostic
        .labels()
        .and_then(|mut labels| labels.next())
        .map(|label| label.offset());
    offset
        .map(|offset| format!(":{}", line_of(text, offset)))
        .unwrap_or_default()
}

/// The policies of `dir`, each file's validated against `schema`, with the `permit` of
/// everything added; or why they cannot be used (the file, and the line).
fn load(schema: &Schema, folder: &WatchedFolder) -> Result<Policies, String> {
    let mut set = PolicySet::new();
    let mut places = Vec::new();
    let mut files = 0;
    for path in folder.files() {
        if path.extension().and_then(|e| e.to_str()) != Some("cedar") {
            continue;
        }
        files += 1;
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("the policy file {name} cannot be read: {e}"))?;
        let parsed = PolicySet::from_str(&text).map_err(|e| {
            let place = place_of(&e, &text);
            format!("the policy file {name}{place} is not valid Cedar: {e}")
        })?;
        let validated = Validator::new(schema.clone()).validate(&parsed, ValidationMode::Strict);
        if let Some(error) = validated.validation_errors().next() {
            let place = place_of(error, &text);
            return Err(format!(
                "the policy file {name}{place} does not fit Palisade's requests: {error}"
            ));
        }
        let starts = statement_starts(&text);
        let mut parsed: Vec<&Policy> = parsed.policies().collect();
        // Cedar names a file's policies `policy0`, `policy1`, … in their order.
        parsed.sort_by_key(|p| {
            let id = p.id().to_string();
            id.strip_prefix("policy")
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or(usize::MAX)
        });
        for (n, policy) in parsed.into_iter().enumerate() {
            let line = starts
                .get(n)
                .map(|start| format!(":{}", line_of(&text, *start)))
                .unwrap_or_default();
            let id = PolicyId::new(format!("{name}{line}#{}", places.len()));
            places.push((id.clone(), format!("{name}{line}")));
            set.add(policy.new_id(id))
                .map_err(|e| format!("the policy file {name} cannot be added: {e}"))?;
        }
    }
    if files == 0 {
        return Err(format!(
            "the policy folder {} holds no .cedar file",
            folder.path().display()
        ));
    }
    let everything = Policy::from_str("permit (principal, action, resource);")
        .expect("a valid policy")
        .new_id(PolicyId::new("palisade:permit-everything"));
    set.add(everything).map_err(|e| e.to_string())?;
    Ok(Policies { set, places })
}

/// What a policy's answer to a request is, for the guard.
enum Verdict {
    Allow,
    Ask(String),
    Deny(Deny),
}

impl CedarGuard {
    /// Reads the policies again when a file of the folder changed.
    fn refresh(&mut self) {
        if self.folder.changed() {
            log::info("the policy changed: reading it again");
            self.policies = load(&self.schema, &self.folder);
        }
    }

    /// The verdict on `action` by the session's agent on `resource` (with its attributes)
    /// in `context`.
    fn judge(&mut self, action: &str, resource: (&str, &str, Value), context: Value) -> Verdict {
        self.refresh();
        let schema = &self.schema;
        let verdict = self
            .policies
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|policies| {
                let session = palisade_sdk::invocation().session_id;
                let uid = |kind: &str, id: &str| {
                    EntityUid::from_str(&format!("Palisade::{kind}::{}", Value::from(id)))
                        .map_err(|e| e.to_string())
                };
                let principal = uid("Agent", &session)?;
                let action_uid = uid("Action", action)?;
                let (kind, id, attrs) = resource;
                let resource_uid = uid(kind, id)?;
                let entities = json!([{ "uid": { "type": format!("Palisade::{kind}"), "id": id },
                "attrs": attrs, "parents": [] }]);
                let entities = Entities::from_json_value(entities, Some(schema))
                    .map_err(|e| format!("the request does not fit the schema: {e}"))?;
                let context = Context::from_json_value(context, Some((schema, &action_uid)))
                    .map_err(|e| format!("the request does not fit the schema: {e}"))?;
                let request =
                    Request::new(principal, action_uid, resource_uid, context, Some(schema))
                        .map_err(|e| format!("the request does not fit the schema: {e}"))?;
                let response = Authorizer::new().is_authorized(&request, &policies.set, &entities);
                if let Some(error) = response.diagnostics().errors().next() {
                    return Err(format!("a policy failed to evaluate: {error}"));
                }
                if response.decision() == Decision::Allow {
                    return Ok(Verdict::Allow);
                }
                // The first forbid that applies, in the order of the files and their lines.
                let reasons: Vec<&PolicyId> = response.diagnostics().reason().collect();
                let first = policies
                    .places
                    .iter()
                    .find(|(id, _)| reasons.contains(&id))
                    .and_then(|(id, place)| Some((policies.set.policy(id)?, place)));
                let Some((policy, place)) = first else {
                    return Ok(Verdict::Deny(Deny::new(
                        "policy-deny",
                        "Refused by the Cedar policy.",
                    )));
                };
                if let Some(reason) = policy.annotation("ask") {
                    return Ok(Verdict::Ask(reason.to_string()));
                }
                let code = policy.annotation("reason_code").unwrap_or("policy-deny");
                let message = policy
                    .annotation("message")
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("Refused by the Cedar policy at {place}."));
                Ok(Verdict::Deny(Deny::new(code, message)))
            });
        verdict.unwrap_or_else(|why| {
            Verdict::Deny(Deny::new("policy-error", format!("Refused: {why}")))
        })
    }
}

/// What a tool call's arguments say that policies judge: its command, path and URL, as the
/// agents name them, and where the tool comes from.
fn call_context(call: &ToolCall) -> Value {
    let arguments = call.args();
    let text = |keys: &[&str]| {
        keys.iter()
            .find_map(|key| arguments.get(*key).and_then(Value::as_str))
            .map(str::to_string)
    };
    let mut context = serde_json::Map::new();
    let command = text(&["command", "cmd"]).or_else(|| {
        let words = arguments.get("cmd")?.as_array()?;
        let words: Vec<&str> = words.iter().filter_map(Value::as_str).collect();
        Some(words.join(" "))
    });
    for (key, value) in [
        ("command", command),
        ("path", text(&["file_path", "path"])),
        ("url", text(&["url"])),
    ] {
        if let Some(value) = value {
            context.insert(key.into(), Value::String(value));
        }
    }
    match &call.provenance {
        Some(Provenance::Builtin) => {
            context.insert("provenance".into(), json!("builtin"));
        }
        Some(Provenance::Mcp(tool)) => {
            context.insert("provenance".into(), json!("mcp"));
            context.insert("mcp_server".into(), json!(tool.server));
        }
        Some(Provenance::Plugin(_)) => {
            context.insert("provenance".into(), json!("plugin"));
        }
        None => {}
    }
    Value::Object(context)
}

impl PreTool for CedarGuard {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        let kind = call.kind().map_or("other", |kind| kind.name());
        let attrs = json!({ "name": call.name, "kind": kind });
        let context = call_context(&call);
        match self.judge("pre-tool", ("Tool", &call.name, attrs), context) {
            Verdict::Allow => PreToolDecision::Allow,
            Verdict::Ask(reason) => PreToolDecision::ask(reason),
            Verdict::Deny(deny) => PreToolDecision::Deny(deny),
        }
    }
}

impl PromptSubmit for CedarGuard {
    fn on_prompt_submit(&mut self, step: PreStep) -> PreStepDecision {
        let text: Vec<&str> = step.messages.iter().map(|m| m.text.as_str()).collect();
        let context = json!({ "text": text.join("\n"), "step": step.step });
        let id = format!("turn-{}-step-{}", step.turn, step.step);
        match self.judge("prompt-submit", ("Prompt", &id, json!({})), context) {
            Verdict::Allow => PreStepDecision::Enter(Vec::new()),
            // A prompt cannot be asked about: an ask keeps it out too.
            Verdict::Ask(reason) => PreStepDecision::Reject(Deny::new("policy-ask", reason)),
            Verdict::Deny(deny) => PreStepDecision::Reject(deny),
        }
    }
}

export!(CedarGuard: PreTool + PromptSubmit);
