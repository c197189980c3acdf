//! A process that commits facts to a fact stream through a lifecycle, and says which the stream
//! acknowledged: the writer the kill -9 tests (`tests/facts.rs`) kill mid-stream.
//!
//! `fact-writer STREAM SESSION N`: STREAM is a Redis URL or the embedded log's directory. For
//! each of N tool calls (`t0`, `t1`, …) it runs the tool step (the call committed, its decision)
//! and commits the call's result, then flushes the stream and prints `acked <interaction id>`
//! for each of the three records — only once the stream has acknowledged them.

use palisade::facts::FactStream;
use palisade::{AskPolicy, Host, Lifecycle, ToolCall, ToolOutcome};
use std::io::Write;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [stream, session, n] = &args[..] else {
        panic!("usage: fact-writer STREAM SESSION N");
    };
    let n: usize = n.parse().expect("N is a number");
    let stream = if stream.starts_with("redis") {
        FactStream::redis(stream)
    } else {
        FactStream::embedded(stream)
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let plugins_dir = tempfile::tempdir().unwrap();
    let plugins = Host::builder()
        .fact_stream(stream.clone())
        .build()
        .unwrap()
        .load_dir(plugins_dir.path())
        .unwrap();
    let lifecycle = Lifecycle::new(plugins.session(session.as_str()));
    let mut out = std::io::stdout().lock();
    runtime.block_on(async {
        for i in 0..n {
            let id = format!("t{i}");
            let call = ToolCall::new(&id, "Bash", serde_json::json!({ "command": "true" }));
            lifecycle.authorize(&call, AskPolicy::Deny).await;
            lifecycle
                .tool_finished(&call, &ToolOutcome::text(format!("ran {i}")))
                .await;
            stream.flush(Duration::from_secs(30)).unwrap();
            for what in ["tool-call", "tool-decision", "tool-result"] {
                writeln!(out, "acked {session}:{what}:{id}").unwrap();
            }
            out.flush().unwrap();
        }
    });
}
