//! The lifecycle driver (`palisade::lifecycle`): one sequence of points and committed facts
//! for every driver, and interaction ids that are the facts' own — the same fact gets the same
//! id in another process, after a resume and in a replay; two facts never share one.

use palisade::agent::{Agent, ModelReply, ScriptedModel};
use palisade::events::EventKind;
use palisade::{
    Lifecycle, Plugins, Point, SessionSource, Tool, ToolOutcome, ToolRegistry, ToolRequest,
};
use palisade_tests::{PluginDir, Recorder};
use serde_json::json;
use std::sync::Arc;

/// An observer of every committed fact: it logs `kind interaction-id`.
fn observed() -> (PluginDir, Plugins, Arc<Recorder>) {
    let dir = PluginDir::new();
    let mut body = String::new();
    for point in Point::ALL.iter().filter(|p| p.is_committed_fact()) {
        body.push_str(&format!(
            "[[hooks]]\npoint = \"{point}\"\ncapability = \"observe\"\n"
        ));
    }
    dir.scripted("observer", &body);
    let recorder = Recorder::shared();
    let plugins = palisade::Host::builder()
        .event_sink(recorder.clone())
        .build()
        .unwrap()
        .load_dir(dir.path())
        .unwrap();
    (dir, plugins, recorder)
}

/// The `kind id` lines the observer logged, in order.
fn facts(recorder: &Recorder) -> Vec<String> {
    recorder
        .events()
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::PluginLog { message, .. } => Some(message.clone()),
            _ => None,
        })
        .collect()
}

fn tools() -> ToolRegistry {
    ToolRegistry::new([Tool::new("echo", |inv| async move {
        Ok(ToolOutcome::text(format!("echo {}", inv.call.arguments)))
    })])
}

fn turn_with_a_tool(id: &str) -> Vec<ModelReply> {
    vec![
        ModelReply {
            text: "let me look".into(),
            tool_calls: vec![ToolRequest::new(id, "echo", json!({ "x": 1 }))],
            ..Default::default()
        },
        ModelReply {
            text: "done".into(),
            tool_calls: vec![],
            ..Default::default()
        },
    ]
}

/// One agent session: a start and one turn with a tool call.
async fn first_part(plugins: &Plugins) -> (Vec<palisade::agent::Entry>, ()) {
    let session = plugins.session("sess-1");
    let mut agent = Agent::new(
        session.clone(),
        tools(),
        ScriptedModel::new(turn_with_a_tool("toolu_a")),
    );
    agent.start(SessionSource::Startup).await;
    agent.run_turn("first").await;
    session.drain_background().await;
    (agent.transcript().to_vec(), ())
}

fn ids(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.split(' ').nth(1).unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_fact_gets_the_same_id_in_another_process_and_after_a_resume_no_fact_shares_one() {
    // Two "processes" running the same session: the same facts, the same ids.
    let (_d1, plugins, recorder) = observed();
    let (transcript, ()) = first_part(&plugins).await;
    // The observers run in tasks of their own: compare the sets of facts, not their order.
    let mut first = facts(&recorder);
    first.sort();
    let (_d2, again, recorder2) = observed();
    first_part(&again).await;
    let mut second = facts(&recorder2);
    second.sort();
    assert_eq!(second, first, "ids depend on the facts, not the process");
    let first_ids = ids(&first);
    assert!(
        first_ids.contains(&"sess-1:tool-call:toolu_a".to_string())
            && first_ids.contains(&"sess-1:tool-result:toolu_a".to_string())
            && first_ids.contains(&"sess-1:turn-1:message-0".to_string())
            && first_ids.contains(&"sess-1:turn-1:step-1:llm-response".to_string())
            && first_ids.contains(&"sess-1:turn-1:completed".to_string()),
        "{first:#?}"
    );

    // The session resumed in a third process from its transcript: turns go on from 2, and no
    // new fact takes an id of the first part (a deduplicating observer would skip it).
    let (_d3, resumed, recorder3) = observed();
    let session = resumed.session("sess-1");
    let mut agent = Agent::resume(
        session.clone(),
        tools(),
        ScriptedModel::new(turn_with_a_tool("toolu_b")),
        transcript,
    );
    agent.start(SessionSource::Resume).await;
    agent.run_turn("second").await;
    agent.end("exit");
    session.drain_background().await;
    let second_ids = ids(&facts(&recorder3));
    assert!(
        second_ids.contains(&"sess-1:turn-2:completed".to_string()),
        "{second_ids:#?}"
    );
    for id in &second_ids {
        assert!(
            !first_ids.contains(id),
            "{id} was already a fact of the first part"
        );
    }
    let mut all: Vec<&String> = first_ids.iter().chain(&second_ids).collect();
    let count = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), count, "two facts share an id");
}

/// The bridge commits the same facts with the agent's own ids (Claude Code's `prompt_id`,
/// `tool_use_id`), and the tool call before any policy runs on it.
#[tokio::test(flavor = "multi_thread")]
async fn a_bridged_event_commits_its_facts_with_the_agents_ids() {
    let (_dir, plugins, recorder) = observed();
    let lifecycle = Lifecycle::new(plugins.session("s"));
    let event = |name: &str, extra: serde_json::Value| {
        let mut event = json!({
            "session_id": "s",
            "hook_event_name": name,
            "prompt_id": "p-7",
        });
        for (k, v) in extra.as_object().unwrap() {
            event[k] = v.clone();
        }
        event
    };
    use palisade::bridge::{Dialect, handle_in};
    handle_in(
        &lifecycle,
        Dialect::CLAUDE_CODE,
        &event("UserPromptSubmit", json!({ "prompt": "hi" })),
    )
    .await;
    let tool =
        json!({ "tool_name": "Bash", "tool_input": { "command": "ls" }, "tool_use_id": "toolu_9" });
    handle_in(
        &lifecycle,
        Dialect::CLAUDE_CODE,
        &event("PreToolUse", tool.clone()),
    )
    .await;
    let mut post = tool.clone();
    post["tool_response"] = json!({ "stdout": "a b", "stderr": "" });
    handle_in(
        &lifecycle,
        Dialect::CLAUDE_CODE,
        &event("PostToolUse", post),
    )
    .await;
    handle_in(
        &lifecycle,
        Dialect::CLAUDE_CODE,
        &event("Stop", json!({ "stop_hook_active": false })),
    )
    .await;
    handle_in(
        &lifecycle,
        Dialect::CLAUDE_CODE,
        &event("SessionEnd", json!({ "reason": "exit" })),
    )
    .await;
    lifecycle.session().drain_background().await;
    let mut lines = facts(&recorder);
    lines.sort();
    assert_eq!(
        lines,
        [
            "message s:turn-p-7:message-0",
            "session-ended s:session-ended",
            "tool-call s:tool-call:toolu_9",
            "tool-result s:tool-result:toolu_9",
            "turn-completed s:turn-p-7:completed",
        ]
    );
    // One lifecycle kept across the events (as `palisade serve` keeps it): one turn, numbered.
    assert_eq!(lifecycle.turn(), 1);
}

/// The one tool step every door takes (`Lifecycle::authorize`): a `pre-tool` ask never becomes
/// an allow — it is returned for the agent to ask, denied when no one can be asked, or put to
/// the session's approver (none here: a denial) — and `tool-guard` still vetoes an asked call.
/// The points it ran are the lifecycle's record, not the caller's.
#[tokio::test(flavor = "multi_thread")]
async fn the_tool_step_answers_an_ask_as_its_policy_says_and_never_allows_it() {
    use palisade::{AskPolicy, ToolCall, ToolDecision};
    let asks = PluginDir::new();
    asks.scripted(
        "asks",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"ask\"\n",
    );
    let plugins = palisade_tests::load(&asks);
    let lifecycle = Lifecycle::new(plugins.session("step"));
    let call = ToolCall::new("t1", "Bash", json!({ "command": "ls" }));
    let step = lifecycle.authorize(&call, AskPolicy::Agent).await;
    assert!(matches!(&step.decision, ToolDecision::Ask(ask) if ask.hook_id == "asks/pre-tool"));
    assert_eq!(
        step.points,
        [Point::ToolCallCommitted, Point::PreTool, Point::ToolGuard]
    );
    let step = lifecycle.authorize(&call, AskPolicy::Deny).await;
    assert!(
        matches!(&step.decision, ToolDecision::Denied(d) if d.reason_code == "approval-unavailable"),
        "{step:?}"
    );
    assert_eq!(step.points, [Point::ToolCallCommitted, Point::PreTool]);
    let step = lifecycle.authorize(&call, AskPolicy::Approver).await;
    assert!(
        matches!(&step.decision, ToolDecision::Denied(d) if d.reason_code == "no-approver"),
        "{step:?}"
    );

    asks.scripted(
        "invariant",
        "[[hooks]]\npoint = \"tool-guard\"\ncapability = \"guard\"\n[config]\ntool_guard = \"deny\"\n",
    );
    let plugins = palisade_tests::load(&asks);
    let lifecycle = Lifecycle::new(plugins.session("step"));
    let step = lifecycle.authorize(&call, AskPolicy::Agent).await;
    assert!(
        matches!(&step.decision, ToolDecision::Denied(d) if d.hook_id == "invariant/tool-guard"),
        "{step:?}"
    );
}
