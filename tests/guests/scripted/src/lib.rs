//! A test guest: what it does at each point is chosen by its manifest's `[config]`, so one
//! component serves every behaviour the tests need (allow, deny, loop forever, bomb memory,
//! panic, ...). `tag` is logged on every call so tests can see the order hooks ran in.
//!
//! `[config] pre_tool` is one of: `allow`, `deny`, `ask`, `provenance` (logs the call's),
//! `kind` (logs its tool kind), `loop`, `membomb`, `panic`,
//! `bad-payload`, `probe` (try files, env and network), `http` (see [`http_behaviour`]), `deny-after:N` (deny from the N+1-th call of this instance on),
//! `huge-payload` / `huge-message` (`size_mb` MiB), `pollables` (hoard WASI resources),
//! `state-count`, `state-global-count`, `state-count-panic`, `state-tamper` (host-kept state),
//! `scatter` (write every other page of a 1 MiB block), `seed` (deny with a hash under a new
//! `RandomState`, as the `direct` guest's `seed` does).
//! `[config] tool_result` is one of: `ok`, `panic`, `loop`, `echo` (logs `saw [error] TEXT`).
//! `[config] panic_on_call = N` panics on the N-th `pre-tool` call of the instance.
//! `[config] log_new = true` logs `made` when the instance makes the plugin's value.
//! The other points read `session_start`, `prompt_submit`, `tool_guard`, `post_tool`,
//! `turn_stopping` and `committed` the same way (see each impl), and `contexts`.

use palisade_sdk::{
    Committed, CommittedFact, Config, ContentBlock, Deny, GuardDecision, Message, Observation,
    Plugin, PostTool, PostToolAction, PostToolDecision, PreStep, PreStepDecision, PreTool,
    PreToolDecision, PromptSubmit, Provenance, SessionSource, SessionStart, StopEvent, ToolCall,
    ToolExecute, ToolGuard, ToolOutcome, ToolResult, TurnStopping, export, log, next, state,
};
use std::hint::black_box;

fn tag() {
    if let Some(tag) = palisade_sdk::config::<String>("tag") {
        log::info(&tag);
    }
}

fn spin() -> ! {
    let mut x = 0u64;
    loop {
        x = black_box(x.wrapping_add(1));
    }
}

fn membomb() -> ! {
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        hoard.push(vec![1u8; 1 << 20]);
        black_box(&hoard);
    }
}

/// `pre_tool = "http"`: sends `[config] method` (default GET) to `url` with `body` (or
/// `body_size` bytes); follows
/// one redirect when `follow`; denies `http: STATUS BODY` with the answer, or
/// `http-refused` / `http-timeout` / `http-failed: WHY` without one.
fn http_behaviour() -> PreToolDecision {
    use palisade_sdk::http;
    let url: String = palisade_sdk::config("url").unwrap_or_default();
    let method: String = palisade_sdk::config("method").unwrap_or_else(|| "GET".into());
    let body: Option<Vec<u8>> = palisade_sdk::config::<String>("body")
        .map(String::into_bytes)
        .or_else(|| palisade_sdk::config::<usize>("body_size").map(|n| vec![b'x'; n]));
    let send = |url: &str| {
        let request = http::Request::new(&method, url);
        match &body {
            Some(body) => request.body(body.clone()).send(),
            None => request.send(),
        }
    };
    let mut answer = send(&url);
    if palisade_sdk::config::<bool>("follow") == Some(true)
        && let Ok(response) = &answer
        && (300..400).contains(&response.status)
        && let Some(location) = response.header("location")
    {
        answer = send(&location);
    }
    match answer {
        Ok(response) => PreToolDecision::deny(
            "http",
            format!("{} {}", response.status, response.text().trim())
                .trim()
                .to_string(),
        ),
        Err(http::Error::Refused(why)) => PreToolDecision::deny("http-refused", why),
        Err(http::Error::Timeout(why)) => PreToolDecision::deny("http-timeout", why),
        Err(http::Error::Failed(why)) => PreToolDecision::deny("http-failed", why),
    }
}

/// Tries every ambient authority a sandboxed hook must not have; denies naming any that
/// worked, allows when none did.
fn probe() -> PreToolDecision {
    let mut escaped = Vec::new();
    if std::fs::read_dir("/").is_ok() || std::fs::read("/etc/passwd").is_ok() {
        escaped.push("filesystem");
    }
    if std::fs::write("escape.txt", b"x").is_ok() {
        escaped.push("filesystem-write");
    }
    if std::env::vars().next().is_some() {
        escaped.push("environment");
    }
    if let Some(port) = palisade_sdk::config::<u16>("port")
        && tcp_connect(port)
    {
        escaped.push("network");
    }
    // wasi:http is linked for every component; without an `http` grant it reaches nothing.
    if let Some(port) = palisade_sdk::config::<u16>("port")
        && palisade_sdk::http::get(&format!("http://127.0.0.1:{port}/")).is_ok()
    {
        escaped.push("http");
    }
    // Goes nowhere: a hook's stdout is not the host's.
    println!("PROBE-STDOUT-MARKER");
    eprintln!("PROBE-STDERR-MARKER");
    if escaped.is_empty() {
        PreToolDecision::Allow
    } else {
        PreToolDecision::deny("escaped", escaped.join(","))
    }
}

/// Whether a TCP connection to 127.0.0.1:`port` succeeds, through raw WASI sockets.
#[cfg(target_arch = "wasm32")]
fn tcp_connect(port: u16) -> bool {
    use wasi::sockets::network::{IpAddressFamily, IpSocketAddress, Ipv4SocketAddress};
    let network = wasi::sockets::instance_network::instance_network();
    let Ok(socket) = wasi::sockets::tcp_create_socket::create_tcp_socket(IpAddressFamily::Ipv4)
    else {
        log::info("probe: tcp socket refused");
        return false;
    };
    let address = IpSocketAddress::Ipv4(Ipv4SocketAddress {
        port,
        address: (127, 0, 0, 1),
    });
    if let Err(err) = socket.start_connect(&network, address) {
        log::info(&format!("probe: tcp connect refused: {err:?}"));
        return false;
    }
    socket.subscribe().block();
    match socket.finish_connect() {
        Ok(_) => true,
        Err(err) => {
            log::info(&format!("probe: tcp connect failed: {err:?}"));
            false
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn tcp_connect(_port: u16) -> bool {
    false
}

/// `[config] size_mb` in bytes (default 24 MiB).
fn size() -> usize {
    palisade_sdk::config::<usize>("size_mb").unwrap_or(24) * 1024 * 1024
}

/// A JSON array of about `bytes` bytes: `[1,1,1,…]`.
fn json_array(bytes: usize) -> String {
    let mut text = String::with_capacity(bytes + 2);
    text.push('[');
    text.push_str(&"1,".repeat(bytes / 2));
    text.push('1');
    text.push(']');
    text
}

/// Holds on to WASI pollables, which live in the host's memory, not the guest's; denies if
/// the host let it hold 100,000 of them.
fn hoard_pollables() -> PreToolDecision {
    #[cfg(target_arch = "wasm32")]
    for _ in 0..100_000 {
        std::mem::forget(wasi::clocks::monotonic_clock::subscribe_duration(
            1_000_000_000,
        ));
    }
    PreToolDecision::deny("hoarded", "held 100000 pollables")
}

struct Scripted {
    /// `pre-tool` calls of this instance.
    calls: u32,
}

impl Plugin for Scripted {
    fn new(config: &Config) -> Self {
        // `[config] log_new`: say when the instance makes its value.
        if config.get::<bool>("log_new") == Some(true) {
            log::info("made");
        }
        Scripted { calls: 0 }
    }
}

impl PreTool for Scripted {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        tag();
        self.calls += 1;
        let n = self.calls;
        if palisade_sdk::config::<u32>("panic_on_call") == Some(n) {
            panic!("scripted panic on call {n}");
        }
        let behaviour: String = palisade_sdk::config("pre_tool").unwrap_or_else(|| "allow".into());
        match behaviour.as_str() {
            "allow" => PreToolDecision::Allow,
            "deny" => PreToolDecision::Deny(
                Deny::new("scripted-deny", format!("denied {}", call.name))
                    .with_payload(&serde_json::json!({ "call": n })),
            ),
            "ask" => PreToolDecision::ask(format!("may {} run?", call.name)),
            "provenance" => {
                log::info(&match &call.provenance {
                    None => "provenance none".to_string(),
                    Some(Provenance::Builtin) => "provenance builtin".to_string(),
                    Some(Provenance::Mcp(mcp)) => {
                        format!("provenance mcp {} {}", mcp.server, mcp.tool)
                    }
                    Some(Provenance::Plugin(name)) => format!("provenance plugin {name}"),
                });
                PreToolDecision::Allow
            }
            "kind" => {
                match call.kind() {
                    Some(kind) => log::info(&format!("kind {} {}", call.name, kind.name())),
                    None => log::info(&format!("kind {} none", call.name)),
                }
                PreToolDecision::Allow
            }
            "loop" => spin(),
            "membomb" => membomb(),
            "panic" => panic!("scripted panic"),
            "probe" => probe(),
            "print-flood" => {
                for i in 0..1000 {
                    println!("line {i:04} {}", "x".repeat(70));
                }
                PreToolDecision::Allow
            }
            "log-loop" => loop {
                log::info("again");
            },
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(30));
                PreToolDecision::Allow
            }
            // Host-kept state: a session counter `n`, denied past `[config] limit`; or the
            // same with the global counter; or count, then trap.
            "state-count" | "state-global-count" => {
                let store = if behaviour == "state-count" {
                    state::session()
                } else {
                    state::global()
                };
                let limit: i64 = palisade_sdk::config("limit").unwrap_or(3);
                match store.increment("n", 1) {
                    Ok(count) if count > limit => {
                        PreToolDecision::deny("over-limit", format!("call {count} of {limit}"))
                    }
                    Ok(count) => {
                        log::info(&format!("count {count}"));
                        PreToolDecision::Allow
                    }
                    Err(refused) => PreToolDecision::deny("state-refused", format!("{refused:?}")),
                }
            }
            // The grants: what the component can read of the host, said back as a deny (or
            // an allow, with why not, when it cannot).
            "read-file" => {
                let path: String = palisade_sdk::config("path").unwrap_or_default();
                match std::fs::read_to_string(&path) {
                    Ok(text) => PreToolDecision::deny("read", text.trim().to_string()),
                    Err(err) => {
                        log::info(&format!("cannot read {path}: {err}"));
                        PreToolDecision::Allow
                    }
                }
            }
            "write-file" => {
                let path: String = palisade_sdk::config("path").unwrap_or_default();
                match std::fs::write(&path, b"x") {
                    Ok(()) => PreToolDecision::deny("wrote", path),
                    Err(err) => {
                        log::info(&format!("cannot write {path}: {err}"));
                        PreToolDecision::Allow
                    }
                }
            }
            "http" => http_behaviour(),
            "env-var" => {
                let name: String = palisade_sdk::config("name").unwrap_or_default();
                match std::env::var(&name) {
                    Ok(value) => PreToolDecision::deny("env", value),
                    Err(_) => PreToolDecision::Allow,
                }
            }
            // Another plugin's counter, tried: reads the session value of `[config] key`
            // (default `n`), then sets it to the counter `[config] set` or, without one,
            // deletes it; denies with what it read.
            "state-tamper" => {
                let key: String = palisade_sdk::config("key").unwrap_or_else(|| "n".into());
                let store = state::session();
                let seen = store.get(&key);
                let written = match palisade_sdk::config::<i64>("set") {
                    Some(count) => store.set(&key, &count.to_le_bytes()).map(|()| true),
                    None => store.delete(&key),
                };
                PreToolDecision::deny("tampered", format!("saw {seen:?}, wrote {written:?}"))
            }
            "state-count-panic" => {
                let _ = state::session().increment("n", 1);
                panic!("scripted panic after counting")
            }
            // Hostile answers, `size_mb` MiB each: the host must refuse them unparsed.
            "huge-payload" => PreToolDecision::Deny(Deny {
                reason_code: "huge".into(),
                message: "a huge payload".into(),
                payload: Some(json_array(size())),
            }),
            "huge-message" => PreToolDecision::Deny(Deny::new("huge", "x".repeat(size()))),
            "pollables" => hoard_pollables(),
            // Writes one byte in every other page of a 1 MiB block: 128 pages written, none
            // beside another (how an interpreter's heap dirties its memory).
            "scatter" => {
                // Not zeroed first (that would write every page): only the bytes below are.
                let mut block: Vec<u8> = Vec::with_capacity(1 << 20);
                for page in (0..block.capacity()).step_by(2 * 4096) {
                    block.spare_capacity_mut()[page].write(1);
                }
                black_box(&block);
                PreToolDecision::Allow
            }
            "seed" => {
                use std::hash::BuildHasher;
                let hash = std::hash::RandomState::new().hash_one(0u8);
                PreToolDecision::deny("seed", format!("{hash:016x}"))
            }
            "bad-payload" => PreToolDecision::Deny(Deny {
                reason_code: "bad".into(),
                message: "bad payload".into(),
                payload: Some("{not json".into()),
            }),
            other => match other
                .strip_prefix("deny-after:")
                .and_then(|n| n.parse().ok())
            {
                Some(limit) if n > limit => PreToolDecision::deny(
                    "rate-limit",
                    format!("call {n} is over the limit of {limit}"),
                ),
                Some(_) => PreToolDecision::Allow,
                None => panic!("unknown pre_tool behaviour `{other}`"),
            },
        }
    }
}

impl ToolResult for Scripted {
    fn on_tool_result(&mut self, _call: ToolCall, outcome: ToolOutcome) {
        tag();
        match palisade_sdk::config::<String>("tool_result").as_deref() {
            Some("panic") => panic!("scripted panic"),
            Some("loop") => spin(),
            Some("echo") => log::info(&format!(
                "saw{} {}",
                if outcome.is_error { " error" } else { "" },
                outcome.joined_text()
            )),
            _ => {}
        }
    }
}

/// `text` with the word after each `password=` replaced by `***`.
fn redact_passwords(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("password=") {
        let (before, after) = rest.split_at(at + "password=".len());
        out.push_str(before);
        out.push_str("***");
        rest = after.trim_start_matches(|c: char| !c.is_whitespace());
    }
    out.push_str(rest);
    out
}

fn behaviour(key: &str, default: &str) -> String {
    palisade_sdk::config(key).unwrap_or_else(|| default.to_string())
}

impl SessionStart for Scripted {
    fn on_session_start(&mut self, source: SessionSource) -> Vec<String> {
        tag();
        match behaviour("session_start", "contexts").as_str() {
            "panic" => panic!("scripted panic"),
            _ => palisade_sdk::config::<Vec<String>>("contexts")
                .unwrap_or_default()
                .into_iter()
                .map(|c| format!("{c} ({source:?})"))
                .collect(),
        }
    }
}

impl PromptSubmit for Scripted {
    fn on_prompt_submit(&mut self, step: PreStep) -> PreStepDecision {
        tag();
        let texts: Vec<&str> = step.messages.iter().map(|m| m.text.as_str()).collect();
        log::debug(&format!(
            "turn {} step {} batch {texts:?}",
            step.turn, step.step
        ));
        match behaviour("prompt_submit", "enter").as_str() {
            "panic" => panic!("scripted panic"),
            "reject" => PreStepDecision::Reject(Deny::new("scripted-reject", "rejected the step")),
            // Any step after a tool call (the prompt's is step 1).
            "reject-continuations" if step.step > 1 => PreStepDecision::Reject(Deny::new(
                "continuation",
                format!("step {} of turn {} is not allowed", step.step, step.turn),
            )),
            // The complete batch, each `password=…` masked.
            "redact" => PreStepDecision::EnterBatch(
                step.messages
                    .iter()
                    .map(|m| Message {
                        role: m.role,
                        text: redact_passwords(&m.text),
                    })
                    .collect(),
            ),
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(30));
                PreStepDecision::Enter(vec![])
            }
            "reject-secrets" if texts.iter().any(|t| t.contains("password")) => {
                PreStepDecision::Reject(Deny::new(
                    "secret-in-prompt",
                    "the prompt contains a password",
                ))
            }
            _ => PreStepDecision::Enter(palisade_sdk::config("contexts").unwrap_or_default()),
        }
    }
}

impl ToolGuard for Scripted {
    fn on_tool_guard(&mut self, call: ToolCall) -> GuardDecision {
        tag();
        match behaviour("tool_guard", "abstain").as_str() {
            "deny" => GuardDecision::deny("invariant", format!("{} is never allowed", call.name)),
            "panic" => panic!("scripted panic"),
            "loop" => spin(),
            _ => GuardDecision::Abstain,
        }
    }
}

impl PostTool for Scripted {
    fn on_post_tool(&mut self, call: ToolCall, outcome: ToolOutcome) -> PostToolDecision {
        tag();
        let contexts: Vec<String> = palisade_sdk::config("contexts").unwrap_or_default();
        let action = match behaviour("post_tool", "accept").as_str() {
            "block" => {
                PostToolAction::Block(format!("blocked {}: {}", call.name, outcome.joined_text()))
            }
            "replace-content" => PostToolAction::ReplaceContent(vec![ContentBlock::Text(format!(
                "[redacted {} chars]",
                outcome.joined_text().len()
            ))]),
            "replace-value" => PostToolAction::ReplaceValue(behaviour("value", "{\"ok\":true}")),
            "bad-value" => PostToolAction::ReplaceValue("{not json".into()),
            "huge-value" => PostToolAction::ReplaceValue(json_array(size())),
            "panic" => panic!("scripted panic"),
            "upper" => PostToolAction::ReplaceContent(vec![ContentBlock::Text(
                outcome.joined_text().to_uppercase(),
            )]),
            // Every `secret` (config) becomes [REDACTED]: in the value when there is one (the
            // content is recomputed from it), else in the text.
            "redact" => {
                let secret = behaviour("secret", "secret");
                match &outcome.value {
                    Some(value) => {
                        PostToolAction::ReplaceValue(value.replace(secret.as_str(), "[REDACTED]"))
                    }
                    None => PostToolAction::ReplaceContent(vec![ContentBlock::Text(
                        outcome.joined_text().replace(secret.as_str(), "[REDACTED]"),
                    )]),
                }
            }
            _ => PostToolAction::Accept,
        };
        PostToolDecision { action, contexts }
    }
}

impl TurnStopping for Scripted {
    fn on_turn_stopping(&mut self, event: StopEvent) -> Option<String> {
        tag();
        match behaviour("turn_stopping", "none").as_str() {
            "steer" => Some(format!("keep going (turn {})", event.turn)),
            "steer-once" if event.continuations == 0 => Some("check your work once more".into()),
            "panic" => panic!("scripted panic"),
            _ => None,
        }
    }
}

impl Committed for Scripted {
    fn on_committed(&mut self, observation: Observation) {
        let kind = match &observation.fact {
            CommittedFact::Message(_) => "message",
            CommittedFact::ToolCall(_) => "tool-call",
            CommittedFact::ToolResult(_) => "tool-result",
            CommittedFact::LlmResponse(_) => "llm-response",
            CommittedFact::TurnCompleted(_) => "turn-completed",
            CommittedFact::SessionEnded(_) => "session-ended",
        };
        log::info(&format!("{kind} {}", observation.interaction_id));
        match behaviour("committed", "ok").as_str() {
            "loop" => spin(),
            "panic" => panic!("scripted panic"),
            _ => {}
        }
    }
}

impl ToolExecute for Scripted {
    fn on_tool_execute(&mut self, _call: ToolCall) -> ToolOutcome {
        tag();
        match behaviour("tool_execute", "passthrough").as_str() {
            "short-circuit" => ToolOutcome {
                content_blocks: Vec::new(),
                is_error: false,
                value: Some("{\"cached\":true}".into()),
            },
            "bad-outcome" => ToolOutcome {
                content_blocks: Vec::new(),
                is_error: false,
                value: Some("{not json".into()),
            },
            "panic" => panic!("scripted panic"),
            // Calls next() until it stops running the tool; says how often the tool ran.
            "next-loop" => {
                let mut ran = 0;
                for _ in 0..1000 {
                    if next(None).is_error {
                        break;
                    }
                    ran += 1;
                }
                ToolOutcome::text(format!("the tool ran {ran} times"))
            }
            "twice" => {
                let first = next(None);
                let second = next(None);
                ToolOutcome::text(format!(
                    "{} | {}",
                    first.joined_text(),
                    second.joined_text()
                ))
            }
            _ => next(None),
        }
    }
}

export!(
    Scripted: PreTool + ToolResult + SessionStart + PromptSubmit + ToolGuard + PostTool + TurnStopping
        + Committed + ToolExecute
);
