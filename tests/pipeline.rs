//! The tool pipeline: identity sealing, normalization of every failure, wrappers and
//! `next()`, `finalize_content`, and contexts.

use palisade::{Authorization, ContentBlock, Tool, ToolOutcome, ToolRegistry, ToolRequest};
use palisade_tests::{PluginDir, Recorder, host, load, load_recorded};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

fn wrapper(dir: &PluginDir, name: &str, behaviour: &str, extra: &str) {
    dir.scripted(
        name,
        &format!(
            "{extra}\n[[hooks]]\npoint = \"tool-execute\"\ncapability = \"wrap\"\n[config]\ntool_execute = \"{behaviour}\"\ntag = \"{name}\"\n"
        ),
    );
}

fn counting_tool(runs: Arc<AtomicU32>) -> Tool {
    Tool::new("echo", move |inv| {
        let runs = runs.clone();
        async move {
            let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(ToolOutcome::text(format!(
                "echo {} #{n}",
                inv.call.arguments["text"]
            )))
        }
    })
}

#[tokio::test]
async fn wrappers_nest_outermost_first_and_next_reaches_the_tool() {
    let dir = PluginDir::new();
    wrapper(&dir, "a-outer", "passthrough", "");
    wrapper(&dir, "b-inner", "twice", "");
    let (plugins, recorder) = load_recorded(&dir);
    let runs = Arc::new(AtomicU32::new(0));
    let registry = ToolRegistry::new([counting_tool(runs.clone())]);
    let session = plugins.session("s");
    let execution = session
        .execute(
            &registry,
            ToolRequest::new("t", "echo", json!({ "text": "hi" })),
        )
        .await;
    assert_eq!(
        execution.outcome,
        ToolOutcome::text("echo \"hi\" #1 | echo \"hi\" #2")
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(recorder.logs(), ["a-outer", "b-inner"]);
}

#[tokio::test]
async fn a_wrapper_may_short_circuit_with_its_own_success_renormalized() {
    let dir = PluginDir::new();
    wrapper(&dir, "cache", "short-circuit", "");
    let plugins = load(&dir);
    let runs = Arc::new(AtomicU32::new(0));
    let registry = ToolRegistry::new([counting_tool(runs.clone())]);
    let execution = plugins
        .session("s")
        .execute(&registry, ToolRequest::new("t", "echo", json!({})))
        .await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "dispatch was short-circuited"
    );
    assert_eq!(execution.outcome.value, Some(json!({ "cached": true })));
    assert_eq!(
        execution.outcome.content_blocks,
        [ContentBlock::Json {
            value: json!({ "cached": true })
        }]
    );

    // Re-normalized through the tool's output declaration: a value it refuses is an error.
    let registry = ToolRegistry::new([counting_tool(runs).output(|v| {
        if v.get("text").is_some() {
            Ok(())
        } else {
            Err("a value needs `text`".into())
        }
    })]);
    let execution = plugins
        .session("s")
        .execute(&registry, ToolRequest::new("t", "echo", json!({})))
        .await;
    assert!(execution.outcome.is_error);
    assert!(palisade::agent::text_of(&execution.outcome).contains("a value needs `text`"));
}

#[tokio::test]
async fn a_wrappers_deadline_excludes_the_time_inside_next() {
    let dir = PluginDir::new();
    wrapper(&dir, "quick", "passthrough", "[limits]\ntimeout_ms = 50");
    let plugins = load(&dir);
    let registry = ToolRegistry::new([Tool::new("slow", |_| async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        Ok(ToolOutcome::text("slow but fine"))
    })]);
    let execution = plugins
        .session("s")
        .execute(&registry, ToolRequest::new("t", "slow", json!({})))
        .await;
    assert_eq!(execution.outcome, ToolOutcome::text("slow but fine"));
}

#[tokio::test]
async fn the_timeout_wrapper_stops_a_slow_tool() {
    let dir = PluginDir::new();
    palisade_examples::install_one(palisade_examples::get("timeout").unwrap(), dir.path()).unwrap();
    let manifest = dir.path().join("timeout/plugin.toml");
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("timeout_ms = 30_000", "timeout_ms = 100");
    std::fs::write(&manifest, text).unwrap();
    let plugins = load(&dir);
    let finished = Arc::new(AtomicU32::new(0));
    let done = finished.clone();
    let registry = ToolRegistry::new([Tool::new("hang", move |_| {
        let done = done.clone();
        async move {
            tokio::time::sleep(Duration::from_secs(30)).await;
            done.fetch_add(1, Ordering::SeqCst);
            Ok(ToolOutcome::text("never"))
        }
    })]);
    let started = std::time::Instant::now();
    let execution = plugins
        .session("s")
        .execute(&registry, ToolRequest::new("t", "hang", json!({})))
        .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(execution.outcome.is_error);
    assert_eq!(
        palisade::agent::text_of(&execution.outcome),
        "hang was stopped after 100 ms. Split the work into smaller steps, or run it in the background and poll for the result."
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        finished.load(Ordering::SeqCst),
        0,
        "the tool body was cancelled"
    );
}

#[tokio::test]
async fn every_failure_normalizes_to_an_error_result() {
    let dir = PluginDir::new();
    let plugins = load(&dir);
    let registry = ToolRegistry::new([
        Tool::new("fails", |_| async { Err("disk full".to_string()) }),
        Tool::new("panics", |_| async { panic!("tool bug") }),
        Tool::new("strict", |_| async { Ok(ToolOutcome::text("ok")) }).input(|v| {
            if v["path"].is_string() {
                Ok(())
            } else {
                Err("`path` must be a string".into())
            }
        }),
        Tool::new("bad-value", |_| async {
            Ok(ToolOutcome {
                value: Some(json!(7)),
                ..Default::default()
            })
        })
        .output(|v| {
            if v.is_object() {
                Ok(())
            } else {
                Err("expected an object".into())
            }
        }),
    ]);
    let session = plugins.session("s");
    for (name, input, expect) in [
        ("fails", json!({}), "disk full"),
        ("panics", json!({}), "the tool panicked"),
        (
            "strict",
            json!({ "path": 3 }),
            "invalid input for strict: `path` must be a string",
        ),
        (
            "bad-value",
            json!({}),
            "the tool produced an invalid value: expected an object",
        ),
        ("missing", json!({}), "unknown tool `missing`"),
    ] {
        let execution = session
            .execute(&registry, ToolRequest::new("t", name, input))
            .await;
        assert!(execution.outcome.is_error, "{name}");
        let text = palisade::agent::text_of(&execution.outcome);
        assert!(text.contains(expect), "{name}: {text}");
    }
}

#[tokio::test]
async fn a_failing_wrapper_and_an_invalid_wrapper_outcome_are_errors() {
    for behaviour in ["panic", "bad-outcome"] {
        let dir = PluginDir::new();
        wrapper(&dir, "w", behaviour, "");
        let plugins = load(&dir);
        let registry = ToolRegistry::new([counting_tool(Arc::new(AtomicU32::new(0)))]);
        let execution = plugins
            .session("s")
            .execute(&registry, ToolRequest::new("t", "echo", json!({})))
            .await;
        assert!(execution.outcome.is_error, "{behaviour}");
        assert!(
            palisade::agent::text_of(&execution.outcome).contains("w/tool-execute"),
            "{behaviour}"
        );
    }
}

/// Seed 1: "a throwing listener becomes a final normalized failure" that bypasses later
/// waterfalls: a crashed pre-tool guard, a crashed tool-guard or a crashed wrapper skips
/// post-tool (whose transform would rewrite, and so hide, the failure) and goes straight to
/// finalize-content, once, and tool-result.
#[tokio::test]
async fn a_failed_hook_is_a_final_failure_that_skips_post_tool() {
    let failing = [
        ("pre-tool", "guard", "pre_tool"),
        ("tool-guard", "guard", "tool_guard"),
        ("tool-execute", "wrap", "tool_execute"),
    ];
    for (point, capability, key) in failing {
        let dir = PluginDir::new();
        dir.scripted(
            "crash",
            &format!(
                "[[hooks]]\npoint = \"{point}\"\ncapability = \"{capability}\"\n\
                 [config]\n{key} = \"panic\"\n"
            ),
        );
        dir.scripted(
            "post",
            "[[hooks]]\npoint = \"post-tool\"\ncapability = \"transform\"\n\
             [config]\npost_tool = \"upper\"\ntag = \"post-tool ran\"\n",
        );
        dir.scripted(
            "audit",
            "[[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\n\
             [config]\ntool_result = \"ok\"\ntag = \"tool-result ran\"\n",
        );
        let (plugins, recorder) = load_recorded(&dir);
        let finalized = Arc::new(AtomicU32::new(0));
        let count = finalized.clone();
        let registry =
            ToolRegistry::new([
                Tool::new("echo", |_| async { Ok(ToolOutcome::text("ran")) }).finalize_content(
                    move |_, _| {
                        count.fetch_add(1, Ordering::SeqCst);
                        None
                    },
                ),
            ]);
        let session = plugins.session("s");
        let execution = session
            .execute(&registry, ToolRequest::new("t", "echo", json!({})))
            .await;
        session.drain_background().await;
        let text = palisade::agent::text_of(&execution.outcome);
        assert!(execution.outcome.is_error, "{point}: {text}");
        assert!(
            text.contains("crash/"),
            "{point}: the failure is shown: {text}"
        );
        assert_eq!(
            recorder.logs(),
            vec!["tool-result ran"],
            "{point}: post-tool must not run"
        );
        assert_eq!(finalized.load(Ordering::SeqCst), 1, "{point}");
        assert!(execution.blocked.is_none(), "{point}");
    }
}

#[tokio::test]
async fn identity_is_sealed_and_denials_still_reach_post_tool_and_finalize_once() {
    let dir = PluginDir::new();
    dir.scripted(
        "deny-all",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"deny\"\n",
    );
    dir.scripted(
        "post",
        "[[hooks]]\npoint = \"post-tool\"\ncapability = \"transform\"\n[config]\npost_tool = \"upper\"\ntag = \"post saw it\"\n",
    );
    let (plugins, recorder) = load_recorded(&dir);
    let finalized = Arc::new(AtomicU32::new(0));
    let count = finalized.clone();
    let registry =
        ToolRegistry::new([
            Tool::new("echo", |_| async { Ok(ToolOutcome::text("ran")) }).finalize_content(
                move |call, outcome| {
                    count.fetch_add(1, Ordering::SeqCst);
                    assert!(outcome.is_error);
                    Some(vec![ContentBlock::Text {
                        text: format!("{} refused", call.name),
                    }])
                },
            ),
        ]);
    let execution = plugins
        .session("s")
        .execute(
            &registry,
            ToolRequest::new("toolu_9", "echo", json!({ "text": "x" })),
        )
        .await;
    assert!(matches!(execution.authorization, Authorization::Denied(_)));
    assert_eq!(execution.call.tool_use_id, "toolu_9");
    assert_eq!(execution.call.arguments, json!({ "text": "x" }));
    assert_eq!(
        recorder.logs(),
        ["post saw it"],
        "post-tool saw the denied call"
    );
    assert_eq!(
        finalized.load(Ordering::SeqCst),
        1,
        "finalize_content ran exactly once"
    );
    assert_eq!(
        execution.outcome,
        ToolOutcome::error("echo refused"),
        "content replaced, error flag kept"
    );
}

#[tokio::test]
async fn nested_calls_carry_the_parent_token_and_defer_their_contexts() {
    let dir = PluginDir::new();
    dir.scripted(
        "ctx",
        "[[hooks]]\npoint = \"post-tool\"\ncapability = \"transform\"\nmatcher = \"inner\"\n[config]\ncontexts = [\"inner context\"]\n",
    );
    let plugins = load(&dir);
    let parents = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = parents.clone();
    let registry = ToolRegistry::new([
        Tool::new("inner", |_| async { Err("inner failed".to_string()) }),
        Tool::new("outer", move |inv| {
            let seen = seen.clone();
            async move {
                let nested = inv
                    .context
                    .execute(ToolRequest::new("n1", "inner", json!({})))
                    .await;
                seen.lock().unwrap().push((inv.token, nested.parent));
                inv.context.defer_context("outer", "after the nested call");
                Ok(ToolOutcome::text("outer ok"))
            }
        }),
    ]);
    let execution = plugins
        .session("s")
        .execute(&registry, ToolRequest::new("t", "outer", json!({})))
        .await;
    let (token, parent) = parents.lock().unwrap()[0];
    assert_eq!(
        parent,
        Some(token),
        "the nested call carries only its parent's token"
    );
    assert_eq!(execution.token, token);
    let contexts: Vec<_> = execution.contexts.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        contexts,
        ["inner context", "after the nested call"],
        "kept through the nested failure"
    );
}

#[tokio::test]
async fn a_nested_call_through_the_same_per_session_wrapper_does_not_deadlock() {
    // The wrapper's per-session instance is mid-call (in `next()`) while the tool makes a
    // nested call that the same wrapper wraps.
    let dir = PluginDir::new();
    wrapper(&dir, "metrics", "passthrough", "instance = \"per-session\"");
    let plugins = load(&dir);
    let registry = ToolRegistry::new([
        Tool::new("outer", |inv| async move {
            let inner = inv
                .context
                .execute(ToolRequest::new("t2", "inner", json!({})))
                .await;
            Ok(ToolOutcome::text(format!(
                "outer saw {:?}",
                inner.outcome.content_blocks
            )))
        }),
        Tool::new("inner", |_| async { Ok(ToolOutcome::text("inner ran")) }),
    ]);
    let session = plugins.session("s");
    let execution = tokio::time::timeout(
        Duration::from_secs(20),
        session.execute(&registry, ToolRequest::new("t1", "outer", json!({}))),
    )
    .await
    .expect("a nested call through the same wrapper deadlocked");
    assert!(!execution.outcome.is_error, "{:?}", execution.outcome);
    assert!(
        format!("{:?}", execution.outcome).contains("inner ran"),
        "{:?}",
        execution.outcome
    );
    // The session instance is still there for the next call.
    let again = session
        .execute(&registry, ToolRequest::new("t3", "inner", json!({})))
        .await;
    assert_eq!(again.outcome, ToolOutcome::text("inner ran"));
}

#[tokio::test]
async fn a_wrappers_next_calls_are_bounded_in_number() {
    let dir = PluginDir::new();
    wrapper(&dir, "looper", "next-loop", "");
    let plugins = load(&dir);
    let runs = Arc::new(AtomicU32::new(0));
    let registry = ToolRegistry::new([counting_tool(runs.clone())]);
    let execution = plugins
        .session("s")
        .execute(
            &registry,
            ToolRequest::new("t", "echo", json!({ "text": "hi" })),
        )
        .await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        palisade::limits::MAX_NEXT_CALLS
    );
    assert_eq!(
        execution.outcome,
        ToolOutcome::text(format!(
            "the tool ran {} times",
            palisade::limits::MAX_NEXT_CALLS
        ))
    );
}

#[tokio::test]
async fn a_wrapped_execution_has_an_overall_deadline() {
    let dir = PluginDir::new();
    wrapper(&dir, "wrap", "passthrough", "");
    let host = palisade::Host::builder()
        .wrapped_execution_deadline(Duration::from_millis(300))
        .build()
        .unwrap();
    let plugins = host.load_dir(dir.path()).unwrap();
    let registry = ToolRegistry::new([Tool::new("slow", |_| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(ToolOutcome::text("done"))
    })]);
    let started = std::time::Instant::now();
    let execution = plugins
        .session("s")
        .execute(&registry, ToolRequest::new("t", "slow", json!({})))
        .await;
    assert!(execution.outcome.is_error);
    assert!(
        format!("{:?}", execution.outcome).contains("overall deadline"),
        "{:?}",
        execution.outcome
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Seed 1: "An accepted outer call preserves deferred contexts before decision contexts; an
/// outer block discards deferred contexts and exposes only contexts explicitly supplied by the
/// blocking decision."
#[tokio::test]
async fn deferred_contexts_come_before_decision_contexts_and_a_block_keeps_only_its_own() {
    let dir = PluginDir::new();
    dir.scripted(
        "adds",
        "[[hooks]]\npoint = \"post-tool\"\ncapability = \"transform\"\nmatcher = \"accepted\"\n\
         [config]\ncontexts = [\"the decision's context\"]\n",
    );
    dir.scripted(
        "blocks",
        "[[hooks]]\npoint = \"post-tool\"\ncapability = [\"guard\", \"transform\"]\nmatcher = \"blocked\"\n\
         [config]\npost_tool = \"block\"\ncontexts = [\"the block's context\"]\n",
    );
    let plugins = load(&dir);
    let deferring = |name: &str| {
        Tool::new(name, |inv| async move {
            inv.context.defer_context("tool", "deferred by the tool");
            Ok(ToolOutcome::text("done"))
        })
    };
    let registry = ToolRegistry::new([deferring("accepted"), deferring("blocked")]);
    let session = plugins.session("s");
    let texts = |execution: &palisade::ToolExecution| -> Vec<String> {
        execution.contexts.iter().map(|c| c.text.clone()).collect()
    };
    let accepted = session
        .execute(&registry, ToolRequest::new("t1", "accepted", json!({})))
        .await;
    assert!(accepted.blocked.is_none());
    assert_eq!(
        texts(&accepted),
        ["deferred by the tool", "the decision's context"],
        "both kinds on one call: deferred first"
    );
    let blocked = session
        .execute(&registry, ToolRequest::new("t2", "blocked", json!({})))
        .await;
    assert!(blocked.blocked.is_some());
    assert_eq!(
        texts(&blocked),
        ["the block's context"],
        "the deferred one is discarded"
    );
}

/// A tool whose canonical value must be `{"n": <number>}`.
fn typed_tool(value: serde_json::Value) -> Tool {
    Tool::new("typed", move |_| {
        let value = value.clone();
        async move {
            Ok(ToolOutcome {
                content_blocks: Vec::new(),
                is_error: false,
                value: Some(value),
            })
        }
    })
    .output(|v| {
        v["n"]
            .as_f64()
            .map(|_| ())
            .ok_or_else(|| "`n` must be a number".to_string())
    })
}

/// Seed 1: "Value replacement revalidates". The check is the replacing hook's: an invalid
/// replacement is its `invalid-response` (failing closed, naming it), not the tool's error.
#[tokio::test]
async fn a_replaced_value_is_checked_against_the_tools_declaration_as_the_hooks_answer() {
    let dir = PluginDir::new();
    dir.scripted(
        "v",
        "[[hooks]]\npoint = \"post-tool\"\ncapability = [\"guard\", \"transform\"]\n\
         [config]\npost_tool = \"replace-value\"\nvalue = '{\"s\": \"not a number\"}'\n",
    );
    let plugins = load(&dir);
    let registry = ToolRegistry::new([typed_tool(json!({ "n": 1 }))]);
    let execution = plugins
        .session("s")
        .execute(&registry, ToolRequest::new("t1", "typed", json!({})))
        .await;
    let blocked = execution.blocked.expect("the replacement fails closed");
    assert_eq!(blocked.hook_id, "v/post-tool");
    assert_eq!(
        blocked.failure,
        Some(palisade::FailureReason::InvalidResponse)
    );
    assert!(
        blocked.message.contains("output declaration"),
        "{}",
        blocked.message
    );
    assert!(execution.outcome.is_error);
}

/// Seed 1: a wrapper "receives the already-normalized canonical success/failure result": a
/// tool's invalid value reaches `next()` as the error it normalizes to.
#[tokio::test]
async fn next_returns_the_normalized_result() {
    let dir = PluginDir::new();
    wrapper(&dir, "w", "twice", "");
    let plugins = load(&dir);
    let registry = ToolRegistry::new([typed_tool(json!({ "s": "x" }))]);
    let execution = plugins
        .session("s")
        .execute(&registry, ToolRequest::new("t1", "typed", json!({})))
        .await;
    let text = palisade::agent::text_of(&execution.outcome);
    assert!(
        text.contains("the tool produced an invalid value: `n` must be a number"),
        "the wrapper saw: {text:?}"
    );
}

/// Seed 1: finalize_content is "a synchronous, total, content-only boundary": when it is not
/// total after all (it panics), the call gets an error result and the caller goes on.
#[tokio::test]
async fn a_panic_in_finalize_content_is_contained_and_normalized() {
    let plugins = load(&PluginDir::new());
    let registry = ToolRegistry::new([Tool::new("echo", |_| async {
        Ok(ToolOutcome::text("secret output"))
    })
    .finalize_content(|_, _| panic!("the invariant check broke"))]);
    let execution = plugins
        .session("s")
        .execute(&registry, ToolRequest::new("t1", "echo", json!({})))
        .await;
    assert!(execution.outcome.is_error);
    let text = palisade::agent::text_of(&execution.outcome);
    assert!(text.contains("finalize_content failed"), "{text}");
    assert!(
        !text.contains("secret output"),
        "the content is withheld: {text}"
    );
}

/// Seed 1: tools/result is "the synchronous contained notification": a foreground observer
/// is done before `execute` returns — here one that spins to its deadline, whose failure is
/// recorded by then and changes nothing. `detached_tool_result` relaxes it: the call returns
/// while the observer still runs.
#[tokio::test]
async fn a_tool_result_observer_is_done_before_execute_returns() {
    let dir = PluginDir::new();
    dir.scripted(
        "slow",
        "[limits]\ntimeout_ms = 300\nfuel = 1_000_000_000_000_000\n\
         [[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\n\
         [config]\ntool_result = \"loop\"\n",
    );
    let failed = |recorder: &Recorder| {
        recorder.events().iter().any(|e| {
            e.hook_id == "slow/tool-result"
                && matches!(e.kind, palisade::events::EventKind::HookFailed { .. })
        })
    };
    let registry = ToolRegistry::new([Tool::new("echo", |_| async {
        Ok(ToolOutcome::text("ran"))
    })]);
    for detached in [false, true] {
        let recorder = Recorder::shared();
        let plugins = host()
            .state(palisade::state::StateStore::memory())
            .event_sink(recorder.clone())
            .detached_tool_result(detached)
            .build()
            .unwrap()
            .load_dir(dir.path())
            .unwrap();
        let session = plugins.session("s");
        let execution = session
            .execute(&registry, ToolRequest::new("t1", "echo", json!({})))
            .await;
        assert_eq!(palisade::agent::text_of(&execution.outcome), "ran");
        assert_eq!(failed(&recorder), !detached, "detached: {detached}");
        session.drain_background().await;
        assert!(failed(&recorder), "detached: {detached}");
    }
}

/// A foreground `tool-result` observer is never dropped: with the session's background queue
/// full (a slow background observer holds its one slot), each call's result still reaches it.
#[tokio::test]
async fn a_tool_result_observer_sees_every_result_while_the_background_queue_is_full() {
    let dir = PluginDir::new();
    dir.scripted(
        "busy",
        "[limits]\ntimeout_ms = 2000\nfuel = 1_000_000_000_000_000\n\
         [[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\nmode = \"background\"\n\
         [config]\ntool_result = \"loop\"\n",
    );
    dir.scripted(
        "audit",
        "[[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\n\
         [config]\ntool_result = \"ok\"\ntag = \"audited\"\n",
    );
    let recorder = Recorder::shared();
    let plugins = host()
        .state(palisade::state::StateStore::memory())
        .event_sink(recorder.clone())
        .background_queue(1)
        .build()
        .unwrap()
        .load_dir(dir.path())
        .unwrap();
    let session = plugins.session("s");
    let registry = ToolRegistry::new([Tool::new("echo", |_| async {
        Ok(ToolOutcome::text("ran"))
    })]);
    for n in 0..3 {
        session
            .execute(
                &registry,
                ToolRequest::new(format!("t{n}"), "echo", json!({})),
            )
            .await;
    }
    let audited = recorder.logs().iter().filter(|l| *l == "audited").count();
    assert_eq!(audited, 3, "{:?}", recorder.lifecycle());
    assert!(session.dropped_background() > 0, "the queue was full");
}

/// Seed 1: "a final observer sees the execution-local canonical value beside exactly the
/// presentation fields the session log can persist": a `tool-result` observer is handed the
/// tool's canonical value and the content blocks projected from it.
#[tokio::test]
async fn a_tool_result_observer_sees_the_canonical_value_beside_the_content() {
    let seen = tempfile::tempdir().unwrap();
    let file = seen.path().join("seen.json");
    let dir = PluginDir::new();
    let manifest = format!(
        "name = \"watch\"\ncommand = [\"sh\", \"-c\", \"cat > '{}'\"]\nprotocol = \"palisade\"\n\
         [[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\n",
        file.display()
    );
    dir.raw("watch", &[("plugin.toml", manifest.as_bytes())]);
    let plugins = load(&dir);
    let registry = ToolRegistry::new([Tool::new("count", |_| async {
        Ok(ToolOutcome {
            content_blocks: Vec::new(),
            is_error: false,
            value: Some(json!({ "rows": 3 })),
        })
    })]);
    plugins
        .session("s")
        .execute(&registry, ToolRequest::new("t1", "count", json!({})))
        .await;
    let request: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let outcome = &request["input"]["outcome"];
    assert_eq!(outcome["value"], json!({ "rows": 3 }), "{request:#}");
    assert_eq!(
        outcome["content_blocks"],
        json!([{ "type": "json", "value": { "rows": 3 } }]),
        "{request:#}"
    );
}
