//! Soak and flood of `palisade serve`: 1,000 agent sessions of 20 events each (a
//! `SessionStart`, 18 tool calls, a `SessionEnd`), 16 clients at once, each event on a fresh
//! connection with the server's token (as `palisade forward` sends it). Mixed in:
//!
//! - 1 % of the events hit a faulty guard — one that traps, one that overruns its deadline,
//!   one that answers an invalid value — whose answer must be a deny naming it (fail closed);
//! - 5 % of the events come from a client that hangs up mid-request: half of them in the
//!   middle of the body, half right after sending it, before the answer.
//!
//! The plugins: `bash-budget` (stateful: at most 10 shell commands per session) and the three
//! faulty guards, each matched to a tool of its own. So every answered event has one exact
//! expected answer — the first 10 `Bash` calls of a session allowed, the next ones denied by
//! the budget (which checks that per-session state held across the session's events under
//! load), every faulty call denied — and every answer is checked.
//!
//! Reported: events/s, p50/p99 latency of the answered events, the server's RSS after start,
//! after a warm-up (the first 10 % of the sessions) and at the end, and the mismatches (the run
//! fails on any).
//!
//! Run: `cargo bench -p palisade-cli --bench soak` (`PALISADE_SOAK_SESSIONS=N` for another
//! count).

#[path = "../tests/support/server.rs"]
mod server;

use serde_json::json;
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const EVENTS_PER_SESSION: usize = 20;
const CLIENTS: usize = 16;
const BUDGET: usize = 10;

/// What one event is.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Kind {
    Start,
    Bash,
    /// A tool whose guard fails: trap, timeout, invalid answer.
    Fault(usize),
    /// A client that hangs up: in the body (`true`) or after it.
    Vanish(bool),
    End,
}

const FAULTS: [(&str, &str, &str); 3] = [
    ("fault-trap", "FaultTrap", "panic"),
    ("fault-timeout", "FaultTimeout", "sleep"),
    ("fault-invalid", "FaultInvalid", "bad-payload"),
];

/// A small deterministic generator (xorshift64*): the same mix on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A uniform draw in 0..10_000.
    fn per_10k(&mut self) -> u64 {
        self.next() % 10_000
    }
}

/// The 20 events of session `s`.
fn session_plan(s: usize) -> Vec<Kind> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (s as u64 + 1).wrapping_mul(0x1000_0000_01b3));
    let mut plan = vec![Kind::Start];
    for _ in 0..EVENTS_PER_SESSION - 2 {
        let draw = rng.per_10k();
        plan.push(if draw < 100 {
            Kind::Fault((rng.next() % 3) as usize)
        } else if draw < 600 {
            Kind::Vanish(rng.next().is_multiple_of(2))
        } else {
            Kind::Bash
        });
    }
    plan.push(Kind::End);
    plan
}

fn event(session: &str, kind: Kind) -> serde_json::Value {
    let tool = |name: &str| {
        json!({
            "session_id": session,
            "transcript_path": "/tmp/t.jsonl",
            "cwd": "/tmp",
            "hook_event_name": "PreToolUse",
            "tool_name": name,
            "tool_input": { "command": "ls" },
            "tool_use_id": "toolu_1"
        })
    };
    match kind {
        Kind::Start => json!({
            "session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
            "hook_event_name": "SessionStart", "source": "startup"
        }),
        Kind::End => json!({
            "session_id": session, "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
            "hook_event_name": "SessionEnd", "reason": "exit"
        }),
        Kind::Bash => tool("Bash"),
        Kind::Fault(f) => tool(FAULTS[f].1),
        Kind::Vanish(_) => tool("Read"),
    }
}

/// The deny reason of an answer, or `None` for no objection.
fn deny_reason(answer: &server::Response) -> Result<Option<String>, String> {
    if answer.status != 200 {
        return Err(format!("status {}: {}", answer.status, answer.body));
    }
    if answer.body.trim().is_empty() {
        return Ok(None);
    }
    let json: serde_json::Value =
        serde_json::from_str(&answer.body).map_err(|e| format!("{e}: {}", answer.body))?;
    let specific = &json["hookSpecificOutput"];
    Ok((specific["permissionDecision"] == "deny").then(|| {
        specific["permissionDecisionReason"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }))
}

/// Sends `body` and hangs up: halfway through the body, or right after it.
fn vanish(server: &server::Server, body: &[u8], in_the_body: bool) {
    let mut stream = std::net::TcpStream::connect(server.address).unwrap();
    let head = format!(
        "POST /claude-code HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {}\r\nContent-Length: {}\r\n\r\n",
        server.address,
        server.token,
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let sent = if in_the_body {
        body.len() / 2
    } else {
        body.len()
    };
    let _ = stream.write_all(&body[..sent]);
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    answered: usize,
    vanished: usize,
    faults: usize,
    budget_denials: usize,
    mismatches: Vec<String>,
}

/// Runs sessions `range` with `CLIENTS` threads; adds to `tally`.
fn run_sessions(server: &server::Server, range: std::ops::Range<usize>, tally: &Mutex<Tally>) {
    let next = AtomicUsize::new(range.start);
    std::thread::scope(|scope| {
        for _ in 0..CLIENTS {
            scope.spawn(|| {
                let mut local = Tally::default();
                loop {
                    let s = next.fetch_add(1, Ordering::Relaxed);
                    if s >= range.end {
                        break;
                    }
                    run_session(server, s, &mut local);
                }
                let mut all = tally.lock().unwrap();
                all.latencies.extend(local.latencies);
                all.answered += local.answered;
                all.vanished += local.vanished;
                all.faults += local.faults;
                all.budget_denials += local.budget_denials;
                all.mismatches.extend(local.mismatches);
            });
        }
    });
}

fn run_session(server: &server::Server, s: usize, tally: &mut Tally) {
    let session = format!("soak-{s}");
    let mut bash_calls = 0;
    for (i, kind) in session_plan(s).into_iter().enumerate() {
        let body = event(&session, kind).to_string();
        if let Kind::Vanish(in_the_body) = kind {
            vanish(server, body.as_bytes(), in_the_body);
            tally.vanished += 1;
            continue;
        }
        let started = Instant::now();
        let answer = server.post("/claude-code", body.as_bytes());
        tally.latencies.push(started.elapsed());
        tally.answered += 1;
        let got = match deny_reason(&answer) {
            Ok(got) => got,
            Err(e) => {
                tally
                    .mismatches
                    .push(format!("{session} #{i} {kind:?}: {e}"));
                continue;
            }
        };
        let ok = match kind {
            Kind::Start | Kind::End => got.is_none(),
            Kind::Bash => {
                bash_calls += 1;
                if bash_calls <= BUDGET {
                    got.is_none()
                } else {
                    tally.budget_denials += 1;
                    got.as_deref().is_some_and(|r| r.contains("budget of 10"))
                }
            }
            Kind::Fault(f) => {
                tally.faults += 1;
                got.as_deref().is_some_and(|r| r.contains(FAULTS[f].0))
            }
            Kind::Vanish(_) => unreachable!(),
        };
        if !ok {
            tally
                .mismatches
                .push(format!("{session} #{i} {kind:?}: got {got:?}"));
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it with no arguments: a
    // short run then, so the suite stays quick.
    let benching = std::env::args().any(|a| a == "--bench");
    let sessions: usize = std::env::var("PALISADE_SOAK_SESSIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(if benching { 1000 } else { 20 });
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    let budget = palisade_examples::get("bash-budget").unwrap();
    palisade_examples::install_one(budget, &plugins).unwrap();
    let manifest = plugins.join("bash-budget/plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("max_calls = 50", &format!("max_calls = {BUDGET}")),
    )
    .unwrap();
    for (name, tool, behaviour) in FAULTS {
        server::scripted(
            &plugins,
            name,
            &format!(
                "[limits]\ntimeout_ms = 200\n\n[[hooks]]\npoint = \"pre-tool\"\n\
                 capability = \"guard\"\nmatcher = \"^{tool}$\"\n\n[config]\npre_tool = \"{behaviour}\"\n"
            ),
        );
    }
    let cache = dir.path().join("cache");
    let server = server::Server::start(
        &plugins,
        &["--max-sessions", "2048", "--max-concurrency", "64"],
        &[("PALISADE_CACHE_DIR", cache.to_str().unwrap())],
    );
    let pid = server.child.id();
    let rss_start = rss_kib(pid);
    let tally = Mutex::new(Tally::default());
    let warm = (sessions / 10).max(1);
    run_sessions(&server, 0..warm, &tally);
    let rss_warm = rss_kib(pid);
    let started = Instant::now();
    run_sessions(&server, warm..sessions, &tally);
    let took = started.elapsed();
    // Let the server finish what the vanished clients left (their hooks end at the deadline).
    std::thread::sleep(Duration::from_millis(500));
    let rss_end = rss_kib(pid);
    let health = server.request("GET", "/health", b"", &[]).json();
    let mut tally = tally.into_inner().unwrap();
    tally.latencies.sort();
    let measured_events = (sessions - warm) * EVENTS_PER_SESSION;
    let growth = (rss_end as f64 - rss_warm as f64) / rss_warm as f64 * 100.0;
    println!(
        "palisade serve soak: {sessions} sessions x {EVENTS_PER_SESSION} events, {CLIENTS} clients"
    );
    println!(
        "  events: {} answered ({} from faulty guards, {} budget denials), {} clients hung up",
        tally.answered, tally.faults, tally.budget_denials, tally.vanished
    );
    println!(
        "  throughput (after warm-up): {:.0} events/s ({measured_events} events in {:.2} s)",
        measured_events as f64 / took.as_secs_f64(),
        took.as_secs_f64()
    );
    println!(
        "  latency of answered events: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        percentile(&tally.latencies, 0.5).as_secs_f64() * 1e3,
        percentile(&tally.latencies, 0.99).as_secs_f64() * 1e3,
        tally.latencies.last().unwrap().as_secs_f64() * 1e3
    );
    println!(
        "  RSS: {} KiB after start, {} KiB after warm-up ({warm} sessions), {} KiB at the end: \
         {growth:+.1} % since warm-up",
        rss_start, rss_warm, rss_end
    );
    println!("  /health at the end: {health}");
    println!(
        "  answers not as the plugins decided: {}",
        tally.mismatches.len()
    );
    for m in tally.mismatches.iter().take(20) {
        println!("    {m}");
    }
    assert!(tally.mismatches.is_empty(), "some answers were wrong");
    assert_eq!(health["busy"], 0, "a session is still busy: {health}");
}
