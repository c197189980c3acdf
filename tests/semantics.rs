//! The dispatch rules of docs/semantics.md, one test (at least) per rule, for every point.

use palisade::events::EventKind;
use palisade::{
    Approval, Approver, AskRequest, Authorization, BoxFuture, CommittedFact, FailureReason,
    GuardDecision, Host, Message, Observation, PreStep, PreStepDecision, SessionSource, StopEvent,
    ToolCall, ToolOutcome, TurnOutcome,
};
use palisade_tests::{PluginDir, Recorder, load, load_audited, load_recorded};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn bash(command: &str) -> ToolCall {
    ToolCall::new("toolu_1", "Bash", json!({ "command": command }))
}

fn hook(point: &str, capability: &str, extra: &str) -> String {
    format!("[[hooks]]\npoint = \"{point}\"\ncapability = {capability}\n{extra}\n")
}

fn failures(recorder: &Recorder) -> Vec<(String, FailureReason, bool)> {
    recorder
        .events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::HookFailed {
                reason,
                failed_closed,
                ..
            } => Some((e.hook_id, reason, failed_closed)),
            _ => None,
        })
        .collect()
}

struct Fixed(Approval);

impl Approver for Fixed {
    fn approve<'a>(&'a self, _call: &'a ToolCall, _ask: &'a AskRequest) -> BoxFuture<'a, Approval> {
        Box::pin(async move { self.0 })
    }
}

// --- session-start -------------------------------------------------------------------

#[tokio::test]
async fn session_start_injects_contexts_of_transform_hooks_and_cannot_block() {
    let dir = PluginDir::new();
    dir.scripted(
        "a",
        &format!(
            "{}[config]\ncontexts = [\"repo uses pnpm\"]\n",
            hook("session-start", "\"transform\"", "")
        ),
    );
    dir.scripted(
        "b",
        &format!(
            "{}[config]\nsession_start = \"panic\"\n",
            hook("session-start", "\"transform\"", "priority = 1")
        ),
    );
    dir.scripted(
        "c",
        &format!(
            "{}[config]\ncontexts = [\"ignored\"]\n",
            hook("session-start", "\"observe\"", "priority = 2")
        ),
    );
    let (plugins, recorder) = load_recorded(&dir);
    let contexts = plugins
        .session("s")
        .session_start(SessionSource::Resume)
        .await;
    let texts: Vec<_> = contexts
        .iter()
        .map(|c| (c.hook_id.as_str(), c.text.as_str()))
        .collect();
    assert_eq!(
        texts,
        [("a/session-start", "repo uses pnpm (SessionSource::Resume)")]
    );
    assert_eq!(
        failures(&recorder),
        [
            ("b/session-start".into(), FailureReason::Trap, false),
            ("c/session-start".into(), FailureReason::NotGranted, false),
        ]
    );
}

// --- prompt-submit -------------------------------------------------------------------

#[tokio::test]
async fn prompt_submit_enters_with_contexts_or_rejects_with_no_step() {
    let dir = PluginDir::new();
    dir.scripted(
        "ctx",
        &format!(
            "{}[config]\ncontexts = [\"today is Monday\"]\n",
            hook("prompt-submit", "\"transform\"", "")
        ),
    );
    dir.scripted(
        "gate",
        &format!(
            "{}[config]\nprompt_submit = \"reject-secrets\"\ntag = \"gate\"\n",
            hook("prompt-submit", "\"guard\"", "priority = 1")
        ),
    );
    let plugins = load(&dir);
    let session = plugins.session("s");
    let step = |text: &str| PreStep {
        messages: vec![Message::user(text)],
        turn: 1,
        step: 1,
    };
    match session.prompt_submit(&step("hello")).await {
        PreStepDecision::Enter { contexts, .. } => {
            assert_eq!(contexts.len(), 1);
            assert_eq!(contexts[0].text, "today is Monday");
        }
        other => panic!("{other:?}"),
    }
    match session.prompt_submit(&step("my password is hunter2")).await {
        PreStepDecision::Reject(denial) => {
            assert_eq!(denial.hook_id, "gate/prompt-submit");
            assert_eq!(denial.reason_code, "secret-in-prompt");
        }
        other => panic!("{other:?}"),
    }
    // A tool continuation submits an empty batch; it still reaches the hooks.
    let empty = PreStep {
        messages: vec![],
        turn: 1,
        step: 2,
    };
    assert!(matches!(
        session.prompt_submit(&empty).await,
        PreStepDecision::Enter { .. }
    ));
}

#[tokio::test]
async fn prompt_submit_guard_failure_rejects_fail_closed() {
    let dir = PluginDir::new();
    dir.scripted(
        "gate",
        &format!(
            "{}[config]\nprompt_submit = \"panic\"\n",
            hook("prompt-submit", "\"guard\"", "")
        ),
    );
    let plugins = load(&dir);
    let step = PreStep {
        messages: vec![Message::user("hi")],
        turn: 1,
        step: 1,
    };
    match plugins.session("s").prompt_submit(&step).await {
        PreStepDecision::Reject(denial) => {
            assert_eq!(denial.reason_code, "hook-failure:trap");
            assert_eq!(denial.failure, Some(FailureReason::Trap));
        }
        other => panic!("{other:?}"),
    }
}

// --- pre-tool, ask, tool-guard -------------------------------------------------------

#[tokio::test]
async fn ask_resolves_through_the_approver_and_only_allowed_once_continues() {
    let dir = PluginDir::new();
    dir.scripted(
        "asker",
        &format!(
            "{}[config]\npre_tool = \"ask\"\n",
            hook("pre-tool", "\"guard\"", "")
        ),
    );
    let plugins = load(&dir);
    let call = bash("make deploy");
    let allowed = plugins
        .session("s")
        .with_approver(Arc::new(Fixed(Approval::AllowedOnce)));
    assert_eq!(
        allowed.authorize(&call).await,
        Authorization::Allowed {
            approved_by: Some("asker/pre-tool".into())
        }
    );
    for (approval, code) in [
        (Some(Approval::Rejected), "approval-rejected"),
        (Some(Approval::Cancelled), "approval-cancelled"),
        (Some(Approval::Unavailable), "approval-unavailable"),
        (None, "no-approver"),
    ] {
        let mut session = plugins.session("s");
        if let Some(approval) = approval {
            session = session.with_approver(Arc::new(Fixed(approval)));
        }
        match session.authorize(&call).await {
            Authorization::Denied(denial) => {
                assert_eq!(denial.reason_code, code);
                assert_eq!(denial.hook_id, "asker/pre-tool");
                assert!(
                    denial.message.contains("may Bash run?"),
                    "{}",
                    denial.message
                );
            }
            other => panic!("{approval:?}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn tool_guard_vetoes_after_pre_tool_allows_and_never_force_allows() {
    let dir = PluginDir::new();
    dir.scripted(
        "allow-all",
        &format!(
            "{}[config]\npre_tool = \"allow\"\ntag = \"pre\"\n",
            hook("pre-tool", "\"guard\"", "")
        ),
    );
    dir.scripted(
        "invariant",
        &format!(
            "{}[config]\ntool_guard = \"deny\"\ntag = \"guard\"\n",
            hook("tool-guard", "\"guard\"", "matcher = \"Bash\"")
        ),
    );
    let (plugins, recorder) = load_recorded(&dir);
    let session = plugins.session("s");
    match session.authorize(&bash("ls")).await {
        Authorization::Denied(denial) => {
            assert_eq!(denial.hook_id, "invariant/tool-guard");
            assert_eq!(denial.reason_code, "invariant");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        recorder.logs(),
        ["pre", "guard"],
        "tool-guard runs after pre-tool"
    );
    // A pre-tool deny never reaches tool-guard; tool-guard cannot resurrect it.
    let read = ToolCall::new("t", "Read", json!({}));
    assert_eq!(session.tool_guard(&read).await, GuardDecision::Abstain);
}

#[tokio::test]
async fn an_observers_deny_is_reported_not_granted_and_not_honoured() {
    let dir = PluginDir::new();
    dir.scripted(
        "watcher",
        &format!(
            "{}[config]\npre_tool = \"deny\"\n",
            hook("pre-tool", "\"observe\"", "")
        ),
    );
    let (plugins, recorder) = load_recorded(&dir);
    assert!(
        plugins
            .session("s")
            .pre_tool(&bash("rm -rf /"))
            .await
            .is_allow()
    );
    assert_eq!(
        failures(&recorder),
        [("watcher/pre-tool".into(), FailureReason::NotGranted, false)]
    );
}

// --- post-tool -----------------------------------------------------------------------

#[tokio::test]
async fn post_tool_waterfall_transforms_in_order_and_blocks_with_feedback() {
    let dir = PluginDir::new();
    dir.scripted(
        "a-upper",
        &format!(
            "{}[config]\npost_tool = \"upper\"\ncontexts = [\"from a\"]\n",
            hook("post-tool", "\"transform\"", "")
        ),
    );
    dir.scripted(
        "b-redact",
        &format!(
            "{}[config]\npost_tool = \"replace-content\"\n",
            hook("post-tool", "\"transform\"", "priority = 1")
        ),
    );
    let plugins = load(&dir);
    let session = plugins.session("s");
    let outcome = ToolOutcome {
        value: Some(json!({ "lines": 1 })),
        ..ToolOutcome::text("secret")
    };
    let result = session.post_tool(&bash("cat x"), &outcome).await;
    // b saw a's uppercase text (6 chars) and redacted it; the value is kept.
    assert_eq!(
        result.outcome.content_blocks,
        [palisade::ContentBlock::Text {
            text: "[redacted 6 chars]".into()
        }]
    );
    assert_eq!(result.outcome.value, Some(json!({ "lines": 1 })));
    assert_eq!(result.contexts.len(), 1);
    assert_eq!(result.contexts[0].hook_id, "a-upper/post-tool");
    assert!(result.blocked.is_none());

    let dir = PluginDir::new();
    dir.scripted(
        "a-ctx",
        &format!(
            "{}[config]\ncontexts = [\"dropped by the block\"]\n",
            hook("post-tool", "\"transform\"", "")
        ),
    );
    dir.scripted(
        "b-block",
        &format!(
            "{}[config]\npost_tool = \"block\"\ncontexts = [\"kept\"]\n",
            hook("post-tool", "[\"guard\", \"transform\"]", "priority = 1")
        ),
    );
    dir.scripted(
        "c-never",
        &format!(
            "{}[config]\ntag = \"c\"\n",
            hook("post-tool", "\"transform\"", "priority = 2")
        ),
    );
    let (plugins, recorder) = load_recorded(&dir);
    let result = plugins
        .session("s")
        .post_tool(&bash("cat x"), &ToolOutcome::error("no such file"))
        .await;
    let blocked = result.blocked.expect("blocked");
    assert_eq!(blocked.hook_id, "b-block/post-tool");
    assert_eq!(
        result.outcome,
        ToolOutcome::error("blocked Bash: no such file"),
        "a post-tool hook inspects a failed tool"
    );
    let contexts: Vec<_> = result.contexts.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(contexts, ["kept"]);
    assert!(recorder.logs().is_empty(), "c never ran");
}

#[tokio::test]
async fn post_tool_value_replacement_is_validated_and_reprojected() {
    let dir = PluginDir::new();
    dir.scripted(
        "v",
        &format!(
            "{}[config]\npost_tool = \"replace-value\"\nvalue = '{{\"n\": 2}}'\n",
            hook("post-tool", "\"transform\"", "")
        ),
    );
    let plugins = load(&dir);
    let result = plugins
        .session("s")
        .post_tool(&bash("x"), &ToolOutcome::text("1"))
        .await;
    assert_eq!(result.outcome.value, Some(json!({ "n": 2 })));
    assert_eq!(
        result.outcome.content_blocks,
        [palisade::ContentBlock::Json {
            value: json!({ "n": 2 })
        }]
    );

    let dir = PluginDir::new();
    dir.scripted(
        "bad",
        &format!(
            "{}[config]\npost_tool = \"bad-value\"\n",
            hook("post-tool", "[\"guard\", \"transform\"]", "")
        ),
    );
    let (plugins, recorder) = load_recorded(&dir);
    let result = plugins
        .session("s")
        .post_tool(&bash("x"), &ToolOutcome::text("1"))
        .await;
    let blocked = result.blocked.expect("an invalid value fails closed");
    assert_eq!(blocked.failure, Some(FailureReason::InvalidResponse));
    assert!(result.outcome.is_error);
    assert!(result.contexts.is_empty());
    assert_eq!(
        failures(&recorder),
        [("bad/post-tool".into(), FailureReason::InvalidResponse, true)]
    );
}

#[tokio::test]
async fn post_tool_transform_without_the_grant_is_not_honoured() {
    let dir = PluginDir::new();
    dir.scripted(
        "sneaky",
        &format!(
            "{}[config]\npost_tool = \"replace-content\"\n",
            hook("post-tool", "\"guard\"", "")
        ),
    );
    let (plugins, recorder) = load_recorded(&dir);
    let result = plugins
        .session("s")
        .post_tool(&bash("x"), &ToolOutcome::text("original"))
        .await;
    assert_eq!(result.outcome, ToolOutcome::text("original"));
    assert_eq!(
        failures(&recorder),
        [("sneaky/post-tool".into(), FailureReason::NotGranted, false)]
    );
}

// --- turn-stopping -------------------------------------------------------------------

#[tokio::test]
async fn turn_stopping_steering_needs_steer_and_continues_the_same_turn() {
    let dir = PluginDir::new();
    dir.scripted(
        "coach",
        &format!(
            "{}[config]\nturn_stopping = \"steer-once\"\n",
            hook("turn-stopping", "\"steer\"", "")
        ),
    );
    dir.scripted(
        "mute",
        &format!(
            "{}[config]\nturn_stopping = \"steer\"\n",
            hook("turn-stopping", "\"observe\"", "priority = 1")
        ),
    );
    let (plugins, recorder) = load_recorded(&dir);
    let session = plugins.session("s");
    let event = |continuations| StopEvent {
        turn: 3,
        step: 2,
        last_assistant_message: Some("done".into()),
        continuations,
    };
    let steering = session.turn_stopping(&event(0)).await;
    assert_eq!(steering.len(), 1);
    assert_eq!(steering[0].hook_id, "coach/turn-stopping");
    assert_eq!(steering[0].content, "check your work once more");
    assert!(
        session.turn_stopping(&event(1)).await.is_empty(),
        "the turn may close now"
    );
    assert!(
        failures(&recorder)
            .iter()
            .all(|f| f.0 == "mute/turn-stopping" && f.1 == FailureReason::NotGranted)
    );
}

// --- committed facts -----------------------------------------------------------------

fn observation(id: &str, fact: CommittedFact) -> Observation {
    Observation {
        interaction_id: id.into(),
        turn: 1,
        fact,
    }
}

#[tokio::test]
async fn committed_facts_reach_their_point_and_are_not_delayed() {
    let dir = PluginDir::new();
    dir.scripted(
        "slow",
        &format!(
            "{}[limits]\ntimeout_ms = 300\nfuel = 1_000_000_000_000\n[config]\ncommitted = \"loop\"\n",
            hook("turn-completed", "\"observe\"", "")
        ),
    );
    dir.scripted("msgs", &hook("message-committed", "\"observe\"", ""));
    dir.scripted(
        "tools",
        &hook("tool-result-committed", "\"observe\"", "matcher = \"Bash\""),
    );
    let (plugins, recorder) = load_recorded(&dir);
    let session = plugins.session("s");
    let started = Instant::now();
    session.committed(&observation(
        "i-1",
        CommittedFact::TurnCompleted {
            outcome: TurnOutcome::Completed,
        },
    ));
    session.committed(&observation(
        "i-2",
        CommittedFact::Message {
            message: Message::user("hi"),
        },
    ));
    let result = |name: &str| palisade::ToolResult {
        tool_use_id: "t".into(),
        name: name.into(),
        provenance: None,
        outcome: ToolOutcome::text("ok"),
    };
    session.committed(&observation(
        "i-3",
        CommittedFact::ToolResult {
            result: result("Bash"),
        },
    ));
    session.committed(&observation(
        "i-4",
        CommittedFact::ToolResult {
            result: result("Read"),
        },
    ));
    assert!(
        started.elapsed() < Duration::from_millis(250),
        "committed() waited for its hooks"
    );
    session.drain_background().await;
    let mut logs = recorder.logs();
    logs.sort();
    assert_eq!(
        logs,
        ["message i-2", "tool-result i-3", "turn-completed i-1"]
    );
    assert_eq!(
        failures(&recorder),
        [("slow/turn-completed".into(), FailureReason::Timeout, false)]
    );
}

// --- modes and the session dispatcher ------------------------------------------------

#[tokio::test]
async fn a_saturated_background_queue_drops_and_reports() {
    let dir = PluginDir::new();
    dir.scripted(
        "bg",
        "[limits]\ntimeout_ms = 2000\n[[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\nmode = \"background\"\n\
         [config]\ntool_result = \"loop\"\n",
    );
    let recorder = Recorder::shared();
    let host = Host::builder()
        .event_sink(recorder.clone())
        .background_queue(2)
        .build()
        .unwrap();
    let plugins = host.load_dir(dir.path()).unwrap();
    let session = plugins.session("s");
    for _ in 0..5 {
        session
            .tool_result(&bash("ls"), &ToolOutcome::text("x"))
            .await;
    }
    assert_eq!(session.dropped_background(), 3);
    let dropped = failures(&recorder)
        .into_iter()
        .filter(|f| f.1 == FailureReason::DroppedSaturated)
        .count();
    assert_eq!(dropped, 3);
}

/// Seed 2: the dispatcher "owns all spawned tasks, reaps completed task handles". With a
/// queue of 2, finished tasks that were never reaped would fill it after two invocations.
#[tokio::test]
async fn finished_background_tasks_are_reaped_so_the_queue_never_fills_with_them() {
    let dir = PluginDir::new();
    dir.scripted(
        "bg",
        "[[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\nmode = \"background\"\n",
    );
    let recorder = Recorder::shared();
    let host = Host::builder()
        .event_sink(recorder.clone())
        .background_queue(2)
        .build()
        .unwrap();
    let plugins = host.load_dir(dir.path()).unwrap();
    let session = plugins.session("s");
    let completed = || {
        recorder
            .events()
            .iter()
            .filter(|e| matches!(e.kind, EventKind::HookCompleted { .. }))
            .count()
    };
    for i in 0..50 {
        session
            .tool_result(&bash("ls"), &ToolOutcome::text("x"))
            .await;
        // Wait for the hook itself, not for the session's count (which reaps as it counts).
        let deadline = Instant::now() + Duration::from_secs(10);
        while completed() <= i {
            assert!(Instant::now() < deadline, "invocation {i} never finished");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    assert_eq!(
        session.dropped_background(),
        0,
        "a finished task held a slot"
    );
}

#[tokio::test]
async fn dropping_a_session_aborts_its_background_work() {
    let dir = PluginDir::new();
    dir.scripted(
        "spinner",
        "[limits]\ntimeout_ms = 600000\nfuel = 1_000_000_000_000_000\n\
         [[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\nmode = \"background\"\n\
         [config]\ntool_result = \"loop\"\n",
    );
    let plugins = load(&dir);
    let session = plugins.session("s");
    session
        .tool_result(&bash("ls"), &ToolOutcome::text("x"))
        .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(session.background_in_flight(), 1, "the spinner is running");
    assert_eq!(plugins.live_sessions(), 1);
    drop(session);
    let deadline = Instant::now() + Duration::from_secs(10);
    while plugins.live_sessions() > 0 {
        assert!(
            Instant::now() < deadline,
            "the background task outlived its session"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn background_failures_never_touch_the_foreground_outcome() {
    let dir = PluginDir::new();
    dir.scripted(
        "bg",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"observe\"\nmode = \"background\"\n[config]\npre_tool = \"panic\"\n",
    );
    let plugins = load(&dir);
    let session = plugins.session("s");
    assert!(session.pre_tool(&bash("ls")).await.is_allow());
    session.drain_background().await;
}

// --- instances and deadlines ---------------------------------------------------------

#[tokio::test]
async fn a_trap_discards_the_per_session_instance() {
    let dir = PluginDir::new();
    dir.scripted(
        "flaky",
        &format!(
            "{}[config]\npre_tool = \"allow\"\npanic_on_call = 2\n",
            hook("pre-tool", "\"guard\"", "")
        ),
    );
    let plugins = load(&dir);
    let session = plugins.session("s");
    let failure = |d: palisade::PreToolDecision| d.denial().and_then(|d| d.failure);
    // Every second call of an instance panics. A fresh instance after each trap counts from
    // 1 again; a reused (dead) instance would fail every call after the first trap.
    for _ in 0..3 {
        assert_eq!(failure(session.pre_tool(&bash("ls")).await), None);
        assert_eq!(
            failure(session.pre_tool(&bash("ls")).await),
            Some(FailureReason::Trap)
        );
    }
}

#[tokio::test]
async fn a_stateful_rate_limit_denies_the_fourth_call_of_a_session() {
    let dir = PluginDir::new();
    dir.scripted(
        "rate",
        &format!(
            "{}[config]\npre_tool = \"deny-after:3\"\n",
            hook("pre-tool", "\"guard\"", "")
        ),
    );
    let plugins = load(&dir);
    let session = plugins.session("s");
    for _ in 0..3 {
        assert!(session.pre_tool(&bash("ls")).await.is_allow());
    }
    assert_eq!(
        session
            .pre_tool(&bash("ls"))
            .await
            .denial()
            .unwrap()
            .reason_code,
        "rate-limit"
    );
}

/// A 100 ms guard doing `behaviour` denies with a timeout, well within 5 s (a correctness
/// bound, not a benchmark).
async fn assert_stopped_on_time(behaviour: &str) {
    let dir = PluginDir::new();
    dir.scripted(
        "g",
        &format!(
            "[limits]\ntimeout_ms = 100\nfuel = 1_000_000_000_000\n{}[config]\npre_tool = \"{behaviour}\"\n",
            hook("pre-tool", "\"guard\"", "")
        ),
    );
    let plugins = load(&dir);
    let started = Instant::now();
    let decision = plugins.session("s").pre_tool(&bash("ls")).await;
    assert_eq!(
        decision.denial().and_then(|d| d.failure),
        Some(FailureReason::Timeout)
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{behaviour}: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_guard_that_calls_the_host_in_a_loop_is_stopped_on_time() {
    assert_stopped_on_time("log-loop").await;
}

#[tokio::test]
async fn a_guard_blocked_in_a_host_call_is_stopped_on_time() {
    // The guest sleeps 30 s inside a WASI poll, where epochs cannot reach it.
    assert_stopped_on_time("sleep").await;
}

// --- lifecycle events and the audit log ----------------------------------------------

#[tokio::test]
async fn the_audit_log_lists_every_invocation_of_a_session() {
    let dir = PluginDir::new();
    dir.scripted(
        "guard",
        &format!(
            "{}[config]\npre_tool = \"deny-after:1\"\n",
            hook("pre-tool", "\"guard\"", "")
        ),
    );
    dir.scripted("obs", &hook("tool-result", "\"observe\"", ""));
    dir.scripted(
        "crash",
        &format!(
            "{}[config]\nsession_start = \"panic\"\n",
            hook("session-start", "\"observe\"", "")
        ),
    );
    let (plugins, log) = load_audited(&dir);
    let session = plugins.session("sess-42");
    session.session_start(SessionSource::Startup).await;
    session.pre_tool(&bash("ls")).await;
    session
        .tool_result(&bash("ls"), &ToolOutcome::text("a b"))
        .await;
    // tool-result observers run detached from the call (they cannot delay it): let them end.
    session.drain_background().await;
    session.pre_tool(&bash("ls")).await;
    drop(session);

    let lines = log.events();
    let outcomes: Vec<(String, String)> = lines
        .iter()
        .filter(|e| e["event"] != "hook_started" && e["event"] != "plugin_log")
        .map(|e| {
            (
                e["hook_id"].as_str().unwrap().into(),
                e["event"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("crash/session-start".into(), "hook_failed".into()),
            ("guard/pre-tool".into(), "hook_completed".into()),
            ("obs/tool-result".into(), "hook_completed".into()),
            ("guard/pre-tool".into(), "hook_denied".into()),
        ]
    );
    assert_eq!(
        lines
            .iter()
            .filter(|e| e["event"] == "hook_started")
            .count(),
        4
    );
    for line in &lines {
        assert_eq!(line["session_id"], "sess-42");
        assert!(line["invocation_id"].as_str().unwrap().starts_with("inv-"));
    }
    let denied = lines.iter().find(|e| e["event"] == "hook_denied").unwrap();
    assert_eq!(denied["reason_code"], "rate-limit");
    assert!(denied["fuel_consumed"].as_u64().unwrap() > 0);
    let failed = lines.iter().find(|e| e["event"] == "hook_failed").unwrap();
    assert_eq!(failed["reason"], "trap");
}

// --- fail closed: every foreground hook, not only a guard ----------------------------

#[tokio::test]
async fn every_foreground_failure_fails_closed_not_only_a_guards() {
    // A redaction hook (transform only) that fails must not let the unredacted result through.
    let dir = PluginDir::new();
    dir.scripted(
        "redact",
        &format!(
            "{}[config]\npost_tool = \"panic\"\n",
            hook("post-tool", "\"transform\"", "")
        ),
    );
    let (plugins, recorder) = load_recorded(&dir);
    let result = plugins
        .session("s")
        .post_tool(&bash("cat .env"), &ToolOutcome::text("TOKEN=secret"))
        .await;
    let blocked = result
        .blocked
        .expect("a failed transform hook blocks the result");
    assert_eq!(blocked.hook_id, "redact/post-tool");
    assert_eq!(blocked.failure, Some(FailureReason::Trap));
    assert!(result.outcome.is_error);
    let shown = format!("{:?}", result.outcome.content_blocks);
    assert!(!shown.contains("secret"), "{shown}");
    assert!(
        shown.contains("redact/post-tool") && shown.contains("trap"),
        "{shown}"
    );
    assert_eq!(
        failures(&recorder),
        [("redact/post-tool".into(), FailureReason::Trap, true)]
    );

    // A context-adding hook at prompt-submit that fails rejects the step.
    let dir = PluginDir::new();
    dir.scripted(
        "contexts",
        &format!(
            "{}[config]\nprompt_submit = \"panic\"\n",
            hook("prompt-submit", "\"transform\"", "")
        ),
    );
    let plugins = load(&dir);
    let step = PreStep {
        messages: vec![Message::user("hi")],
        turn: 1,
        step: 1,
    };
    assert!(matches!(
        plugins.session("s").prompt_submit(&step).await,
        PreStepDecision::Reject(d) if d.failure == Some(FailureReason::Trap)
    ));

    // session-start and turn-stopping: recorded; the point's safe default applies.
    let dir = PluginDir::new();
    dir.scripted(
        "steer",
        &format!(
            "{}[config]\nturn_stopping = \"panic\"\n",
            hook("turn-stopping", "\"steer\"", "")
        ),
    );
    let (plugins, recorder) = load_recorded(&dir);
    let stop = StopEvent {
        turn: 1,
        step: 1,
        last_assistant_message: None,
        continuations: 0,
    };
    assert!(plugins.session("s").turn_stopping(&stop).await.is_empty());
    assert_eq!(
        failures(&recorder),
        [("steer/turn-stopping".into(), FailureReason::Trap, false)]
    );

    // `on_failure = "allow"` is the operator's explicit opt-out.
    let dir = PluginDir::new();
    dir.scripted(
        "lenient",
        &format!(
            "{}[config]\npost_tool = \"panic\"\n",
            hook("post-tool", "\"transform\"", "on_failure = \"allow\"")
        ),
    );
    let plugins = load(&dir);
    let result = plugins
        .session("s")
        .post_tool(&bash("x"), &ToolOutcome::text("1"))
        .await;
    assert!(result.blocked.is_none());
}

#[tokio::test]
async fn a_post_tool_replacement_over_the_answer_bound_blocks_unparsed() {
    let dir = PluginDir::new();
    dir.scripted(
        "bloat",
        &format!(
            "[limits]\nmemory_mb = 128\n{}[config]\npost_tool = \"huge-value\"\nsize_mb = 24\n",
            hook("post-tool", "\"transform\"", "")
        ),
    );
    let (plugins, recorder) = load_recorded(&dir);
    let result = plugins
        .session("s")
        .post_tool(&bash("x"), &ToolOutcome::text("1"))
        .await;
    let blocked = result.blocked.expect("an oversized answer fails closed");
    assert_eq!(blocked.failure, Some(FailureReason::InvalidResponse));
    let detail = recorder.first_failure_detail().unwrap();
    assert!(detail.contains("payload_max_bytes"), "{detail}");
}

// --- the deadline covers the whole invocation ----------------------------------------

#[tokio::test]
async fn a_busy_session_instance_fails_a_foreground_hook_at_its_own_deadline() {
    // One plugin, one per-session instance for its guards: a tool guard that runs for 6 s,
    // and a pre-tool guard with a 200 ms deadline asked while it runs (a concurrent call).
    let dir = PluginDir::new();
    dir.scripted(
        "both",
        "[[hooks]]\npoint = \"tool-guard\"\ncapability = \"guard\"\n\
         timeout_ms = 6000\nfuel = 1_000_000_000_000\n\
         [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\ntimeout_ms = 200\n\
         [config]\ntool_guard = \"loop\"\n",
    );
    let plugins = load(&dir);
    let session = plugins.session("s");
    let busy = session.clone();
    let _spinning = tokio::spawn(async move { busy.tool_guard(&bash("sleep")).await });
    // Let the tool guard take the instance.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let decision = session.pre_tool(&bash("ls")).await;
    let took = started.elapsed();
    let denial = decision
        .denial()
        .unwrap_or_else(|| panic!("expected a fail-closed denial, got {decision:?}"));
    assert_eq!(denial.failure, Some(FailureReason::Timeout));
    assert!(
        denial.message.contains("per-session instance"),
        "{}",
        denial.message
    );
    // A correctness bound, not a benchmark: its own 200 ms deadline, not the observer's 6 s.
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

// --- the rule table ------------------------------------------------------------------

/// Every function name the last column of docs/semantics.md's rule table gives (a backquoted
/// snake_case name) is a function of this repository, every row says one of the four statuses,
/// and the table keeps at least 80 rules.
#[test]
fn every_test_the_rule_table_names_exists() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("docs/semantics.md")).unwrap();
    let heading = "## The seeds, rule by rule";
    let start = doc
        .find(heading)
        .expect("docs/semantics.md has the rule table's section");
    let section = &doc[start + heading.len()..];
    let section = section.find("\n## ").map_or(section, |end| &section[..end]);
    let rows: Vec<Vec<&str>> = section
        .lines()
        .filter(|line| line.starts_with("| S"))
        .map(|line| {
            line.trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect()
        })
        .collect();
    assert!(rows.len() >= 80, "the table has {} rules", rows.len());

    let looks_like_a_test = |name: &str| {
        name.contains('_')
            && name.starts_with(|c: char| c.is_ascii_lowercase())
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    let mut named = Vec::new();
    for row in &rows {
        assert_eq!(row.len(), 4, "a row of four cells: {row:?}");
        assert!(
            ["faithful", "partial", "deviation", "missing"].contains(&row[2]),
            "{}: unknown status `{}`",
            row[0],
            row[2]
        );
        for name in row[3].split('`').skip(1).step_by(2) {
            if looks_like_a_test(name) {
                named.push((row[0], name));
            }
        }
    }
    assert!(!named.is_empty(), "the table names no test");

    // Every `fn NAME` of the sources and tests.
    fn walk(dir: &std::path::Path, fns: &mut std::collections::HashSet<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    walk(&path, fns);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                for (at, _) in text.match_indices("fn ") {
                    let name: String = text[at + 3..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        fns.insert(name);
                    }
                }
            }
        }
    }
    let mut fns = std::collections::HashSet::new();
    for dir in ["host/src", "cli/src", "cli/tests", "tests", "guest-sdk"] {
        walk(&root.join(dir), &mut fns);
    }
    let missing: Vec<String> = named
        .iter()
        .filter(|(_, name)| !fns.contains(*name))
        .map(|(rule, name)| format!("{rule}: {name}"))
        .collect();
    assert!(
        missing.is_empty(),
        "the rule table names tests that do not exist:\n{}",
        missing.join("\n")
    );
}
