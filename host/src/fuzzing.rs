//! Entry points for fuzzing: the `cargo fuzz` targets under `fuzz/` and the deterministic
//! property tests of the normal test suite call these. Not part of the API.
//!
//! Each takes arbitrary bytes, builds a structured input from them (a manifest, a hook's
//! answer, an agent's hook event, a component's decisions) and checks what must hold whatever
//! the input: no panic, and the bounds and fail-closed rules the host promises.

use crate::hook::Request;
use crate::manifest::{self, MAX_FUEL, MAX_MEMORY_MB, MAX_TIMEOUT_MS, Matcher};
use crate::point::Point;
use crate::runtime::external::wire;
use arbitrary::Unstructured;
use std::path::Path;

/// Fuzzes the manifest parser: a valid manifest's every limit is in range, every matcher
/// matches whole names only; an invalid one has at least one problem.
pub fn manifest(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let text = manifest_text(&mut u).unwrap_or_else(|_| String::from_utf8_lossy(data).into_owned());
    let mut problems = Vec::new();
    let path = Path::new("fuzz/plugin.toml");
    match manifest::parse::parse(path, &text, &mut problems) {
        Some(manifest) => {
            assert!(problems.is_empty(), "{problems:?}");
            for hook in &manifest.hooks {
                let limits = &hook.limits;
                assert!(limits.fuel >= 1 && limits.fuel <= MAX_FUEL);
                assert!(limits.timeout.as_millis() >= 1);
                assert!(limits.timeout.as_millis() <= u128::from(MAX_TIMEOUT_MS));
                assert!(limits.memory_bytes as u64 <= MAX_MEMORY_MB * 1024 * 1024);
                assert!(limits.memory_bytes >= 1024 * 1024);
                if let (Some(Matcher::Names(_)), Some(pattern)) =
                    (&hook.compiled_matcher, &hook.matcher)
                {
                    // Names (and name prefixes) answer as their regex would.
                    let re = regex::Regex::new(&format!("^(?:{pattern})$")).unwrap();
                    for name in [
                        "Bash",
                        "Bashful_tool",
                        "Read",
                        "x",
                        "",
                        "mcp__",
                        "mcp__a\nb",
                    ] {
                        assert_eq!(hook.matches_tool(name), re.is_match(name), "{pattern}");
                    }
                }
                if let Some(Matcher::Regex(re)) = &hook.compiled_matcher {
                    // Whole names only: any match of a name spans all of it.
                    for name in ["Bash", "Bashful_tool", "Read", "x", ""] {
                        if let Some(m) = re.find(name) {
                            assert!(
                                m.start() == 0 && m.end() == name.len(),
                                "{:?} matches part of {name:?}",
                                hook.matcher
                            );
                        }
                    }
                }
            }
        }
        None => assert!(!problems.is_empty(), "refused without a problem:\n{text}"),
    }
}

/// A manifest made of plausible fields with arbitrary values.
fn manifest_text(u: &mut Unstructured<'_>) -> arbitrary::Result<String> {
    const POINTS: &[&str] = &[
        "session-start",
        "prompt-submit",
        "pre-tool",
        "tool-guard",
        "tool-execute",
        "post-tool",
        "tool-result",
        "turn-stopping",
        "message-committed",
        "session-ended",
        "nope",
    ];
    const CAPS: &[&str] = &["observe", "guard", "transform", "wrap", "steer", "root"];
    let number = |u: &mut Unstructured<'_>| -> arbitrary::Result<String> {
        Ok(match u.int_in_range(0..=5)? {
            0 => "0".into(),
            1 => u64::MAX.to_string(),
            2 => "17592186044416".into(),
            3 => format!("-{}", u.arbitrary::<u16>()?),
            4 => "1e3".into(),
            _ => u.arbitrary::<u32>()?.to_string(),
        })
    };
    let mut text = format!("name = {:?}\n", u.arbitrary::<String>()?);
    match u.int_in_range(0..=3)? {
        0 => text.push_str("wasm = \"plugin.wasm\"\n"),
        1 => text.push_str(&format!("command = {:?}\n", u.arbitrary::<String>()?)),
        2 => text.push_str(&format!("url = {:?}\n", u.arbitrary::<String>()?)),
        _ => {}
    }
    if u.arbitrary()? {
        text.push_str("[limits]\n");
        for field in ["timeout_ms", "fuel", "memory_mb", "payload_max_bytes"] {
            if u.arbitrary()? {
                text.push_str(&format!("{field} = {}\n", number(u)?));
            }
        }
    }
    for _ in 0..u.int_in_range(0..=3)? {
        text.push_str("[[hooks]]\n");
        text.push_str(&format!("point = \"{}\"\n", u.choose(POINTS)?));
        text.push_str(&format!("capability = \"{}\"\n", u.choose(CAPS)?));
        if u.arbitrary()? {
            text.push_str("mode = \"background\"\n");
        }
        if u.arbitrary()? {
            text.push_str(&format!("matcher = {:?}\n", u.arbitrary::<String>()?));
        }
        if u.arbitrary()? {
            text.push_str(&format!("fuel = {}\n", number(u)?));
        }
        if u.arbitrary()? {
            text.push_str(&format!("priority = {}\n", number(u)?));
        }
    }
    if u.arbitrary()? {
        text.push_str(&format!("[config]\nk = {:?}\n", u.arbitrary::<String>()?));
    }
    Ok(text)
}

/// Fuzzes the command/HTTP answer decoders — Claude Code's and the palisade protocol's — at
/// every point: they never panic, and what they accept is no larger than what they were given.
pub fn answer(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let point = Point::ALL[usize::from(first) % Point::ALL.len()];
    if first & 0x20 != 0 {
        let mut u = Unstructured::new(rest);
        let output = native_answer_text(&mut u).unwrap_or_else(|_| rest.to_vec());
        if let Ok(response) =
            crate::runtime::external::native::decode(point, &request_for(point), &output)
        {
            assert!(response.answer_bytes() <= output.len() + 64);
        }
        return;
    }
    let exit = if first & 0x80 == 0 {
        wire::Exit::Success
    } else {
        wire::Exit::Block
    };
    let mut u = Unstructured::new(rest);
    let output = answer_text(&mut u).unwrap_or_else(|_| rest.to_vec());
    let stderr: &[u8] = b"a reason";
    let request = request_for(point);
    let guarding = first & 0x40 != 0;
    if let Ok((response, _)) = wire::decode(
        point,
        &request,
        "fuzz/hook",
        exit,
        &output,
        stderr,
        guarding,
    ) {
        assert!(response.answer_bytes() <= output.len() + stderr.len() + 64);
    }
}

/// A Claude Code answer made of its fields, with arbitrary values.
fn answer_text(u: &mut Unstructured<'_>) -> arbitrary::Result<Vec<u8>> {
    use serde_json::{Value, json};
    let value = |u: &mut Unstructured<'_>| -> arbitrary::Result<Value> {
        Ok(match u.int_in_range(0..=5)? {
            0 => Value::Null,
            1 => Value::Bool(u.arbitrary()?),
            2 => json!(u.arbitrary::<i64>()?),
            3 => json!(["deny", "ask", "allow", "block", "approve"][u.int_in_range(0..=4)?]),
            4 => json!({ "x": u.arbitrary::<String>()? }),
            _ => Value::String(u.arbitrary()?),
        })
    };
    let mut top = serde_json::Map::new();
    for field in [
        "continue",
        "stopReason",
        "suppressOutput",
        "systemMessage",
        "decision",
        "reason",
        "patches",
    ] {
        if u.ratio(1, 3)? {
            top.insert(field.into(), value(u)?);
        }
    }
    if u.arbitrary()? {
        let mut specific = serde_json::Map::new();
        for field in [
            "hookEventName",
            "permissionDecision",
            "permissionDecisionReason",
            "additionalContext",
            "updatedInput",
        ] {
            if u.ratio(1, 2)? {
                specific.insert(field.into(), value(u)?);
            }
        }
        top.insert("hookSpecificOutput".into(), Value::Object(specific));
    }
    let mut text = serde_json::to_vec(&top).unwrap_or_default();
    if u.ratio(1, 8)? {
        text.insert(0, b'x');
    }
    Ok(text)
}

/// A palisade-protocol answer: `{"decision": D}` with `D` made of the protocol's variant names,
/// records and arbitrary values.
fn native_answer_text(u: &mut Unstructured<'_>) -> arbitrary::Result<Vec<u8>> {
    use serde_json::{Value, json};
    fn any(u: &mut Unstructured<'_>, depth: u32) -> arbitrary::Result<Value> {
        let names = [
            "allow",
            "deny",
            "ask",
            "abstain",
            "enter",
            "reject",
            "accept",
            "block",
            "replace-content",
            "replace-value",
            "action",
            "contexts",
            "reason_code",
            "message",
            "payload",
            "reason",
            "type",
            "text",
            "json",
            "image",
            "media_type",
            "data",
            "value",
        ];
        Ok(match u.int_in_range(0..=6)? {
            0 => Value::Null,
            1 => Value::Bool(u.arbitrary()?),
            2 => json!(u.arbitrary::<i64>()?),
            3 => json!(names[u.choose_index(names.len())?]),
            4 if depth < 4 => {
                let mut map = serde_json::Map::new();
                for _ in 0..u.int_in_range(0..=3)? {
                    let key = names[u.choose_index(names.len())?];
                    map.insert(key.into(), any(u, depth + 1)?);
                }
                Value::Object(map)
            }
            5 if depth < 4 => {
                let mut list = Vec::new();
                for _ in 0..u.int_in_range(0..=3)? {
                    list.push(any(u, depth + 1)?);
                }
                Value::Array(list)
            }
            _ => Value::String(u.arbitrary()?),
        })
    }
    let mut top = serde_json::Map::new();
    if u.ratio(7, 8)? {
        top.insert("decision".into(), any(u, 0)?);
    }
    if u.ratio(1, 8)? {
        top.insert("patches".into(), any(u, 0)?);
    }
    Ok(serde_json::to_vec(&top).unwrap_or_default())
}

fn request_for(point: Point) -> Request<'static> {
    crate::point_wire::of(point.interface()).sample(point)
}

/// A host, its async runtime and a plugin set, made once per process.
struct Harness {
    runtime: tokio::runtime::Runtime,
    plugins: crate::Plugins,
}

impl Harness {
    fn new(dir: &Path) -> Harness {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        let host = crate::Host::new().expect("a host");
        let plugins = host
            .load_dir(dir)
            .unwrap_or_else(|e| panic!("the fuzzing plugins do not load: {e}"));
        Harness { runtime, plugins }
    }
}

/// Fuzzes the Claude Code / Codex bridge with agent events: every event gets an answer of
/// the protocol (exit 0, 1 or 2; JSON on stdout only as an object).
pub fn bridge_event(data: &[u8]) {
    static HARNESS: std::sync::OnceLock<Harness> = std::sync::OnceLock::new();
    let harness = HARNESS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("palisade-fuzz-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary folder");
        Harness::new(&dir)
    });
    let mut u = Unstructured::new(data);
    let Ok(event) = event_json(&mut u).or_else(|_| serde_json::from_slice(data)) else {
        return;
    };
    for dialect in crate::bridge::Dialect::ALL {
        let lifecycle = crate::Lifecycle::new(harness.plugins.session("fuzz"));
        let reply = harness
            .runtime
            .block_on(crate::bridge::handle_in(&lifecycle, dialect, &event));
        assert!(matches!(reply.exit_code, 0..=2), "{reply:?}");
        if let Some(stdout) = &reply.stdout {
            let json = serde_json::to_value(stdout);
            assert!(json.is_ok_and(|j| j.is_object()), "{reply:?}");
        }
        let _ = reply.http(dialect, "PreToolUse");
    }
}

fn event_json(u: &mut Unstructured<'_>) -> arbitrary::Result<serde_json::Value> {
    use serde_json::{Value, json};
    // Every event the bridge maps, and one it does not.
    let events: Vec<&str> = crate::bridge::Dialect::ALL
        .iter()
        .flat_map(|dialect| dialect.events().iter().map(|e| e.name))
        .chain(["NoSuchEvent"])
        .collect();
    let value = |u: &mut Unstructured<'_>| -> arbitrary::Result<Value> {
        Ok(match u.int_in_range(0..=5)? {
            0 => Value::Null,
            1 => json!(u.arbitrary::<bool>()?),
            2 => json!({ "stdout": u.arbitrary::<String>()?, "stderr": u.arbitrary::<String>()? }),
            3 => json!([u.arbitrary::<String>()?]),
            // Gemini CLI's tool response.
            4 => {
                json!({ "llmContent": [{ "text": u.arbitrary::<String>()? }, u.arbitrary::<String>()?],
                "error": { "message": u.arbitrary::<String>()? } })
            }
            _ => Value::String(u.arbitrary()?),
        })
    };
    let mut event = serde_json::Map::new();
    event.insert("hook_event_name".into(), json!(u.choose(&events)?));
    for field in [
        "session_id",
        "tool_name",
        "tool_input",
        "tool_response",
        "tool_use_id",
        "prompt",
        "source",
        "stop_hook_active",
        "last_assistant_message",
        "prompt_response",
        "reason",
    ] {
        if u.ratio(2, 3)? {
            event.insert(field.into(), value(u)?);
        }
    }
    Ok(Value::Object(event))
}

/// Fuzzes what the host does with a component's decisions: the `arbitrary` test guest
/// answers every point with a WIT value decoded from the bytes it is sent (any variant, any
/// string, any list length), and every answer must be bounded, refused as invalid, or
/// honoured — never panic, never pass the answer bound.
#[derive(Debug)]
pub struct Decisions {
    harness: Harness,
    _dir: Dir,
}

#[derive(Debug)]
struct Dir(std::path::PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl std::fmt::Debug for Harness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Harness").finish_non_exhaustive()
    }
}

/// The answer bound of the guest's hooks (`payload_max_bytes`, the default).
const BOUND: usize = manifest::DEFAULT_PAYLOAD_MAX_BYTES;

impl Decisions {
    /// Loads the `arbitrary` guest component at `guest` on every point it exports.
    pub fn new(guest: &Path) -> Decisions {
        let dir = std::env::temp_dir().join(format!(
            "palisade-fuzz-decisions-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let folder = dir.join("arbitrary");
        std::fs::create_dir_all(&folder).expect("a temporary folder");
        std::fs::copy(guest, folder.join("plugin.wasm")).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (build the test guests first: `cargo test -p palisade-tests --no-run`)",
                guest.display()
            )
        });
        let mut manifest = String::from(
            "name = \"arbitrary\"\nwasm = \"plugin.wasm\"\n[limits]\ntimeout_ms = 2000\n",
        );
        for (point, capability) in [
            ("pre-tool", "\"guard\""),
            ("tool-guard", "\"guard\""),
            ("post-tool", "[\"guard\", \"transform\"]"),
            ("tool-execute", "\"wrap\""),
            ("prompt-submit", "[\"guard\", \"transform\"]"),
            ("turn-stopping", "\"steer\""),
        ] {
            manifest.push_str(&format!(
                "[[hooks]]\npoint = \"{point}\"\ncapability = {capability}\n"
            ));
        }
        std::fs::write(folder.join("plugin.toml"), manifest).expect("a manifest");
        Decisions {
            harness: Harness::new(&dir),
            _dir: Dir(dir),
        }
    }

    /// Runs every point of one session with `data` as the guest's answer.
    pub fn run(&self, data: &[u8]) {
        let hex: String = data.iter().map(|b| format!("{b:02x}")).collect();
        let session = self.harness.plugins.session("fuzz");
        let call = crate::ToolCall::new("t", "echo", serde_json::json!({ "bytes": hex }));
        let registry = crate::ToolRegistry::new([crate::Tool::new("echo", |_| async {
            Ok(crate::ToolOutcome::text("echo"))
        })]);
        self.harness.runtime.block_on(async {
            let denial_ok = |d: &crate::Denial| {
                d.failure.is_some()
                    || d.message.len()
                        + d.reason_code.len()
                        + d.payload.as_ref().map_or(0, |p| p.to_string().len())
                        <= BOUND * 2
            };
            match session.pre_tool(&call).await {
                crate::PreToolDecision::Deny(d) => assert!(denial_ok(&d), "{d:?}"),
                crate::PreToolDecision::Ask(a) => assert!(a.reason.len() <= BOUND),
                crate::PreToolDecision::Allow => {}
            }
            if let crate::GuardDecision::Deny(d) = session.tool_guard(&call).await {
                assert!(denial_ok(&d), "{d:?}");
            }
            let post = session
                .post_tool(&call, &crate::ToolOutcome::text("out"))
                .await;
            let size: usize = post.contexts.iter().map(|c| c.text.len()).sum::<usize>()
                + serde_json::to_string(&post.outcome).map_or(0, |s| s.len());
            assert!(size <= BOUND * 8, "{size}");
            let execution = session
                .execute(
                    &registry,
                    crate::ToolRequest::new("t2", "echo", call.arguments.clone()),
                )
                .await;
            let _ = execution;
            let step = crate::PreStep {
                messages: vec![crate::Message::user(hex.clone())],
                turn: 1,
                step: 1,
            };
            match session.prompt_submit(&step).await {
                crate::PreStepDecision::Enter { messages, contexts } => {
                    assert!(contexts.iter().map(|c| c.text.len()).sum::<usize>() <= BOUND * 2);
                    assert!(messages.iter().map(|m| m.text.len()).sum::<usize>() <= BOUND * 2);
                    assert!(messages.iter().all(|m| m.role == crate::Role::User));
                }
                crate::PreStepDecision::Reject(d) => assert!(denial_ok(&d), "{d:?}"),
            }
            let stop = crate::StopEvent {
                turn: 1,
                step: 1,
                last_assistant_message: Some(hex.clone()),
                continuations: 0,
            };
            for steering in session.turn_stopping(&stop).await {
                assert!(steering.content.len() <= BOUND);
            }
        });
    }
}

/// Deterministic inputs for the property tests: `count` byte strings of up to `max` bytes
/// from a fixed seed (splitmix64), so every run of the suite checks the same cases.
pub fn inputs(seed: u64, count: usize, max: usize) -> impl Iterator<Item = Vec<u8>> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (0..count).map(move |_| {
        let len = (next() as usize) % (max + 1);
        (0..len).map(|_| next() as u8).collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_never_panic_and_valid_ones_are_in_range() {
        for data in inputs(1, 3000, 256) {
            manifest(&data);
        }
    }

    #[test]
    fn answers_never_panic_and_never_grow() {
        for data in inputs(2, 5000, 256) {
            answer(&data);
        }
    }

    #[test]
    fn bridge_events_always_get_an_answer_of_the_protocol() {
        for data in inputs(3, 2000, 256) {
            bridge_event(&data);
        }
    }
}
