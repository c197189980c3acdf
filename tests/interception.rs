//! Every extension point, composed through the real agent loop with wasm plugins: the exact
//! transcript and the audit log of one scripted session.

use palisade::agent::{Agent, Entry, ModelReply, ScriptedModel};
use palisade::{
    Approval, Approver, AskRequest, BoxFuture, SessionSource, Tool, ToolCall, ToolOutcome,
    ToolRegistry, ToolRequest, TurnOutcome,
};
use palisade_tests::transcript::{context, result};
use palisade_tests::{PluginDir, load_audited};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Approves deploys to staging, rejects the rest.
struct StagingOnly;

impl Approver for StagingOnly {
    fn approve<'a>(&'a self, call: &'a ToolCall, _ask: &'a AskRequest) -> BoxFuture<'a, Approval> {
        let staging = call.arguments["target"] == "staging";
        Box::pin(async move {
            if staging {
                Approval::AllowedOnce
            } else {
                Approval::Rejected
            }
        })
    }
}

fn plugins() -> PluginDir {
    let dir = PluginDir::new();
    let scripted = |name: &str, hooks: &str, config: &str| {
        dir.scripted(name, &format!("{hooks}\n[config]\n{config}\n"));
    };
    let hook = |point: &str, capability: &str, matcher: &str| {
        let matcher = if matcher.is_empty() {
            String::new()
        } else {
            format!("matcher = \"{matcher}\"\n")
        };
        format!("[[hooks]]\npoint = \"{point}\"\ncapability = {capability}\n{matcher}")
    };
    scripted(
        "ctx",
        &hook("session-start", "\"transform\"", ""),
        "contexts = [\"project uses cargo\"]",
    );
    scripted(
        "gate",
        &hook("prompt-submit", "\"guard\"", ""),
        "prompt_submit = \"reject-secrets\"",
    );
    scripted(
        "asker",
        &hook("pre-tool", "\"guard\"", "deploy"),
        "pre_tool = \"ask\"",
    );
    scripted(
        "invariant",
        &hook("tool-guard", "\"guard\"", "write_file"),
        "tool_guard = \"deny\"",
    );
    scripted(
        "valuer",
        &hook("post-tool", "\"transform\"", "count"),
        "post_tool = \"replace-value\"\nvalue = '{\"count\": 42}'\ncontexts = [\"counted\"]",
    );
    scripted(
        "blocker",
        &hook("post-tool", "[\"guard\", \"transform\"]", "leak"),
        "post_tool = \"block\"\ncontexts = [\"the leak tool is blocked\"]",
    );
    scripted(
        "coach",
        &hook("turn-stopping", "\"steer\"", ""),
        "turn_stopping = \"steer-once\"",
    );
    let facts: String = [
        "message-committed",
        "tool-call-committed",
        "tool-result-committed",
        "llm-response-committed",
        "turn-completed",
        "session-ended",
    ]
    .iter()
    .map(|point| hook(point, "\"observe\"", ""))
    .collect();
    scripted("observer", &facts, "");
    for name in ["shell-guard", "retry"] {
        palisade_examples::install_one(palisade_examples::get(name).unwrap(), dir.path()).unwrap();
    }
    let retry = dir.path().join("retry/plugin.toml");
    let manifest = std::fs::read_to_string(&retry).unwrap();
    // The example's own matcher (every agent's read-only tools) made this test's tool's.
    let manifest: Vec<&str> = manifest
        .lines()
        .map(|line| {
            if line.starts_with("matcher = ") {
                "matcher = \"flaky\""
            } else {
                line
            }
        })
        .collect();
    let manifest = manifest.join("\n");
    assert!(manifest.contains("matcher = \"flaky\""), "{manifest}");
    std::fs::write(retry, manifest).unwrap();
    dir
}

fn text(s: String) -> Result<ToolOutcome, String> {
    Ok(ToolOutcome::text(s))
}

fn tools(flaky_runs: Arc<AtomicU32>) -> ToolRegistry {
    ToolRegistry::new([
        Tool::new("Bash", move |inv| async move {
            text(format!(
                "ran: {}",
                inv.call.arguments["command"].as_str().unwrap()
            ))
        }),
        Tool::new("deploy", move |inv| async move {
            text(format!(
                "deployed {}",
                inv.call.arguments["target"].as_str().unwrap()
            ))
        }),
        Tool::new("write_file", |_| async { text("wrote".into()) }),
        Tool::new("flaky", move |_| {
            let runs = flaky_runs.clone();
            async move {
                match runs.fetch_add(1, Ordering::SeqCst) + 1 {
                    1 => Err("connection reset".to_string()),
                    n => text(format!("flaky ok on attempt {n}")),
                }
            }
        }),
        Tool::new("count", |_| async {
            Ok(ToolOutcome {
                value: Some(json!({ "count": 1 })),
                ..ToolOutcome::text("1")
            })
        }),
        Tool::new("leak", |_| async { text("secret=xyz".into()) }),
        Tool::new("outer", |inv| async move {
            let nested = inv
                .context
                .execute(ToolRequest::new("nested-1", "count", json!({})))
                .await;
            inv.context.defer_context("outer", "outer note");
            text(format!(
                "outer done (nested: {})",
                palisade::agent::text_of(&nested.outcome)
            ))
        })
        .finalize_content(|_, outcome| {
            // The tool's own last-mile invariant: it sees the final content, once.
            Some(vec![palisade::ContentBlock::Text {
                text: format!("[final] {}", palisade::agent::text_of(outcome)),
            }])
        }),
    ])
}

fn call(id: &str, name: &str, input: Value) -> ToolRequest {
    ToolRequest::new(id, name, input)
}

#[tokio::test]
async fn every_extension_point_through_the_agent_loop() {
    let dir = plugins();
    let (plugins, log) = load_audited(&dir);
    let session = plugins
        .session("interception")
        .with_approver(Arc::new(StagingOnly));
    let flaky_runs = Arc::new(AtomicU32::new(0));
    let model = ScriptedModel::new([
        ModelReply {
            text: "working".into(),
            tool_calls: vec![
                call("t1", "Bash", json!({ "command": "rm -rf /" })),
                call("t2", "Bash", json!({ "command": "ls" })),
                call("t3", "deploy", json!({ "target": "staging" })),
                call("t4", "deploy", json!({ "target": "prod" })),
                call("t5", "write_file", json!({ "path": "a.txt" })),
                call("t6", "flaky", json!({})),
                call("t7", "count", json!({})),
                call("t8", "leak", json!({})),
                call("t9", "outer", json!({})),
            ],
            ..Default::default()
        },
        ModelReply {
            text: "all done".into(),
            tool_calls: vec![],
            ..Default::default()
        },
        ModelReply {
            text: "double-checked".into(),
            tool_calls: vec![],
            ..Default::default()
        },
    ]);
    let mut agent = Agent::new(session.clone(), tools(flaky_runs.clone()), model);
    agent.start(SessionSource::Startup).await;
    assert_eq!(
        agent.run_turn("hello, my password is hunter2").await,
        TurnOutcome::Blocked
    );
    assert_eq!(
        agent.run_turn("set up the project").await,
        TurnOutcome::Completed
    );
    agent.end("user exit");
    session.drain_background().await;

    let shell_guard_message = "Refused: this deletes the filesystem root or the home directory. Delete the specific path you mean instead (for example `rm -rf ./build`).";
    let expected = vec![
        context(
            "ctx/session-start",
            "project uses cargo (SessionSource::Startup)",
        ),
        // Turn 1: rejected before any step; nothing model-visible.
        Entry::TurnClosed {
            turn: 1,
            outcome: TurnOutcome::Blocked,
            reason: Some("secret-in-prompt".into()),
        },
        // Turn 2.
        Entry::User {
            text: "set up the project".into(),
        },
        Entry::Assistant {
            text: "working".into(),
            tool_calls: ["t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"]
                .map(String::from)
                .to_vec(),
        },
        result("t1", true, shell_guard_message),
        result("t2", false, "ran: ls"),
        result("t3", false, "deployed staging"),
        result(
            "t4",
            true,
            "`asker/pre-tool` asked before running deploy (may deploy run?), and the approver rejected it, so the call is denied",
        ),
        result("t5", true, "write_file is never allowed"),
        result("t6", false, "flaky ok on attempt 2"),
        result("t7", false, "{\"count\":42}"),
        result("t8", true, "blocked leak: secret=xyz"),
        result("t9", false, "[final] outer done (nested: {\"count\":42})"),
        // The batch settled: its contexts, in FIFO order.
        context("valuer/post-tool", "counted"),
        context("blocker/post-tool", "the leak tool is blocked"),
        context("valuer/post-tool", "counted"),
        context("outer", "outer note"),
        Entry::Assistant {
            text: "all done".into(),
            tool_calls: vec![],
        },
        // The stop boundary steered: the SAME turn goes on.
        Entry::Steering {
            source: "coach/turn-stopping".into(),
            text: "check your work once more".into(),
        },
        Entry::Assistant {
            text: "double-checked".into(),
            tool_calls: vec![],
        },
        Entry::TurnClosed {
            turn: 2,
            outcome: TurnOutcome::Completed,
            reason: None,
        },
    ];
    assert_eq!(
        agent.transcript(),
        expected.as_slice(),
        "{:#?}",
        agent.transcript()
    );
    assert_eq!(
        flaky_runs.load(Ordering::SeqCst),
        2,
        "the retry wrapper called next() twice"
    );

    // The audit log: the foreground hooks' outcomes, in order.
    let events = log.events();
    let outcomes: Vec<String> = events
        .iter()
        .filter(|e| {
            e["plugin"] != "observer" && e["event"] != "hook_started" && e["event"] != "plugin_log"
        })
        .map(|e| {
            format!(
                "{} {}",
                e["hook_id"].as_str().unwrap(),
                e["event"].as_str().unwrap()
            )
        })
        .collect();
    let expected_outcomes = [
        "ctx/session-start hook_completed",
        "gate/prompt-submit hook_denied",
        "gate/prompt-submit hook_completed",
        "shell-guard/pre-tool hook_denied",
        "shell-guard/pre-tool hook_completed",
        "asker/pre-tool hook_completed",
        "asker/pre-tool hook_completed",
        "invariant/tool-guard hook_denied",
        "retry/tool-execute hook_completed",
        "valuer/post-tool hook_completed",
        "blocker/post-tool hook_denied",
        "valuer/post-tool hook_completed",
        "gate/prompt-submit hook_completed",
        "coach/turn-stopping hook_completed",
        "gate/prompt-submit hook_completed",
        "coach/turn-stopping hook_completed",
    ];
    assert_eq!(outcomes, expected_outcomes, "{outcomes:#?}");
    let retried = events
        .iter()
        .find(|e| e["plugin"] == "retry" && e["event"] == "plugin_log")
        .expect("the retry wrapper logged its retry");
    assert_eq!(
        retried["message"],
        "flaky (t6) failed; attempt 2 of 3: connection reset"
    );
    let denied = events
        .iter()
        .find(|e| e["event"] == "hook_denied" && e["plugin"] == "shell-guard")
        .unwrap();
    assert_eq!(denied["reason_code"], "destructive-delete");

    // The committed-fact observers saw every fact, each with its own interaction id.
    let mut seen: Vec<String> = events
        .iter()
        .filter(|e| e["plugin"] == "observer" && e["event"] == "plugin_log")
        .map(|e| {
            e["message"]
                .as_str()
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen,
        [
            "llm-response",
            "message",
            "session-ended",
            "tool-call",
            "tool-result",
            "turn-completed"
        ]
    );
    let ids: Vec<&str> = events
        .iter()
        .filter(|e| e["plugin"] == "observer" && e["event"] == "plugin_log")
        .map(|e| e["message"].as_str().unwrap().split(' ').nth(1).unwrap())
        .collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        ids.len(),
        "interaction ids are unique per fact"
    );
}
