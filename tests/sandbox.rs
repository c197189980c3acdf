//! The sandbox: deadlines, fuel, memory, traps and invalid answers fail closed as typed
//! failures; no hook has ambient authority; instance lifetimes.

use palisade::events::EventKind;
use palisade::{FailureReason, PreToolDecision, ToolCall};
use palisade_tests::{PluginDir, calls_on_spares, host, load, load_recorded, load_without_spares};
use serde_json::json;
use std::time::{Duration, Instant};

fn call(tool: &str) -> ToolCall {
    ToolCall::new("toolu_1", tool, json!({ "command": "ls" }))
}

/// A guard on every tool (or those `matcher` names) with `behaviour` and extra manifest lines.
fn guard(dir: &PluginDir, name: &str, behaviour: &str, extra: &str) {
    dir.scripted(
        name,
        &format!(
            "{extra}\n[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"{behaviour}\"\n"
        ),
    );
}

async fn failure_of(decision: PreToolDecision) -> FailureReason {
    let denial = decision
        .denial()
        .cloned()
        .unwrap_or_else(|| panic!("expected a denial, got {decision:?}"));
    let reason = denial
        .failure
        .expect("a fail-closed denial names its failure");
    assert_eq!(denial.reason_code, format!("hook-failure:{reason}"));
    reason
}

#[tokio::test]
async fn an_endless_guard_is_stopped_at_its_deadline_and_denies_then_the_next_call_is_served() {
    let dir = PluginDir::new();
    dir.scripted(
        "spinner",
        "[limits]\ntimeout_ms = 50\nfuel = 1_000_000_000_000\n\
         [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"Spin\"\n\
         [config]\npre_tool = \"loop\"\n",
    );
    guard(&dir, "steady", "allow", "");
    let plugins = load(&dir);
    let session = plugins.session("s");

    let started = Instant::now();
    let reason = failure_of(session.pre_tool(&call("Spin")).await).await;
    assert_eq!(reason, FailureReason::Timeout);
    // A correctness bound, not a benchmark: the 50 ms deadline fired, not some fallback.
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );

    assert_eq!(
        session.pre_tool(&call("Bash")).await,
        PreToolDecision::Allow
    );
    // The spinner itself is served again too (a fresh instance), and stopped again.
    assert_eq!(
        failure_of(session.pre_tool(&call("Spin")).await).await,
        FailureReason::Timeout
    );
}

#[tokio::test]
async fn a_guard_out_of_fuel_denies() {
    let dir = PluginDir::new();
    guard(
        &dir,
        "burner",
        "loop",
        "[limits]\ntimeout_ms = 60000\nfuel = 2_000_000",
    );
    let plugins = load(&dir);
    let reason = failure_of(plugins.session("s").pre_tool(&call("Bash")).await).await;
    assert_eq!(reason, FailureReason::OutOfFuel);
}

#[tokio::test]
async fn a_memory_bomb_is_stopped_by_the_memory_cap() {
    let dir = PluginDir::new();
    guard(&dir, "bomb", "membomb", "[limits]\nmemory_mb = 8");
    let (plugins, recorder) = load_recorded(&dir);
    let reason = failure_of(plugins.session("s").pre_tool(&call("Bash")).await).await;
    assert_eq!(reason, FailureReason::MemoryLimit);
    let detail = recorder
        .events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::HookFailed {
                detail,
                failed_closed,
                ..
            } => Some((detail, failed_closed)),
            _ => None,
        })
        .unwrap();
    assert!(detail.0.contains("8 MiB"), "{}", detail.0);
    assert!(detail.1, "the failure is reported as failing closed");
}

#[tokio::test]
async fn a_panicking_guard_denies_as_a_trap() {
    let dir = PluginDir::new();
    guard(&dir, "panicky", "panic", "");
    let plugins = load(&dir);
    let reason = failure_of(plugins.session("s").pre_tool(&call("Bash")).await).await;
    assert_eq!(reason, FailureReason::Trap);
}

#[tokio::test]
async fn an_invalid_response_denies_as_invalid_response() {
    let dir = PluginDir::new();
    guard(&dir, "garbled", "bad-payload", "");
    let plugins = load(&dir);
    let reason = failure_of(plugins.session("s").pre_tool(&call("Bash")).await).await;
    assert_eq!(reason, FailureReason::InvalidResponse);
}

#[tokio::test]
async fn on_failure_allow_fails_open_and_says_so() {
    let dir = PluginDir::new();
    dir.scripted(
        "lenient",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\non_failure = \"allow\"\n\
         [config]\npre_tool = \"panic\"\n",
    );
    let (plugins, recorder) = load_recorded(&dir);
    assert_eq!(
        plugins.session("s").pre_tool(&call("Bash")).await,
        PreToolDecision::Allow
    );
    assert!(recorder.events().iter().any(|e| matches!(
        e.kind,
        EventKind::HookFailed {
            reason: FailureReason::Trap,
            failed_closed: false,
            ..
        }
    )));
}

#[tokio::test]
async fn a_failing_observer_never_denies() {
    let dir = PluginDir::new();
    dir.scripted(
        "watcher",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"observe\"\n[config]\npre_tool = \"panic\"\n",
    );
    let plugins = load(&dir);
    assert_eq!(
        plugins.session("s").pre_tool(&call("Bash")).await,
        PreToolDecision::Allow
    );
}

#[tokio::test]
async fn a_hook_has_no_filesystem_environment_network_or_stdio() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let dir = PluginDir::new();
    dir.scripted(
        "prober",
        &format!(
            "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"probe\"\nport = {port}\n"
        ),
    );
    let (plugins, recorder) = load_recorded(&dir);
    let decision = plugins.session("s").pre_tool(&call("Bash")).await;
    assert_eq!(
        decision,
        PreToolDecision::Allow,
        "the hook escaped its sandbox: {decision:?} {:?}",
        recorder.logs()
    );
    assert!(
        listener.accept().is_err(),
        "the hook reached a loopback port"
    );
    assert!(!dir.path().join("prober/escape.txt").exists());
    // Its stdout and stderr were captured and reported as its own log lines.
    let output = recorder.output();
    assert_eq!(
        output,
        [
            ("stdout", "PROBE-STDOUT-MARKER".to_string()),
            ("stderr", "PROBE-STDERR-MARKER".to_string())
        ]
    );
}

#[tokio::test]
async fn guest_output_is_capped_per_call_and_never_fails_the_hook() {
    let dir = PluginDir::new();
    guard(&dir, "chatty", "print-flood", "");
    let (plugins, recorder) = load_recorded(&dir);
    let session = plugins.session("s");
    for _ in 0..2 {
        recorder.clear();
        assert_eq!(
            session.pre_tool(&call("Bash")).await,
            PreToolDecision::Allow
        );
        let kept: usize = recorder
            .events()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::PluginLog {
                    level: "stdout",
                    message,
                } => Some(message.len()),
                _ => None,
            })
            .sum();
        assert!(
            kept > 0 && kept <= palisade::limits::MAX_OUTPUT_BYTES_PER_CALL,
            "kept {kept} bytes"
        );
    }
}

#[tokio::test]
async fn per_session_instances_keep_state_and_per_call_instances_do_not() {
    let dir = PluginDir::new();
    guard(
        &dir,
        "limited",
        "deny-after:3",
        "instance = \"per-session\"",
    );
    let plugins = load(&dir);
    let session = plugins.session("s");
    for _ in 0..3 {
        assert_eq!(
            session.pre_tool(&call("Bash")).await,
            PreToolDecision::Allow
        );
    }
    let denial = session.pre_tool(&call("Bash")).await;
    assert_eq!(denial.denial().unwrap().reason_code, "rate-limit");
    // Another session has its own instance.
    assert_eq!(
        plugins.session("t").pre_tool(&call("Bash")).await,
        PreToolDecision::Allow
    );

    let dir = PluginDir::new();
    guard(&dir, "forgetful", "deny-after:3", "instance = \"per-call\"");
    let plugins = load(&dir);
    let session = plugins.session("s");
    for _ in 0..6 {
        assert_eq!(
            session.pre_tool(&call("Bash")).await,
            PreToolDecision::Allow
        );
    }
}

/// A per-call plugin's calls after its first take a spare instance made ahead of them, and
/// each is still an instance no call has used: a guard that denies from its instance's second
/// call on allows every call. A host without spares instantiates for every call.
#[tokio::test]
async fn per_call_calls_take_spares_made_ahead_and_each_gets_an_unused_instance() {
    let dir = PluginDir::new();
    guard(&dir, "fresh", "deny-after:1", "instance = \"per-call\"");
    let plugins = load(&dir);
    let plugin = plugins.iter().next().unwrap();
    let session = plugins.session("s");
    let bash = call("Bash");
    let answers = calls_on_spares(plugin, 4, |_| session.pre_tool(&bash)).await;
    assert_eq!(answers, vec![PreToolDecision::Allow; 4]);
    assert_eq!(plugin.calls_on_spares(), 3);
    assert!(!plugin.spares_refused());

    let plugins = load_without_spares(&dir);
    let plugin = plugins.iter().next().unwrap();
    let session = plugins.session("s");
    for _ in 0..3 {
        assert_eq!(
            session.pre_tool(&call("Bash")).await,
            PreToolDecision::Allow
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!plugin.spare_ready());
    }
    assert_eq!(plugin.calls_on_spares(), 0);
}

/// Without spare instances (a bridge's host), each call of a per-call plugin gets an unused
/// instance, and a used one is never called again.
#[tokio::test]
async fn without_spares_each_per_call_instance_serves_one_call() {
    let dir = PluginDir::new();
    guard(&dir, "fresh", "deny-after:1", "instance = \"per-call\"");
    guard(&dir, "session", "allow", "instance = \"per-session\"");
    let host = host()
        .state(palisade::state::StateStore::memory())
        .spare_instances(false)
        .build()
        .unwrap();
    let plugins = host.load_dir(dir.path()).unwrap();
    let session = plugins.session("s");
    for _ in 0..3 {
        assert_eq!(
            session.pre_tool(&call("Bash")).await,
            PreToolDecision::Allow
        );
    }
}

/// Every instance seeds its hash maps differently (`wasi:random/insecure-seed`, a plugin's
/// defence against input crafted to collide in them), in both linkers: the first hashes of
/// no two per-call instances — made for their call or ahead of it, in one host or two — are
/// the same.
#[tokio::test]
async fn every_instance_seeds_its_hash_maps_differently_in_both_linkers() {
    let full = PluginDir::new();
    guard(&full, "full", "seed", "instance = \"per-call\"");
    let direct = PluginDir::new();
    direct.plugin(
        "direct",
        palisade_fixtures::DIRECT,
        "name = \"direct\"\nwasm = \"plugin.wasm\"\ninstance = \"per-call\"\n\
         [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n",
    );
    let seed = ToolCall::new("toolu_1", "Bash", json!({ "command": "seed" }));
    for (dir, directly) in [(&full, false), (&direct, true)] {
        let mut seen = std::collections::HashSet::new();
        for plugins in [load(dir), load(dir), load_without_spares(dir)] {
            assert_eq!(plugins.iter().next().unwrap().direct_calls(), directly);
            let session = plugins.session("s");
            for _ in 0..3 {
                let denial = session.pre_tool(&seed).await;
                let denial = denial.denial().expect("the guest answers with its hash");
                assert_eq!(denial.reason_code, "seed", "{denial:?}");
                assert!(
                    seen.insert(denial.message.clone()),
                    "two instances hashed alike: {}",
                    denial.message
                );
            }
        }
    }
}

#[tokio::test]
async fn lifecycle_events_carry_duration_and_fuel() {
    let dir = PluginDir::new();
    guard(&dir, "g", "allow", "");
    let (plugins, recorder) = load_recorded(&dir);
    plugins.session("sess-9").pre_tool(&call("Bash")).await;
    let events = recorder.events();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].invocation_id, events[1].invocation_id);
    assert_eq!(events[0].session_id, "sess-9");
    assert_eq!(events[1].plugin, "g");
    match &events[1].kind {
        EventKind::HookCompleted {
            fuel_consumed,
            decision,
            honoured,
            ..
        } => {
            assert!(*fuel_consumed > 0);
            assert_eq!(decision, "allow");
            assert!(honoured);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_answer_over_payload_max_bytes_is_refused_before_it_is_parsed() {
    for behaviour in ["huge-payload", "huge-message"] {
        let dir = PluginDir::new();
        guard(
            &dir,
            "bloat",
            behaviour,
            "[limits]\nmemory_mb = 128\nfuel = 10_000_000_000",
        );
        let (plugins, recorder) = load_recorded(&dir);
        let reason = failure_of(plugins.session("s").pre_tool(&call("Bash")).await).await;
        assert_eq!(reason, FailureReason::InvalidResponse, "{behaviour}");
        let detail = recorder.first_failure_detail().unwrap();
        assert!(
            detail.contains("over payload_max_bytes (131072)"),
            "{behaviour}: {detail}"
        );
    }
}

#[tokio::test]
async fn wasi_resources_a_plugin_holds_are_bounded() {
    let dir = PluginDir::new();
    guard(
        &dir,
        "hoarder",
        "pollables",
        "[limits]\nfuel = 100_000_000_000",
    );
    let (plugins, recorder) = load_recorded(&dir);
    let decision = plugins.session("s").pre_tool(&call("Bash")).await;
    // It never got to hold 100,000 of them: the call that went past the bound trapped.
    let reason = failure_of(decision).await;
    assert_eq!(reason, FailureReason::Trap, "{:?}", recorder.events());
}

#[test]
fn arbitrary_decisions_of_a_component_are_bounded_refused_or_honoured() {
    // The deterministic short run of the `decisions` fuzz target (fuzz/): the same checks,
    // on the same inputs every time.
    let decisions =
        palisade::fuzzing::Decisions::new(std::path::Path::new(palisade_fixtures::ARBITRARY));
    for data in palisade::fuzzing::inputs(4, 300, 64) {
        decisions.run(&data);
    }
}

/// Past a full instance pool, instances come from the on-demand engine: with a pool of one
/// slot, three sessions each keep a live instance (the second and third from the on-demand
/// engine) that holds its state across calls, next to a per-call plugin that needs a slot at
/// every call; with no pool (`instance_pool(0)`) every instance is allocated on demand.
#[tokio::test]
async fn a_full_instance_pool_costs_time_never_a_failure() {
    let dir = PluginDir::new();
    guard(
        &dir,
        "counter",
        "deny-after:2",
        "instance = \"per-session\"",
    );
    guard(&dir, "fresh", "allow", "instance = \"per-call\"");
    for slots in [1, 0] {
        let host = palisade::Host::builder()
            .instance_pool(slots)
            .build()
            .unwrap();
        let plugins = host.load_dir(dir.path()).unwrap();
        let sessions: Vec<_> = (0..3).map(|i| plugins.session(format!("s{i}"))).collect();
        for round in 0..3 {
            for session in &sessions {
                let decision = session.pre_tool(&call("Bash")).await;
                if round < 2 {
                    assert_eq!(decision, PreToolDecision::Allow, "pool of {slots}");
                } else {
                    let denial = decision
                        .denial()
                        .expect("the counter denies its third call");
                    assert_eq!(denial.failure, None, "pool of {slots}: {denial:?}");
                }
            }
        }
    }
}

/// Page faults the calling thread has taken so far.
#[allow(unsafe_code)]
fn minor_faults() -> i64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `getrusage` fills the struct it is given; `RUSAGE_THREAD` is Linux's.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, usage.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage: {}", std::io::Error::last_os_error());
    // SAFETY: filled by the successful call above.
    unsafe { usage.assume_init() }.ru_minflt
}

/// A freed slot of the pool is reset by rewriting the pages its instance wrote, which stay
/// mapped (up to 1 MiB), however scattered they are: the next instance in the slot writes
/// them again without a page fault. (wasmtime 49 kept the first 32 runs of written pages
/// only and unmapped the rest: an instance that dirtied its memory in many places, as an
/// interpreter does, faulted them all in again, ~2 µs each on the development VM.)
#[tokio::test(flavor = "current_thread")]
async fn a_freed_slot_keeps_the_scattered_pages_its_instance_wrote() {
    // The host keeps a freed slot's written pages only where the kernel reports them
    // (`PAGEMAP_SCAN`, Linux 6.7): the same check as its pool's.
    if !wasmtime::PoolingAllocationConfig::is_pagemap_scan_available() {
        eprintln!("this kernel has no PAGEMAP_SCAN (Linux < 6.7): freed slots are unmapped");
        return;
    }
    let dir = PluginDir::new();
    guard(&dir, "scatter", "scatter", "");
    let plugins = load(&dir);
    // Each session's instance is freed when the session is: the slot is reset, and the next
    // session's instance takes it.
    let mut faults = Vec::new();
    for n in 0..4 {
        let before = minor_faults();
        let session = plugins.session(format!("s{n}"));
        assert_eq!(
            session.pre_tool(&call("Bash")).await,
            PreToolDecision::Allow
        );
        drop(session);
        faults.push(minor_faults() - before);
    }
    eprintln!("page faults of each session's instance and call: {faults:?}");
    // The first instance writes its 128 pages afresh; the later ones find them mapped.
    assert!(faults[0] >= 128, "{faults:?}");
    assert!(
        faults[1..].iter().all(|&n| n < 32),
        "a reused slot faulted its pages in again: {faults:?} faults a session"
    );
}

/// A plugin's observer never holds the per-session instance its guard needs: while the
/// plugin's background `tool-result` observer spins to its deadline, the guard of the same
/// plugin decides as it would alone (its own deny, not a timeout waiting for the instance).
#[tokio::test]
async fn a_busy_observer_leaves_a_same_plugin_guards_decisions_unchanged() {
    let dir = PluginDir::new();
    dir.scripted(
        "both",
        "instance = \"per-session\"\n\
         [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\ntimeout_ms = 500\n\
         [[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\nmode = \"background\"\n\
         timeout_ms = 5000\nfuel = 1_000_000_000_000_000\n\
         [config]\npre_tool = \"deny\"\ntool_result = \"loop\"\n",
    );
    let (plugins, recorder) = load_recorded(&dir);
    let session = plugins.session("s");
    // The guard's instance exists before the observer starts.
    let first = session.pre_tool(&call("Bash")).await;
    session
        .tool_result(&call("Bash"), &palisade::ToolOutcome::text("ran"))
        .await;
    // The observer is running (its instance taken) when the guard is asked again.
    while !recorder
        .lifecycle()
        .contains(&("hook_started".into(), "both/tool-result".into()))
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let second = session.pre_tool(&call("Bash")).await;
    for decision in [first, second] {
        let denial = decision.denial().cloned().expect("the guard denies");
        assert!(
            denial.failure.is_none(),
            "the guard's own decision, not a failure: {denial:?}"
        );
    }
}
