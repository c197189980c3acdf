//! `prepare`: a component that exports it has each instance prepared once, after
//! instantiation and before its first call — on a per-call plugin's spare, ahead of the call —
//! within the plugin's limits; a `prepare` that fails, traps or overruns fails the call closed.

use palisade::{FailureReason, Point, PreToolDecision, ToolCall};
use palisade_tests::{
    PluginDir, calls_on_spares, load, load_recorded, load_without_spares, spare_settled,
};
use serde_json::{Value, json};

fn call() -> ToolCall {
    ToolCall::new("toolu_1", "Bash", json!({ "command": "ls" }))
}

/// A `pre-tool` guard of the `prepared` test guest, with `extra` manifest lines before its
/// hook and `config` after `[config]`.
fn prepared(dir: &PluginDir, extra: &str, config: &str) {
    dir.plugin(
        "prepared",
        palisade_fixtures::PREPARED,
        &format!(
            "name = \"prepared\"\nwasm = \"plugin.wasm\"\n{extra}\n\
             [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\n{config}\n"
        ),
    );
}

/// What the guest's instance saw, from its denial.
fn seen(decision: PreToolDecision) -> Value {
    let denial = decision
        .denial()
        .unwrap_or_else(|| panic!("expected the guest's denial, got {decision:?}"));
    assert_eq!(denial.reason_code, "prepared", "{denial:?}");
    serde_json::from_str(&denial.message).unwrap()
}

fn failure(decision: &PreToolDecision) -> FailureReason {
    let denial = decision
        .denial()
        .unwrap_or_else(|| panic!("expected a denial, got {decision:?}"));
    denial
        .failure
        .unwrap_or_else(|| panic!("expected a failure, got {denial:?}"))
}

#[tokio::test]
async fn a_per_call_instance_is_prepared_once_before_its_call_on_a_spare_or_not() {
    let dir = PluginDir::new();
    prepared(&dir, "instance = \"per-call\"", "word = \"ready\"");
    let expected = json!({ "prepared": 1, "calls": 1, "word": "ready", "session": null });

    let plugins = load(&dir);
    let plugin = plugins.iter().next().unwrap();
    let session = plugins.session("s");
    let bash = call();
    let answers = calls_on_spares(plugin, 4, |_| session.pre_tool(&bash)).await;
    for (n, answer) in answers.into_iter().enumerate() {
        assert_eq!(seen(answer), expected, "call {n}");
    }
    // Calls 1 to 3 took spares: their `prepare` ran before the call, when the spare was made.
    assert_eq!(plugin.calls_on_spares(), 3);

    let plugins = load_without_spares(&dir);
    let session = plugins.session("s");
    for n in 0..2 {
        assert_eq!(seen(session.pre_tool(&call()).await), expected, "call {n}");
    }
}

#[tokio::test]
async fn a_per_session_instance_is_prepared_once_for_all_its_calls() {
    let dir = PluginDir::new();
    prepared(&dir, "instance = \"per-session\"", "word = \"once\"");
    let plugins = load(&dir);
    let session = plugins.session("s");
    for calls in 1..=3 {
        assert_eq!(
            seen(session.pre_tool(&call()).await),
            json!({ "prepared": 1, "calls": calls, "word": "once", "session": null })
        );
    }
    // Another session, another instance, prepared again.
    assert_eq!(
        seen(plugins.session("t").pre_tool(&call()).await),
        json!({ "prepared": 1, "calls": 1, "word": "once", "session": null })
    );
}

/// A `prepare` that returns an error, traps or overruns fails the call it was made for
/// closed, naming what happened, and so every later call (no spare is made after an
/// instance that failed).
#[tokio::test]
async fn a_prepare_that_fails_traps_or_overruns_fails_each_call_closed() {
    for (behaviour, reason, says) in [
        (
            "fail",
            FailureReason::Unavailable,
            "its `prepare` failed: no rules to read",
        ),
        (
            "fail-long",
            FailureReason::Unavailable,
            "its `prepare` failed: no rules xxxx",
        ),
        ("panic", FailureReason::Trap, "during prepare"),
        ("loop", FailureReason::Timeout, "during prepare"),
    ] {
        for lifetime in ["per-call", "per-session"] {
            let dir = PluginDir::new();
            prepared(
                &dir,
                &format!(
                    "instance = \"{lifetime}\"\n[limits]\ntimeout_ms = 100\nfuel = 1_000_000_000_000"
                ),
                &format!("prepare = \"{behaviour}\""),
            );
            let (plugins, recorder) = load_recorded(&dir);
            let plugin = plugins.iter().next().unwrap();
            let session = plugins.session("s");
            for n in 0..3 {
                recorder.clear();
                let decision = session.pre_tool(&call()).await;
                assert_eq!(
                    failure(&decision),
                    reason,
                    "{behaviour} {lifetime} call {n}"
                );
                let detail = recorder.first_failure_detail().unwrap();
                assert!(
                    detail.contains(says),
                    "{behaviour} {lifetime} call {n}: {detail}"
                );
                // A plugin's words in a failure's detail are clipped: not a mebibyte.
                assert!(detail.len() < 1024, "{behaviour}: {} bytes", detail.len());
            }
            assert_eq!(plugin.calls_on_spares(), 0, "{behaviour} {lifetime}");
        }
    }
}

/// Made ahead of its call, an instance whose `prepare` asks for what only an invocation has
/// is discarded, and its plugin's instances are made at their calls from then on — where
/// `prepare` gets its answer.
#[tokio::test]
async fn a_prepare_that_asks_for_the_invocation_on_a_spare_spoils_it() {
    let dir = PluginDir::new();
    prepared(&dir, "instance = \"per-call\"", "prepare = \"invocation\"");
    let plugins = load(&dir);
    let plugin = plugins.iter().next().unwrap();
    let session = plugins.session("s");
    let expected = json!({ "prepared": 1, "calls": 1, "word": null, "session": "s" });
    assert_eq!(seen(session.pre_tool(&call()).await), expected);
    assert!(!spare_settled(plugin).await, "the spare was kept");
    assert_eq!(seen(session.pre_tool(&call()).await), expected);
    assert_eq!(plugin.calls_on_spares(), 0);
}

/// A guard that allows, before the others (`priority = -10`): the first component's call
/// comes at once, so its instance is not made ahead.
fn leader(dir: &PluginDir) {
    leader_that(dir, "allow");
}

/// The leading guard, answering `verdict` (`allow`, `deny`).
fn leader_that(dir: &PluginDir, verdict: &str) {
    dir.scripted(
        "leader",
        &format!(
            "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\npriority = -10\n\
             [config]\npre_tool = \"{verdict}\"\n"
        ),
    );
}

/// A `prepared` guard after the leader whose `prepare` never ends, cut off at `timeout_ms`.
fn looping(dir: &PluginDir, timeout_ms: u32) {
    prepared(
        dir,
        &format!("[limits]\ntimeout_ms = {timeout_ms}\nfuel = 1_000_000_000_000"),
        "prepare = \"loop\"",
    );
}

/// The plugin named `name` of `plugins`.
fn named<'a>(plugins: &'a palisade::Plugins, name: &str) -> &'a palisade::Plugin {
    plugins.iter().find(|p| p.name() == name).unwrap()
}

/// A hook command's process makes each plugin's first instance ahead of its first call
/// (`Plugins::make_instances_ahead`), on another thread: the call takes it, prepared, as it
/// would a spare — per-call or per-session — and is the first to use it. The calls after it
/// make their own (or reuse the session's), as without.
#[tokio::test]
async fn the_first_call_takes_the_instance_made_ahead_of_it() {
    for lifetime in ["per-call", "per-session"] {
        let dir = PluginDir::new();
        leader(&dir);
        prepared(
            &dir,
            &format!("instance = \"{lifetime}\""),
            "word = \"ahead\"",
        );
        // As a hook command loads: no spares after calls.
        let plugins = load_without_spares(&dir);
        let plugin = named(&plugins, "prepared");
        plugins.make_instances_ahead(&[Point::PreTool]);
        assert!(spare_settled(plugin).await, "{lifetime}: refused");
        // The first hook's is made by its call.
        assert!(!named(&plugins, "leader").spare_ready());
        let session = plugins.session("s");
        assert_eq!(
            seen(session.pre_tool(&call()).await),
            json!({ "prepared": 1, "calls": 1, "word": "ahead", "session": null }),
            "{lifetime}"
        );
        assert_eq!(plugin.calls_on_spares(), 1, "{lifetime}");
        let calls = if lifetime == "per-call" { 1 } else { 2 };
        assert_eq!(
            seen(session.pre_tool(&call()).await),
            json!({ "prepared": 1, "calls": calls, "word": "ahead", "session": null }),
            "{lifetime}"
        );
        assert_eq!(plugin.calls_on_spares(), 1, "{lifetime}");
        // A second session of a per-session plugin gets an instance of its own.
        if lifetime == "per-session" {
            assert_eq!(
                seen(plugins.session("t").pre_tool(&call()).await),
                json!({ "prepared": 1, "calls": 1, "word": "ahead", "session": null })
            );
        }
    }
}

/// The largest components are made ahead first: a call whose instance's making has not begun
/// makes its own, which costs a small component's call little, and a large one's (a Python
/// interpreter's) much. Here the large one's `prepare` never ends: the small one, whose hook
/// runs before it, is made only once the large one's making is cut off at its `timeout_ms`.
#[tokio::test]
async fn the_largest_component_is_made_ahead_first() {
    let dir = PluginDir::new();
    leader(&dir);
    let manifest = |name: &str, priority: i32, limits: &str, config: &str| {
        format!(
            "name = \"{name}\"\nwasm = \"plugin.wasm\"\n{limits}\n\
             [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\npriority = {priority}\n\
             [config]\n{config}\n"
        )
    };
    let wasm = std::fs::read(palisade_fixtures::PREPARED).unwrap();
    let small = manifest("small", -5, "", "");
    dir.raw(
        "small",
        &[("plugin.wasm", &wasm), ("plugin.toml", small.as_bytes())],
    );
    let large = manifest(
        "large",
        0,
        "[limits]\ntimeout_ms = 1000\nfuel = 1_000_000_000_000",
        "prepare = \"loop\"",
    );
    dir.raw(
        "large",
        &[
            ("plugin.wasm", &padded(&wasm, 256 * 1024)),
            ("plugin.toml", large.as_bytes()),
        ],
    );
    let plugins = load_without_spares(&dir);
    let (small, large) = (named(&plugins, "small"), named(&plugins, "large"));
    plugins.make_instances_ahead(&[Point::PreTool]);
    // In the order the hooks run, the small one would be made in milliseconds.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !small.spare_ready() && !large.spare_ready(),
        "the small component was made before the large one"
    );
    // Once the large one's making is cut off (at 1 s), the small one's begins.
    assert!(spare_settled(small).await);
    assert!(!large.spare_ready());
}

/// `wasm` with a custom section of `extra` bytes more at its end: the same component, larger.
fn padded(wasm: &[u8], extra: usize) -> Vec<u8> {
    let name = b"padding";
    let mut content = vec![u8::try_from(name.len()).unwrap()];
    content.extend_from_slice(name);
    content.resize(content.len() + extra, 0);
    let mut out = wasm.to_vec();
    out.push(0);
    // The section's size, LEB128.
    let mut size = content.len();
    loop {
        let byte = u8::try_from(size & 0x7f).unwrap();
        size >>= 7;
        if size == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend(content);
    out
}

/// A plugin granted folders is not made ahead: its instantiation could touch them, and a
/// hook made ahead may never run. The others are.
#[tokio::test]
async fn a_plugin_granted_folders_is_not_made_ahead() {
    let dir = PluginDir::new();
    leader(&dir);
    let shared = tempfile::tempdir().unwrap();
    dir.plugin(
        "a-files",
        palisade_fixtures::PREPARED,
        &format!(
            "name = \"a-files\"\nwasm = \"plugin.wasm\"\n\
             files = [{{ path = \"{}\", as = \"/shared\" }}]\n\
             [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\npriority = -1\n",
            shared.path().display()
        ),
    );
    prepared(&dir, "", "word = \"ahead\"");
    let plugins = load_without_spares(&dir);
    let (files, ahead) = (named(&plugins, "a-files"), named(&plugins, "prepared"));
    plugins.make_instances_ahead(&[Point::PreTool]);
    // The other one, whose hook runs after it, is made: it was passed over.
    assert!(spare_settled(ahead).await);
    assert!(!files.spare_ready() && !files.spares_refused());
    let decision = plugins.session("s").pre_tool(&call()).await;
    // `a-files` refuses (the guest denies every call): the hook after it does not run, and
    // its instance made ahead was never used.
    assert_eq!(seen(decision)["word"], Value::Null);
    assert_eq!((files.calls_on_spares(), ahead.calls_on_spares()), (0, 0));
}

/// Made ahead, an instance whose `prepare` asks for what only an invocation has is thrown
/// away, and the call makes its own, where `prepare` gets its answer; one whose `prepare`
/// never ends is cut off at its `timeout_ms`, and the call — waiting for it, or making its
/// own — fails closed at its deadline.
#[tokio::test]
async fn an_instance_made_ahead_that_is_spoiled_or_overruns_leaves_the_call_its_own() {
    let dir = PluginDir::new();
    leader(&dir);
    prepared(
        &dir,
        "instance = \"per-session\"",
        "prepare = \"invocation\"",
    );
    let plugins = load_without_spares(&dir);
    let plugin = named(&plugins, "prepared");
    plugins.make_instances_ahead(&[Point::PreTool]);
    assert!(
        !spare_settled(plugin).await,
        "the spoiled instance was kept"
    );
    assert_eq!(
        seen(plugins.session("s").pre_tool(&call()).await),
        json!({ "prepared": 1, "calls": 1, "word": null, "session": "s" })
    );
    assert_eq!(plugin.calls_on_spares(), 0);

    let dir = PluginDir::new();
    leader(&dir);
    looping(&dir, 100);
    let plugins = load_without_spares(&dir);
    plugins.make_instances_ahead(&[Point::PreTool]);
    // Its making has begun (or the call takes it over).
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let decision = plugins.session("s").pre_tool(&call()).await;
    assert_eq!(failure(&decision), FailureReason::Timeout);
}

/// An instance made ahead for a hook that does not run (a guard before it refused) is not
/// waited for: the event is decided by the guards that ran, while a `prepare` that never ends
/// is still being cut off on the other thread.
#[tokio::test]
async fn a_hook_that_does_not_run_is_not_waited_for() {
    let dir = PluginDir::new();
    leader_that(&dir, "deny");
    looping(&dir, 3000);
    let plugins = load_without_spares(&dir);
    let looping = named(&plugins, "prepared");
    plugins.make_instances_ahead(&[Point::PreTool]);
    let decision = plugins.session("s").pre_tool(&call()).await;
    let denial = decision.denial().expect("the leader denies");
    assert!(denial.failure.is_none(), "{denial:?}");
    // Its making has not ended: the decision did not wait for it (it ends at 3 s).
    assert!(!looping.spares_refused() && looping.calls_on_spares() == 0);
}
