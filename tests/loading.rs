//! Loading a plugin directory: every manifest and component problem is refused with a
//! message naming the file, the field and the fix — and all of them are listed at once.

use palisade::{Error, Host, LoadRequest, Problem};
use palisade_tests::{PluginDir, assert_load_problems};
use sha2::{Digest, Sha256};

const PRE_TOOL_GUARD: &str = "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n";

fn problems(dir: &PluginDir) -> Vec<Problem> {
    match Host::new().unwrap().load_dir(dir.path()) {
        Err(Error::Invalid { problems }) => problems,
        Err(other) => panic!("expected problems, got {other}"),
        Ok(_) => panic!("expected problems, the directory loaded"),
    }
}

fn only_problem(dir: &PluginDir) -> Problem {
    let mut all = problems(dir);
    assert_eq!(all.len(), 1, "{all:#?}");
    all.remove(0)
}

fn manifest(name: &str, rest: &str) -> String {
    format!("name = \"{name}\"\nwasm = \"plugin.wasm\"\n{rest}")
}

fn scripted_wasm() -> Vec<u8> {
    std::fs::read(palisade_fixtures::SCRIPTED).unwrap()
}

#[test]
fn unknown_fields_are_errors_with_their_line() {
    let dir = PluginDir::new();
    dir.scripted(
        "typo",
        "[[hooks]]\npoint = \"pre-tool\"\ncapabilty = \"guard\"\n",
    );
    let problem = only_problem(&dir);
    assert!(problem.path.ends_with("typo/plugin.toml"));
    assert!(
        problem.message.contains("unknown field `capabilty`"),
        "{}",
        problem.message
    );
    assert!(problem.message.contains("line 5"), "{}", problem.message);
    assert!(problem.fix.is_some());
}

#[test]
fn guard_on_an_observe_only_point_is_refused() {
    for point in ["tool-result", "message-committed", "session-ended"] {
        let dir = PluginDir::new();
        dir.scripted(
            "p",
            &format!("[[hooks]]\npoint = \"{point}\"\ncapability = \"guard\"\n"),
        );
        let problem = only_problem(&dir);
        assert_eq!(
            problem.field.as_deref(),
            Some("hooks[0].capability"),
            "{point}"
        );
        assert!(
            problem.message.contains("cannot be granted"),
            "{}",
            problem.message
        );
        assert_eq!(problem.fix.as_deref(), Some("grant one of: observe"));
    }
}

/// Seed 1: session-start "CANNOT block startup".
#[test]
fn session_start_cannot_be_granted_guard() {
    let dir = PluginDir::new();
    dir.scripted(
        "p",
        "[[hooks]]\npoint = \"session-start\"\ncapability = [\"guard\", \"transform\"]\n",
    );
    let problem = only_problem(&dir);
    assert_eq!(problem.field.as_deref(), Some("hooks[0].capability"));
    assert!(
        problem.message.contains(
            "`guard` cannot be granted on `session-start` (session-start cannot block startup)"
        ),
        "{}",
        problem.message
    );
}

#[test]
fn guard_on_a_committed_fact_is_refused_in_background_mode_too() {
    let dir = PluginDir::new();
    dir.scripted(
        "p",
        "[[hooks]]\npoint = \"turn-completed\"\ncapability = \"guard\"\nmode = \"background\"\n",
    );
    let all = problems(&dir);
    assert!(
        all.iter()
            .any(|p| p.message.contains("committed-fact points are observe-only")),
        "{all:#?}"
    );
}

#[test]
fn a_background_hook_must_be_observe() {
    let dir = PluginDir::new();
    dir.scripted(
        "p",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmode = \"background\"\n",
    );
    let problem = only_problem(&dir);
    assert_eq!(problem.field.as_deref(), Some("hooks[0].mode"));
    assert!(problem.message.contains("observe-only"));
}

#[test]
fn unknown_points_capabilities_and_bad_matchers_are_named() {
    let dir = PluginDir::new();
    dir.scripted(
        "p",
        "[[hooks]]\npoint = \"pre-tol\"\ncapability = \"guard\"\n\
         [[hooks]]\npoint = \"tool-guard\"\ncapability = \"gaurd\"\n\
         [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"Bash(\"\n",
    );
    let all = problems(&dir);
    let fields: Vec<_> = all.iter().map(|p| p.field.clone().unwrap()).collect();
    assert_eq!(
        fields,
        ["hooks[0].point", "hooks[1].capability", "hooks[2].matcher"],
        "{all:#?}"
    );
    assert!(all[0].message.contains("unknown point `pre-tol`"));
    assert!(all[1].message.contains("unknown capability `gaurd`"));
}

#[test]
fn a_subscription_to_a_point_the_component_does_not_export_is_refused() {
    let dir = PluginDir::new();
    let shell_guard = palisade_examples::get("shell-guard").unwrap();
    dir.raw(
        "p",
        &[
            ("plugin.wasm", shell_guard.wasm),
            (
                "plugin.toml",
                manifest(
                    "p",
                    "[[hooks]]\npoint = \"tool-result\"\ncapability = \"observe\"\n",
                )
                .as_bytes(),
            ),
        ],
    );
    let problem = only_problem(&dir);
    assert_eq!(problem.field.as_deref(), Some("hooks[0].point"));
    assert!(
        problem
            .message
            .contains("does not export `palisade:hooks/tool-result@0.1.0`"),
        "{}",
        problem.message
    );
    assert!(
        problem
            .message
            .contains("it exports: palisade:hooks/pre-tool@0.1.0"),
        "{}",
        problem.message
    );
}

#[test]
fn an_empty_component_exports_nothing_to_subscribe_to() {
    let dir = PluginDir::new();
    let wasm = wat::parse_str("(component)").unwrap();
    dir.raw(
        "p",
        &[
            ("plugin.wasm", &wasm),
            ("plugin.toml", manifest("p", PRE_TOOL_GUARD).as_bytes()),
        ],
    );
    let problem = only_problem(&dir);
    assert!(
        problem
            .message
            .contains("it exports: nothing of palisade:hooks"),
        "{}",
        problem.message
    );
}

#[test]
fn a_component_with_imports_the_host_does_not_offer_is_refused() {
    let dir = PluginDir::new();
    let wasm = wat::parse_str(
        r#"(component (import "example:net/socket@1.0.0" (instance (export "open" (func)))))"#,
    )
    .unwrap();
    dir.raw(
        "p",
        &[
            ("plugin.wasm", &wasm),
            ("plugin.toml", manifest("p", PRE_TOOL_GUARD).as_bytes()),
        ],
    );
    let problem = only_problem(&dir);
    assert!(
        problem.message.contains("cannot be linked"),
        "{}",
        problem.message
    );
    assert!(
        problem.message.contains("example:net/socket"),
        "{}",
        problem.message
    );
}

#[test]
fn a_core_module_is_not_a_component() {
    let dir = PluginDir::new();
    let wasm = wat::parse_str("(module (func (export \"on-pre-tool\")))").unwrap();
    dir.raw(
        "p",
        &[
            ("plugin.wasm", &wasm),
            ("plugin.toml", manifest("p", PRE_TOOL_GUARD).as_bytes()),
        ],
    );
    let problem = only_problem(&dir);
    assert!(problem.path.ends_with("p/plugin.wasm"));
    assert!(
        problem
            .message
            .contains("core WebAssembly module, not a component")
    );
    assert!(problem.fix.unwrap().contains("wasm32-wasip2"));
}

#[test]
fn a_truncated_component_is_refused() {
    let dir = PluginDir::new();
    let wasm = scripted_wasm();
    dir.raw(
        "p",
        &[
            ("plugin.wasm", &wasm[..wasm.len() / 2]),
            ("plugin.toml", manifest("p", PRE_TOOL_GUARD).as_bytes()),
        ],
    );
    let problem = only_problem(&dir);
    assert!(
        problem.message.contains("not a valid component"),
        "{}",
        problem.message
    );
}

#[test]
fn a_file_that_is_not_wasm_is_refused() {
    let dir = PluginDir::new();
    dir.raw(
        "p",
        &[
            ("plugin.wasm", b"#!/bin/sh\necho hi\n"),
            ("plugin.toml", manifest("p", PRE_TOOL_GUARD).as_bytes()),
        ],
    );
    assert!(
        only_problem(&dir)
            .message
            .contains("not a WebAssembly file")
    );
}

#[test]
fn a_missing_component_says_to_build_it() {
    let dir = PluginDir::new();
    dir.raw(
        "p",
        &[("plugin.toml", manifest("p", PRE_TOOL_GUARD).as_bytes())],
    );
    let problem = only_problem(&dir);
    assert_eq!(problem.field.as_deref(), Some("wasm"));
    assert!(problem.message.contains("does not exist"));
}

#[test]
fn the_component_must_be_inside_the_plugin_folder() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("outside.wasm");
    std::fs::write(&secret, scripted_wasm()).unwrap();
    for wasm in [
        "../outside.wasm".to_string(),
        "sub/../../outside.wasm".to_string(),
        secret.display().to_string(),
        "link.wasm".to_string(),
    ] {
        let dir = PluginDir::new();
        let folder = dir.raw(
            "p",
            &[(
                "plugin.toml",
                format!("name = \"p\"\nwasm = \"{wasm}\"\n{PRE_TOOL_GUARD}").as_bytes(),
            )],
        );
        std::fs::copy(&secret, dir.path().join("outside.wasm")).unwrap();
        std::os::unix::fs::symlink(&secret, folder.join("link.wasm")).unwrap();
        let problem = only_problem(&dir);
        assert_eq!(problem.field.as_deref(), Some("wasm"), "{wasm}: {problem}");
        assert!(
            problem.message.contains("outside the plugin folder"),
            "{wasm}: {problem}"
        );
    }
}

#[test]
fn a_symlink_inside_the_folder_is_fine() {
    let dir = PluginDir::new();
    let folder = dir.scripted("p", PRE_TOOL_GUARD);
    std::os::unix::fs::symlink("plugin.wasm", folder.join("alias.wasm")).unwrap();
    std::fs::write(
        folder.join("plugin.toml"),
        format!("name = \"p\"\nwasm = \"alias.wasm\"\n{PRE_TOOL_GUARD}"),
    )
    .unwrap();
    Host::new().unwrap().load_dir(dir.path()).unwrap();
}

#[test]
fn duplicate_plugin_names_are_refused() {
    let dir = PluginDir::new();
    dir.scripted("first", PRE_TOOL_GUARD);
    let folder = dir.scripted("second", PRE_TOOL_GUARD);
    std::fs::write(
        folder.join("plugin.toml"),
        manifest("first", PRE_TOOL_GUARD),
    )
    .unwrap();
    let problem = only_problem(&dir);
    assert_eq!(problem.field.as_deref(), Some("name"));
    assert!(
        problem.message.contains("already used by"),
        "{}",
        problem.message
    );
    assert!(problem.path.ends_with("second/plugin.toml"));
}

#[test]
fn a_sha256_pin_is_checked() {
    let dir = PluginDir::new();
    let good: String = Sha256::digest(scripted_wasm())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    dir.scripted("pinned", &format!("sha256 = \"{good}\"\n{PRE_TOOL_GUARD}"));
    Host::new().unwrap().load_dir(dir.path()).unwrap();

    let dir = PluginDir::new();
    dir.scripted(
        "pinned",
        &format!("sha256 = \"{}\"\n{PRE_TOOL_GUARD}", "0".repeat(64)),
    );
    let problem = only_problem(&dir);
    assert_eq!(problem.field.as_deref(), Some("sha256"));
    assert!(problem.message.contains(&good));
}

#[test]
fn every_problem_of_every_plugin_is_listed_at_once() {
    let dir = PluginDir::new();
    dir.scripted(
        "a",
        "[[hooks]]\npoint = \"tool-result\"\ncapability = \"guard\"\n",
    );
    dir.raw(
        "b",
        &[("plugin.toml", manifest("b", PRE_TOOL_GUARD).as_bytes())],
    );
    dir.scripted("c", "[limits]\ntimeout_ms = 0\n[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmode = \"background\"\n");
    let all = problems(&dir);
    assert_eq!(all.len(), 4, "{all:#?}");
    let message = Error::Invalid { problems: all }.to_string();
    assert!(
        message.starts_with("4 problems in the plugin directory:"),
        "{message}"
    );
    for needle in [
        "a/plugin.toml",
        "b/plugin.toml",
        "c/plugin.toml",
        "limits.timeout_ms",
        "(fix: ",
    ] {
        assert!(message.contains(needle), "{needle} in {message}");
    }
}

#[test]
fn folders_without_a_manifest_are_skipped_and_listed() {
    let dir = PluginDir::new();
    dir.scripted("real", PRE_TOOL_GUARD);
    dir.raw("notes", &[("README.md", b"not a plugin")]);
    let plugins = Host::new().unwrap().load_dir(dir.path()).unwrap();
    assert_eq!(
        plugins.iter().map(|p| p.name()).collect::<Vec<_>>(),
        ["real"]
    );
    assert_eq!(plugins.skipped().len(), 1);
    assert!(plugins.skipped()[0].path.ends_with("notes"));
    assert_eq!(plugins.skipped()[0].reason, "no plugin.toml");
}

#[test]
fn a_missing_directory_is_an_error_naming_it() {
    let err = Host::new()
        .unwrap()
        .load_dir("/no/such/plugins")
        .unwrap_err();
    assert!(err.to_string().contains("/no/such/plugins"), "{err}");
}

#[test]
fn compiled_components_are_cached_sealed_and_never_trusted_when_tampered() {
    let dir = PluginDir::new();
    dir.scripted("p", PRE_TOOL_GUARD);
    let cache = tempfile::tempdir().unwrap();
    let host = Host::builder().cache_dir(cache.path()).build().unwrap();
    host.load_dir(dir.path()).unwrap();
    let entries: Vec<_> = walk(cache.path())
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let entry = &entries[0];
    let sha: String = Sha256::digest(scripted_wasm())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(entry.file_stem().unwrap().to_str().unwrap(), sha);
    let key = cache.path().join("key");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // A second host loads from the entry; a tampered entry is not trusted, and is replaced.
    let sealed = std::fs::read(entry).unwrap();
    let mut tampered = sealed.clone();
    let last = tampered.len() - 1;
    tampered[last] ^= 0xff;
    std::fs::write(entry, &tampered).unwrap();
    let host = Host::builder().cache_dir(cache.path()).build().unwrap();
    let plugins = host.load_dir(dir.path()).unwrap();
    assert_eq!(plugins.iter().count(), 1);
    assert_eq!(
        std::fs::read(entry).unwrap(),
        sealed,
        "the entry was rewritten, sealed"
    );
}

#[test]
fn a_changed_component_is_hashed_again_never_taken_from_memory() {
    // The cache remembers a component's sha256 while its file is provably unchanged; a
    // rewrite (even to the same size) moves its change time, and the pin sees the new bytes.
    let dir = PluginDir::new();
    let folder = dir.scripted("p", PRE_TOOL_GUARD);
    let cache = tempfile::tempdir().unwrap();
    let host = Host::builder().cache_dir(cache.path()).build().unwrap();
    let plugins = host.load_dir(dir.path()).unwrap();
    let first = plugins.iter().next().unwrap().sha256().unwrap().to_string();
    let plugins = host.load_dir(dir.path()).unwrap();
    assert_eq!(plugins.iter().next().unwrap().sha256().unwrap(), first);

    let wasm = folder.join("plugin.wasm");
    let mut bytes = std::fs::read(&wasm).unwrap();
    // A custom section appended: still a valid component, other bytes.
    bytes.extend_from_slice(&[0, 4, 1, b'x', 1, 2]);
    std::fs::write(&wasm, &bytes).unwrap();
    let expected: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let plugins = host.load_dir(dir.path()).unwrap();
    assert_eq!(plugins.iter().next().unwrap().sha256().unwrap(), expected);
    assert_ne!(expected, first);
    // Pinned to the old digest, the changed component is refused.
    let manifest = folder.join("plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replacen("\n", &format!("\nsha256 = \"{first}\"\n"), 1),
    )
    .unwrap();
    let err = host.load_dir(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains(&format!("the component's sha256 is {expected}")),
        "{err}"
    );
}

#[test]
fn a_cache_directory_others_can_write_to_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let cache = tempfile::tempdir().unwrap();
    std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = Host::builder()
        .cache_dir(cache.path())
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("can be written by other users") && err.contains("chmod 700"),
        "{err}"
    );
    // Made private, it is accepted, and its entries are private too.
    std::fs::set_permissions(cache.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let dir = PluginDir::new();
    dir.scripted("p", PRE_TOOL_GUARD);
    let host = Host::builder().cache_dir(cache.path()).build().unwrap();
    host.load_dir(dir.path()).unwrap();
    for entry in walk(cache.path()) {
        let mode = std::fs::metadata(&entry).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", entry.display());
    }
}

#[test]
fn a_component_mapped_ahead_is_taken_by_the_load_of_its_digest_and_no_other() {
    use palisade::CompileProgress;
    use std::sync::{Arc, Mutex};
    let dir = PluginDir::new();
    dir.scripted("p", PRE_TOOL_GUARD);
    // Another component (a custom section appended: other bytes, another digest), compiled
    // into the same cache.
    let other_dir = PluginDir::new();
    let wasm = other_dir.scripted("q", PRE_TOOL_GUARD).join("plugin.wasm");
    let mut bytes = std::fs::read(&wasm).unwrap();
    bytes.extend_from_slice(&[0, 4, 1, b'x', 1, 2]);
    std::fs::write(&wasm, &bytes).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let digest_of = |dir: &PluginDir| {
        let host = Host::builder().cache_dir(cache.path()).build().unwrap();
        let plugins = host.load_dir(dir.path()).unwrap();
        plugins.iter().next().unwrap().sha256().unwrap().to_string()
    };
    let (digest, other) = (digest_of(&dir), digest_of(&other_dir));
    assert_ne!(digest, other);
    // Maps `ahead` (each digest given to `load_ahead`), then takes the compiled code out of
    // the cache and loads `dir`: a load that does not take a component mapped ahead compiles
    // its own again. Returns how many compiled, and the plugin's digest.
    let load = |ahead: &[&str]| {
        let seen = Arc::new(Mutex::new(0));
        let sink = seen.clone();
        let host = Host::builder()
            .cache_dir(cache.path())
            .on_compile(Arc::new(move |event: &CompileProgress| {
                if matches!(event, CompileProgress::Started { .. }) {
                    *sink.lock().unwrap() += 1;
                }
            }))
            .build()
            .unwrap();
        for sha256 in ahead {
            host.load_ahead(sha256);
        }
        for entry in walk(cache.path()) {
            if entry
                .extension()
                .is_some_and(|e| e == "cwasm" || e == "seal")
            {
                std::fs::remove_file(entry).unwrap();
            }
        }
        let plugins = host.load_dir(dir.path()).unwrap();
        let sha256 = plugins.iter().next().unwrap().sha256().unwrap().to_string();
        let compiled = *seen.lock().unwrap();
        (compiled, sha256)
    };
    assert_eq!(load(&[&digest]), (0, digest.clone()), "taken, not compiled");
    // Back in the cache (this load compiles it), with the other component.
    assert_eq!(load(&[]), (1, digest.clone()));
    digest_of(&other_dir);
    // Another component's digest, one the cache does not hold, and what is no digest: none
    // of them is taken, and the load compiles its own.
    let absent = "0".repeat(64);
    for ahead in [&other[..], &absent, "../../key", ""] {
        assert_eq!(load(&[ahead]), (1, digest.clone()), "{ahead}");
        digest_of(&other_dir);
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

#[test]
fn a_component_that_starts_over_its_memory_cap_is_refused_at_load() {
    let dir = PluginDir::new();
    // A Rust guest starts with its 1 MiB stack and data: more than 1 MiB.
    dir.scripted("p", &format!("[limits]\nmemory_mb = 1\n{PRE_TOOL_GUARD}"));
    let problem = only_problem(&dir);
    assert_eq!(
        problem.field.as_deref(),
        Some("limits.memory_mb"),
        "{problem}"
    );
    assert!(
        problem
            .message
            .contains("starts with 2 MiB of linear memory, over the 1 MiB cap"),
        "{problem}"
    );
    assert!(
        problem
            .fix
            .as_deref()
            .is_some_and(|f| f.contains("at least 3")),
        "{problem}"
    );
    // With room, it loads.
    let dir = PluginDir::new();
    dir.scripted("p", &format!("[limits]\nmemory_mb = 3\n{PRE_TOOL_GUARD}"));
    Host::new().unwrap().load_dir(dir.path()).unwrap();
}

#[test]
fn compiling_is_reported_on_a_cache_miss_only() {
    use palisade::CompileProgress;
    use std::sync::{Arc, Mutex};
    let dir = PluginDir::new();
    dir.scripted("p", PRE_TOOL_GUARD);
    let cache = tempfile::tempdir().unwrap();
    let load = || {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let host = Host::builder()
            .cache_dir(cache.path())
            .on_compile(Arc::new(move |event: &CompileProgress| {
                sink.lock().unwrap().push(event.clone())
            }))
            .build()
            .unwrap();
        host.load_dir(dir.path()).unwrap();
        std::mem::take(&mut *seen.lock().unwrap())
    };
    let bytes = scripted_wasm().len() as u64;
    let first = load();
    assert_eq!(first.len(), 2, "{first:?}");
    assert_eq!(
        first[0],
        CompileProgress::Started {
            plugin: "p".into(),
            bytes
        }
    );
    assert!(
        matches!(&first[1], CompileProgress::Finished { plugin, ok: true, bytes: b, .. } if plugin == "p" && *b == bytes),
        "{first:?}"
    );
    assert_eq!(load(), vec![], "a cache hit compiles nothing");
}

#[test]
fn a_plugin_folder_loads_as_a_directory_of_itself() {
    let dir = PluginDir::new();
    let folder = dir.scripted("p", PRE_TOOL_GUARD);
    let plugins = Host::new().unwrap().load_dir(&folder).unwrap();
    let names: Vec<&str> = plugins.iter().map(|p| p.name()).collect();
    assert_eq!(names, ["p"]);
}

// --- hostile folders ------------------------------------------------------------------

/// Loads `dir` on a thread of its own: a load that hangs fails the test instead of hanging it.
fn load_in_time(dir: &std::path::Path) -> Result<palisade::Plugins, Error> {
    let (tx, rx) = std::sync::mpsc::channel();
    let path = dir.to_path_buf();
    std::thread::spawn(move || {
        let _ = tx.send(Host::new().unwrap().load_dir(&path));
    });
    rx.recv_timeout(std::time::Duration::from_secs(30))
        .expect("loading hung")
}

fn problems_of(result: Result<palisade::Plugins, Error>) -> Vec<Problem> {
    match result {
        Err(Error::Invalid { problems }) => problems,
        Err(other) => panic!("expected problems, got {other}"),
        Ok(_) => panic!("expected problems, the directory loaded"),
    }
}

fn mkfifo(path: &std::path::Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
}

#[test]
fn a_fifo_where_a_plugin_file_should_be_is_refused_without_hanging() {
    let dir = PluginDir::new();
    let folder = dir.raw("x", &[]);
    mkfifo(&folder.join("plugin.toml"));
    let problems = problems_of(load_in_time(dir.path()));
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].path.ends_with("x/plugin.toml"));
    assert!(
        problems[0].message.contains("not a regular file"),
        "{}",
        problems[0].message
    );

    let dir = PluginDir::new();
    let folder = dir.raw(
        "y",
        &[("plugin.toml", manifest("y", PRE_TOOL_GUARD).as_bytes())],
    );
    mkfifo(&folder.join("plugin.wasm"));
    let problems = problems_of(load_in_time(dir.path()));
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].message.contains("not a regular file"),
        "{}",
        problems[0].message
    );
}

#[test]
fn an_oversized_manifest_is_refused_unread() {
    let dir = PluginDir::new();
    let mut text = manifest("big", PRE_TOOL_GUARD);
    text.push_str(&"# padding\n".repeat(200_000));
    dir.raw(
        "big",
        &[
            ("plugin.toml", text.as_bytes()),
            ("plugin.wasm", &scripted_wasm()),
        ],
    );
    let problem = only_problem(&dir);
    assert!(
        problem.message.contains("over the limit"),
        "{}",
        problem.message
    );
}

#[test]
fn a_symlinked_plugin_folder_is_followed_and_said_so() {
    let guards = PluginDir::new();
    let real = guards.scripted(
        "shell-guard",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"deny\"\n",
    );
    let dir = PluginDir::new();
    std::os::unix::fs::symlink(&real, dir.path().join("shell-guard")).unwrap();
    std::fs::write(dir.path().join("README.md"), "not a plugin").unwrap();
    let plugins = load_in_time(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<_> = plugins.iter().map(|p| p.name()).collect();
    assert_eq!(names, ["shell-guard"], "a symlinked plugin was skipped");
    let plugin = plugins.iter().next().unwrap();
    assert_eq!(
        plugin.symlink_target(),
        Some(real.canonicalize().unwrap().as_path())
    );
    // A file beside the plugins is listed, not silently ignored.
    assert_eq!(plugins.skipped().len(), 1);
    assert!(plugins.skipped()[0].path.ends_with("README.md"));
    assert_eq!(plugins.skipped()[0].reason, "a file, not a plugin folder");

    // A symlink that leads nowhere is refused: it is likely a plugin that is meant to be there.
    std::os::unix::fs::symlink("/no/such/guard", dir.path().join("gone")).unwrap();
    let problems = problems_of(load_in_time(dir.path()));
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].path.ends_with("gone"));
    assert!(problems[0].fix.is_some());
}

#[test]
fn manifest_numbers_are_range_checked_before_any_arithmetic() {
    for (field, value) in [
        ("memory_mb", "17592186044416"),
        ("fuel", "18446744073709551615"),
        ("fuel", "1000000000000001"),
    ] {
        let dir = PluginDir::new();
        dir.scripted(
            "n",
            &format!("[limits]\n{field} = {value}\n{PRE_TOOL_GUARD}"),
        );
        let problem = only_problem(&dir);
        assert_eq!(
            problem.field.as_deref(),
            Some(format!("limits.{field}").as_str()),
            "{problem}"
        );
        assert!(problem.message.contains("out of range"), "{problem}");
    }
}

#[test]
fn a_matcher_cannot_escape_its_anchors() {
    let dir = PluginDir::new();
    dir.scripted(
        "m",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"Bash)|(?:Read\"\n",
    );
    let problem = only_problem(&dir);
    assert_eq!(problem.field.as_deref(), Some("hooks[0].matcher"));
}

/// `prepare` is optional, but a component that exports it in a shape the host cannot call
/// is refused, not loaded unprepared.
#[test]
fn a_prepare_export_the_host_cannot_call_is_refused_at_load() {
    // Exports `palisade:hooks/prepare@0.1.0` with `prepare: func()` (no result).
    let component = wat::parse_str(
        r#"(component
            (core module $m (func (export "f")))
            (core instance $i (instantiate $m))
            (func $f (canon lift (core func $i "f")))
            (instance $e (export "prepare" (func $f)))
            (export "palisade:hooks/prepare@0.1.0" (instance $e))
        )"#,
    )
    .unwrap();
    let dir = PluginDir::new();
    dir.raw(
        "unready",
        &[
            (
                "plugin.toml",
                manifest("unready", PRE_TOOL_GUARD).as_bytes(),
            ),
            ("plugin.wasm", &component),
        ],
    );
    assert_load_problems(
        &dir,
        &[(
            "wasm",
            "exports `palisade:hooks/prepare@0.1.0` with the wrong type for `prepare`: \
             expected `func() -> result<_, string>`, found `func()`",
        )],
    );
}

#[test]
fn an_export_with_the_wrong_function_type_is_refused_at_load() {
    // Exports `palisade:hooks/pre-tool@0.1.0` with `on-pre-tool: func(call: u32) -> u32`.
    let component = wat::parse_str(
        r#"(component
            (core module $m (func (export "f") (param i32) (result i32) local.get 0))
            (core instance $i (instantiate $m))
            (func $f (param "call" u32) (result u32) (canon lift (core func $i "f")))
            (instance $e (export "on-pre-tool" (func $f)))
            (export "palisade:hooks/pre-tool@0.1.0" (instance $e))
        )"#,
    )
    .unwrap();
    let dir = PluginDir::new();
    dir.raw(
        "liar",
        &[
            ("plugin.toml", manifest("liar", PRE_TOOL_GUARD).as_bytes()),
            ("plugin.wasm", &component),
        ],
    );
    let problem = only_problem(&dir);
    assert_eq!(
        problem.field.as_deref(),
        Some("hooks[0].point"),
        "{problem}"
    );
    assert!(
        problem.message.contains(
            "expected `func(call: tool-call) -> pre-tool-decision`, found `func(call: u32) -> u32`"
        ),
        "{problem}"
    );
}

#[test]
fn the_bytes_compiled_are_the_bytes_pinned_even_if_the_file_is_swapped_meanwhile() {
    let dir = PluginDir::new();
    let pinned = scripted_wasm();
    let sha: String = Sha256::digest(&pinned)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let folder = dir.scripted(
        "pinned",
        &format!("sha256 = \"{sha}\"\n[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"deny\"\n"),
    );
    // When compiling starts (after the digest was checked against the pin), another component
    // is swapped in under the same name.
    let other = palisade_examples::get("shell-guard").unwrap();
    let target = folder.join("plugin.wasm");
    let swap: palisade::CompileObserver = std::sync::Arc::new(move |progress| {
        if let palisade::CompileProgress::Started { .. } = progress {
            let tmp = target.with_extension("swap");
            std::fs::write(&tmp, other.wasm).unwrap();
            std::fs::rename(&tmp, &target).unwrap();
        }
    });
    let cache = tempfile::tempdir().unwrap();
    let host = Host::builder()
        .cache_dir(cache.path())
        .on_compile(swap)
        .build()
        .unwrap();
    let plugins = host.load_dir(dir.path()).unwrap();
    // The scripted guest denies every call; shell-guard would allow `ls`.
    assert_eq!(
        denial_of_ls(&plugins).as_deref(),
        Some("scripted-deny"),
        "other code ran under the pinned digest"
    );
    // And what the cache keeps under the pinned digest is the pinned code: with the pinned
    // file back in place, a new host loads it from the cache, and it still denies.
    let tmp = folder.join("plugin.back");
    std::fs::write(&tmp, &pinned).unwrap();
    std::fs::rename(&tmp, folder.join("plugin.wasm")).unwrap();
    let host = Host::builder().cache_dir(cache.path()).build().unwrap();
    let plugins = host.load_dir(dir.path()).unwrap();
    assert_eq!(
        denial_of_ls(&plugins).as_deref(),
        Some("scripted-deny"),
        "the cache holds other code under the pinned digest"
    );
}

/// The reason code of the plugins' denial of `ls` in a new session (`None`: not denied).
fn denial_of_ls(plugins: &palisade::Plugins) -> Option<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let call = palisade::ToolCall::new("t", "Bash", serde_json::json!({ "command": "ls" }));
    let decision = runtime.block_on(plugins.session("s").pre_tool(&call));
    decision.denial().map(|d| d.reason_code.clone())
}

/// The packs of the compiled-function cache under `cache`: path and size.
fn function_packs(cache: &std::path::Path) -> Vec<(std::path::PathBuf, u64)> {
    let mut packs: Vec<_> = walk(cache)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pack"))
        .map(|p| {
            let len = std::fs::metadata(&p).unwrap().len();
            (p, len)
        })
        .collect();
    packs.sort();
    packs
}

#[test]
fn a_component_rebuilt_with_the_same_code_compiles_from_the_function_cache() {
    let dir = PluginDir::new();
    let folder = dir.scripted(
        "p",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n[config]\npre_tool = \"deny\"\n",
    );
    let cache = tempfile::tempdir().unwrap();
    let load = || {
        let host = Host::builder().cache_dir(cache.path()).build().unwrap();
        let plugins = host.load_dir(dir.path()).unwrap();
        assert_eq!(denial_of_ls(&plugins).as_deref(), Some("scripted-deny"));
    };
    load();
    let first = function_packs(cache.path());
    assert_eq!(first.len(), 1, "one compile, one pack: {first:?}");

    // Rebuilt: the same code with other bytes (a custom section appended, as a snapshot's
    // data would differ), so another digest and a compile, which finds its functions in the
    // pack. (Not quite all: wasmtime's translation of a few functions varies from one compile
    // to the next, and those are compiled again.)
    let wasm = folder.join("plugin.wasm");
    let mut bytes = std::fs::read(&wasm).unwrap();
    bytes.extend_from_slice(&[0, 6, 5, b'b', b'u', b'i', b'l', b'd']);
    std::fs::write(&wasm, &bytes).unwrap();
    load();
    let (pack, len) = first[0].clone();
    let added: u64 = function_packs(cache.path())
        .iter()
        .filter(|(p, _)| *p != pack)
        .map(|(_, len)| len)
        .sum();
    assert!(
        added < len / 4,
        "the rebuilt component compiled {added} bytes of functions anew, of {len}"
    );

    // A pack that does not verify is never used: deleted, its functions compiled again.
    let mut forged = std::fs::read(&pack).unwrap();
    let middle = forged.len() / 2;
    forged[middle] ^= 0x55;
    std::fs::write(&pack, &forged).unwrap();
    bytes.extend_from_slice(&[0, 6, 5, b'a', b'g', b'a', b'i', b'n']);
    std::fs::write(&wasm, &bytes).unwrap();
    load();
    let again = function_packs(cache.path());
    assert!(!pack.exists(), "the forged pack is still there: {again:?}");
    assert!(
        again.iter().any(|(_, new)| *new > len / 2),
        "the functions of the forged pack were not compiled again: {again:?}"
    );
}

#[test]
fn a_cache_key_others_can_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let cache = tempfile::tempdir().unwrap();
    Host::builder().cache_dir(cache.path()).build().unwrap();
    let key = cache.path().join("key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = Host::builder()
        .cache_dir(cache.path())
        .build()
        .unwrap_err()
        .to_string();
    assert!(err.contains("can be read by other users"), "{err}");
}

#[test]
fn a_state_grant_is_checked_field_by_field_and_only_a_component_may_have_one() {
    let dir = PluginDir::new();
    dir.scripted(
        "bad-scope",
        "[state]\nscopes = [\"session\", \"everyone\"]\nshared = \"Team Budget\"\n[[hooks]]\n\
         point = \"pre-tool\"\ncapability = \"guard\"\n",
    );
    dir.scripted(
        "no-scope",
        "[state]\nscopes = []\nmax_keys = 0\nmax_bytes = 999999999999\n[[hooks]]\n\
         point = \"pre-tool\"\ncapability = \"guard\"\n",
    );
    dir.raw(
        "command",
        &[(
            "plugin.toml",
            b"name = \"command\"\ncommand = \"true\"\n[state]\nscopes = [\"session\"]\n\
              [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n",
        )],
    );
    let found: Vec<(String, String)> = problems(&dir)
        .into_iter()
        .map(|p| (p.field.unwrap_or_default(), p.message))
        .collect();
    for (field, message) in [
        ("state.scopes", "unknown state scope `everyone`"),
        ("state.shared", "invalid state namespace `Team Budget`"),
        ("state.scopes", "`[state]` grants no scope"),
        ("state.max_keys", "a state scope of 0 keys is out of range"),
        (
            "state.max_bytes",
            "a state scope of 999999999999 bytes is out of range",
        ),
        ("state", "`[state]` applies to wasm components only"),
    ] {
        assert!(
            found.iter().any(|(f, m)| f == field && m == message),
            "missing {field}: {message} in {found:#?}"
        );
    }
}

/// A process that serves one event loads only the plugins with a hook that would run for it:
/// on one of its points and, where the point has a tool, with a matcher that takes the event's
/// tool. A plugin that only guards shell commands is not loaded for a `Read` (nor compiled, nor
/// its component read): even a broken one, which the events it guards still refuse.
#[test]
fn an_event_about_a_tool_loads_only_the_plugins_whose_matchers_take_it() {
    use palisade::Point;
    let dir = PluginDir::new();
    dir.scripted("every-tool", PRE_TOOL_GUARD);
    dir.raw(
        "shell-only",
        &[
            (
                "plugin.toml",
                manifest(
                    "shell-only",
                    &format!("{PRE_TOOL_GUARD}matcher = \"Bash|shell\"\n"),
                )
                .as_bytes(),
            ),
            ("plugin.wasm", b"\0asm not a component"),
        ],
    );
    dir.scripted(
        "prompts",
        "[[hooks]]\npoint = \"prompt-submit\"\ncapability = \"guard\"\n",
    );
    let host = palisade_tests::host().build().unwrap();
    let names = |plugins: &palisade::Plugins| -> Vec<String> {
        plugins.iter().map(|p| p.name().to_string()).collect()
    };
    let pre_tool = [Point::ToolCallCommitted, Point::PreTool, Point::ToolGuard];
    let read = host
        .load(LoadRequest::dir(dir.path()).points(&pre_tool).tool("Read"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(names(&read), ["every-tool"]);
    // The tool it guards: loaded, and refused as broken.
    let Err(Error::Invalid { problems }) =
        host.load(LoadRequest::dir(dir.path()).points(&pre_tool).tool("Bash"))
    else {
        panic!("a broken plugin that guards Bash loaded for a Bash event");
    };
    assert!(
        problems
            .iter()
            .any(|p| p.path.ends_with("shell-only/plugin.wasm")),
        "{problems:#?}"
    );
    // Without a tool, every plugin on the points.
    assert!(
        host.load(LoadRequest::dir(dir.path()).points(&pre_tool))
            .is_err()
    );
    // A point with no tool: its plugins, whatever their matchers elsewhere.
    let prompt = host
        .load(
            LoadRequest::dir(dir.path())
                .points(&[Point::PromptSubmit])
                .tool("Read"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(names(&prompt), ["prompts"]);
}
