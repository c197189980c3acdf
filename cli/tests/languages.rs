//! The four-language examples (`example-plugins/languages/`): path-guard and tool-tally written
//! in Rust, Python, JavaScript and C, each built from source here with its language's own
//! toolchain, must all pass the same cases (`cases.jsonl`: the same decisions, messages and
//! log lines).

use std::process::Command;

use crate::toolchain;
use toolchain::{toolchain, workspace};

/// The `palisade` just built, with the tests' component cache.
fn palisade() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_palisade"));
    command.env("PALISADE_CACHE_DIR", toolchain::component_cache());
    command
}

/// Builds the plugins of `lang` into a fresh plugin directory with the language's build.sh.
fn build(lang: &str) -> tempfile::TempDir {
    let out = tempfile::tempdir().unwrap();
    let script = workspace().join(format!("example-plugins/languages/{lang}/build.sh"));
    let mut command = Command::new("bash");
    command.arg(&script).arg(out.path());
    command.envs(toolchain(lang));
    let output = command.output().expect("bash runs");
    assert!(
        output.status.success(),
        "{} failed:\n{}{}",
        script.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    out
}

/// Builds `lang`'s plugins and runs the shared cases against them with `palisade test`.
fn passes_the_shared_cases(lang: &str) {
    let dir = build(lang);
    for plugin in ["path-guard", "tool-tally"] {
        assert!(
            dir.path().join(plugin).join("plugin.toml").exists(),
            "{lang}: {plugin} was not built"
        );
    }
    let cases = workspace().join("example-plugins/languages/cases.jsonl");
    let output = palisade()
        .arg("test")
        .arg(dir.path())
        .arg(&cases)
        .output()
        .expect("palisade runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{lang}: the shared cases fail:\n{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let expected = std::fs::read_to_string(&cases)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('{'))
        .count();
    assert!(
        stdout.contains(&format!("cases: {expected} passed, 0 failed")),
        "{lang}: not every case ran:\n{stdout}"
    );
    answers_alike_in_one_session(lang, dir.path(), &cases);
}

/// Every `pre-tool` case of `cases` answered twice over in one session, by per-session
/// instances that live through all of them, as each is answered in a session of its own
/// (which `palisade test` checked against the cases). A plugin keeps what it may between
/// calls — the examples read their `[config]` at an instance's first call and keep it — and
/// nothing it keeps may change a later call's answer.
fn answers_alike_in_one_session(lang: &str, dir: &std::path::Path, cases: &std::path::Path) {
    let calls: Vec<palisade::ToolCall> = std::fs::read_to_string(cases)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|case| case["point"] == "pre-tool")
        .map(|case| {
            let input = &case["input"];
            palisade::ToolCall::new(
                input["tool_use_id"].as_str().unwrap(),
                input["name"].as_str().unwrap(),
                input["arguments"].clone(),
            )
        })
        .collect();
    assert!(calls.len() > 3, "{lang}: too few pre-tool cases");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let host = palisade::Host::builder()
            .cache_dir(toolchain::component_cache())
            .build()
            .unwrap();
        let plugins = host.load_dir(dir).unwrap();
        let mut alone = Vec::new();
        for (i, call) in calls.iter().enumerate() {
            alone.push(plugins.session(format!("alone-{i}")).pre_tool(call).await);
        }
        // The cases allow, deny and ask: a plugin that answered nothing would not pass here.
        for kind in ["Allow", "Deny", "Ask"] {
            assert!(
                alone.iter().any(|d| format!("{d:?}").starts_with(kind)),
                "{lang}: no case answered {kind}: {alone:?}"
            );
        }
        let session = plugins.session("one-session");
        for round in 1..=2 {
            for (call, expected) in calls.iter().zip(&alone) {
                assert_eq!(
                    &session.pre_tool(call).await,
                    expected,
                    "{lang}: {} {} answered otherwise in round {round} of one session than \
                     in a session of its own",
                    call.name,
                    call.arguments,
                );
            }
        }
    });
}

#[test]
fn rust_examples_pass_the_shared_cases() {
    passes_the_shared_cases("rust");
}

#[test]
fn python_examples_pass_the_shared_cases() {
    passes_the_shared_cases("python");
}

#[test]
fn javascript_examples_pass_the_shared_cases() {
    let started = std::time::SystemTime::now();
    passes_the_shared_cases("js");
    // componentize-js pre-initialises with wizer, whose wasmtime cache would go to the user's
    // ~/.cache/wasmtime (it ignores HOME: componentize-js gives it an empty environment);
    // the test toolchain keeps it in the build tree (scripts/tools.sh). A hit rewrites an
    // entry's `.stats`, so even a warm user cache shows a write.
    let written = written_since(&user_wasmtime_cache(), started);
    assert!(
        written.is_empty(),
        "building the JavaScript examples wrote into the user's wasmtime cache: {written:?}"
    );
}

/// `~/.cache/wasmtime` of the user the tests run as (where a wasmtime embedding that has no
/// environment keeps its cache).
fn user_wasmtime_cache() -> std::path::PathBuf {
    let home = std::env::var_os("HOME").expect("HOME is set");
    std::path::Path::new(&home).join(".cache/wasmtime")
}

/// The files under `dir` modified at or after `since` (none when `dir` does not exist).
fn written_since(dir: &std::path::Path, since: std::time::SystemTime) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                pending.push(entry.path());
            } else if meta.modified().is_ok_and(|m| m >= since) {
                found.push(entry.path());
            }
        }
    }
    found
}

#[test]
fn c_examples_pass_the_shared_cases() {
    passes_the_shared_cases("c");
}

/// `palisade new NAME --lang LANG` in a fresh folder, then its own build.sh, `palisade check .`
/// and `palisade test . cases.jsonl`, as its README says.
fn scaffold_builds_and_passes(lang: &str) {
    let parent = tempfile::tempdir().unwrap();
    // The tutorials' name where a plugin is a file of its own folder: the same source makes
    // the same component, compiled once. Rust plugins share a target directory (below), where
    // two crates of one name would overwrite each other's component.
    let name = match lang {
        "rust" => "my-rust-guard",
        _ => "my-guard",
    };
    let run = |cmd: &mut Command, what: &str| -> String {
        let output = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(output.status.success(), "{lang}: {what} failed:\n{said}");
        said
    };
    let said = run(
        palisade()
            .args(["new", name, "--lang", lang])
            .current_dir(parent.path()),
        "palisade new",
    );
    assert!(said.contains("./build.sh"), "{said}");
    let folder = parent.path().join(name);
    let mut build = Command::new(folder.join("build.sh"));
    build.envs(toolchain(lang));
    if lang == "rust" {
        // The generated crate is a workspace of its own; build.sh honours CARGO_TARGET_DIR.
        build.env("CARGO_TARGET_DIR", toolchain::user_plugin_target());
    }
    run(build.current_dir(&folder), "build.sh");
    let snake = name.replace('-', "_");
    assert!(folder.join(format!("{snake}.wasm")).exists());
    let said = run(
        palisade().args(["check", "."]).current_dir(&folder),
        "palisade check .",
    );
    assert!(said.contains("ok: 1 plugin, 1 hook on 1 point"), "{said}");
    let said = run(
        palisade()
            .args(["test", ".", "cases.jsonl"])
            .current_dir(&folder),
        "palisade test . cases.jsonl",
    );
    assert!(said.contains("cases: 3 passed, 0 failed"), "{said}");
    // A changed policy is caught by the generated cases: they can fail.
    let manifest = folder.join("plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("\"rm -rf /\", ", "")).unwrap();
    let output = palisade()
        .args(["test", ".", "cases.jsonl"])
        .current_dir(&folder)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        !output.status.success() && said.contains("FAIL  a blocked command is denied"),
        "{said}"
    );
}

// The Python and JavaScript scaffolds are built, checked and tested by the tutorials'
// commands, verbatim (`docs::first_hook_in_python`, `docs::first_hook_in_javascript`: the same
// `palisade new`, `./build.sh`, `palisade check .` and `palisade test`, their output
// checked); a second build of each here cost a componentize run (the JavaScript one, a minute
// of the 2-core VM's CPU) and tested nothing more than that the cases can fail, which does
// not depend on the language.
#[test]
fn palisade_new_rust_builds_and_passes_check_and_test() {
    scaffold_builds_and_passes("rust");
}

#[test]
fn palisade_new_c_builds_and_passes_check_and_test() {
    scaffold_builds_and_passes("c");
}

/// A per-call plugin whose instantiation needs its invocation — a C constructor that logs,
/// run by the component's `_initialize` while it is instantiated — is not made ahead of its
/// calls: the spare made after its first call is thrown away (spoiled by the log), the plugin
/// gets no more, and every call instantiates for itself, its `started` line logged as that
/// call's own. The same plugin without the constructor takes spares.
#[test]
fn a_c_plugin_that_logs_while_instantiated_gets_no_spare_instances() {
    let parent = tempfile::tempdir().unwrap();
    let status = palisade()
        .args(["new", "chatty", "--lang", "c"])
        .current_dir(parent.path())
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
    let folder = parent.path().join("chatty");
    let manifest = folder.join("plugin.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("instance = \"per-session\"", "instance = \"per-call\""),
    )
    .unwrap();
    let build = |constructor: bool| {
        let source = folder.join("hook.c");
        let mut text = std::fs::read_to_string(&source).unwrap();
        if constructor {
            text.push_str(
                "\n__attribute__((constructor)) static void at_start(void) {\n  \
                 string_t line;\n  pre_tool_hook_string_set(&line, \"started\");\n  \
                 palisade_hooks_host_log(PALISADE_HOOKS_HOST_LEVEL_INFO, &line);\n}\n",
            );
            std::fs::write(&source, text).unwrap();
        }
        let output = Command::new(folder.join("build.sh"))
            .envs(toolchain("c"))
            .current_dir(&folder)
            .output()
            .unwrap();
        assert!(output.status.success(), "build.sh: {output:?}");
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // Calls with time between them, as an agent makes them: whether each took a spare, and
    // the plugin's log lines.
    let run = || {
        rt.block_on(async {
            let recorder = palisade_tests::Recorder::shared();
            let plugins = palisade::Host::builder()
                .cache_dir(toolchain::component_cache())
                .event_sink(recorder.clone())
                .build()
                .unwrap()
                .load_dir(parent.path())
                .unwrap();
            let plugin = plugins.iter().next().unwrap();
            let session = plugins.session("s");
            let call = palisade::ToolCall::new("t", "Bash", serde_json::json!({"command": "ls"}));
            for _ in 0..3 {
                assert_eq!(
                    session.pre_tool(&call).await,
                    palisade::PreToolDecision::Allow
                );
                palisade_tests::spare_settled(plugin).await;
            }
            (
                plugin.calls_on_spares(),
                plugin.spares_refused(),
                recorder.events(),
            )
        })
    };
    build(false);
    let (on_spares, refused, _) = run();
    assert_eq!((on_spares, refused), (2, false));

    build(true);
    let (on_spares, refused, events) = run();
    assert_eq!((on_spares, refused), (0, true));
    let started: Vec<_> = events
        .iter()
        .filter(|e| {
            matches!(&e.kind, palisade::events::EventKind::PluginLog { message, .. } if message == "started")
        })
        .collect();
    assert_eq!(started.len(), 3, "{events:?}");
    assert!(started.iter().all(|e| e.session_id == "s"), "{started:?}");
}

/// A scaffold outside the checkout builds with what a newcomer has after the README's set-up:
/// a Python one finds the componentize-py the test command installed (not on PATH, no
/// COMPONENTIZE_PY), and a Rust one pins the Rust the guest SDK needs in a
/// `rust-toolchain.toml` of its own, so an older default toolchain does not stop it.
#[test]
fn scaffolds_find_the_tools_the_set_up_installed() {
    let tools = workspace().join("target/tools/venv/bin/componentize-py");
    assert!(
        tools.exists(),
        "{} is missing: run `bash scripts/tools.sh` (scripts/test.sh does)",
        tools.display()
    );
    let parent = tempfile::tempdir().unwrap();
    let new = |name: &str, lang: &str| {
        let out = palisade()
            .args(["new", name, "--lang", lang])
            .current_dir(parent.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        parent.path().join(name)
    };
    let python = new("py-guard", "python");
    let built = Command::new(python.join("build.sh"))
        .env_remove("COMPONENTIZE_PY")
        .env("PATH", "/usr/bin:/bin")
        .current_dir(&python)
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    assert!(python.join("py_guard.wasm").exists());
    let rust = new("rs-guard", "rust");
    let pinned = std::fs::read_to_string(rust.join("rust-toolchain.toml")).unwrap();
    let ours = std::fs::read_to_string(workspace().join("rust-toolchain.toml")).unwrap();
    let channel = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("channel = "))
            .map(str::to_string)
    };
    assert_eq!(channel(&pinned), channel(&ours), "{pinned}");
    assert!(pinned.contains("wasm32-wasip2"), "{pinned}");
}
