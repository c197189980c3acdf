//! A test guest whose imports are all in the host's direct linker (no state, no files, no
//! HTTP, no clock subscription, no `next()`), so the host calls it without a fiber. What it
//! does is named by the call's command:
//!
//! - `spin`: loops until it is stopped;
//! - `print`: writes a line to stdout and one to stderr, then allows;
//! - `stdin`: reads its stdin to the end (there is none), then allows;
//! - `now`: reads the monotonic clock twice, then allows;
//! - `seed`: denies with a hash under a new `RandomState` (see [`seeded`]);
//! - anything else: allows.

use palisade_sdk::{Config, Plugin, PreTool, PreToolDecision, ToolCall, export};
use std::hint::black_box;
use std::io::Read as _;

struct Direct;

impl Plugin for Direct {
    fn new(_config: &Config) -> Self {
        Direct
    }
}

impl PreTool for Direct {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        let args = call.arguments;
        if args.contains("spin") {
            let mut x = 0u64;
            loop {
                x = black_box(x.wrapping_add(1));
            }
        }
        if args.contains("print") {
            println!("to stdout");
            eprintln!("to stderr");
        }
        if args.contains("stdin") {
            let mut input = Vec::new();
            if std::io::stdin().read_to_end(&mut input).is_err() || !input.is_empty() {
                return PreToolDecision::deny("stdin", "stdin was not empty and closed");
            }
        }
        if args.contains("now") {
            let start = std::time::Instant::now();
            black_box(start.elapsed());
        }
        if args.contains("seed") {
            return PreToolDecision::deny("seed", seeded());
        }
        PreToolDecision::Allow
    }
}

/// A hash of one value under a new `RandomState`, whose keys the standard library makes from
/// the instance's `wasi:random/insecure-seed` at its first `RandomState` (and the later ones
/// in order): the first calls of two instances answer alike only if their seeds are alike.
fn seeded() -> String {
    use std::hash::BuildHasher;
    format!("{:016x}", std::hash::RandomState::new().hash_one(0u8))
}

export!(Direct: PreTool);
