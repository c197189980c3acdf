//! A test guest that exports `prepare` (`palisade_sdk::Prepare`). What its `prepare` does is
//! named by `[config] prepare`:
//!
//! - `ok` (or none): reads `[config] word` and keeps it;
//! - `fail`: returns an error (`no rules to read`);
//! - `fail-long`: returns an error of a mebibyte (`no rules ` and `x`s);
//! - `panic`: panics;
//! - `loop`: loops until it is stopped;
//! - `invocation`: asks for the current invocation, which an instance made ahead of its call
//!   does not have.
//!
//! Its `pre-tool` denies every call with reason code `prepared`, its message a JSON object of
//! what the instance saw: `prepared` (how many times `prepare` ran in it), `calls` (this call
//! included), `word` and `session` (as `prepare` read them; `null` when it did not run).

use palisade_sdk::{Config, Plugin, PreTool, PreToolDecision, Prepare, ToolCall, export};
use std::hint::black_box;

#[derive(Default)]
struct Prepared {
    prepared: u32,
    calls: u32,
    word: Option<String>,
    session: Option<String>,
}

impl Plugin for Prepared {
    fn new(_config: &Config) -> Self {
        Prepared::default()
    }
}

impl Prepare for Prepared {
    fn prepare(&mut self) -> Result<(), String> {
        self.prepared += 1;
        match palisade_sdk::config::<String>("prepare").as_deref() {
            None | Some("ok") => {}
            Some("fail") => return Err("no rules to read".into()),
            Some("fail-long") => return Err(format!("no rules {}", "x".repeat(1 << 20))),
            Some("panic") => panic!("prepare panicked"),
            Some("loop") => {
                let mut x = 0u64;
                loop {
                    x = black_box(x.wrapping_add(1));
                }
            }
            Some("invocation") => self.session = Some(palisade_sdk::invocation().session_id),
            Some(other) => return Err(format!("unknown behaviour {other}")),
        }
        self.word = palisade_sdk::config("word");
        Ok(())
    }
}

impl PreTool for Prepared {
    fn on_pre_tool(&mut self, _call: ToolCall) -> PreToolDecision {
        self.calls += 1;
        let seen = serde_json::json!({
            "prepared": self.prepared,
            "calls": self.calls,
            "word": self.word,
            "session": self.session,
        });
        PreToolDecision::deny("prepared", seen.to_string())
    }
}

export!(Prepared: PreTool + Prepare);
