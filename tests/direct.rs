//! Direct calls: a plugin whose imports include nothing that may wait is called on the
//! caller's thread, without a fiber, under the same deadline, fuel and output capture; one
//! that ran past an epoch tick is called on a fiber from then on, where it yields the thread.

use palisade::{FailureReason, PreToolDecision, ToolCall};
use palisade_tests::{PluginDir, load, load_recorded};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

fn command(command: &str) -> ToolCall {
    ToolCall::new("toolu_1", "Bash", json!({ "command": command }))
}

fn guard(dir: &PluginDir, name: &str, wasm: &str, limits: &str) {
    dir.plugin(
        name,
        wasm,
        &format!(
            "name = \"{name}\"\nwasm = \"plugin.wasm\"\n{limits}\n\
             [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n"
        ),
    );
}

fn direct_calls(plugins: &palisade::Plugins, name: &str) -> bool {
    plugins
        .iter()
        .find(|p| p.name() == name)
        .unwrap_or_else(|| panic!("{name} is not loaded"))
        .direct_calls()
}

/// A task that counts the runtime's millisecond ticks, started: its count grows only while
/// the thread is free to run it.
async fn ticker() -> (Arc<AtomicU64>, tokio::task::JoinHandle<()>) {
    let ticks = Arc::new(AtomicU64::new(0));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                ticks.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    // Let it start.
    tokio::time::sleep(Duration::from_millis(5)).await;
    (ticks, ticker)
}

fn failure(decision: &PreToolDecision) -> Option<FailureReason> {
    decision.denial().and_then(|d| d.failure)
}

/// A plugin that may wait on the world (plugin state, `next()`, HTTP) is never called
/// directly. One whose only wait is a clock's is, until it sleeps: its sleep holds the thread,
/// and its later calls go on a fiber. (Every Rust component built by rustc 1.97 or later
/// imports the clock's subscriptions through its standard library, sleeping or not.)
#[tokio::test]
async fn only_a_plugin_that_cannot_wait_on_the_world_is_called_directly_until_it_sleeps() {
    let dir = PluginDir::new();
    guard(&dir, "allow", palisade_fixtures::ALLOW, "");
    guard(&dir, "direct", palisade_fixtures::DIRECT, "");
    // A clock subscription: its sleep waits.
    guard(&dir, "napper", palisade_fixtures::NAPPER, "");
    // Plugin state, `next()` and HTTP.
    dir.scripted(
        "scripted",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"allow\"\n",
    );
    let plugins = load(&dir);
    assert!(direct_calls(&plugins, "allow"));
    assert!(direct_calls(&plugins, "direct"));
    assert!(direct_calls(&plugins, "napper"));
    assert!(!direct_calls(&plugins, "scripted"));
    // Each is served: the napper's first sleep on the thread.
    let session = plugins.session("s");
    assert_eq!(
        session.pre_tool(&command("ls")).await,
        PreToolDecision::Allow
    );
    assert!(
        !direct_calls(&plugins, "napper"),
        "its sleep sent it to a fiber"
    );
    assert!(
        direct_calls(&plugins, "direct"),
        "a short call keeps it direct"
    );
    // Served on a fiber, in a new session.
    assert_eq!(
        plugins.session("t").pre_tool(&command("ls")).await,
        PreToolDecision::Allow
    );
}

/// Once a plugin has slept (or run long), its new instances — a new session's, a per-call
/// plugin's — are linked to the full linker: a sleep there waits on the executor, which runs
/// the runtime's other tasks meanwhile. A session's instance made before keeps the direct
/// linker's synchronous imports, where a sleep would hold the thread at every call: its
/// sleep fails the call, closed, at once.
#[tokio::test(flavor = "current_thread")]
async fn after_its_first_sleep_a_plugins_new_instances_sleep_without_holding_the_thread() {
    for lifetime in ["per-session", "per-call"] {
        let dir = PluginDir::new();
        guard(
            &dir,
            "napper",
            palisade_fixtures::NAPPER,
            &format!("instance = \"{lifetime}\"\n[limits]\ntimeout_ms = 5000\n[config]\nms = 50"),
        );
        let plugins = load(&dir);
        let (ticks, ticker) = ticker().await;
        let ticked = async |session: &palisade::Session| {
            let before = ticks.load(Ordering::Relaxed);
            let decision = session.pre_tool(&command("ls")).await;
            (decision, ticks.load(Ordering::Relaxed) - before)
        };

        let first = plugins.session("s");
        let (decision, during_direct) = ticked(&first).await;
        assert_eq!(decision, PreToolDecision::Allow, "{lifetime}");
        assert_eq!(during_direct, 0, "{lifetime}: the direct sleep yielded");
        assert!(!direct_calls(&plugins, "napper"), "{lifetime}");

        let (decision, during_fiber) = ticked(&plugins.session("t")).await;
        assert_eq!(decision, PreToolDecision::Allow, "{lifetime}");
        // About fifty in its 50 ms; ten is the bound no scheduling noise crosses.
        assert!(
            during_fiber >= 10,
            "{lifetime}: the ticker ran {during_fiber} times during a sleep on a fiber"
        );

        let (decision, _) = ticked(&first).await;
        if lifetime == "per-session" {
            // The session's instance, linked for direct calls before the plugin slept.
            assert_eq!(
                failure(&decision),
                Some(FailureReason::Trap),
                "{decision:?}"
            );
        } else {
            assert_eq!(decision, PreToolDecision::Allow, "{lifetime}");
        }
        ticker.abort();
    }
}

/// A direct call that sleeps past its deadline holds the thread to the deadline, no longer,
/// and fails as `timeout`, as a call on a fiber does.
#[tokio::test]
async fn a_direct_sleep_past_the_deadline_is_cut_at_the_deadline() {
    let dir = PluginDir::new();
    guard(
        &dir,
        "napper",
        palisade_fixtures::NAPPER,
        "[limits]\ntimeout_ms = 100\n[config]\nms = 60000",
    );
    let plugins = load(&dir);
    assert!(direct_calls(&plugins, "napper"));
    let session = plugins.session("s");
    let started = Instant::now();
    let slept = session.pre_tool(&command("ls")).await;
    let took = started.elapsed();
    assert_eq!(failure(&slept), Some(FailureReason::Timeout), "{slept:?}");
    assert!(
        took < Duration::from_secs(5),
        "held the thread for {took:?}"
    );
    assert!(!direct_calls(&plugins, "napper"));
    // The failed instance is dropped; the next, linked to the full linker, sleeps on a fiber
    // to the deadline as well.
    let slept = session.pre_tool(&command("ls")).await;
    assert_eq!(failure(&slept), Some(FailureReason::Timeout), "{slept:?}");
}

#[tokio::test]
async fn a_direct_call_writes_stdout_and_stderr_reads_stdin_and_the_clock() {
    let dir = PluginDir::new();
    guard(&dir, "direct", palisade_fixtures::DIRECT, "");
    let (plugins, recorder) = load_recorded(&dir);
    let session = plugins.session("s");
    assert_eq!(
        session.pre_tool(&command("print stdin now")).await,
        PreToolDecision::Allow,
        "{:?}",
        recorder.first_failure_detail()
    );
    assert_eq!(
        recorder.output(),
        [
            ("stdout", "to stdout".to_string()),
            ("stderr", "to stderr".to_string())
        ]
    );
    assert!(direct_calls(&plugins, "direct"));
}

#[tokio::test]
async fn a_direct_call_that_spins_is_stopped_at_its_deadline_and_its_plugin_goes_on_a_fiber() {
    let dir = PluginDir::new();
    guard(
        &dir,
        "direct",
        palisade_fixtures::DIRECT,
        "[limits]\ntimeout_ms = 50\nfuel = 1_000_000_000_000",
    );
    let plugins = load(&dir);
    let session = plugins.session("s");
    assert!(direct_calls(&plugins, "direct"));
    let spun = session.pre_tool(&command("spin")).await;
    assert_eq!(failure(&spun), Some(FailureReason::Timeout), "{spun:?}");
    assert!(!direct_calls(&plugins, "direct"));
    // On its fiber it is served, and stopped, as before.
    assert_eq!(
        session.pre_tool(&command("ls")).await,
        PreToolDecision::Allow
    );
    let spun = session.pre_tool(&command("spin")).await;
    assert_eq!(failure(&spun), Some(FailureReason::Timeout), "{spun:?}");
}

/// A direct call holds its thread until it returns; once its plugin ran long, its calls go
/// on a fiber that yields at every epoch tick, so the other tasks of a single-threaded
/// runtime (another session's hooks, a server's connections) run meanwhile.
#[tokio::test(flavor = "current_thread")]
async fn after_a_long_direct_call_a_long_call_yields_the_thread() {
    let dir = PluginDir::new();
    guard(
        &dir,
        "direct",
        palisade_fixtures::DIRECT,
        "[limits]\ntimeout_ms = 100\nfuel = 1_000_000_000_000",
    );
    let plugins = load(&dir);
    let session = plugins.session("s");
    let (ticks, ticker) = ticker().await;

    let before = ticks.load(Ordering::Relaxed);
    let spun = session.pre_tool(&command("spin")).await;
    let during_direct = ticks.load(Ordering::Relaxed) - before;
    assert_eq!(failure(&spun), Some(FailureReason::Timeout), "{spun:?}");

    let before = ticks.load(Ordering::Relaxed);
    let spun = session.pre_tool(&command("spin")).await;
    let during_fiber = ticks.load(Ordering::Relaxed) - before;
    assert_eq!(failure(&spun), Some(FailureReason::Timeout), "{spun:?}");
    ticker.abort();

    // The direct call never let the ticker run; the one on a fiber let it run at its ticks
    // (about a hundred in its 100 ms; ten is the bound that no scheduling noise crosses).
    assert_eq!(during_direct, 0, "the direct call yielded");
    assert!(during_fiber >= 10, "the ticker ran {during_fiber} times");
}

#[tokio::test]
async fn a_host_built_without_direct_calls_calls_every_plugin_on_a_fiber() {
    let dir = PluginDir::new();
    guard(&dir, "direct", palisade_fixtures::DIRECT, "");
    let plugins = palisade::Host::builder()
        .direct_calls(false)
        .state(palisade::state::StateStore::memory())
        .build()
        .unwrap()
        .load_dir(dir.path())
        .unwrap();
    assert!(!direct_calls(&plugins, "direct"));
    assert_eq!(
        plugins.session("s").pre_tool(&command("print")).await,
        PreToolDecision::Allow
    );
}
