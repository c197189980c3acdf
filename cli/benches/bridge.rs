//! Cost of one Claude Code hook event, as Claude Code pays it: a new process per event,
//! measured from spawn to exit, side by side with the hooks Palisade replaces.
//!
//! - `palisade claude-code DIR`: start, load the plugins from the compiled component cache,
//!   dispatch `PreToolUse`, answer, exit. With the two plugin sets of five (see
//!   `support/plugin_sets.rs`) and the whole `example-plugins/` directory (its Python
//!   `url-guard` and its command hook `no-force-push` included; build it first with
//!   `scripts/build-examples.sh --no-languages`); each as the bridges run (no instance pool)
//!   and with the pool the long-lived hosts have (`PALISADE_INSTANCE_POOL=1000`), which
//!   shows why the bridges have none.
//! - The same rules as shell-guard and secret-guard written as a typical Claude Code hook in
//!   bash + jq + grep, in Python and in Node (each given the same event on stdin).
//!
//! The event is a `PreToolUse` of `Bash` as Claude Code writes it; the whole directory is
//! measured with a `PreToolUse` of `Read` too, which loads only the plugins whose matchers
//! take `Read`. The cache is filled once before measuring (as the first event of a session
//! does).
//!
//! Run: `cargo bench -p palisade-cli --bench bridge`. The bench's `palisade` is built with the
//! bench profile; to measure the installed binary beside it in the same run (the `dist`
//! profile, with whole-program LTO), build it and name it (a path from the workspace root):
//! `cargo build --profile dist -p palisade-cli --bin palisade` then
//! `PALISADE_BENCH_DIST_BIN=target/dist/palisade cargo bench -p palisade-cli --bench bridge`.
//! The static build (`scripts/install-static.sh --root target/static`) is measured beside them
//! with `PALISADE_BENCH_STATIC_BIN=target/static/bin/palisade`.

#[path = "support/plugin_sets.rs"]
mod plugin_sets;

use criterion::{Criterion, criterion_group, criterion_main};
use plugin_sets::{EVENT, binaries, event_in_session, plugin_sets};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

/// Runs `command` with `input` on stdin; its output.
fn run(mut command: Command, input: &str) -> std::process::Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {command:?}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// The event, in a session of its own: each measured event is an allowed one. (With one
/// session for all, `example-plugins/`'s `bash-budget` would deny every event after its
/// 50th, and its denial would skip the hooks after it — the Python `url-guard` and the shell
/// hook among them.)
fn event_of_a_new_session() -> String {
    static SESSIONS: AtomicU64 = AtomicU64::new(0);
    event_in_session(SESSIONS.fetch_add(1, Ordering::Relaxed))
}

fn palisade(bin: &Path, dir: &Path, cache: &Path, pool: bool) -> Command {
    let mut command = Command::new(bin);
    command
        .arg("claude-code")
        .arg(dir)
        .env("PALISADE_CACHE_DIR", cache)
        // The bench's own plugin state (bash-budget's counts), never the user's.
        .env("PALISADE_STATE_DIR", cache.with_file_name("state"));
    if pool {
        command.env("PALISADE_INSTANCE_POOL", "1000");
    }
    command
}

/// The rules of shell-guard and secret-guard, as people write them for Claude Code.
const BASH_HOOK: &str = r#"#!/usr/bin/env bash
input=$(cat)
tool=$(jq -r '.tool_name' <<<"$input")
command=$(jq -r '.tool_input.command // empty' <<<"$input")
file=$(jq -r '.tool_input.file_path // empty' <<<"$input")
deny() {
  jq -n --arg why "$1" '{hookSpecificOutput: {hookEventName: "PreToolUse",
    permissionDecision: "deny", permissionDecisionReason: $why}}'
  exit 0
}
if [ "$tool" = Bash ] && grep -qE 'rm -rf /|curl [^|]*\| *(ba)?sh|git push (-f|--force)|mkfs|dd if=' <<<"$command"; then
  deny "dangerous command"
fi
if grep -qE '(^|/)\.env$|id_rsa|\.pem$|\.aws/credentials' <<<"$file$command"; then
  deny "secret file"
fi
exit 0
"#;

const PYTHON_HOOK: &str = r#"import json, re, sys
event = json.load(sys.stdin)
tool_input = event.get("tool_input", {})
command = tool_input.get("command", "")
target = tool_input.get("file_path", "") + command
def deny(why):
    print(json.dumps({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": why}}))
    sys.exit(0)
if event.get("tool_name") == "Bash" and re.search(r"rm -rf /|curl [^|]*\| *(ba)?sh|git push (-f|--force)|mkfs|dd if=", command):
    deny("dangerous command")
if re.search(r"(^|/)\.env$|id_rsa|\.pem$|\.aws/credentials", target):
    deny("secret file")
"#;

const NODE_HOOK: &str = r#"let input = "";
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  const event = JSON.parse(input);
  const command = event.tool_input?.command ?? "";
  const target = (event.tool_input?.file_path ?? "") + command;
  const deny = (why) => {
    console.log(JSON.stringify({ hookSpecificOutput: { hookEventName: "PreToolUse",
      permissionDecision: "deny", permissionDecisionReason: why } }));
    process.exit(0);
  };
  if (event.tool_name === "Bash" && /rm -rf \/|curl [^|]*\| *(ba)?sh|git push (-f|--force)|mkfs|dd if=/.test(command)) deny("dangerous command");
  if (/(^|\/)\.env$|id_rsa|\.pem$|\.aws\/credentials/.test(target)) deny("secret file");
});
"#;

/// The repository's `example-plugins/`, built.
fn example_plugins() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../example-plugins");
    assert!(
        dir.join("url-guard/url_guard.wasm").is_file()
            && dir.join("shell-guard/shell_guard.wasm").is_file(),
        "example-plugins/ is not built: run `scripts/build-examples.sh --no-languages` first"
    );
    dir
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let [first, second] = plugin_sets(dir.path());
    let sets = [first, second, ("example-plugins", example_plugins())];
    let hooks = dir.path().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for (name, text) in [
        ("hook.sh", BASH_HOOK),
        ("hook.py", PYTHON_HOOK),
        ("hook.js", NODE_HOOK),
    ] {
        std::fs::write(hooks.join(name), text).unwrap();
    }
    let shell_hooks: [(&str, &str, PathBuf); 3] = [
        ("bash + jq + grep", "bash", hooks.join("hook.sh")),
        ("python3", "python3", hooks.join("hook.py")),
        ("node", "node", hooks.join("hook.js")),
    ];
    // The bench profile's binary, and the installed (`dist`) one when it is named.
    let binaries = binaries();
    let mut group = c.benchmark_group("bridge");
    group.sample_size(30);
    // The floor: starting and exiting the same binary, no engine, no plugins.
    for (suffix, bin) in &binaries {
        group.bench_function(format!("baseline: palisade --version{suffix}"), |b| {
            b.iter(|| {
                let out = Command::new(bin).arg("--version").output().unwrap();
                assert!(out.status.success());
            })
        });
    }
    for (name, program, script) in &shell_hooks {
        let hook = || {
            let mut command = Command::new(program);
            command.arg(script);
            command
        };
        // The hook judges: the event passes, a dangerous one is denied.
        let passed = run(hook(), EVENT);
        assert!(
            passed.status.success() && passed.stdout.is_empty(),
            "{passed:?}"
        );
        let denied = run(hook(), &EVENT.replace("cargo test --workspace", "rm -rf /"));
        assert!(
            String::from_utf8_lossy(&denied.stdout).contains("\"deny\""),
            "{name} (is {program} installed? jq?): {denied:?}"
        );
        group.bench_function(format!("shell hook: {name}"), |b| {
            b.iter(|| assert!(run(hook(), EVENT).status.success()))
        });
    }
    // Every binary as the bridges run it, one after the other for each set (this VM drifts
    // within minutes: what is compared is measured close together); then the pool, with the
    // first binary only.
    let mut runs = Vec::new();
    for (name, plugins) in &sets {
        for (suffix, bin) in &binaries {
            runs.push((*suffix, bin, false, name, plugins));
        }
    }
    for (name, plugins) in &sets {
        runs.push(("", &binaries[0].1, true, name, plugins));
    }
    for (suffix, bin, pool, name, plugins) in runs {
        // The first event compiles and caches (with the budget of a first event that
        // compiles a Python interpreter on a slow machine); every later one loads from
        // the cache.
        let mut filling = palisade(bin, plugins, &cache, pool);
        filling.args(["--budget-ms", "600000"]);
        let first = run(filling, EVENT);
        assert!(first.status.success(), "{first:?}");
        // A denied event, to check the bridge really dispatches.
        let denied = run(
            palisade(bin, plugins, &cache, pool),
            &EVENT.replace("cargo test --workspace", "rm -rf /"),
        );
        assert!(
            String::from_utf8_lossy(&denied.stdout).contains("\"deny\""),
            "{denied:?}"
        );
        let label = if pool { "a pool of 1000" } else { "no pool" };
        group.bench_function(
            format!("palisade claude-code{suffix}, cold process, {name}, {label}"),
            |b| {
                b.iter(|| {
                    let out = run(
                        palisade(bin, plugins, &cache, pool),
                        &event_of_a_new_session(),
                    );
                    assert!(
                        out.status.success()
                            && !String::from_utf8_lossy(&out.stdout).contains("\"deny\""),
                        "{out:?}"
                    );
                })
            },
        );
    }
    // Most of an agent's tool calls are not shell commands: a `Read` loads none of the
    // plugins that guard only shell commands (the Python `url-guard`, the shell hook,
    // `bash-budget`, `policy-file-guard`, `shell-guard`).
    let read = EVENT.replace("\"Bash\"", "\"Read\"").replace(
        "\"command\":\"cargo test --workspace\"",
        "\"file_path\":\"src/lib.rs\"",
    );
    let (name, plugins) = &sets[2];
    for (suffix, bin) in &binaries {
        group.bench_function(
            format!("palisade claude-code{suffix}, cold process, {name}, a Read event"),
            |b| {
                b.iter(|| {
                    let out = run(palisade(bin, plugins, &cache, false), &read);
                    assert!(out.status.success(), "{out:?}");
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
