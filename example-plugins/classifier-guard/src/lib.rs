//! `classifier-guard`: before a step opens, sends its messages to the organisation's
//! classifier service and rejects the step when the classifier says so.
//!
//! The service answers `POST {endpoint}` with `{"messages": [{"role": "user", "text": "…"}]}`
//! by `{"verdict": "allow"}` or `{"verdict": "reject", "reason": "…"}`. Anything else — the
//! request refused by the host, the service down, slower than `request_timeout_ms`, a status
//! other than 200, an answer that is not that JSON — rejects too: a guard that cannot ask must
//! not let everything through.

use palisade_sdk::http::{self, Request};
use palisade_sdk::{
    Config, Deny, Plugin, PreStep, PreStepDecision, PromptSubmit, Role, export, log,
};
use serde::{Deserialize, Serialize};
use std::time::Duration;

struct ClassifierGuard {
    endpoint: String,
    timeout: Duration,
}

#[derive(Serialize)]
struct Classify<'a> {
    messages: Vec<Text<'a>>,
}

#[derive(Serialize)]
struct Text<'a> {
    role: &'static str,
    text: &'a str,
}

#[derive(Deserialize)]
struct Verdict {
    verdict: String,
    #[serde(default)]
    reason: String,
}

impl Plugin for ClassifierGuard {
    fn new(config: &Config) -> Self {
        ClassifierGuard {
            endpoint: config.get("endpoint").unwrap_or_default(),
            timeout: Duration::from_millis(config.get("request_timeout_ms").unwrap_or(300)),
        }
    }
}

impl ClassifierGuard {
    fn ask(&self, step: &PreStep) -> Result<Verdict, http::Error> {
        let body = Classify {
            messages: step
                .messages
                .iter()
                .map(|m| Text {
                    role: match m.role {
                        Role::User => "user",
                        Role::Assistant => "assistant",
                        Role::System => "system",
                    },
                    text: &m.text,
                })
                .collect(),
        };
        let answer = Request::post(&self.endpoint)
            .json(&body)
            .timeout(self.timeout)
            .send()?;
        if answer.status != 200 {
            return Err(http::Error::Failed(format!(
                "the classifier answered {}",
                answer.status
            )));
        }
        answer.json()
    }
}

impl PromptSubmit for ClassifierGuard {
    fn on_prompt_submit(&mut self, step: PreStep) -> PreStepDecision {
        // A tool continuation brings no new input: nothing to classify.
        if step.messages.is_empty() {
            return PreStepDecision::Enter(Vec::new());
        }
        match self.ask(&step) {
            Ok(v) if v.verdict == "allow" => PreStepDecision::Enter(Vec::new()),
            Ok(v) if v.verdict == "reject" => PreStepDecision::Reject(Deny::new(
                "classifier-reject",
                format!(
                    "The organisation's classifier rejected this prompt: {}",
                    v.reason
                ),
            )),
            Ok(v) => unavailable(&format!("an unknown verdict `{}`", v.verdict)),
            Err(err) => unavailable(&err.to_string()),
        }
    }
}

/// Rejects: the classifier could not decide.
fn unavailable(why: &str) -> PreStepDecision {
    log::warn(&format!("classifier unavailable: {why}"));
    PreStepDecision::Reject(Deny::new(
        "classifier-unavailable",
        format!(
            "The organisation's classifier could not be asked ({why}), so the prompt was not sent."
        ),
    ))
}

export!(ClassifierGuard: PromptSubmit);
