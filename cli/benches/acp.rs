//! Cost of one ACP prompt turn through `palisade acp`, against the same turn made to the
//! agent directly. The agent is a small Python program that answers each `session/prompt`
//! with two `session/update` message chunks and `end_turn`, so what is measured is the
//! proxy: two pipe hops each way, reading and re-encoding every message, `prompt-submit`
//! (and, with the five bundled examples, `session-start` and `turn-stopping`).
//!
//! The median and p99 of 2,000 turns each way, printed: the turns taken in turn, one of each
//! case after the other, so that the VM's drift falls on every case alike. With
//! `PALISADE_BENCH_BASELINE_BIN=PATH` (another build of `palisade`, e.g. the commit before a
//! change), the proxy's cases run with that binary too, each right before this build's, and
//! the ratios of what the proxy adds are printed.
//!
//! Run: `cargo bench -p palisade-cli --bench acp`.

#[path = "support/in_turn.rs"]
mod in_turn;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

const AGENT: &str = r#"
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") != "session/prompt":
        continue
    session = message["params"]["sessionId"]
    for text in ("Looking at it.", " Done."):
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        print(json.dumps({"jsonrpc": "2.0", "method": "session/update",
                          "params": {"sessionId": session, "update": update}}), flush=True)
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"stopReason": "end_turn"}}),
          flush=True)
"#;

const TURNS: usize = 2_000;

/// An agent, or the proxy in front of it, driven as its editor.
struct Editor {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    next: u64,
}

impl Editor {
    fn start(command: &mut Command) -> Editor {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        Editor {
            child,
            input,
            output,
            next: 1,
        }
    }

    /// One prompt turn: the prompt sent, the updates read, the answer read.
    fn turn(&mut self) {
        let id = self.next;
        self.next += 1;
        let prompt = json!({ "jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": { "sessionId": "bench", "prompt": [{ "type": "text", "text": "go on" }] } });
        writeln!(self.input, "{prompt}").unwrap();
        self.input.flush().unwrap();
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.output.read_line(&mut line).unwrap() > 0,
                "the agent ended"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                assert_eq!(message["result"]["stopReason"], "end_turn", "{message}");
                return;
            }
        }
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn python() -> String {
    std::env::var("PALISADE_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn main() {
    // `cargo bench` passes `--bench`; a filter is not taken.
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.py");
    std::fs::write(&agent, AGENT).unwrap();
    let examples = dir.path().join("examples");
    palisade_examples::install(&examples).unwrap();
    let empty = dir.path().join("none");
    std::fs::create_dir_all(&empty).unwrap();
    let baseline = std::env::var_os("PALISADE_BENCH_BASELINE_BIN").map(PathBuf::from);
    let this = PathBuf::from(env!("CARGO_BIN_EXE_palisade"));
    let proxy = |binary: &Path, plugins: &Path| {
        let mut command = Command::new(binary);
        command
            .args(["acp", "--plugins"])
            .arg(plugins)
            .arg("--")
            .arg(python())
            .arg(&agent)
            .env("PALISADE_CACHE_DIR", dir.path().join("cache"))
            .env("PALISADE_STATE_DIR", dir.path().join("state"));
        command
    };
    let mut direct = Command::new(python());
    direct.arg(&agent);
    let mut cases = vec![("direct".to_string(), direct)];
    for (what, plugins) in [("no plugins", &empty), ("the five examples", &examples)] {
        if let Some(baseline) = &baseline {
            let name = format!("through palisade acp (baseline), {what}");
            cases.push((name, proxy(baseline, plugins)));
        }
        cases.push((
            format!("through palisade acp, {what}"),
            proxy(&this, plugins),
        ));
    }
    let mut editors: Vec<(String, Editor)> = cases
        .into_iter()
        .map(|(name, mut command)| (name, Editor::start(&mut command)))
        .collect();
    for (_, editor) in &mut editors {
        for _ in 0..50 {
            editor.turn();
        }
    }
    let times = in_turn::percentiles(editors.len(), TURNS, |case| editors[case].1.turn());
    let summary: Vec<_> = editors
        .into_iter()
        .map(|(name, _)| name)
        .zip(times)
        .collect();
    in_turn::print("acp", "a prompt turn", TURNS, &summary, baseline.is_some());
}
