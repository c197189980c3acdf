//! Host-kept plugin state (the WIT `state` interface, the manifest's `[state]` grant): it
//! outlives every instance, is one per state domain (a plugin folder's own, or one the
//! operator shares) and scope, and a store that fails or stalls stops a guard closed.

use palisade::state::StateStore;
use palisade::{FailureReason, Host, Plugins, PreToolDecision, ToolCall};
use palisade_tests::PluginDir;
use serde_json::json;
use std::path::Path;

fn bash() -> ToolCall {
    ToolCall::new("t", "Bash", json!({ "command": "ls" }))
}

/// `bash-budget` (the example, as shipped but for a budget of 3 and `manifest` edited by
/// `edit`).
fn budget_dir_with(edit: impl Fn(String) -> String) -> PluginDir {
    let dir = PluginDir::new();
    let example = palisade_examples::get("bash-budget").expect("the bash-budget example");
    palisade_examples::install_one(example, dir.path()).unwrap();
    let manifest = dir.path().join("bash-budget/plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        edit(text.replace("max_calls = 50", "max_calls = 3")),
    )
    .unwrap();
    dir
}

fn budget_dir() -> PluginDir {
    budget_dir_with(|text| text)
}

fn host(state: &Path) -> Host {
    Host::builder()
        .state(StateStore::embedded(state))
        .build()
        .unwrap()
}

fn denied_code(decision: PreToolDecision) -> Option<String> {
    match decision {
        PreToolDecision::Deny(denial) => Some(denial.reason_code),
        _ => None,
    }
}

/// `one` and `two`, the budget of three loaded twice, keep one budget of session `s`: three
/// calls allowed, alternating, then the fourth denied.
async fn keep_one_budget(one: &Plugins, two: &Plugins) {
    for plugins in [one, two, one] {
        assert_eq!(
            plugins.session("s").pre_tool(&bash()).await,
            PreToolDecision::Allow
        );
    }
    assert_eq!(
        denied_code(two.session("s").pre_tool(&bash()).await).as_deref(),
        Some("budget-exhausted")
    );
}

/// The first case: a stateful guard's limit must not reset when its instance goes.
#[tokio::test]
async fn the_budget_holds_across_eviction_reload_a_trap_and_a_restart() {
    let dir = budget_dir();
    let state = tempfile::tempdir().unwrap();

    // Two calls in a first host.
    let plugins = host(state.path()).load_dir(dir.path()).unwrap();
    let session = plugins.session("s");
    for _ in 0..2 {
        assert_eq!(session.pre_tool(&bash()).await, PreToolDecision::Allow);
    }
    // Evicted (the session and its instance dropped), then reopened: one call left.
    drop(session);
    let session = plugins.session("s");
    assert_eq!(session.pre_tool(&bash()).await, PreToolDecision::Allow);
    assert_eq!(
        denied_code(session.pre_tool(&bash()).await).as_deref(),
        Some("budget-exhausted")
    );
    // Reloaded (a new plugin set), and restarted (a new host, another process's view of the
    // file): still exhausted. Another session has its own budget.
    let reloaded = host(state.path()).load_dir(dir.path()).unwrap();
    drop(plugins);
    assert_eq!(
        denied_code(reloaded.session("s").pre_tool(&bash()).await).as_deref(),
        Some("budget-exhausted")
    );
    assert_eq!(
        reloaded.session("other").pre_tool(&bash()).await,
        PreToolDecision::Allow
    );
}

#[tokio::test]
async fn a_count_made_before_a_trap_is_kept() {
    let dir = PluginDir::new();
    dir.scripted(
        "counter",
        "[state]\nscopes = [\"session\"]\n[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         [config]\npre_tool = \"state-count-panic\"\n",
    );
    let state = tempfile::tempdir().unwrap();
    let plugins = host(state.path()).load_dir(dir.path()).unwrap();
    let session = plugins.session("s");
    // Each call counts, then traps (failing closed); the instance is discarded every time.
    for _ in 0..2 {
        let PreToolDecision::Deny(denial) = session.pre_tool(&bash()).await else {
            panic!("a trapping guard allowed");
        };
        assert_eq!(denial.failure, Some(FailureReason::Trap));
    }
    // The same counter, read by the same plugin folder, its manifest now counting.
    dir.scripted(
        "counter",
        "[state]\nscopes = [\"session\"]\n[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         [config]\npre_tool = \"state-count\"\nlimit = 2\n",
    );
    let plugins = host(state.path()).load_dir(dir.path()).unwrap();
    assert_eq!(
        denied_code(plugins.session("s").pre_tool(&bash()).await).as_deref(),
        Some("over-limit"),
        "the two counts made before the traps were lost"
    );
}

#[tokio::test]
async fn a_plugin_sees_only_its_own_values_and_only_the_scopes_it_is_granted() {
    let dir = PluginDir::new();
    let counter = |scopes: &str, behaviour: &str| {
        format!(
            "[state]\nscopes = [{scopes}]\n[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
             [config]\npre_tool = \"{behaviour}\"\nlimit = 1\n"
        )
    };
    dir.scripted("a", &counter("\"session\"", "state-count"));
    dir.scripted("b", &counter("\"session\"", "state-count"));
    dir.scripted("c", &counter("\"session\"", "state-global-count"));
    let state = tempfile::tempdir().unwrap();
    let plugins = host(state.path()).load_dir(dir.path()).unwrap();
    let decision = plugins.session("s").pre_tool(&bash()).await;
    // a and b each count 1 of 1 on key `n` (not 2: b does not see a's value); c asks for the
    // global scope it was not granted, and refuses.
    let PreToolDecision::Deny(denial) = decision else {
        panic!("c was not refused: {decision:?}");
    };
    assert_eq!(denial.hook_id, "c/pre-tool");
    assert_eq!(denial.reason_code, "state-refused");
    assert_eq!(denial.message, "Error::NotGranted");
}

/// The message of a `state-tamper` plugin's deny.
fn tampered(decision: PreToolDecision) -> String {
    match decision {
        PreToolDecision::Deny(denial) if denial.reason_code == "tampered" => denial.message,
        other => panic!("the tampering plugin did not run: {other:?}"),
    }
}

/// A plugin in another folder, whatever `name` its manifest gives, neither reads nor writes
/// a guard's state: state belongs to the plugin folder the operator installed, not to a name
/// a plugin's author writes. Two intruders named `bash-budget` try the guard's counter: one
/// deletes it (its budget would start over), one sets it past the budget (its next call would
/// be denied).
#[tokio::test]
async fn a_plugin_of_the_same_name_in_another_folder_cannot_see_or_change_its_state() {
    let (dir, state) = (budget_dir(), tempfile::tempdir().unwrap());
    let guard = host(state.path()).load_dir(dir.path()).unwrap();
    let session = guard.session("s");
    for _ in 0..2 {
        assert_eq!(session.pre_tool(&bash()).await, PreToolDecision::Allow);
    }
    let intruder = |set: Option<i64>| {
        let dir = PluginDir::new();
        let set = set.map_or(String::new(), |n| format!("set = {n}\n"));
        dir.scripted(
            "bash-budget",
            &format!(
                "[state]\nscopes = [\"session\"]\n[[hooks]]\npoint = \"pre-tool\"\n\
                 capability = \"guard\"\n[config]\npre_tool = \"state-tamper\"\n\
                 key = \"shell-commands\"\n{set}"
            ),
        );
        dir
    };
    for set in [None, Some(100)] {
        let dir = intruder(set);
        // Another process: another host over the same store.
        let plugins = host(state.path()).load_dir(dir.path()).unwrap();
        let said = tampered(plugins.session("s").pre_tool(&bash()).await);
        assert!(
            said.starts_with("saw Ok(None)"),
            "it read the guard's count: {said}"
        );
    }
    // The guard's count is as it left it: one call left of three, then denied.
    assert_eq!(session.pre_tool(&bash()).await, PreToolDecision::Allow);
    assert_eq!(
        denied_code(session.pre_tool(&bash()).await).as_deref(),
        Some("budget-exhausted")
    );
}

/// Plugins share state only when the operator says so: folders whose manifests name the
/// same `[state] shared` namespace count on one counter, whatever their names; a plugin of
/// either name elsewhere does not.
#[tokio::test]
async fn folders_that_name_one_shared_namespace_share_it() {
    let counter = |shared: &str| {
        format!(
            "[state]\nscopes = [\"session\"]\n{shared}[[hooks]]\npoint = \"pre-tool\"\n\
             capability = \"guard\"\n[config]\npre_tool = \"state-count\"\nlimit = 2\n"
        )
    };
    let team = "shared = \"team-budget\"\n";
    let (one, two, other) = (PluginDir::new(), PluginDir::new(), PluginDir::new());
    one.scripted("a", &counter(team));
    two.scripted("b", &counter(team));
    other.scripted("a", &counter(""));
    let state = tempfile::tempdir().unwrap();
    let load = |dir: &PluginDir| host(state.path()).load_dir(dir.path()).unwrap();
    let (a, b, other) = (load(&one), load(&two), load(&other));
    assert_eq!(
        a.session("s").pre_tool(&bash()).await,
        PreToolDecision::Allow
    );
    assert_eq!(
        b.session("s").pre_tool(&bash()).await,
        PreToolDecision::Allow
    );
    let PreToolDecision::Deny(denial) = a.session("s").pre_tool(&bash()).await else {
        panic!("a did not count b's call");
    };
    assert_eq!(denial.message, "call 3 of 2");
    // The folder of the same name that shares nothing has a counter of its own.
    assert_eq!(
        other.session("s").pre_tool(&bash()).await,
        PreToolDecision::Allow
    );
}

/// The same plugin folder reached by another path (a symlink to its plugin directory, as
/// another process may be given) keeps one state: a folder's domain is its canonical path's.
#[cfg(unix)]
#[tokio::test]
async fn the_same_folder_by_another_path_keeps_its_state() {
    let dir = budget_dir();
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("plugins");
    std::os::unix::fs::symlink(dir.path(), &link).unwrap();
    let state = tempfile::tempdir().unwrap();
    let direct = host(state.path()).load_dir(dir.path()).unwrap();
    let linked = host(state.path()).load_dir(&link).unwrap();
    keep_one_budget(&direct, &linked).await;
}

#[tokio::test]
async fn a_store_that_cannot_be_opened_stops_the_guard_closed() {
    let file = tempfile::NamedTempFile::new().unwrap();
    // A directory under a regular file cannot be created.
    let plugins = host(&file.path().join("state"))
        .load_dir(budget_dir().path())
        .unwrap();
    let PreToolDecision::Deny(denial) = plugins.session("s").pre_tool(&bash()).await else {
        panic!("a broken store let the call through");
    };
    assert_eq!(denial.failure, Some(FailureReason::StateUnavailable));
    assert_eq!(denial.reason_code, "hook-failure:state-unavailable");
}

#[tokio::test]
async fn a_store_held_by_another_process_is_bounded_by_the_hooks_deadline() {
    let state = tempfile::tempdir().unwrap();
    let dir = budget_dir();
    let plugins = host(state.path()).load_dir(dir.path()).unwrap();
    // One call creates the file.
    assert_eq!(
        plugins.session("s").pre_tool(&bash()).await,
        PreToolDecision::Allow
    );
    // Another process takes the write lock and keeps it.
    let other = rusqlite::Connection::open(state.path().join("state.sqlite3")).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let started = std::time::Instant::now();
    let PreToolDecision::Deny(denial) = plugins.session("s").pre_tool(&bash()).await else {
        panic!("a stalled store let the call through");
    };
    assert_eq!(denial.failure, Some(FailureReason::Timeout), "{denial:?}");
    // The deadline (500 ms), not the store's own wait (5 s), ended it.
    assert!(started.elapsed() < std::time::Duration::from_secs(4));
    other.execute_batch("ROLLBACK").unwrap();
}

/// Loading for an event opens the state store ahead of the hooks that use it, but does not
/// wait for it: a store that another process holds (its open waits up to 5 s, then fails)
/// holds up only the stateful hook — which its deadline fails closed — not the load, nor the
/// other hooks' decisions.
#[tokio::test]
async fn a_store_slow_to_open_does_not_hold_up_the_load() {
    let state = tempfile::tempdir().unwrap();
    // Another process holds the store's file, in the rollback journal it starts in.
    let other = rusqlite::Connection::open(state.path().join("state.sqlite3")).unwrap();
    other
        .execute_batch("CREATE TABLE t (x); BEGIN EXCLUSIVE")
        .unwrap();
    let dir = budget_dir();
    // A second plugin, so that the load has a helper thread (on two cores or more).
    dir.scripted(
        "another",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\npriority = -10\n\
         [config]\npre_tool = \"allow\"\n",
    );
    let load = |state: &Path| {
        palisade_tests::host()
            .state(StateStore::embedded(state))
            .build()
            .unwrap()
            .load(palisade::LoadRequest::dir(dir.path()).points(&[palisade::Point::PreTool]))
            .unwrap()
    };
    // Compiled into the test process's cache first, with a store of its own: what is timed
    // below is loading, not compiling.
    load(tempfile::tempdir().unwrap().path());
    let started = std::time::Instant::now();
    let plugins = load(state.path());
    // Not the store's 5 s: its open is still waiting for the other process.
    let loaded = started.elapsed();
    assert!(loaded < std::time::Duration::from_secs(3), "{loaded:?}");
    let PreToolDecision::Deny(denial) = plugins.session("s").pre_tool(&bash()).await else {
        panic!("a stalled store let the call through");
    };
    assert_eq!(denial.failure, Some(FailureReason::Timeout), "{denial:?}");
    other.execute_batch("ROLLBACK").unwrap();
}

#[tokio::test]
async fn without_a_grant_the_budget_cannot_count_and_refuses() {
    let dir = budget_dir_with(|text| {
        let text = text.replace(
            "[state]\nscopes = [\"session\"]\nmax_keys = 1\nmax_bytes = 64\n",
            "",
        );
        assert!(!text.contains("\n[state]\n"), "{text}");
        text
    });
    let plugins = Host::builder()
        .state(StateStore::memory())
        .build()
        .unwrap()
        .load_dir(dir.path())
        .unwrap();
    assert_eq!(
        denied_code(plugins.session("s").pre_tool(&bash()).await).as_deref(),
        Some("budget-unknown")
    );
}

/// The Redis backend, with a real `redis-server`: the same budget, across two hosts sharing
/// it (as two `palisade serve` nodes would), and through a restart of both.
#[tokio::test]
async fn two_hosts_sharing_redis_keep_one_budget_and_a_redis_that_is_down_fails_closed() {
    let redis = palisade_tests::redis::Redis::start();
    let dir = budget_dir();
    let host = || {
        Host::builder()
            .state(StateStore::redis(&redis.url()))
            .build()
            .unwrap()
            .load_dir(dir.path())
            .unwrap()
    };
    keep_one_budget(&host(), &host()).await;
    assert_eq!(
        host().session("t").pre_tool(&bash()).await,
        PreToolDecision::Allow
    );

    // Redis goes away: the guard fails closed, it does not read "no count".
    let url = redis.url();
    drop(redis);
    let plugins = Host::builder()
        .state(StateStore::redis(&url))
        .build()
        .unwrap()
        .load_dir(dir.path())
        .unwrap();
    let PreToolDecision::Deny(denial) = plugins.session("u").pre_tool(&bash()).await else {
        panic!("a guard with its Redis down let the call through");
    };
    assert_eq!(
        denial.failure,
        Some(FailureReason::StateUnavailable),
        "{denial:?}"
    );
}

/// Concurrent increments from many sessions' hooks at once, on two hosts: none is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_increments_through_redis_are_atomic() {
    let redis = palisade_tests::redis::Redis::start();
    let dir = PluginDir::new();
    dir.scripted(
        "counter",
        "[state]\nscopes = [\"global\"]\n[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
         [config]\npre_tool = \"state-global-count\"\nlimit = 40\n",
    );
    let host = || {
        Host::builder()
            .state(StateStore::redis(&redis.url()))
            .build()
            .unwrap()
            .load_dir(dir.path())
            .unwrap()
    };
    let (one, two) = (host(), host());
    let mut calls = Vec::new();
    for i in 0..50 {
        let plugins = if i % 2 == 0 { one.clone() } else { two.clone() };
        calls.push(tokio::spawn(async move {
            plugins.session(format!("s{i}")).pre_tool(&bash()).await
        }));
    }
    let mut allowed = 0;
    for call in calls {
        if call.await.unwrap() == PreToolDecision::Allow {
            allowed += 1;
        }
    }
    // Exactly the limit: no two calls took the same slot.
    assert_eq!(allowed, 40);
}
