//! MCP 2026-07-28's multi-round-trip requests (MRTR) in the tool pipeline. A server that
//! needs input to finish a `tools/call` answers it with `resultType: "input_required"` and
//! `inputRequests`: questions for the client's user (`elicitation/create`), its model
//! (`sampling/createMessage`) or its roots (`roots/list`). The client calls again, under a new
//! id, with `inputResponses` and the server's `requestState` echoed. These rounds replace the
//! requests a 2025-11-25 server sent its client, and the answers carry the user's and the
//! model's data to the server. So both are judged, as Claude Code's `Elicitation` and
//! `ElicitationResult` are (docs/bridges.md):
//!
//! - each question is a call of its method from the server (`elicitation/create`, with
//!   provenance `mcp`), through the tool step, inside the round's tool body: a denial answers
//!   the round with an error result instead, and the question never reaches the client; an
//!   ask leaves it to the client, whose user sees the question anyway;
//! - each answer of a retry is that call's result, through `post-tool`, `tool-result` and the
//!   committed result, before the retry is sent: a block refuses the retry with an error
//!   result, and the server never hears the answer; a replaced answer is sent as replaced.
//!
//! `prompts/get` and `resources/read` take rounds too (MCP's parameters of the three extend
//! one shape): theirs are judged the same way, outside any tool call, as a 2025-11-25
//! server's own questions are ([`Rounds::of_request`]). A task's questions and the answers
//! of its `tasks/update` are judged the same way too (see [`super::tasks`]). A retry of any
//! other method that carries answers is refused: nothing would judge them.
//!
//! The call an answer is the result of is the question this proxy saw asked (found by the
//! tool, the echoed `requestState` and the key); when it saw none (another proxy asked it, or
//! it was forgotten), a call of the method the answer's shape tells, with no arguments. An
//! answer of no known shape is refused.

use palisade::{AskPolicy, ContentBlock, Lifecycle, ToolCall, ToolDecision, ToolOutcome};
use serde_json::{Map, Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// The questions a session remembers at most; the oldest go first.
const REMEMBERED: usize = 256;

const ELICIT: &str = "elicitation/create";
const SAMPLE: &str = "sampling/createMessage";
const ROOTS: &str = "roots/list";

/// The questions servers asked in one session's calls, for the answers that come back.
#[derive(Default)]
pub(super) struct Questions(Mutex<VecDeque<Asked>>);

struct Asked {
    tool: String,
    state: Option<String>,
    key: String,
    call: ToolCall,
}

impl Questions {
    fn remember(&self, tool: &str, state: Option<&str>, key: &str, call: ToolCall) {
        let mut asked = super::lock(&self.0);
        if asked.len() == REMEMBERED {
            asked.pop_front();
        }
        asked.push_back(Asked {
            tool: tool.to_string(),
            state: state.map(str::to_string),
            key: key.to_string(),
            call,
        });
    }

    fn asked(&self, tool: &str, state: Option<&str>, key: &str) -> Option<ToolCall> {
        let asked = super::lock(&self.0);
        asked
            .iter()
            .rev()
            .find(|a| a.tool == tool && a.state.as_deref() == state && a.key == key)
            .map(|a| a.call.clone())
    }
}

/// The rounds of one client `tools/call`, judged in its session.
#[derive(Clone)]
pub(super) struct Rounds {
    pub(super) lifecycle: Arc<Lifecycle>,
    /// The server's name, as provenance carries it.
    pub(super) server: String,
    /// The server's name for the tool called.
    pub(super) tool: String,
    /// The id hooks see for this round's call: its questions' ids start with it.
    pub(super) tool_use_id: String,
    pub(super) questions: Arc<Questions>,
}

/// The methods besides `tools/call` whose result may be an `input_required` round.
pub(super) const MULTI_ROUND: [&str; 2] = ["prompts/get", "resources/read"];

impl Rounds {
    /// The judge of the rounds of a client's `method` request (one of [`MULTI_ROUND`]) with
    /// `params`, in the session of `lifecycle`: its questions are calls from the server, known
    /// by the prompt's name or the resource's URI, so that a retry's answers find them.
    pub(super) fn of_request(
        lifecycle: &Arc<Lifecycle>,
        server: String,
        questions: &Arc<Questions>,
        method: &str,
        params: &Value,
    ) -> Rounds {
        let of = params
            .get("name")
            .or_else(|| params.get("uri"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        Rounds {
            lifecycle: lifecycle.clone(),
            server,
            tool: format!("{method} {of}"),
            tool_use_id: format!("mcp-{}", method.replace('/', "-")),
            questions: questions.clone(),
        }
    }

    /// The judge of a server's own questions to its client (MCP 2025-11-25's requests), each
    /// known by the id the client has it under, in the session of `lifecycle`.
    pub(super) fn of_server_requests(
        lifecycle: &Arc<Lifecycle>,
        server: String,
        questions: &Arc<Questions>,
    ) -> Rounds {
        Rounds {
            lifecycle: lifecycle.clone(),
            server,
            tool: String::new(),
            tool_use_id: "mcp-server-request".into(),
            questions: questions.clone(),
        }
    }

    /// A retry's answers (`params.inputResponses`), judged as the results of the questions
    /// they answer: the parameters to send (the answers as `post-tool` left them), or why the
    /// retry is refused.
    pub(super) async fn answers(&self, params: &Value) -> Result<Value, String> {
        let Some(Value::Object(responses)) = params.get("inputResponses") else {
            return Ok(params.clone());
        };
        let state = params.get("requestState").and_then(Value::as_str);
        let mut judged = Map::new();
        for (key, answer) in responses {
            judged.insert(key.clone(), self.answer(state, key, answer).await?);
        }
        let mut params = params.clone();
        params["inputResponses"] = Value::Object(judged);
        Ok(params)
    }

    /// One answer, to the question `key` (asked with `state`), as the question's result:
    /// the answer to send (as `post-tool` left it), or why it is refused.
    pub(super) async fn answer(
        &self,
        state: Option<&str>,
        key: &str,
        answer: &Value,
    ) -> Result<Value, String> {
        let call = match self.questions.asked(&self.tool, state, key) {
            Some(call) => call,
            None => match method_answered(answer) {
                Some(method) => self.call(method, key, json!({})),
                None => {
                    return Err(format!(
                        "the answer `{}` answers no question this proxy saw asked, and is none \
                         of MCP's kinds of answer: it is not passed on unjudged",
                        crate::output::printable(key)
                    ));
                }
            },
        };
        let outcome = ToolOutcome {
            content_blocks: vec![ContentBlock::Json {
                value: answer.clone(),
            }],
            is_error: false,
            value: Some(answer.clone()),
        };
        let post = self.lifecycle.tool_finished(&call, &outcome).await;
        if let Some(block) = post.blocked {
            return Err(format!(
                "Palisade refused the answer to the server's question `{}`: {}",
                crate::output::printable(key),
                block.message
            ));
        }
        if post.outcome == outcome {
            return Ok(answer.clone());
        }
        match post.outcome.value {
            Some(value @ Value::Object(_)) => Ok(value),
            // A replacement that is no answer cannot be sent as one.
            _ => Err(format!(
                "a post-tool hook replaced the answer to the server's question `{}` with \
                 something that is not an answer: it is refused",
                crate::output::printable(key)
            )),
        }
    }

    /// The questions of an `input_required` round (`result`, as the server sent it), each
    /// through the tool step: why the round is refused, when a hook denies one or one is of
    /// no kind MCP defines.
    pub(super) async fn questions(&self, result: &Value) -> Result<(), String> {
        let state = result.get("requestState").and_then(Value::as_str);
        let Some(Value::Object(requests)) = result.get("inputRequests") else {
            return Ok(());
        };
        for (key, request) in requests {
            let method = request["method"].as_str().unwrap_or_default();
            let params = request.get("params").cloned().unwrap_or_else(|| json!({}));
            self.question(state, key, method, params).await?;
        }
        Ok(())
    }

    /// One question `key` (asked with `state`): a call of `method` with `params` from the
    /// server, through the tool step; why it is refused, when a hook denies it or it is of no
    /// kind MCP defines.
    pub(super) async fn question(
        &self,
        state: Option<&str>,
        key: &str,
        method: &str,
        params: Value,
    ) -> Result<(), String> {
        if ![ELICIT, SAMPLE, ROOTS].contains(&method) {
            return Err(format!(
                "the server's question `{}` is a `{}`, none of MCP's kinds of question",
                crate::output::printable(key),
                crate::output::printable(method)
            ));
        }
        let call = self.call(method, key, params);
        let step = self.lifecycle.authorize(&call, AskPolicy::Agent).await;
        if let ToolDecision::Denied(denial) = step.decision {
            self.lifecycle.tool_denied(&call, &denial).await;
            return Err(format!(
                "Palisade declined the server's question `{}`: {}",
                crate::output::printable(key),
                denial.message
            ));
        }
        self.questions.remember(&self.tool, state, key, call);
        Ok(())
    }

    /// The call a question `key` of `method` is, from the server.
    fn call(&self, method: &str, key: &str, arguments: Value) -> ToolCall {
        ToolCall {
            provenance: Some(palisade::Provenance::Mcp {
                server: self.server.clone(),
                tool: method.to_string(),
            }),
            ..ToolCall::new(format!("{}/{key}", self.tool_use_id), method, arguments)
        }
    }
}

/// Whether `method` is a question a server asks its client (MCP 2025-11-25 sends it as a
/// request of its own; 2026-07-28 as an `input_required` round).
pub(super) fn is_question(method: &str) -> bool {
    [ELICIT, SAMPLE, ROOTS].contains(&method)
}

/// The kind of question an answer's shape answers: an elicitation's `action`, a sampled
/// message's `role` and `content`, a list's `roots`.
fn method_answered(answer: &Value) -> Option<&'static str> {
    if answer.get("action").is_some() {
        Some(ELICIT)
    } else if answer.get("role").is_some() && answer.get("content").is_some() {
        Some(SAMPLE)
    } else if answer.get("roots").is_some() {
        Some(ROOTS)
    } else {
        None
    }
}

/// Why a client's `method` request with `params` is refused before it is sent: it carries
/// answers to a server's questions (`inputResponses`) on a method that takes no rounds, which
/// nothing would judge.
pub(super) fn unjudged_answers(method: &str, params: &Value) -> Option<String> {
    let takes_rounds =
        ["tools/call", "tasks/update"].contains(&method) || MULTI_ROUND.contains(&method);
    (!takes_rounds && params.get("inputResponses").is_some()).then(|| {
        format!(
            "`{}` carries answers to a server's questions (inputResponses), which only \
             tools/call, prompts/get, resources/read and tasks/update take: they are not \
             passed on unjudged",
            crate::output::printable(method)
        )
    })
}

/// Whether a result is an interim one: the server needs input first (`input_required`) or
/// runs the call as a task (`task`). A result without `resultType` is complete.
pub(super) fn result_type(result: &Value) -> &str {
    result
        .get("resultType")
        .and_then(Value::as_str)
        .unwrap_or("complete")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_tells_the_question_it_answers_by_its_shape() {
        let accept = json!({ "action": "accept", "content": { "name": "octocat" } });
        assert_eq!(method_answered(&accept), Some(ELICIT));
        let sampled = json!({ "role": "assistant", "content": { "type": "text", "text": "Paris" },
            "model": "m", "stopReason": "endTurn" });
        assert_eq!(method_answered(&sampled), Some(SAMPLE));
        assert_eq!(method_answered(&json!({ "roots": [] })), Some(ROOTS));
        assert_eq!(method_answered(&json!({ "name": "octocat" })), None);
    }

    /// A retry's answers go only where rounds are judged.
    #[test]
    fn answers_on_a_method_that_takes_no_rounds_are_refused() {
        let answers = json!({ "inputResponses": { "name": { "action": "accept" } } });
        assert!(unjudged_answers("completion/complete", &answers).is_some());
        for method in [
            "tools/call",
            "prompts/get",
            "resources/read",
            "tasks/update",
        ] {
            assert_eq!(unjudged_answers(method, &answers), None, "{method}");
        }
        assert_eq!(unjudged_answers("resources/list", &json!({})), None);
    }

    #[test]
    fn a_question_is_found_by_its_tool_state_and_key_and_the_oldest_are_forgotten() {
        let questions = Questions::default();
        let call = |id: &str| ToolCall::new(id, ELICIT, json!({}));
        questions.remember("greet", Some("s1"), "name", call("a"));
        questions.remember("greet", None, "name", call("b"));
        let found = |state| {
            questions
                .asked("greet", state, "name")
                .map(|c| c.tool_use_id)
        };
        assert_eq!(found(Some("s1")), Some("a".into()));
        assert_eq!(found(None), Some("b".into()));
        assert_eq!(found(Some("s2")), None);
        assert_eq!(questions.asked("other", None, "name"), None);
        for n in 0..REMEMBERED {
            questions.remember("t", None, &n.to_string(), call("x"));
        }
        assert_eq!(found(Some("s1")), None);
    }
}
