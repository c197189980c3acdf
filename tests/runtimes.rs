//! Conformance across the runtime families: the same manifest body, run as a wasm component
//! (the scripted guest), a command (its `scripted-hook` twin) or an HTTP endpoint (the same
//! behaviour behind 127.0.0.1), gives the same decisions, ordering, failures and lifecycle
//! events. Then what only command and HTTP hooks have: the payload bound, strict answers,
//! exit statuses, and a deadline that holds whatever the process does.

use palisade::events::EventKind;
use palisade::{
    FailureReason, GuardDecision, PreStep, PreStepDecision, PreToolDecision, SessionSource,
    StopEvent, ToolCall, ToolOutcome,
};
use palisade_tests::external::HookServer;
use palisade_tests::{PluginDir, load, load_recorded};
use serde_json::json;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Runtime {
    Wasm,
    /// A command speaking Claude Code's protocol (the default).
    Command,
    /// An endpoint speaking Claude Code's protocol.
    Http,
    /// A command speaking Palisade's own protocol (`protocol = "palisade"`).
    NativeCommand,
    /// An endpoint speaking Palisade's own protocol.
    NativeHttp,
}

const ALL: [Runtime; 5] = [
    Runtime::Wasm,
    Runtime::Command,
    Runtime::Http,
    Runtime::NativeCommand,
    Runtime::NativeHttp,
];
const EXTERNAL: [Runtime; 2] = [Runtime::Command, Runtime::Http];
const EXTERNAL_BOTH_PROTOCOLS: [Runtime; 4] = [
    Runtime::Command,
    Runtime::Http,
    Runtime::NativeCommand,
    Runtime::NativeHttp,
];

const HOOK_BIN: &str = env!("CARGO_BIN_EXE_scripted-hook");

fn server() -> &'static HookServer {
    static SERVER: OnceLock<HookServer> = OnceLock::new();
    SERVER.get_or_init(HookServer::start)
}

/// Adds plugin `name` running in `runtime`, with `body` (hooks, limits, config) as the rest
/// of its manifest.
fn add(dir: &PluginDir, runtime: Runtime, name: &str, body: &str) {
    add_with(dir, runtime, name, &[], body);
}

/// As [`add`], with extra arguments for the command.
fn add_with(dir: &PluginDir, runtime: Runtime, name: &str, args: &[&str], body: &str) {
    match runtime {
        Runtime::Wasm => {
            dir.scripted(name, body);
        }
        Runtime::Command | Runtime::NativeCommand => {
            let argv: Vec<String> = std::iter::once(HOOK_BIN)
                .chain(args.iter().copied())
                .map(|a| format!("{a:?}"))
                .collect();
            let manifest = format!(
                "name = \"{name}\"\ncommand = [{}]\n{}{body}",
                argv.join(", "),
                protocol(runtime)
            );
            dir.raw(name, &[("plugin.toml", manifest.as_bytes())]);
        }
        Runtime::Http | Runtime::NativeHttp => {
            let manifest = format!(
                "name = \"{name}\"\nurl = \"{}\"\n{}{body}",
                server().url,
                protocol(runtime)
            );
            dir.raw(name, &[("plugin.toml", manifest.as_bytes())]);
        }
    }
}

/// The manifest line naming the protocol of `runtime`, if not the default.
fn protocol(runtime: Runtime) -> &'static str {
    match runtime {
        Runtime::NativeCommand | Runtime::NativeHttp => "protocol = \"palisade\"\n",
        _ => "",
    }
}

fn hook(point: &str, capability: &str, matcher: Option<&str>) -> String {
    let mut text = format!("[[hooks]]\npoint = \"{point}\"\ncapability = {capability}\n");
    if let Some(m) = matcher {
        text.push_str(&format!("matcher = \"{m}\"\n"));
    }
    text
}

fn call(name: &str) -> ToolCall {
    ToolCall::new("t1", name, json!({ "command": "ls" }))
}

fn denial(decision: PreToolDecision) -> palisade::Denial {
    match decision {
        PreToolDecision::Deny(d) => d,
        other => panic!("expected a deny, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_point_decides_the_same_in_every_runtime() {
    for runtime in ALL {
        let dir = PluginDir::new();
        let guard = "\"guard\"";
        let add_hook = |name: &str, hook: String, config: &str| {
            add(&dir, runtime, name, &format!("{hook}[config]\n{config}\n"));
        };
        add_hook(
            "p-deny",
            hook("pre-tool", guard, Some("DenyMe")),
            "pre_tool = \"deny\"",
        );
        add_hook(
            "p-ask",
            hook("pre-tool", guard, Some("AskMe")),
            "pre_tool = \"ask\"",
        );
        add_hook(
            "p-guard",
            hook("tool-guard", guard, Some("GuardMe")),
            "tool_guard = \"deny\"",
        );
        add_hook(
            "p-start",
            hook("session-start", "\"transform\"", None),
            "contexts = [\"hello\"]",
        );
        add_hook(
            "p-prompt",
            hook("prompt-submit", "[\"guard\", \"transform\"]", None),
            "contexts = [\"remember\"]",
        );
        add_hook(
            "p-post",
            hook("post-tool", "[\"guard\", \"transform\"]", Some("BlockMe")),
            "post_tool = \"block\"\ncontexts = [\"after\"]",
        );
        add_hook(
            "p-stop",
            hook("turn-stopping", "\"steer\"", None),
            "turn_stopping = \"steer\"",
        );
        let plugins = load(&dir);
        let session = plugins.session("s");
        let at = format!("{runtime:?}");

        let d = denial(session.pre_tool(&call("DenyMe")).await);
        assert_eq!(
            (d.hook_id.as_str(), d.message.as_str()),
            ("p-deny/pre-tool", "denied DenyMe"),
            "{at}"
        );
        match session.pre_tool(&call("AskMe")).await {
            PreToolDecision::Ask(ask) => {
                assert_eq!(
                    (ask.hook_id.as_str(), ask.reason.as_str()),
                    ("p-ask/pre-tool", "may AskMe run?"),
                    "{at}"
                )
            }
            other => panic!("{at}: expected an ask, got {other:?}"),
        }
        assert_eq!(
            session.pre_tool(&call("Other")).await,
            PreToolDecision::Allow,
            "{at}"
        );
        match session.tool_guard(&call("GuardMe")).await {
            GuardDecision::Deny(d) => assert_eq!(d.message, "GuardMe is never allowed", "{at}"),
            other => panic!("{at}: expected a deny, got {other:?}"),
        }
        let contexts = session.session_start(SessionSource::Startup).await;
        let texts: Vec<_> = contexts
            .iter()
            .map(|c| (c.hook_id.as_str(), c.text.as_str()))
            .collect();
        assert_eq!(
            texts,
            [("p-start/session-start", "hello (SessionSource::Startup)")],
            "{at}"
        );
        let step = PreStep {
            messages: vec![palisade::Message::user("hi")],
            turn: 1,
            step: 1,
        };
        match session.prompt_submit(&step).await {
            PreStepDecision::Enter { contexts, .. } => {
                let texts: Vec<_> = contexts.iter().map(|c| c.text.as_str()).collect();
                assert_eq!(texts, ["remember"], "{at}");
            }
            other => panic!("{at}: expected enter, got {other:?}"),
        }
        let result = session
            .post_tool(&call("BlockMe"), &ToolOutcome::text("out"))
            .await;
        let blocked = result
            .blocked
            .unwrap_or_else(|| panic!("{at}: not blocked"));
        assert_eq!(blocked.message, "blocked BlockMe: out", "{at}");
        let texts: Vec<_> = result.contexts.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts, ["after"], "{at}");
        let steering = session
            .turn_stopping(&StopEvent {
                turn: 3,
                step: 2,
                last_assistant_message: Some("done".into()),
                continuations: 0,
            })
            .await;
        let texts: Vec<_> = steering.iter().map(|s| s.content.as_str()).collect();
        assert_eq!(texts, ["keep going (turn 3)"], "{at}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn order_and_the_first_denial_hold_across_runtimes() {
    // One waterfall over all three runtimes: priority order, then the first denial stops
    // the remaining foreground and background hooks.
    let dir = PluginDir::new();
    let body = |priority: i32, behaviour: &str, tag: &str| {
        format!(
            "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\npriority = {priority}\n\
             [config]\npre_tool = \"{behaviour}\"\ntag = \"{tag}\"\n"
        )
    };
    add(&dir, Runtime::Http, "a", &body(2, "allow", "a"));
    add(&dir, Runtime::Wasm, "b", &body(1, "allow", "b"));
    add(&dir, Runtime::Command, "c", &body(3, "deny", "c"));
    add(&dir, Runtime::Wasm, "d", &body(4, "allow", "d"));
    add(
        &dir,
        Runtime::Http,
        "e",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"observe\"\nmode = \"background\"\n\
         priority = 5\n[config]\ntag = \"e\"\n",
    );
    let (plugins, recorder) = load_recorded(&dir);
    let session = plugins.session("s");
    let d = denial(session.pre_tool(&call("Bash")).await);
    assert_eq!(d.hook_id, "c/pre-tool");
    session.drain_background().await;
    assert_eq!(recorder.logs(), ["b", "a", "c"]);
    let lifecycle: Vec<_> = recorder
        .lifecycle()
        .into_iter()
        .map(|(event, hook)| format!("{event} {hook}"))
        .collect();
    assert_eq!(
        lifecycle,
        [
            "hook_started b/pre-tool",
            "hook_completed b/pre-tool",
            "hook_started a/pre-tool",
            "hook_completed a/pre-tool",
            "hook_started c/pre-tool",
            "hook_denied c/pre-tool",
        ]
    );
    let denied = recorder
        .events()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::HookDenied {
                reason_code,
                message,
                ..
            } => Some((reason_code, message)),
            _ => None,
        })
        .unwrap();
    assert_eq!(denied, ("deny".to_string(), "denied Bash".to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn failures_fail_closed_in_every_runtime() {
    for runtime in ALL {
        let dir = PluginDir::new();
        let guard = |matcher: &str, extra: &str, config: &str| {
            format!(
                "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"{matcher}\"\n\
                 {extra}\n[config]\n{config}\n"
            )
        };
        add(
            &dir,
            runtime,
            "slow",
            &guard("Slow", "timeout_ms = 300", "pre_tool = \"sleep\""),
        );
        add(
            &dir,
            runtime,
            "crash",
            &guard("Crash", "", "pre_tool = \"panic\""),
        );
        add(
            &dir,
            runtime,
            "lenient",
            &guard("Lenient", "on_failure = \"allow\"", "pre_tool = \"panic\""),
        );
        add(
            &dir,
            runtime,
            "observer",
            "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"observe\"\nmatcher = \"Observed\"\n\
             [config]\npre_tool = \"deny\"\n",
        );
        let (plugins, recorder) = load_recorded(&dir);
        let session = plugins.session("s");
        let at = format!("{runtime:?}");

        let started = Instant::now();
        let d = denial(session.pre_tool(&call("Slow")).await);
        assert_eq!(d.failure, Some(FailureReason::Timeout), "{at}: {d:?}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{at}: {:?}",
            started.elapsed()
        );

        let d = denial(session.pre_tool(&call("Crash")).await);
        let expected = match runtime {
            Runtime::Wasm => FailureReason::Trap,
            _ => FailureReason::HookError,
        };
        assert_eq!(d.failure, Some(expected), "{at}: {d:?}");
        assert_eq!(d.reason_code, expected.reason_code(), "{at}");

        assert_eq!(
            session.pre_tool(&call("Lenient")).await,
            PreToolDecision::Allow,
            "{at}"
        );

        recorder.clear();
        assert_eq!(
            session.pre_tool(&call("Observed")).await,
            PreToolDecision::Allow,
            "{at}"
        );
        assert!(
            recorder.events().iter().any(|e| matches!(
                &e.kind,
                EventKind::HookFailed {
                    reason: FailureReason::NotGranted,
                    failed_closed: false,
                    ..
                }
            )),
            "{at}: an observer's deny is reported as not-granted: {:?}",
            recorder.events()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_palisade_protocol_carries_reason_codes_and_payloads_and_only_exit_0_answers() {
    for runtime in [Runtime::NativeCommand, Runtime::NativeHttp] {
        let dir = PluginDir::new();
        add(
            &dir,
            runtime,
            "denier",
            &format!(
                "{}[config]\npre_tool = \"deny\"\n",
                hook("pre-tool", "\"guard\"", Some("DenyMe"))
            ),
        );
        add(
            &dir,
            runtime,
            "exit-two",
            &format!(
                "{}[config]\npre_tool = \"exit-2\"\n",
                hook("pre-tool", "\"guard\"", Some("ExitTwo"))
            ),
        );
        let plugins = load(&dir);
        let session = plugins.session("s");
        let at = format!("{runtime:?}");
        // Seed 2: a deny's reason code and structured payload reach the agent, as from wasm.
        let d = denial(session.pre_tool(&call("DenyMe")).await);
        assert_eq!(
            (d.reason_code.as_str(), d.message.as_str(), d.payload),
            (
                "scripted",
                "denied DenyMe",
                Some(json!({ "tool": "DenyMe" }))
            ),
            "{at}"
        );
        assert_eq!(d.failure, None, "{at}");
        // Claude Code's "exit 2 blocks" is not this protocol's: any status but 0 (or an HTTP
        // error) is the hook's failure — which, for a guard, fails closed.
        let d = denial(session.pre_tool(&call("ExitTwo")).await);
        assert_eq!(d.failure, Some(FailureReason::HookError), "{at}: {d:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn command_and_http_answers_are_strict() {
    for runtime in EXTERNAL_BOTH_PROTOCOLS {
        let dir = PluginDir::new();
        let mut cases = vec![
            "invalid-json",
            "patches",
            "rewrite",
            "unknown-field",
            // Seed 2: projections "are serialize-only convenience fields and are never
            // accepted back as authority".
            "projection",
            "huge",
        ];
        for case in &cases {
            add(
                &dir,
                runtime,
                case,
                &format!(
                    "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"{case}\"\n\
                     [config]\npre_tool = \"{case}\"\n"
                ),
            );
        }
        let plugins = load(&dir);
        let session = plugins.session("s");
        for case in cases.drain(..) {
            let d = denial(session.pre_tool(&call(case)).await);
            assert_eq!(
                d.failure,
                Some(FailureReason::InvalidResponse),
                "{runtime:?} {case}: {d:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_statuses_and_http_statuses_mean_what_claude_code_says() {
    let dir = PluginDir::new();
    let guard = |name: &str, behaviour: &str| {
        format!(
            "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"{name}\"\n\
             [config]\npre_tool = \"{behaviour}\"\n"
        )
    };
    add(
        &dir,
        Runtime::Command,
        "exit-two",
        &guard("ExitTwo", "exit-2"),
    );
    add(
        &dir,
        Runtime::Command,
        "exit-one",
        &guard("ExitOne", "exit-1"),
    );
    add(
        &dir,
        Runtime::Http,
        "status",
        &guard("Status", "status-500"),
    );
    let plugins = load(&dir);
    let session = plugins.session("s");
    // Exit 2 is a decision: a deny, its reason stderr.
    let d = denial(session.pre_tool(&call("ExitTwo")).await);
    assert_eq!(
        (d.failure, d.message.as_str()),
        (None, "blocked ExitTwo by exit status 2")
    );
    assert_eq!(d.reason_code, "exit-2");
    // Any other status is the hook's error: a guard's error fails closed.
    let d = denial(session.pre_tool(&call("ExitOne")).await);
    assert_eq!(d.failure, Some(FailureReason::HookError), "{d:?}");
    assert!(d.message.contains("something broke"), "{d:?}");
    let d = denial(session.pre_tool(&call("Status")).await);
    assert_eq!(d.failure, Some(FailureReason::HookError), "{d:?}");
    assert!(d.message.contains("500"), "{d:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn payloads_over_the_bound_never_reach_the_hook() {
    for runtime in EXTERNAL {
        let dir = PluginDir::new();
        add(
            &dir,
            runtime,
            "small",
            "[limits]\npayload_max_bytes = 2048\n[[hooks]]\npoint = \"pre-tool\"\n\
             capability = \"guard\"\n[config]\ntag = \"ran\"\n",
        );
        let (plugins, recorder) = load_recorded(&dir);
        let session = plugins.session("s");
        let small = ToolCall::new("t1", "Bash", json!({ "command": "ls" }));
        assert_eq!(session.pre_tool(&small).await, PreToolDecision::Allow);
        assert_eq!(recorder.logs(), ["ran"], "{runtime:?}");
        recorder.clear();
        let big = ToolCall::new("t2", "Bash", json!({ "command": "x".repeat(4096) }));
        let d = denial(session.pre_tool(&big).await);
        assert_eq!(
            d.failure,
            Some(FailureReason::PayloadTooLarge),
            "{runtime:?}: {d:?}"
        );
        assert!(recorder.logs().is_empty(), "{runtime:?}: the hook ran");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_default_payload_bound_is_128_kib() {
    let dir = PluginDir::new();
    add(
        &dir,
        Runtime::Command,
        "default",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n",
    );
    let plugins = load(&dir);
    let spec = plugins.hooks(palisade::Point::PreTool).next().unwrap().1;
    assert_eq!(spec.limits.payload_max_bytes, 128 * 1024);
    assert_eq!(spec.limits.timeout, Duration::from_millis(5000));
    let session = plugins.session("s");
    let under = ToolCall::new("t", "Bash", json!({ "command": "x".repeat(120 * 1024) }));
    assert_eq!(session.pre_tool(&under).await, PreToolDecision::Allow);
    let over = ToolCall::new("t", "Bash", json!({ "command": "x".repeat(130 * 1024) }));
    let d = denial(session.pre_tool(&over).await);
    assert_eq!(d.failure, Some(FailureReason::PayloadTooLarge));
}

fn alive(pid: &str) -> bool {
    // A killed process may linger a moment as a zombie until its new parent reaps it.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|stat| stat.split_whitespace().nth(2).is_none_or(|s| s != "Z"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_deadline_holds_whatever_the_process_does() {
    let dir = PluginDir::new();
    let pidfile = dir.path().join("child.pid");
    let guard = |matcher: &str| {
        format!(
            "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\nmatcher = \"{matcher}\"\n\
             timeout_ms = 300\n"
        )
    };
    add_with(
        &dir,
        Runtime::Command,
        "unread",
        &["--sleep-unread"],
        &guard("Unread"),
    );
    add_with(
        &dir,
        Runtime::Command,
        "stubborn",
        &["--ignore-sigterm"],
        &guard("Stubborn"),
    );
    add_with(
        &dir,
        Runtime::Command,
        "forker",
        &["--fork", pidfile.to_str().unwrap()],
        &guard("Forker"),
    );
    let plugins = load(&dir);
    let session = plugins.session("s");

    // It never reads its stdin, and the input is larger than a pipe's buffer.
    let started = Instant::now();
    let big = ToolCall::new("t", "Unread", json!({ "command": "x".repeat(100 * 1024) }));
    let d = denial(session.pre_tool(&big).await);
    assert_eq!(d.failure, Some(FailureReason::Timeout), "{d:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    // It ignores SIGTERM.
    let started = Instant::now();
    let d = denial(session.pre_tool(&call("Stubborn")).await);
    assert_eq!(d.failure, Some(FailureReason::Timeout), "{d:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );

    // It answers at once but leaves a child holding its stdout: the answer is read at once,
    // and the child does not outlive the invocation.
    let started = Instant::now();
    assert_eq!(
        session.pre_tool(&call("Forker")).await,
        PreToolDecision::Allow
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    let gone = (0..50).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        !alive(&pid)
    });
    assert!(gone, "the hook's child {pid} outlived the invocation");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_http_hook_fails_closed() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let dir = PluginDir::new();
    dir.raw(
        "gone",
        &[(
            "plugin.toml",
            format!(
                "name = \"gone\"\nurl = \"http://127.0.0.1:{port}/hook\"\n\
                 [[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n"
            )
            .as_bytes(),
        )],
    );
    let plugins = load(&dir);
    let d = denial(plugins.session("s").pre_tool(&call("Bash")).await);
    assert_eq!(d.failure, Some(FailureReason::Unavailable), "{d:?}");
}

#[test]
fn manifests_of_external_hooks_are_checked() {
    let dir = PluginDir::new();
    let hook = "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\n";
    let cases: [(&str, String); 8] = [
        (
            "two",
            format!("wasm = \"p.wasm\"\ncommand = \"./x.sh\"\n{hook}"),
        ),
        ("none", hook.to_string()),
        (
            "fuel",
            format!("command = \"true\"\n[limits]\nfuel = 5\n{hook}"),
        ),
        (
            "wrapper",
            "command = \"true\"\n[[hooks]]\npoint = \"tool-execute\"\ncapability = \"wrap\"\n"
                .to_string(),
        ),
        (
            "escape",
            format!("command = [\"../other/hook.sh\"]\n{hook}"),
        ),
        (
            "scheme",
            format!("url = \"ftp://example.com/hook\"\n{hook}"),
        ),
        (
            "wasm-protocol",
            format!("wasm = \"p.wasm\"\nprotocol = \"palisade\"\n{hook}"),
        ),
        (
            "dialect",
            format!("command = \"true\"\nprotocol = \"gemini\"\n{hook}"),
        ),
    ];
    for (name, body) in &cases {
        dir.raw(
            name,
            &[(
                "plugin.toml",
                format!("name = \"{name}\"\n{body}").as_bytes(),
            )],
        );
    }
    let err = palisade::Host::new()
        .unwrap()
        .load_dir(dir.path())
        .unwrap_err()
        .to_string();
    for needle in [
        "two/plugin.toml: `wasm`: the plugin names 2 runtimes: wasm, command",
        "none/plugin.toml: `wasm`: the plugin names no runtime",
        "fuel/plugin.toml: `limits.fuel`: `limits.fuel` applies to wasm components only",
        "wrapper/plugin.toml: `hooks[0].point`: a tool-execute wrapper must be a wasm component",
        "escape/plugin.toml: `command`: `../other/hook.sh` leads out of the plugin folder",
        "scheme/plugin.toml: `url`: `ftp://example.com/hook` is not an http(s) URL",
        "wasm-protocol/plugin.toml: `protocol`: `protocol` applies to command and HTTP hooks only",
        "dialect/plugin.toml",
    ] {
        assert!(err.contains(needle), "`{needle}` missing from:\n{err}");
    }
}

/// A command plugin `name` running the shell line `line` in its folder.
fn shell_plugin(dir: &PluginDir, name: &str, line: &str, body: &str) -> std::path::PathBuf {
    let manifest = format!("name = \"{name}\"\ncommand = {line:?}\n{body}");
    dir.raw(name, &[("plugin.toml", manifest.as_bytes())])
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_hook_gets_only_the_environment_it_was_given() {
    const GIVEN: [&str; 6] = [
        "PATH",
        "HOME",
        "LANG",
        "PALISADE_HOOK_ID",
        "PALISADE_SESSION_ID",
        "PALISADE_POINT",
    ];
    // The shell sets these itself.
    const SHELL: [&str; 4] = ["PWD", "OLDPWD", "SHLVL", "_"];
    // One of this process's own variables is listed; the others must not reach the hook.
    let mine: Vec<String> = std::env::vars()
        .map(|(name, _)| name)
        .filter(|name| !GIVEN.contains(&name.as_str()) && !SHELL.contains(&name.as_str()))
        .filter(|name| name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    let listed = mine
        .first()
        .cloned()
        .expect("the test process has some environment");
    let dir = PluginDir::new();
    let folder = shell_plugin(
        &dir,
        "envy",
        "env > seen.txt",
        &format!(
            "env = [\"{listed}\"]\n{}",
            hook("pre-tool", "\"guard\"", None)
        ),
    );
    let plugins = load(&dir);
    assert_eq!(
        plugins.session("s").pre_tool(&call("Bash")).await,
        PreToolDecision::Allow
    );
    let seen: Vec<String> = std::fs::read_to_string(folder.join("seen.txt"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('=').map(|(n, _)| n.to_string()))
        .collect();
    assert!(seen.contains(&listed), "{listed} was listed: {seen:?}");
    for name in mine.iter().skip(1) {
        assert!(
            !seen.contains(name),
            "{name} leaked into the hook: {seen:?}"
        );
    }
}

/// A command line the shell would only split into words (`./hook.sh one two`) starts its
/// program without the shell — a process less for each invocation — and the program gets
/// what the shell would have given it: the event on stdin, its words, its name as written,
/// the environment with the shell's `PWD`; its exit 2 blocks. A file the kernel cannot start
/// (a script without a `#!` line) is run by the shell, as before.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn a_plain_command_line_starts_its_program_without_the_shell() {
    /// A guard running the line `line`, its folder holding the executable `hook.sh`.
    fn script_guard(dir: &PluginDir, line: &str, script: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let manifest = format!(
            "name = \"scripted\"\ncommand = \"{line}\"\n{}",
            hook("pre-tool", "\"guard\"", None)
        );
        let folder = dir.raw(
            "scripted",
            &[
                ("plugin.toml", manifest.as_bytes()),
                ("hook.sh", script.as_bytes()),
            ],
        );
        let permissions = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(folder.join("hook.sh"), permissions).unwrap();
        folder
    }
    let dir = PluginDir::new();
    let script = "#!/bin/sh\n\
        input=$(cat)\n\
        { echo \"parent=$(cat /proc/$PPID/comm)\"; echo \"argv0=$0\"; echo \"args=$*\";\n\
          echo \"pwd=$PWD\"; case \"$input\" in *PreToolUse*) echo 'input=event';; esac;\n\
        } > seen.txt\n\
        echo 'refused by the script' >&2\n\
        exit 2\n";
    let folder = script_guard(&dir, "./hook.sh  one two", script);
    let plugins = load(&dir);
    let d = denial(plugins.session("s").pre_tool(&call("Bash")).await);
    assert_eq!(d.failure, None, "{d:?}");
    assert!(d.message.contains("refused by the script"), "{d:?}");
    let seen = std::fs::read_to_string(folder.join("seen.txt")).unwrap();
    let folder = folder.canonicalize().unwrap();
    let parent = seen.lines().next().unwrap();
    assert!(
        !["parent=sh", "parent=dash", "parent=bash"].contains(&parent),
        "started by a shell: {seen}"
    );
    assert!(
        seen.contains(&format!(
            "argv0=./hook.sh\nargs=one two\npwd={}\ninput=event\n",
            folder.display()
        )),
        "{seen}"
    );

    // No `#!` line: the kernel will not start it; the shell runs it.
    let dir = PluginDir::new();
    let folder = script_guard(
        &dir,
        "./hook.sh",
        "echo ran > ran.txt\necho 'a bare script' >&2\nexit 2\n",
    );
    let plugins = load(&dir);
    let d = denial(plugins.session("s").pre_tool(&call("Bash")).await);
    assert!(d.message.contains("a bare script"), "{d:?}");
    assert_eq!(
        std::fs::read_to_string(folder.join("ran.txt")).unwrap(),
        "ran\n"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_guards_log_line_before_its_json_fails_closed() {
    let dir = PluginDir::new();
    shell_plugin(
        &dir,
        "chatty",
        r#"echo 'checking the command...'; echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}'"#,
        &hook("pre-tool", "\"guard\"", None),
    );
    let plugins = load(&dir);
    let d = denial(plugins.session("s").pre_tool(&call("Bash")).await);
    assert_eq!(d.failure, Some(FailureReason::InvalidResponse), "{d:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_command_hook_takes_its_process_group_with_it() {
    let dir = PluginDir::new();
    let folder = shell_plugin(
        &dir,
        "slow",
        "sleep 30 & echo $! > child.pid; wait",
        &hook("pre-tool", "\"guard\"", None),
    );
    let plugins = load(&dir);
    let session = plugins.session("s");
    // The embedder stops waiting (its own timeout, a cancelled turn): the future is dropped.
    let cancelled =
        tokio::time::timeout(Duration::from_millis(500), session.pre_tool(&call("Bash"))).await;
    assert!(cancelled.is_err());
    let pid = std::fs::read_to_string(folder.join("child.pid")).unwrap();
    let pid = pid.trim();
    let gone = (0..100).any(|_| {
        std::thread::sleep(Duration::from_millis(20));
        !alive(pid)
    });
    assert!(
        gone,
        "the hook's child {pid} outlived its cancelled invocation"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_child_that_escapes_the_group_cannot_hold_the_answer_back() {
    let dir = PluginDir::new();
    shell_plugin(
        &dir,
        "escaper",
        r#"setsid sleep 30 & echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no"}}'"#,
        &format!(
            "{}timeout_ms = 10000\n",
            hook("pre-tool", "\"guard\"", None)
        ),
    );
    let plugins = load(&dir);
    let started = Instant::now();
    let d = denial(plugins.session("s").pre_tool(&call("Bash")).await);
    assert_eq!(d.message, "no", "{d:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the escaped child held the answer back for {:?}",
        started.elapsed()
    );
}

/// The palisade-protocol guard of docs/runtimes.md, run as written there.
#[tokio::test(flavor = "multi_thread")]
async fn the_palisade_protocol_guard_of_the_docs_runs_as_written() {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/runtimes.md"),
    )
    .unwrap();
    let start = doc.find("## The palisade protocol").expect("the section");
    let section = &doc[start..];
    let block = |lang: &str| {
        let open = format!("```{lang}\n");
        let from = section.find(&open).expect("a code block") + open.len();
        section[from..][..section[from..].find("```").unwrap()].to_string()
    };
    let dir = PluginDir::new();
    dir.raw(
        "py-guard",
        &[
            ("plugin.toml", block("toml").as_bytes()),
            ("guard.py", block("python").as_bytes()),
        ],
    );
    let plugins = load(&dir);
    let session = plugins.session("s");
    let d = denial(
        session
            .pre_tool(&ToolCall::new(
                "t1",
                "Bash",
                json!({ "command": "rm -rf / --no-preserve-root" }),
            ))
            .await,
    );
    assert_eq!(
        (d.reason_code.as_str(), d.message.as_str(), d.payload),
        (
            "dangerous-command",
            "`rm -rf /` is not allowed",
            Some(json!({ "pattern": "rm -rf /", "tool_use_id": "t1" }))
        )
    );
    assert_eq!(
        session.pre_tool(&call("Bash")).await,
        PreToolDecision::Allow
    );
}

/// Shadow hooks (`enforce = false`) run as they would, in every runtime, and change nothing:
/// each would-be denial, ask, failure, block, context and steering is recorded as
/// `hook_shadowed` (`would_…`), the outcome is what it would be without them, an enforced
/// guard after them still denies, and a slow one holds the outcome no longer than its own
/// deadline.
#[tokio::test(flavor = "multi_thread")]
async fn shadow_hooks_never_change_an_outcome_in_any_runtime() {
    for runtime in ALL {
        let dir = PluginDir::new();
        let add_shadow = |name: &str, hook: String, config: &str| {
            add(
                &dir,
                runtime,
                name,
                &format!("{hook}enforce = false\n[config]\n{config}\n"),
            );
        };
        let guard = "\"guard\"";
        add_shadow(
            "s-deny",
            hook("pre-tool", guard, Some("DenyMe|Both")),
            "pre_tool = \"deny\"",
        );
        add_shadow(
            "s-ask",
            hook("pre-tool", guard, Some("AskMe")),
            "pre_tool = \"ask\"",
        );
        add_shadow(
            "s-crash",
            hook("pre-tool", guard, Some("Crash")),
            "pre_tool = \"panic\"",
        );
        add_shadow(
            "s-slow",
            format!(
                "{}timeout_ms = 300\n",
                hook("pre-tool", guard, Some("Slow"))
            ),
            "pre_tool = \"sleep\"",
        );
        add_shadow(
            "s-guard",
            hook("tool-guard", guard, Some("GuardMe")),
            "tool_guard = \"deny\"",
        );
        add_shadow(
            "s-start",
            hook("session-start", "\"transform\"", None),
            "contexts = [\"hello\"]",
        );
        add_shadow(
            "s-prompt",
            hook("prompt-submit", "[\"guard\", \"transform\"]", None),
            "contexts = [\"remember\"]",
        );
        add_shadow(
            "s-post",
            hook("post-tool", "[\"guard\", \"transform\"]", Some("BlockMe")),
            "post_tool = \"block\"\ncontexts = [\"after\"]",
        );
        add_shadow(
            "s-stop",
            hook("turn-stopping", "\"steer\"", None),
            "turn_stopping = \"steer\"",
        );
        // Enforced, after the shadow guard: its denial stands.
        add(
            &dir,
            runtime,
            "z-enforced",
            &format!(
                "{}priority = 100\n[config]\npre_tool = \"deny\"\n",
                hook("pre-tool", guard, Some("Both"))
            ),
        );
        let (plugins, recorder) = load_recorded(&dir);
        let session = plugins.session("s");
        let at = format!("{runtime:?}");

        for tool in ["DenyMe", "AskMe", "Crash", "Other"] {
            assert_eq!(
                session.pre_tool(&call(tool)).await,
                PreToolDecision::Allow,
                "{at}: {tool}"
            );
        }
        let started = Instant::now();
        assert_eq!(
            session.pre_tool(&call("Slow")).await,
            PreToolDecision::Allow,
            "{at}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{at}: {:?}",
            started.elapsed()
        );
        let d = denial(session.pre_tool(&call("Both")).await);
        assert_eq!(d.hook_id, "z-enforced/pre-tool", "{at}");
        assert_eq!(
            session.tool_guard(&call("GuardMe")).await,
            GuardDecision::Abstain,
            "{at}"
        );
        assert!(
            session
                .session_start(SessionSource::Startup)
                .await
                .is_empty(),
            "{at}"
        );
        let step = PreStep {
            messages: vec![palisade::Message::user("hi")],
            turn: 1,
            step: 1,
        };
        match session.prompt_submit(&step).await {
            PreStepDecision::Enter { contexts, .. } => assert!(contexts.is_empty(), "{at}"),
            other => panic!("{at}: expected enter, got {other:?}"),
        }
        let result = session
            .post_tool(&call("BlockMe"), &ToolOutcome::text("out"))
            .await;
        assert!(result.blocked.is_none(), "{at}: {result:?}");
        assert!(result.contexts.is_empty(), "{at}: {result:?}");
        assert_eq!(result.outcome, ToolOutcome::text("out"), "{at}");
        let steering = session
            .turn_stopping(&StopEvent {
                turn: 3,
                step: 2,
                last_assistant_message: Some("done".into()),
                continuations: 0,
            })
            .await;
        assert!(steering.is_empty(), "{at}: {steering:?}");

        let shadowed: Vec<(String, String, String, Option<FailureReason>)> = recorder
            .events()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::HookShadowed {
                    decision,
                    reason_code,
                    failure,
                    ..
                } => Some((e.plugin, decision, reason_code, failure)),
                _ => None,
            })
            .collect();
        let crashed = match runtime {
            Runtime::Wasm => FailureReason::Trap,
            _ => FailureReason::HookError,
        };
        // The reason codes each family's twin of the scripted guard gives (Claude Code's
        // protocol has none: its refusals are `deny`).
        let (denied, vetoed) = match runtime {
            Runtime::Wasm => ("scripted-deny", "invariant"),
            Runtime::Command | Runtime::Http => ("deny", "deny"),
            Runtime::NativeCommand | Runtime::NativeHttp => ("scripted", "scripted"),
        };
        let s = |plugin: &str, decision: &str, code: &str, failure| {
            (
                plugin.to_string(),
                decision.to_string(),
                code.to_string(),
                failure,
            )
        };
        assert_eq!(
            shadowed,
            [
                s("s-deny", "would_deny", denied, None),
                s("s-ask", "would_ask", "", None),
                s(
                    "s-crash",
                    "would_deny",
                    &format!("hook-failure:{crashed}"),
                    Some(crashed)
                ),
                s(
                    "s-slow",
                    "would_deny",
                    "hook-failure:timeout",
                    Some(FailureReason::Timeout)
                ),
                s("s-deny", "would_deny", denied, None),
                s("s-guard", "would_deny", vetoed, None),
                s("s-start", "would_contexts", "", None),
                s("s-prompt", "would_enter", "", None),
                s("s-post", "would_block", "", None),
                s("s-stop", "would_steer", "", None),
            ],
            "{at}"
        );
    }
}
