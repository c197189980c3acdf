//! Seed 1's loop rules that the agent loop enforces itself: session-start once before turn 1,
//! injections through the active batch's FIFO, interruption, and a tool-result-driven
//! terminal stop. Each test quotes the sentence it checks.

use palisade::agent::{Agent, Entry, ModelReply, ScriptedModel};
use palisade::{SessionSource, Tool, ToolOutcome, ToolRegistry, ToolRequest, TurnOutcome};
use palisade_tests::transcript::{context, result};
use palisade_tests::{PluginDir, load, load_recorded};
use serde_json::json;
use std::sync::{Arc, Mutex};

fn reply(text: &str, calls: &[(&str, &str)]) -> ModelReply {
    ModelReply {
        text: text.into(),
        tool_calls: calls
            .iter()
            .map(|(id, name)| ToolRequest::new(*id, *name, json!({})))
            .collect(),
        ..Default::default()
    }
}

fn no_plugins() -> palisade::Plugins {
    load(&PluginDir::new())
}

/// "agent/session-start … emit, once before turn 1"
#[tokio::test]
async fn session_start_runs_exactly_once_before_turn_1() {
    let dir = PluginDir::new();
    dir.scripted(
        "ctx",
        "[[hooks]]\npoint = \"session-start\"\ncapability = \"transform\"\n\
         [config]\ncontexts = [\"project uses cargo\"]\n",
    );
    let (plugins, recorder) = load_recorded(&dir);
    let runs = || {
        recorder
            .events()
            .iter()
            .filter(|e| matches!(e.kind, palisade::events::EventKind::HookStarted))
            .count()
    };

    // The embedder never starts the session: the first turn does, before it opens.
    let mut agent = Agent::new(
        plugins.session("s1"),
        ToolRegistry::default(),
        ScriptedModel::default(),
    );
    agent.run_turn("hello").await;
    agent.run_turn("again").await;
    agent.start(SessionSource::Startup).await;
    assert_eq!(runs(), 1, "{:?}", recorder.events());
    assert_eq!(
        agent.transcript()[..2],
        [
            context(
                "ctx/session-start",
                "project uses cargo (SessionSource::Startup)"
            ),
            Entry::User {
                text: "hello".into()
            },
        ]
    );

    // Started explicitly, then turns: still once.
    let mut agent = Agent::new(
        plugins.session("s2"),
        ToolRegistry::default(),
        ScriptedModel::default(),
    );
    agent.start(SessionSource::Startup).await;
    agent.start(SessionSource::Startup).await;
    agent.run_turn("hello").await;
    assert_eq!(runs(), 2);
}

/// "A listener seeds context via agent.inject()" and "asynchronous injections enter the
/// active-batch FIFO and append when that batch settles … The FIFO appends after every
/// recorded result when the batch settles"
#[tokio::test]
async fn injections_wait_in_the_batch_fifo_and_append_after_every_result() {
    let handle = Arc::new(Mutex::new(None::<palisade::agent::Handle>));
    let inject_from_tool = handle.clone();
    let tools = ToolRegistry::new([
        Tool::new("first", move |inv| {
            let handle = inject_from_tool.lock().unwrap().clone().unwrap();
            async move {
                // Arrives while the batch runs: it must not land between the results.
                handle.inject("watcher", "the build went red");
                inv.context.defer_context("first", "first's own note");
                Ok(ToolOutcome::text("one"))
            }
        }),
        Tool::new("second", |_| async { Ok(ToolOutcome::text("two")) }),
    ]);
    let model = ScriptedModel::new([
        reply("on it", &[("t1", "first"), ("t2", "second")]),
        reply("done", &[]),
    ]);
    let mut agent = Agent::new(no_plugins().session("s"), tools, model);
    *handle.lock().unwrap() = Some(agent.handle());
    // Before the session starts: seeds the transcript right after session-start.
    agent.inject("seed", "the user prefers short answers");
    assert_eq!(
        agent.run_turn("fix the build").await,
        TurnOutcome::Completed
    );

    let transcript = agent.transcript();
    assert_eq!(
        transcript[0],
        context("seed", "the user prefers short answers")
    );
    let at = transcript
        .iter()
        .position(|e| *e == result("t1", false, "one"))
        .expect("t1's result");
    assert_eq!(
        transcript[at..at + 4],
        [
            result("t1", false, "one"),
            result("t2", false, "two"),
            // Arrival order: the injection came while `first` ran, its deferred context
            // when `first` returned.
            context("watcher", "the build went red"),
            context("first", "first's own note"),
        ]
    );
}

/// "The FIFO appends after every recorded result when the batch settles, including before
/// an interrupted turn closes."
#[tokio::test]
async fn an_interrupted_turn_answers_every_call_and_flushes_the_fifo_before_it_closes() {
    let handle = Arc::new(Mutex::new(None::<palisade::agent::Handle>));
    let interrupt_from_tool = handle.clone();
    let ran = Arc::new(Mutex::new(Vec::new()));
    let (ran_first, ran_second) = (ran.clone(), ran.clone());
    let tools = ToolRegistry::new([
        Tool::new("first", move |inv| {
            let handle = interrupt_from_tool.lock().unwrap().clone().unwrap();
            let ran = ran_first.clone();
            async move {
                ran.lock().unwrap().push("first");
                inv.context.defer_context("first", "partial work saved");
                // The user presses Esc while the batch runs.
                handle.interrupt();
                Ok(ToolOutcome::text("one"))
            }
        }),
        Tool::new("second", move |_| {
            let ran = ran_second.clone();
            async move {
                ran.lock().unwrap().push("second");
                Ok(ToolOutcome::text("two"))
            }
        }),
    ]);
    let model = ScriptedModel::new([
        reply("on it", &[("t1", "first"), ("t2", "second")]),
        reply("never asked", &[]),
    ]);
    // A tool-result observer sees every call's result, the one that did not run included.
    let dir = PluginDir::new();
    dir.scripted(
        "audit",
        "[[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\n\
         [config]\ntool_result = \"echo\"\n",
    );
    let (plugins, recorder) = load_recorded(&dir);
    let mut agent = Agent::new(plugins.session("s"), tools, model);
    *handle.lock().unwrap() = Some(agent.handle());
    assert_eq!(agent.run_turn("go").await, TurnOutcome::Interrupted);
    assert_eq!(
        recorder.logs(),
        [
            "saw one",
            "saw error second did not run: the turn was interrupted"
        ]
    );

    assert_eq!(
        *ran.lock().unwrap(),
        ["first"],
        "the second call must not run"
    );
    let transcript = agent.transcript();
    let at = transcript
        .iter()
        .position(|e| *e == result("t1", false, "one"))
        .expect("t1's result");
    assert_eq!(
        transcript[at..],
        [
            result("t1", false, "one"),
            result("t2", true, "second did not run: the turn was interrupted"),
            context("first", "partial work saved"),
            Entry::TurnClosed {
                turn: 1,
                outcome: TurnOutcome::Interrupted,
                reason: None,
            },
        ]
    );

    // The interrupt was for that turn: the next one runs.
    agent.run_turn("go on").await;
    assert!(matches!(
        agent.transcript().last(),
        Some(Entry::TurnClosed {
            turn: 2,
            outcome: TurnOutcome::Completed,
            ..
        })
    ));
}

/// "terminal monotonic stopping is expressed by tool-result data, while agent/turn-stopping
/// is the last chance to steer another step"
#[tokio::test]
async fn a_terminal_tool_result_ends_the_turn_when_its_batch_settles() {
    let dir = PluginDir::new();
    // A coach that would steer the turn on at its stop boundary.
    dir.scripted(
        "coach",
        "[[hooks]]\npoint = \"turn-stopping\"\ncapability = \"steer\"\n\
         [config]\nturn_stopping = \"steer-once\"\n",
    );
    let (plugins, _) = load_recorded(&dir);
    let tools = ToolRegistry::new([
        Tool::new("finish", |inv| async move {
            inv.context.end_turn();
            Ok(ToolOutcome::text("report submitted"))
        }),
        Tool::new("note", |_| async { Ok(ToolOutcome::text("noted")) }),
    ]);
    let model = ScriptedModel::new([
        reply("submitting", &[("t1", "finish"), ("t2", "note")]),
        reply("this step must not happen", &[]),
    ]);
    let mut agent = Agent::new(plugins.session("s"), tools, model);
    assert_eq!(agent.run_turn("submit it").await, TurnOutcome::Completed);
    let transcript = agent.transcript();
    assert_eq!(
        transcript[transcript.len() - 3..],
        [
            // The batch settles first: the other call of it still runs.
            result("t1", false, "report submitted"),
            result("t2", false, "noted"),
            Entry::TurnClosed {
                turn: 1,
                outcome: TurnOutcome::Completed,
                reason: None,
            },
        ]
    );
    assert!(
        !transcript.iter().any(|e| match e {
            Entry::Steering { .. } => true,
            Entry::Assistant { text, .. } => text.contains("must not"),
            _ => false,
        }),
        "no steering and no further step: {transcript:?}"
    );
}

/// "enter returns the complete message batch, including any current-request context a
/// listener contributes" and "On enter, the loop opens the step and appends the returned batch
/// as user/message events before request derivation."
#[tokio::test]
async fn a_pre_step_hook_enters_the_complete_reshaped_batch_and_the_model_sees_only_it() {
    let dir = PluginDir::new();
    dir.scripted(
        "redactor",
        "[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"transform\"\npriority = -10\n\
         [config]\nprompt_submit = \"redact\"\n",
    );
    dir.scripted(
        "witness",
        "[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"transform\"\n\
         [config]\ncontexts = [\"the repo uses cargo\"]\n",
    );
    let (plugins, recorder) = load_recorded(&dir);
    let mut agent = Agent::new(
        plugins.session("s"),
        ToolRegistry::default(),
        ScriptedModel::new([reply("done", &[])]),
    );
    agent.start(SessionSource::Startup).await;
    let outcome = agent.run_turn("log in with password=hunter2 please").await;
    assert_eq!(outcome, TurnOutcome::Completed);

    // The hook after the redactor saw the reshaped batch, not the claimed one.
    assert!(
        recorder
            .logs()
            .iter()
            .any(|l| l.contains(r#"batch ["log in with password=*** please"]"#)),
        "{:?}",
        recorder.logs()
    );
    // The step opened with the returned batch, then the contexts; the secret never entered.
    let transcript = agent.transcript();
    assert_eq!(
        transcript[..2],
        [
            Entry::User {
                text: "log in with password=*** please".into()
            },
            context("witness/prompt-submit", "the repo uses cargo"),
        ]
    );
    assert!(!format!("{transcript:?}").contains("hunter2"));
}

/// "agent/pre-step({ agent, messages, turn, step, signal }, next) … The payload carries the
/// request's turn, step, and cancellation signal" and "rejection closes a durable blocked turn
/// with no step or model-visible message" — here an interrupt: no step opens.
#[tokio::test]
async fn an_interrupt_cuts_off_the_pre_step_in_flight_and_opens_no_step() {
    let dir = PluginDir::new();
    dir.scripted(
        "slow",
        "[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"guard\"\n\
         [limits]\ntimeout_ms = 60000\n[config]\nprompt_submit = \"sleep\"\n",
    );
    let (plugins, recorder) = load_recorded(&dir);
    let mut agent = Agent::new(
        plugins.session("s"),
        ToolRegistry::default(),
        ScriptedModel::new([reply("never asked", &[])]),
    );
    agent.start(SessionSource::Startup).await;
    let handle = agent.handle();
    let started = {
        let recorder = recorder.clone();
        move || {
            recorder
                .events()
                .iter()
                .any(|e| matches!(e.kind, palisade::events::EventKind::HookStarted))
        }
    };
    let interrupter = tokio::spawn(async move {
        while !started() {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        handle.interrupt();
    });
    let outcome = agent.run_turn("hello").await;
    interrupter.await.unwrap();
    assert_eq!(outcome, TurnOutcome::Interrupted);
    assert_eq!(
        agent.transcript(),
        [Entry::TurnClosed {
            turn: 1,
            outcome: TurnOutcome::Interrupted,
            reason: None,
        }],
        "no step: not even the prompt is model-visible"
    );
    assert!(recorder.events().iter().any(|e| matches!(
        &e.kind,
        palisade::events::EventKind::HookFailed {
            reason: palisade::FailureReason::Dropped,
            ..
        }
    )));
}

/// Seed 2: "HookLlmResponse.server_tool_content projects provider-native server-tool blocks,
/// such as web search, into typed kinds": the model's web search and code execution blocks
/// reach the committed `llm-response` typed; a block of another kind is kept as it is.
#[tokio::test]
async fn a_models_server_tool_blocks_are_committed_projected_into_typed_kinds() {
    let seen = tempfile::tempdir().unwrap();
    let file = seen.path().join("seen.jsonl");
    let dir = PluginDir::new();
    let manifest = format!(
        "name = \"watch\"\ncommand = [\"sh\", \"-c\", \"cat >> '{}'; echo >> '{}'\"]\n\
         protocol = \"palisade\"\n\
         [[hooks]]\npoint = \"llm-response-committed\"\ncapability = \"observe\"\n",
        file.display(),
        file.display()
    );
    dir.raw("watch", &[("plugin.toml", manifest.as_bytes())]);
    let plugins = load(&dir);
    let session = plugins.session("s");
    let blocks = vec![
        json!({ "type": "server_tool_use", "id": "srv_1", "name": "web_search",
                "input": { "query": "wasm component model" } }),
        json!({ "type": "web_search_tool_result", "tool_use_id": "srv_1", "content": [
            { "type": "web_search_result", "url": "https://a.example/1", "title": "one" },
            { "type": "web_search_result", "url": "https://b.example/2", "title": "two" } ] }),
        json!({ "type": "server_tool_use", "id": "srv_2", "name": "code_execution",
                "input": { "code": "print(6 * 7)" } }),
        json!({ "type": "code_execution_tool_result", "tool_use_id": "srv_2",
                "content": { "type": "code_execution_result", "stdout": "42\n", "stderr": "",
                             "return_code": 0 } }),
        json!({ "type": "mcp_tool_use", "id": "m_1", "name": "x", "server_name": "y" }),
    ];
    let model = ScriptedModel::new([ModelReply {
        text: "found it".into(),
        server_blocks: blocks.clone(),
        ..Default::default()
    }]);
    let mut agent = Agent::new(session.clone(), ToolRegistry::default(), model);
    agent.run_turn("search for it").await;
    session.drain_background().await;
    let text = std::fs::read_to_string(&file).unwrap();
    let request: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let fact = &request["input"]["observation"]["fact"];
    assert_eq!(
        fact["server_tool_content"],
        json!([
            { "kind": "web-search", "query": "wasm component model",
              "result_urls": ["https://a.example/1", "https://b.example/2"] },
            { "kind": "code-execution", "code": "print(6 * 7)", "output": "42\n" },
            { "kind": "other", "value": blocks[4] },
        ]),
        "{fact:#}"
    );
}
