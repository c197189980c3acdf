//! `palisade forward URL`: a command hook that hands its event to `palisade serve`.

use crate::hook_io::{DEFAULT_BUDGET_MS, answer, read_stdin};
use palisade::agents::Meaning;
use palisade::bridge::{self, Dialect, Reply};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Forwards the hook event on stdin to `palisade serve` and answers what it answered.
#[derive(clap::Args)]
pub struct ForwardCommand {
    /// The server's endpoint, e.g. http://127.0.0.1:8719/claude-code.
    url: String,
    /// The file holding the server's bearer token [default: the one `palisade serve`
    /// uses, ~/.config/palisade/serve-token].
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// The event's budget in milliseconds: past it, the event gets its fail-closed answer.
    #[arg(long, default_value_t = DEFAULT_BUDGET_MS, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    budget_ms: u64,
}

impl ForwardCommand {
    /// Forwards the event and answers for it within the budget.
    pub async fn execute(self) -> anyhow::Result<ExitCode> {
        forward(
            &self.url,
            self.token_file.as_deref(),
            Duration::from_millis(self.budget_ms),
        )
        .await
    }
}

/// `palisade forward URL`: POSTs the hook event on stdin to `palisade serve` and answers what
/// it answered, as a command hook. For the events an agent sends only to command hooks
/// (Claude Code's `SessionStart`).
async fn forward(
    url: &str,
    token_file: Option<&Path>,
    budget: Duration,
) -> anyhow::Result<ExitCode> {
    let event = Arc::new(Mutex::new(String::new()));
    let work = forward_within(url, token_file, event.clone());
    let reply = match tokio::time::timeout(budget, work).await {
        Ok(reply) => reply,
        Err(_) => {
            let event = event.lock().unwrap_or_else(|e| e.into_inner()).clone();
            failure(
                url,
                &event,
                format!(
                    "the event's budget of {} ms ran out {} (raise --budget-ms, or the hooks' \
                     timeout_ms)",
                    budget.as_millis(),
                    if event.is_empty() {
                        "while reading the hook event on stdin".to_string()
                    } else {
                        format!("waiting for palisade serve at {url}")
                    }
                ),
            )
        }
    };
    // No audit log to flush: the server keeps it.
    answer(reply, Duration::ZERO)
}

/// The agent whose event `event` is: the one the URL's endpoint names (`…/claude-code`), else
/// the first that has an event of that name.
fn dialect_of(url: &str, event: &str) -> Option<Dialect> {
    let endpoint = url.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    Dialect::from_name(endpoint)
        .or_else(|| Dialect::ALL.into_iter().find(|d| d.event(event).is_some()))
}

/// The answer when the event cannot be forwarded (`why`): its agent's refusal of it, or a tool
/// call's when which event it is, or whose, is not known.
fn failure(url: &str, event: &str, why: String) -> Reply {
    match dialect_of(url, event) {
        Some(dialect) if !event.is_empty() => bridge::failure(dialect, event, &why),
        _ => bridge::failure_at(Meaning::ToolCall, &why),
    }
}

/// The work of [`forward`]; `event` is set to the event's name as soon as it is known.
async fn forward_within(url: &str, token_file: Option<&Path>, event: Arc<Mutex<String>>) -> Reply {
    let input = match read_stdin().await {
        Ok(raw) => raw,
        Err(e) => {
            return bridge::failure_at(
                Meaning::ToolCall,
                &format!("cannot read the hook event on stdin: {e}"),
            );
        }
    };
    // Without the event's name nothing says blocking is safe: block, as the bridge does.
    let name = crate::commands::bridge::read_event(&input)
        .ok()
        .and_then(|v| v["hook_event_name"].as_str().map(str::to_string))
        .unwrap_or_default();
    *event.lock().unwrap_or_else(|e| e.into_inner()) = name.clone();
    match dialect_of(url, &name).is_none_or(|d| d.waits(&name)) {
        true => crate::hook_io::end_with_the_agent(),
        false => crate::hook_io::outlive_the_agent(),
    }
    let fail = |why: String| failure(url, &name, why);
    let token = match crate::token::path_or_default(token_file)
        .and_then(|file| crate::token::read(&file))
    {
        Ok(token) => token,
        Err(e) => return fail(format!("{e:#}")),
    };
    // No timeout of its own: the budget around the whole forward answers for a slow server,
    // naming it.
    let client = reqwest::Client::builder()
        .no_proxy()
        // Loading the built-in root certificates costs time in every process; a plain-http
        // URL (the usual loopback server) has no use for them.
        .tls_built_in_root_certs(url.starts_with("https:"))
        .build();
    let client = match client {
        Ok(client) => client,
        Err(e) => return fail(format!("cannot make an HTTP client: {e}")),
    };
    let sent = client
        .post(url)
        .header("content-type", "application/json")
        .bearer_auth(token)
        .body(input)
        .send()
        .await;
    let response = match sent {
        Ok(response) => response,
        Err(e) => return fail(format!("palisade serve at {url} did not answer: {e}")),
    };
    let status = response.status();
    let body = match response.text().await {
        Ok(body) => body,
        Err(e) => return fail(format!("reading the answer of {url}: {e}")),
    };
    if !status.is_success() {
        return fail(format!(
            "palisade serve answered {status}: {}",
            crate::output::printable(body.trim())
        ));
    }
    let stdout = match body.trim() {
        "" => None,
        text => match serde_json::from_str(text) {
            // As the server composed it, in its agent's fields.
            Ok(json) => Some(bridge::Answer::Json(json)),
            Err(e) => {
                return fail(format!(
                    "palisade serve answered something not a hook answer: {e}"
                ));
            }
        },
    };
    Reply {
        stdout,
        stderr: None,
        exit_code: 0,
        points: Vec::new(),
    }
}
