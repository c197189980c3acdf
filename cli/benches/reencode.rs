//! What reading a message strictly and forwarding it re-encoded costs the proxies, per
//! message, against the least a judging proxy does: parsing the message with serde_json (to
//! judge it) and passing the peer's bytes on. The messages are those of one ACP prompt turn
//! through `palisade acp` (the editor's `session/prompt`, two `session/update` chunks, the
//! `end_turn` answer) and of one MCP `tools/call` (the request and its result), so the sums
//! compare with what the `acp` and `mcp` benches measure the proxy adding per turn and call.
//!
//! The CLI's strict reader is compiled here from its own file (as the fuzz crate does).
//!
//! Run: `cargo bench -p palisade-cli --bench reencode`.

#[path = "../src/jsonrpc/strict.rs"]
#[allow(dead_code)]
mod strict;

/// What strict.rs uses of the CLI.
mod output {
    pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(text)
    }
}

use std::hint::black_box;
use std::time::{Duration, Instant};

const ACP_TURN: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"sess-0123456789","prompt":[{"type":"text","text":"Look at src/main.rs and tell me why the build fails on the second run."}]}}"#,
    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-0123456789","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"Looking at it."}}}}"#,
    r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-0123456789","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":" Done."}}}}"#,
    r#"{"jsonrpc":"2.0","id":"palisade-5f0c2a9e4b7d1c3a8e6f0b2d4c6a8e0f","result":{"stopReason":"end_turn"}}"#,
];

const MCP_CALL: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/home/user/project/src/main.rs"},"_meta":{"progressToken":12}}}"#,
    r#"{"jsonrpc":"2.0","id":"palisade-5f0c2a9e4b7d1c3a8e6f0b2d4c6a8e0f","result":{"content":[{"type":"text","text":"fn main() {\n    println!(\"hello\");\n}\n"}],"isError":false}}"#,
];

const ROUNDS: usize = 200_000;

/// The median time of `ROUNDS` rounds of `run` over `messages` (all of them, one round).
fn median(messages: &[&str], run: impl Fn(&str) -> usize) -> Duration {
    let mut times = Vec::with_capacity(ROUNDS / 100);
    for _ in 0..ROUNDS / 100 {
        let started = Instant::now();
        for _ in 0..100 {
            for message in messages {
                black_box(run(black_box(message)));
            }
        }
        times.push(started.elapsed() / 100);
    }
    times.sort();
    times[times.len() / 2]
}

/// Judged and forwarded as the proxies do: read strictly, then re-encoded.
fn strict_and_reencoded(line: &str) -> usize {
    let message = strict::read(line).expect("a valid message");
    strict::encode(&message.value).len()
}

/// The least a judging proxy does: parsed to be judged, the peer's bytes passed on.
fn parsed_and_passed(line: &str) -> usize {
    let value: serde_json::Value = serde_json::from_str(line).expect("JSON");
    black_box(&value);
    line.len()
}

fn main() {
    for (what, messages) in [
        ("an ACP prompt turn (4 messages)", ACP_TURN),
        ("an MCP tools/call (2 messages)", MCP_CALL),
    ] {
        // In turn, twice, so that the VM's drift falls on both alike.
        let mut strict = Vec::new();
        let mut plain = Vec::new();
        for _ in 0..2 {
            strict.push(median(messages, strict_and_reencoded));
            plain.push(median(messages, parsed_and_passed));
        }
        let strict = strict.iter().min().copied().unwrap_or_default();
        let plain = plain.iter().min().copied().unwrap_or_default();
        println!(
            "reencode: {what}: read strictly and re-encoded {:.2} µs, parsed and passed on \
             {:.2} µs; re-encoding adds {:.2} µs",
            strict.as_secs_f64() * 1e6,
            plain.as_secs_f64() * 1e6,
            strict.saturating_sub(plain).as_secs_f64() * 1e6
        );
    }
}
