//! A minimal agent embedding Palisade at every extension point: a scripted model, three real
//! tools (read a file, list a directory, run a shell command — all inside a temporary
//! workspace), and the example plugins guarding them.
//!
//! Run: `cargo run -p palisade --example agent`
//!
//! It is the reference for embedders: build a `Host`, load a plugin directory, open a
//! `Session` per conversation, register tools in a `ToolRegistry`, and drive turns through
//! `palisade::agent::Agent` (or copy its loop — it is short and documents the three loop
//! decisions it implements).

use palisade::agent::{Agent, Entry, ModelReply, ScriptedModel};
use palisade::events::{Event, EventKind, EventSink};
use palisade::{Host, SessionSource, Tool, ToolOutcome, ToolRegistry, ToolRequest};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Counts hook outcomes for the summary at the end.
#[derive(Default)]
struct Tally(Mutex<Vec<String>>);

impl EventSink for Tally {
    fn emit(&self, event: &Event) {
        let line = match &event.kind {
            EventKind::HookDenied { reason_code, .. } => {
                format!("{} denied ({reason_code})", event.hook_id)
            }
            EventKind::HookFailed { reason, .. } => format!("{} failed ({reason})", event.hook_id),
            EventKind::PluginLog { message, .. } => format!("{} logged: {message}", event.hook_id),
            _ => return,
        };
        self.0
            .lock()
            .unwrap()
            .push(line.trim_end().replace('\n', " ⏎ "));
    }
}

/// Resolves `path` inside `root`, refusing anything that leaves it.
fn inside(root: &Path, path: &str) -> Result<PathBuf, String> {
    let joined = root.join(path);
    let resolved = joined.canonicalize().map_err(|e| format!("{path}: {e}"))?;
    if resolved.starts_with(root) {
        Ok(resolved)
    } else {
        Err(format!("{path} is outside the workspace"))
    }
}

fn tools(root: PathBuf) -> ToolRegistry {
    let string_arg = |key: &'static str| {
        move |input: &serde_json::Value| match input.get(key) {
            Some(serde_json::Value::String(_)) => Ok(()),
            _ => Err(format!("`{key}` must be a string")),
        }
    };
    let (r1, r2, r3) = (root.clone(), root.clone(), root);
    ToolRegistry::new([
        Tool::new("read_file", move |inv| {
            let root = r1.clone();
            async move {
                let path = inside(
                    &root,
                    inv.call.arguments["path"].as_str().unwrap_or_default(),
                )?;
                let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
                Ok(ToolOutcome::text(text))
            }
        })
        .input(string_arg("path")),
        Tool::new("list_dir", move |inv| {
            let root = r2.clone();
            async move {
                let path = inside(&root, inv.call.arguments["path"].as_str().unwrap_or("."))?;
                let mut names: Vec<String> = std::fs::read_dir(path)
                    .map_err(|e| e.to_string())?
                    .filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect();
                names.sort();
                Ok(ToolOutcome {
                    value: Some(json!(names)),
                    ..ToolOutcome::default()
                })
            }
        })
        .output(|v| {
            if v.is_array() {
                Ok(())
            } else {
                Err("a listing is an array".into())
            }
        }),
        Tool::new("shell", move |inv| {
            let root = r3.clone();
            async move {
                let command = inv.call.arguments["command"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let output = tokio::task::spawn_blocking(move || {
                    std::process::Command::new("sh")
                        .arg("-c")
                        .arg(&command)
                        .current_dir(&root)
                        .output()
                })
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
                let text = String::from_utf8_lossy(&output.stdout).into_owned()
                    + &String::from_utf8_lossy(&output.stderr);
                if output.status.success() {
                    Ok(ToolOutcome::text(text))
                } else {
                    Err(format!("exit status {}: {text}", output.status))
                }
            }
        })
        .input(string_arg("command")),
    ])
}

fn call(id: &str, name: &str, input: serde_json::Value) -> ToolRequest {
    ToolRequest::new(id, name, input)
}

fn reply(text: &str, calls: Vec<ToolRequest>) -> ModelReply {
    ModelReply {
        text: text.into(),
        tool_calls: calls,
        ..Default::default()
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The workspace the tools act on.
    let workspace = tempfile::tempdir()?;
    let root = workspace.path().canonicalize()?;
    std::fs::create_dir_all(root.join("src"))?;
    std::fs::create_dir_all(root.join("build"))?;
    std::fs::write(root.join("README.md"), "# demo\nA tiny project.\n")?;
    std::fs::write(root.join("src/main.rs"), "fn main() {}\n")?;
    std::fs::write(root.join(".env"), "API_KEY=sk-live-1234\n")?;

    // The operator's plugins: here, the bundled examples.
    let plugins_dir = tempfile::tempdir()?;
    palisade_examples::install(plugins_dir.path())?;

    let tally = Arc::new(Tally::default());
    let host = Host::builder().event_sink(tally.clone()).build()?;
    let plugins = host.load_dir(plugins_dir.path())?;
    let session = plugins.session("example-session");

    let model = ScriptedModel::new([
        reply(
            "Let me look around.",
            vec![
                call("t1", "list_dir", json!({ "path": "." })),
                call("t2", "read_file", json!({ "path": "README.md" })),
                call(
                    "t3",
                    "shell",
                    json!({ "command": "ls src && echo build ok" }),
                ),
            ],
        ),
        reply(
            "The project has a README, src/main.rs and a build folder.",
            vec![],
        ),
        reply(
            "Cleaning up.",
            vec![
                call("t4", "shell", json!({ "command": "rm -rf ~" })),
                call("t5", "read_file", json!({ "path": ".env" })),
                call("t6", "shell", json!({ "command": "rm -rf ./build && ls" })),
            ],
        ),
        reply(
            "I removed ./build. I will not delete your home directory or read .env.",
            vec![],
        ),
    ]);
    let mut agent = Agent::new(session.clone(), tools(root.clone()), model);
    agent.start(SessionSource::Startup).await;
    agent.run_turn("Look around the project.").await;
    agent.run_turn("Clean everything up.").await;
    agent.end("done");
    session.drain_background().await;

    println!("Transcript:");
    for entry in agent.transcript() {
        match entry {
            Entry::User { text } => println!("  user       {text}"),
            Entry::Assistant { text, tool_calls } if tool_calls.is_empty() => {
                println!("  assistant  {text}")
            }
            Entry::Assistant { text, tool_calls } => {
                println!("  assistant  {text} → calls {}", tool_calls.join(", "))
            }
            Entry::ToolResult {
                tool_use_id,
                is_error,
                content,
            } => println!(
                "  result     {tool_use_id} {} {}",
                if *is_error { "ERROR" } else { "ok   " },
                content.replace('\n', " ⏎ ")
            ),
            Entry::Context { source, text } => println!("  context    [{source}] {text}"),
            Entry::Steering { source, text } => println!("  steering   [{source}] {text}"),
            Entry::TurnClosed { turn, outcome, .. } => {
                println!("  — turn {turn} closed: {outcome:?}")
            }
        }
    }
    println!("\nWhat the hooks did:");
    for line in tally.0.lock().unwrap().iter() {
        println!("  {line}");
    }
    println!("\nbuild/ still exists: {}", root.join("build").exists());
    Ok(())
}
