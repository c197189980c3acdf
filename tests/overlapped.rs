//! An overlapped load (`Manifests::load_overlapped`, a bridge's): the manifests are checked
//! before anything runs, the components load while the hooks run, and a hook whose
//! component is still loading waits for it at its turn. A component that does not load
//! fails its hook (closed, for a guard) and the load.

use palisade::{CompileProgress, Error, FailureReason, Host, Point, ToolCall};
use palisade_tests::{PluginDir, host};
use serde_json::json;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn call() -> ToolCall {
    ToolCall::new("toolu_1", "Bash", json!({ "command": "ls" }))
}

/// A command plugin `name` whose `pre-tool` hook (at `priority`) appends a line to `marker`
/// and allows.
fn marking(dir: &PluginDir, name: &str, priority: i32, marker: &Path) {
    let folder = dir.raw(
        name,
        &[
            (
                "hook.sh",
                format!("#!/bin/sh\necho ran >> '{}'\n", marker.display()).as_bytes(),
            ),
            (
                "plugin.toml",
                format!(
                    "name = \"{name}\"\ncommand = \"./hook.sh\"\n[[hooks]]\npoint = \"pre-tool\"\n\
                     capability = \"guard\"\npriority = {priority}\n"
                )
                .as_bytes(),
            ),
        ],
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        folder.join("hook.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
}

/// The scripted guest as a guard answering `verdict`.
fn guard(dir: &PluginDir, verdict: &str) {
    dir.scripted(
        "guard",
        &format!(
            "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n\
             [config]\npre_tool = \"{verdict}\"\n"
        ),
    );
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < until, "{what}: not within a minute");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The component's compile is held (the compile observer, on the loading thread, waits for
/// the test): the command hook before it runs meanwhile, and the guard's call waits for its
/// component, then decides as it would have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hooks_before_a_component_still_loading_run_while_it_loads() {
    let dir = PluginDir::new();
    let out = tempfile::tempdir().unwrap();
    let marker = out.path().join("ran");
    marking(&dir, "first", -10, &marker);
    guard(&dir, "deny");
    let (release, held) = std::sync::mpsc::channel::<()>();
    let held = Mutex::new(held);
    let cache = tempfile::tempdir().unwrap();
    let host = Host::builder()
        .cache_dir(cache.path())
        .on_compile(Arc::new(move |event: &CompileProgress| {
            if let CompileProgress::Started { .. } = event {
                let _ = held.lock().unwrap().recv_timeout(Duration::from_secs(60));
            }
        }))
        .build()
        .unwrap();
    let (plugins, loads) = palisade::Manifests::read(dir.path())
        .load_overlapped(&host, &[Point::PreTool], Some("Bash"))
        .unwrap();
    let loaded = |name: &str| {
        plugins
            .iter()
            .find(|p| p.name() == name)
            .unwrap()
            .wasm_path()
            .is_some()
    };
    assert!(!loaded("guard"), "returned before the component loaded");
    let finishing = tokio::task::spawn_blocking(move || loads.finish());
    let session = plugins.session("s");
    let dispatch = tokio::spawn(async move { session.pre_tool(&call()).await });
    wait_for("the hook before the component ran", || marker.exists()).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !dispatch.is_finished(),
        "the guard's call waits for its component"
    );
    assert!(!loaded("guard"));
    release.send(()).unwrap();
    let decision = dispatch.await.unwrap();
    let denial = decision.denial().expect("the guard denies");
    assert_eq!(denial.hook_id, "guard/pre-tool", "{denial:?}");
    assert!(
        denial.failure.is_none(),
        "its decision, not a failure: {denial:?}"
    );
    finishing.await.unwrap().unwrap();
    assert!(loaded("guard"));
}

/// A component that does not load: its guard fails closed (`unavailable`, saying why), the
/// hook after it does not run, and the load's end lists the problem, as a whole load would.
#[tokio::test]
async fn a_component_that_does_not_load_fails_its_hook_and_the_load() {
    let dir = PluginDir::new();
    let out = tempfile::tempdir().unwrap();
    let marker = out.path().join("ran");
    let wasm = std::fs::read(palisade_fixtures::SCRIPTED).unwrap();
    dir.raw(
        "guard",
        &[
            ("plugin.wasm", &wasm[..wasm.len() / 2]),
            (
                "plugin.toml",
                b"name = \"guard\"\nwasm = \"plugin.wasm\"\n[[hooks]]\npoint = \"pre-tool\"\n\
                  capability = \"guard\"\n",
            ),
        ],
    );
    marking(&dir, "after", 10, &marker);
    let host = host().build().unwrap();
    let (plugins, loads) = palisade::Manifests::read(dir.path())
        .load_overlapped(&host, &[Point::PreTool], Some("Bash"))
        .unwrap();
    let finishing = tokio::task::spawn_blocking(move || loads.finish());
    let decision = plugins.session("s").pre_tool(&call()).await;
    let denial = decision.denial().expect("refused");
    assert_eq!(
        denial.failure,
        Some(FailureReason::Unavailable),
        "{denial:?}"
    );
    assert!(
        denial.message.contains("did not load") && denial.message.contains("not a valid component"),
        "{denial:?}"
    );
    assert!(!marker.exists(), "the hook after the refusal ran");
    let Err(Error::Invalid { problems }) = finishing.await.unwrap() else {
        panic!("the load's end reports the component");
    };
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].path.ends_with("guard/plugin.wasm"),
        "{problems:?}"
    );
    assert!(
        problems[0].message.contains("not a valid component"),
        "{problems:?}"
    );
}

/// A manifest's problem is the overlapped load's error, before anything runs or loads.
#[test]
fn a_manifest_problem_is_reported_before_anything_runs() {
    let dir = PluginDir::new();
    guard(&dir, "allow");
    dir.raw(
        "bad",
        &[(
            "plugin.toml",
            b"name = \"bad\"\nwasm = \"x.wasm\"\ncolour = 1\n",
        )],
    );
    let host = host().build().unwrap();
    let Err(Error::Invalid { problems }) = palisade::Manifests::read(dir.path()).load_overlapped(
        &host,
        &[Point::PreTool],
        Some("Bash"),
    ) else {
        panic!("the manifest's problem is an error");
    };
    assert!(
        problems.iter().any(|p| p.message.contains("colour")),
        "{problems:?}"
    );
}

/// Loads dropped unfinished: the component no thread took is refused, and its hook fails
/// closed rather than wait for ever.
#[tokio::test]
async fn loads_dropped_unfinished_refuse_what_no_thread_took() {
    let dir = PluginDir::new();
    guard(&dir, "allow");
    let host = host().build().unwrap();
    let (plugins, loads) = palisade::Manifests::read(dir.path())
        .load_overlapped(&host, &[Point::PreTool], Some("Bash"))
        .unwrap();
    drop(loads);
    let decision = tokio::time::timeout(
        Duration::from_secs(30),
        plugins.session("s").pre_tool(&call()),
    )
    .await
    .expect("the call does not wait for a load no one does");
    let denial = decision.denial().expect("refused");
    assert_eq!(
        denial.failure,
        Some(FailureReason::Unavailable),
        "{denial:?}"
    );
    assert!(denial.message.contains("cut off"), "{denial:?}");
}
