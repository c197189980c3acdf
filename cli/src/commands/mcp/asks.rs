//! A hook's `ask` to a client of MCP 2026-07-28, whose server can no longer send it a request
//! (`elicitation/create`): Palisade asks the way that revision's servers do, in a round of its
//! own. The call is answered `input_required` with one question, [`QUESTION`] (an elicitation:
//! may the call run?), and a `requestState` of Palisade's, a random token for what it keeps of
//! the call; the client asks its user and calls again with the answer and the token. Only an
//! accepted `approve: true`, for the same tool and arguments, in the same session, answers the
//! hook that asked when the retry's pipeline asks again: the call runs, once. Any other answer
//! denies it. What the call carried for the server (its `requestState`, its answers to the
//! server's questions) waits with Palisade and goes on with the retry, judged then. When the
//! server then asks for more in a round of its own, the yes is kept in that round's
//! `requestState` (a token of Palisade's in the server's place): the retry is the same call,
//! and the user is not asked about it again.
//!
//! The round's call itself ends denied (`approval-deferred`), so hooks and the audit log see
//! it as what it was: a call that did not run. Only a 2026-07-28 call of a client that
//! declared it takes elicitations is asked so; any other ask is resolved as before.

use super::call::{approval, elicitation};
use super::{INVALID_PARAMS, lock, random_hex};
use palisade::{Approval, AskRequest, ToolCall};
use serde_json::{Value, json};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// The key of Palisade's question among a round's `inputRequests`.
pub(super) const QUESTION: &str = "palisade/approve";
/// What Palisade's `requestState` tokens start with.
const TOKEN_PREFIX: &str = "palisade-ask-";
/// The rounds a session remembers at most; the oldest go first.
const REMEMBERED: usize = 256;

/// The asks of one session's calls, and the rounds it is waiting on.
#[derive(Default)]
pub(super) struct OwnAsks {
    /// The calls in the pipeline that may be asked in a round, by the id hooks see.
    calls: Mutex<HashMap<String, CallAsk>>,
    /// Rounds asked and not yet answered, by token; oldest first.
    waiting: Mutex<VecDeque<(String, Waiting)>>,
}

#[derive(Default)]
struct CallAsk {
    /// The user's answer the call carries: the hook it answers, and the approval.
    answered: Option<(String, Approval)>,
    /// The hook whose ask the user's yes answered in this call.
    approved: Option<String>,
    /// The ask put off to a round, once the pipeline made one.
    deferred: Option<(ToolCall, AskRequest)>,
}

/// What Palisade keeps of a call it asked about in a round, or of a call the user let run
/// whose server asked for more in a round of its own.
struct Waiting {
    tool: String,
    arguments: Value,
    hook_id: String,
    /// The user's yes, given: the server's round is answered with the call's next retry,
    /// which is the same call.
    approved: bool,
    /// The call's own `requestState` and `inputResponses`, for the server.
    state: Option<Value>,
    answers: Option<Value>,
}

/// A call registered with [`OwnAsks::begin`]: it leaves the table when dropped.
pub(super) struct Begun<'a> {
    asks: &'a OwnAsks,
    tool_use_id: String,
    /// The call's parameters as the server is to have them: Palisade's answer taken out, and
    /// what the round kept for the server put back.
    pub(super) params: Value,
}

impl Drop for Begun<'_> {
    fn drop(&mut self) {
        if !self.tool_use_id.is_empty() {
            lock(&self.asks.calls).remove(&self.tool_use_id);
        }
    }
}

impl Begun<'_> {
    /// Remembers this call, asked about by `hook_id` (`approved`: with the user's yes), and
    /// what it carries for the server: the token it is kept under.
    fn wait(
        &self,
        hook_id: String,
        approved: bool,
        state: Option<Value>,
        answers: Option<Value>,
    ) -> String {
        let sent = &self.params;
        self.asks.wait(Waiting {
            tool: sent["name"].as_str().unwrap_or_default().to_string(),
            arguments: sent.get("arguments").cloned().unwrap_or_else(|| json!({})),
            hook_id,
            approved,
            state,
            answers,
        })
    }

    /// The round that asks the client's user about this call, when its pipeline put an ask
    /// off to one: the `input_required` result to answer it with.
    pub(super) fn round(&self) -> Option<Value> {
        let (call, ask) = lock(&self.asks.calls)
            .get_mut(&self.tool_use_id)?
            .deferred
            .take()?;
        let state = self.params.get("requestState").cloned();
        let answers = self.params.get("inputResponses").cloned();
        let token = self.wait(ask.hook_id.clone(), false, state, answers);
        let mut question = elicitation(&Value::Null, &call, &ask);
        if let Some(question) = question.as_object_mut() {
            question.remove("jsonrpc");
            question.remove("id");
        }
        Some(json!({
            "resultType": "input_required",
            "inputRequests": { QUESTION: question },
            "requestState": token,
        }))
    }

    /// The server's `input_required` round `result` of this call, which its user let run: its
    /// `requestState` becomes a token of Palisade's that keeps the yes, so that the retry, the
    /// same call, is not asked about again.
    pub(super) fn carry(&self, result: &mut Value) {
        let approved = lock(&self.asks.calls)
            .get(&self.tool_use_id)
            .and_then(|call| call.approved.clone());
        let Some(hook_id) = approved else {
            return;
        };
        let token = self.wait(hook_id, true, result.get("requestState").cloned(), None);
        result["requestState"] = json!(token);
    }
}

/// Whether a call with `params` can be asked in a round: a 2026-07-28 call of a client that
/// takes elicitations.
fn askable(params: &Value) -> bool {
    let meta = &params["_meta"];
    meta.get(super::call::PROTOCOL_VERSION).is_some()
        && meta["io.modelcontextprotocol/clientCapabilities"]
            .get("elicitation")
            .is_some()
}

impl OwnAsks {
    /// The client's call `tool_use_id` of `tool` with `arguments` and `params` enters the
    /// pipeline. When it answers a round of Palisade's, the answer is taken for the hook that
    /// asked; a token Palisade does not know, or a call that is not the one asked about, is
    /// refused (JSON-RPC code and why).
    pub(super) fn begin(
        &self,
        tool_use_id: &str,
        (tool, arguments): (&str, &Value),
        params: Value,
    ) -> Result<Begun<'_>, (i64, String)> {
        let mut call = CallAsk::default();
        let mut params = params;
        if let Some(token) = params["requestState"].as_str()
            && token.starts_with(TOKEN_PREFIX)
        {
            let token = token.to_string();
            let waiting = {
                let mut waiting = lock(&self.waiting);
                let at = waiting.iter().position(|(t, _)| *t == token);
                at.and_then(|at| waiting.remove(at)).map(|(_, w)| w)
            };
            let Some(waiting) = waiting else {
                return Err((
                    INVALID_PARAMS,
                    "tools/call: the requestState is a question of Palisade's that it no \
                     longer remembers (answered already, or one of too many): call again \
                     without it"
                        .into(),
                ));
            };
            if waiting.tool != tool || waiting.arguments != *arguments {
                return Err((
                    INVALID_PARAMS,
                    "tools/call: the requestState answers Palisade's question about another \
                     call (another tool or other arguments): call again without it"
                        .into(),
                ));
            }
            let answer = params
                .pointer(&format!("/inputResponses/{}", QUESTION.replace('/', "~1")))
                .cloned()
                .unwrap_or(Value::Null);
            let approved = match waiting.approved {
                true => Approval::AllowedOnce,
                false => approval(&json!({ "result": answer })),
            };
            call.answered = Some((waiting.hook_id, approved));
            restore(&mut params, waiting.state, waiting.answers);
        }
        let registered = askable(&params) || call.answered.is_some();
        if registered {
            lock(&self.calls).insert(tool_use_id.to_string(), call);
        }
        Ok(Begun {
            asks: self,
            tool_use_id: if registered {
                tool_use_id.to_string()
            } else {
                String::new()
            },
            params,
        })
    }

    /// The approver's answer to `ask` about `call`, when the call is one of those [`begin`]
    /// registered: the user's answer it carries for that hook, or a round put off to the
    /// client. `None` for any other call: it is asked as before.
    ///
    /// [`begin`]: OwnAsks::begin
    pub(super) fn approve(&self, call: &ToolCall, ask: &AskRequest) -> Option<Approval> {
        let mut calls = lock(&self.calls);
        let asked = calls.get_mut(&call.tool_use_id)?;
        if let Some((hook, approval)) = asked.answered.take()
            && hook == ask.hook_id
        {
            if approval == Approval::AllowedOnce {
                asked.approved = Some(hook);
            }
            return Some(approval);
        }
        asked.deferred = Some((call.clone(), ask.clone()));
        Some(Approval::Deferred)
    }
}

impl OwnAsks {
    /// Remembers `waiting` under a new token, returned.
    fn wait(&self, waiting: Waiting) -> String {
        let token = format!("{TOKEN_PREFIX}{}{}", random_hex(), random_hex());
        let mut rounds = lock(&self.waiting);
        if rounds.len() == REMEMBERED {
            rounds.pop_front();
        }
        rounds.push_back((token.clone(), waiting));
        token
    }
}

/// A retry's parameters without Palisade's answer and token, and with the call's own
/// `requestState` in its place; the answers kept while Palisade asked, when it asked, else
/// the retry's own (to the server's questions).
fn restore(params: &mut Value, state: Option<Value>, answers: Option<Value>) {
    let Some(fields) = params.as_object_mut() else {
        return;
    };
    fields.remove("requestState");
    let mut own = match fields.remove("inputResponses") {
        Some(Value::Object(own)) => own,
        _ => serde_json::Map::new(),
    };
    own.remove(QUESTION);
    if let Some(state) = state {
        fields.insert("requestState".into(), state);
    }
    let answers = match answers {
        Some(Value::Object(kept)) => kept,
        _ => own,
    };
    if !answers.is_empty() {
        fields.insert("inputResponses".into(), Value::Object(answers));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modern(elicits: bool) -> Value {
        let capabilities = if elicits {
            json!({ "elicitation": {} })
        } else {
            json!({})
        };
        json!({ "name": "rm", "arguments": { "path": "/" }, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities } })
    }

    fn ask() -> AskRequest {
        serde_json::from_value(json!({ "hook_id": "g/pre-tool", "reason": "sure?" })).unwrap()
    }

    /// Asked in a round, answered yes: the retry runs, once, with what the call carried for
    /// the server back in place; a second retry with the same token is refused.
    #[test]
    fn a_yes_to_palisades_round_lets_the_same_call_run_once() {
        let asks = OwnAsks::default();
        let mut sent = modern(true);
        sent["requestState"] = json!("server-state");
        let arguments = sent["arguments"].clone();
        let call = ToolCall::new("mcp-1", "mcp__s__rm", arguments.clone());
        let begun = asks
            .begin("mcp-1", ("rm", &arguments), sent.clone())
            .unwrap();
        assert_eq!(asks.approve(&call, &ask()), Some(Approval::Deferred));
        let round = begun.round().expect("a round");
        drop(begun);
        assert_eq!(round["resultType"], "input_required");
        assert_eq!(
            round["inputRequests"][QUESTION]["method"],
            "elicitation/create"
        );
        let mut retry = modern(true);
        retry["requestState"] = round["requestState"].clone();
        retry["inputResponses"] = json!({ QUESTION: {
            "action": "accept", "content": { "approve": true } } });
        let begun = asks
            .begin("mcp-2", ("rm", &arguments), retry.clone())
            .unwrap();
        assert_eq!(begun.params["requestState"], "server-state");
        assert!(begun.params.get("inputResponses").is_none());
        let call = ToolCall::new("mcp-2", "mcp__s__rm", arguments.clone());
        assert_eq!(asks.approve(&call, &ask()), Some(Approval::AllowedOnce));
        drop(begun);
        assert!(asks.begin("mcp-3", ("rm", &arguments), retry).is_err());
    }

    #[test]
    fn a_round_answered_for_other_arguments_or_with_a_no_does_not_run_the_call() {
        let asks = OwnAsks::default();
        let sent = modern(true);
        let arguments = sent["arguments"].clone();
        let call = ToolCall::new("mcp-1", "mcp__s__rm", arguments.clone());
        let begun = asks
            .begin("mcp-1", ("rm", &arguments), sent.clone())
            .unwrap();
        asks.approve(&call, &ask());
        let token = begun.round().unwrap()["requestState"].clone();
        drop(begun);
        let mut retry = modern(true);
        retry["requestState"] = token;
        retry["inputResponses"] = json!({ QUESTION: { "action": "decline" } });
        let other = json!({ "path": "/home" });
        assert!(asks.begin("mcp-2", ("rm", &other), retry.clone()).is_err());

        let begun = asks
            .begin("mcp-3", ("rm", &arguments), sent.clone())
            .unwrap();
        asks.approve(&call_of("mcp-3", &arguments), &ask());
        let token = begun.round().unwrap()["requestState"].clone();
        drop(begun);
        retry["requestState"] = token;
        let _begun = asks.begin("mcp-4", ("rm", &arguments), retry).unwrap();
        let approved = asks.approve(&call_of("mcp-4", &arguments), &ask());
        assert_eq!(approved, Some(Approval::Rejected));
    }

    fn call_of(id: &str, arguments: &Value) -> ToolCall {
        ToolCall::new(id, "mcp__s__rm", arguments.clone())
    }

    #[test]
    fn a_call_of_a_client_that_takes_no_elicitations_is_not_asked_in_a_round() {
        let asks = OwnAsks::default();
        let sent = modern(false);
        let arguments = sent["arguments"].clone();
        let _begun = asks.begin("mcp-1", ("rm", &arguments), sent).unwrap();
        assert_eq!(asks.approve(&call_of("mcp-1", &arguments), &ask()), None);
    }
}
