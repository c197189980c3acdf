//! `palisade test DIR CASES.jsonl`: a plugin author's test cases, each an input for a point and
//! the decision expected of the plugins of `DIR`.

use anyhow::Context;
use palisade::events::{Event, EventKind, EventSink};
use palisade::{Plugins, Point};
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Run a plugin author's test cases: each line of CASES.jsonl is
/// {"name": "…", "point": "pre-tool", "input": {…}, "expect": {…}}, where `input` is what
/// `palisade run` takes and `expect` the fields its output must have. Prints pass/fail per
/// case with each hook's latency; exits 1 if any case fails.
#[derive(clap::Args)]
pub struct TestCommand {
    /// The plugin directory.
    dir: PathBuf,
    /// The cases, one JSON object per line (`#` lines are comments).
    cases: PathBuf,
}

impl TestCommand {
    /// Runs every case.
    pub async fn execute(self) -> anyhow::Result<ExitCode> {
        test(&self.dir, &self.cases).await
    }
}

/// One line of a cases file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// What the case shows, for the report.
    name: String,
    /// The point to dispatch.
    point: String,
    /// Its input, as `palisade run` takes it.
    input: Value,
    /// The expected output, as `palisade run` prints it: every field given must match (objects
    /// match field by field, so `{"decision": "deny"}` accepts any deny).
    expect: Value,
    /// Lines the plugins must log during the case (what an observer shows): each must be part
    /// of one logged line, written `plugin: message` (`"tool-tally: call 1"` or just `"call 1"`).
    #[serde(default)]
    logs: Vec<String>,
}

/// Keeps the hook events of the case being run.
#[derive(Default)]
struct Collect(Mutex<Vec<Event>>);

impl EventSink for Collect {
    fn emit(&self, event: &Event) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event.clone());
    }
}

impl Collect {
    fn take(&self) -> Vec<Event> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Whether `actual` has every field of `expected` (recursively for objects; other values,
/// arrays included, must be equal).
fn matches(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => want
            .iter()
            .all(|(k, v)| have.get(k).is_some_and(|h| matches(v, h))),
        _ => expected == actual,
    }
}

/// Each hook's decision and latency, in order: `shell-guard allow 41 µs`.
fn hooks(events: &[Event]) -> String {
    let parts: Vec<String> = events
        .iter()
        .filter_map(|e| {
            let (what, us) = match &e.kind {
                EventKind::HookCompleted {
                    decision,
                    duration_us,
                    ..
                } => (decision.clone(), *duration_us),
                EventKind::HookDenied { duration_us, .. } => ("deny".to_string(), *duration_us),
                EventKind::HookFailed {
                    reason,
                    duration_us,
                    ..
                } => (format!("failed ({reason})"), *duration_us),
                _ => return None,
            };
            Some(format!("{} {what} {us} µs", e.plugin))
        })
        .collect();
    if parts.is_empty() {
        "no hook ran".into()
    } else {
        parts.join(", ")
    }
}

async fn test(dir: &Path, cases: &Path) -> anyhow::Result<ExitCode> {
    let text =
        std::fs::read_to_string(cases).with_context(|| format!("reading {}", cases.display()))?;
    let parsed = parse_cases(&text, cases)?;
    let collect = Arc::new(Collect::default());
    // Cases are the same every run: state starts empty and is forgotten.
    let host = crate::cache::host_builder()
        .state(palisade::state::StateStore::memory())
        .event_sink(collect.clone() as Arc<dyn EventSink>)
        .build()?;
    let plugins = host.load_dir(dir)?;
    let (mut passed, mut failed) = (0, 0);
    let width = parsed
        .iter()
        .map(|(_, _, c)| c.name.len())
        .max()
        .unwrap_or(0);
    for (line, point, case) in &parsed {
        // A fresh session per case: cases do not leak state into each other.
        let session = plugins.session(format!("palisade-test-{line}"));
        collect.take();
        let started = Instant::now();
        let dispatch = session
            .run_json(*point, &case.input.to_string())
            .map_err(|e| {
                anyhow::anyhow!(
                    "{}:{line}: `input` is not a valid `{point}` input: {e}\nthe input of each point:\n{}",
                    cases.display(),
                    palisade::Session::json_inputs()
                )
            })?;
        let output = dispatch.await.map_err(anyhow::Error::msg);
        session.drain_background().await;
        let took = started.elapsed();
        let events = collect.take();
        let output = match output {
            Ok(output) => output,
            Err(e) => {
                failed += 1;
                println!("FAIL  {:width$}  {e:#}", case.name);
                continue;
            }
        };
        if let Some(problem) = missing_logs(&plugins, &case.logs, &events) {
            failed += 1;
            println!("FAIL  {:width$}  {point}: {problem}", case.name);
        } else if matches(&case.expect, &output) {
            passed += 1;
            println!(
                "pass  {:width$}  {point}: {} in {} µs ({})",
                case.name,
                summary(&output),
                took.as_micros(),
                hooks(&events)
            );
        } else {
            failed += 1;
            println!(
                "FAIL  {:width$}  {point}: expected {}, got {} ({})",
                case.name,
                case.expect,
                output,
                hooks(&events)
            );
        }
    }
    println!("cases: {passed} passed, {failed} failed");
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The cases of a JSON Lines file (blank and `#` lines skipped), each with its line number
/// and point.
fn parse_cases(text: &str, cases: &Path) -> anyhow::Result<Vec<(usize, Point, Case)>> {
    let mut parsed = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let case: Case = serde_json::from_str(line).with_context(|| {
            format!(
                "{}:{}: not a test case; each line is \
                 {{\"name\": \"…\", \"point\": \"pre-tool\", \"input\": {{…}}, \"expect\": {{…}}}}",
                cases.display(),
                i + 1
            )
        })?;
        let point: Point = case
            .point
            .parse()
            .map_err(|e: String| anyhow::anyhow!("{}:{}: `point`: {e}", cases.display(), i + 1))?;
        parsed.push((i + 1, point, case));
    }
    Ok(parsed)
}

/// Which of the log lines a case expects the plugins did not write, said as a failure.
fn missing_logs(plugins: &Plugins, wanted: &[String], events: &[Event]) -> Option<String> {
    let logged: Vec<(&str, &str)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::PluginLog { message, .. } => Some((e.plugin.as_str(), message.as_str())),
            _ => None,
        })
        .collect();
    let missing: Vec<&String> = wanted
        .iter()
        .filter(|want| !logged.iter().any(|line| log_matches(plugins, want, *line)))
        .collect();
    let logged: Vec<String> = logged
        .iter()
        .map(|(plugin, message)| format!("{plugin}: {message}"))
        .collect();
    if missing.is_empty() {
        return None;
    }
    Some(format!(
        "expected a log line with {}, the plugins logged {} ({})",
        missing
            .iter()
            .map(|m| format!("{m:?}"))
            .collect::<Vec<_>>()
            .join(" and "),
        if logged.is_empty() {
            "nothing".to_string()
        } else {
            logged
                .iter()
                .map(|l| format!("{l:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        },
        hooks(events)
    ))
}

/// Whether the line `message` that `plugin` logged is the one `want` asks for: `want` written
/// `plugin: text` names the plugin that must have logged it (a plugin cannot log a line that
/// passes for another's); plain `text` may come from any plugin. Either way `text` is part of
/// the message.
fn log_matches(plugins: &Plugins, want: &str, (plugin, message): (&str, &str)) -> bool {
    match want.split_once(": ") {
        Some((named, text)) if plugins.iter().any(|p| p.name() == named) => {
            plugin == named && message.contains(text)
        }
        _ => message.contains(want),
    }
}

/// The decision in a few words.
fn summary(output: &Value) -> String {
    match output.get("decision").and_then(Value::as_str) {
        Some(decision) => match output.get("hook_id").and_then(Value::as_str) {
            Some(hook) => format!("{decision} by {hook}"),
            None => decision.to_string(),
        },
        None if output.get("blocked").is_some_and(|b| !b.is_null()) => "block".into(),
        None if output.get("continue") == Some(&Value::Bool(true)) => "steer".into(),
        None => "done".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::matches;
    use serde_json::json;

    #[test]
    fn expectations_match_field_by_field() {
        let actual = json!({"decision": "deny", "hook_id": "g/pre-tool", "message": "no"});
        assert!(matches(&json!({"decision": "deny"}), &actual));
        assert!(matches(
            &json!({"decision": "deny", "hook_id": "g/pre-tool"}),
            &actual
        ));
        assert!(!matches(&json!({"decision": "allow"}), &actual));
        assert!(!matches(&json!({"reason_code": "x"}), &actual));
        assert!(matches(&json!({"contexts": []}), &json!({"contexts": []})));
        assert!(!matches(
            &json!({"contexts": []}),
            &json!({"contexts": [1]})
        ));
    }
}
