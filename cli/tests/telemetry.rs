//! OpenTelemetry export, received by an OTLP/HTTP receiver made of the protocol's own messages
//! (`opentelemetry-proto`, decoded with prost): the spans and metrics of a session bridged one
//! process per event, and of `palisade serve` while it runs; a receiver that never answers or
//! a configuration palisade cannot honour changes no decision.

use crate::server;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{Metric, metric};
use opentelemetry_proto::tonic::trace::v1::Span;
use palisade_tests::web::{Reply, Server};
use prost::Message as _;
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A receiver of OTLP over HTTP, protobuf or JSON bodies.
struct Receiver(Server);

impl Receiver {
    fn start() -> Receiver {
        // An empty body is an empty Export…ServiceResponse: everything accepted.
        Receiver(Server::start(|_| Reply::ok(Vec::new())))
    }

    fn endpoint(&self) -> String {
        self.0.origin()
    }

    /// Every span received, with its resource's attributes.
    fn spans(&self) -> Vec<(Vec<KeyValue>, Span)> {
        let mut spans = Vec::new();
        for request in self.0.received() {
            assert_eq!(request.method, "POST");
            if request.path != "/v1/traces" {
                continue;
            }
            let export = ExportTraceServiceRequest::decode(&request.body[..])
                .expect("a protobuf ExportTraceServiceRequest");
            for resource in export.resource_spans {
                let attributes = resource.resource.map(|r| r.attributes).unwrap_or_default();
                for scope in resource.scope_spans {
                    for span in scope.spans {
                        spans.push((attributes.clone(), span));
                    }
                }
            }
        }
        spans
    }

    /// Every metric received (each export of a cumulative metric repeats it).
    fn metrics(&self) -> Vec<Metric> {
        let mut metrics = Vec::new();
        for request in self.0.received() {
            if request.path != "/v1/metrics" {
                continue;
            }
            let export = ExportMetricsServiceRequest::decode(&request.body[..])
                .expect("a protobuf ExportMetricsServiceRequest");
            for resource in export.resource_metrics {
                for scope in resource.scope_metrics {
                    metrics.extend(scope.metrics);
                }
            }
        }
        metrics
    }
}

fn value(value: &Option<AnyValue>) -> Value {
    match value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => json!(s),
        Some(any_value::Value::IntValue(n)) => json!(n),
        Some(any_value::Value::BoolValue(b)) => json!(b),
        Some(any_value::Value::DoubleValue(d)) => json!(d),
        other => panic!("an attribute of an unexpected type: {other:?}"),
    }
}

/// The attributes as a JSON object, for readable assertions.
fn attributes(attributes: &[KeyValue]) -> Value {
    Value::Object(
        attributes
            .iter()
            .map(|kv| (kv.key.clone(), value(&kv.value)))
            .collect(),
    )
}

fn cache_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("telemetry-cache")
}

/// `palisade ARGS` with `stdin`, the OTEL variables `otel`, and nothing of this process's
/// own OTEL_* environment.
fn palisade(args: &[&str], stdin: &str, otel: &[(&str, &str)]) -> Output {
    let child = command(args, otel).spawn().unwrap();
    crate::process::fed(child, stdin)
        .wait_with_output()
        .unwrap()
}

/// `palisade ARGS` with the OTEL variables `otel` and none of this process's own, its
/// standard streams piped.
fn command(args: &[&str], otel: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_palisade"));
    for (name, _) in std::env::vars() {
        if name.starts_with("OTEL_") {
            command.env_remove(name);
        }
    }
    command
        .args(args)
        .envs(otel.iter().copied())
        .env("PALISADE_CACHE_DIR", cache_dir())
        .env("PALISADE_STATE_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn event(session: &str, name: &str, extra: Value) -> String {
    let mut event = json!({
        "session_id": session,
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/tmp",
        "hook_event_name": name,
    });
    event
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    event.to_string()
}

fn bash(session: &str, id: &str, command: &str) -> String {
    event(
        session,
        "PreToolUse",
        json!({ "tool_name": "Bash", "tool_input": { "command": command }, "tool_use_id": id }),
    )
}

/// shell-guard (a guard) and audit-log (an observer of pre-tool, and in the background of
/// tool-result).
fn plugins() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["shell-guard", "audit-log"] {
        palisade_examples::install_one(palisade_examples::get(name).unwrap(), dir.path()).unwrap();
    }
    dir
}

fn denies(out: &Output) -> bool {
    assert!(
        out.status.success(),
        "status {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    answer["hookSpecificOutput"]["permissionDecision"] == "deny"
}

/// The data points of every export of metric `name`: their attributes and values (a sum's
/// value, a histogram's count). A process exports its cumulative counts; a server repeats
/// them at every interval.
fn points(metrics: &[Metric], name: &str) -> Vec<(Value, u64)> {
    use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value as Number;
    let exported: Vec<_> = metrics.iter().filter(|m| m.name == name).collect();
    if exported.is_empty() {
        let names: Vec<_> = metrics.iter().map(|m| &m.name).collect();
        panic!("no metric {name} in {names:?}");
    }
    let mut points = Vec::new();
    for metric in exported {
        match &metric.data {
            Some(metric::Data::Sum(sum)) => points.extend(sum.data_points.iter().map(|p| {
                let n = match p.value {
                    Some(Number::AsInt(n)) => n as u64,
                    Some(Number::AsDouble(d)) => d as u64,
                    None => 0,
                };
                (attributes(&p.attributes), n)
            })),
            Some(metric::Data::Histogram(histogram)) => points.extend(
                histogram
                    .data_points
                    .iter()
                    .map(|p| (attributes(&p.attributes), p.count)),
            ),
            other => panic!("{name}: an unexpected kind of metric: {other:?}"),
        }
    }
    points
}

/// A session bridged one process per event (as Claude Code runs its hooks): a trace per
/// dispatch, whose hooks' spans are its children and carry what each hook did; the
/// invocation counters and latency histograms; one resource instance per process.
#[test]
fn a_bridged_session_is_exported_as_spans_and_metrics() {
    let receiver = Receiver::start();
    let dir = plugins();
    let endpoint = receiver.endpoint();
    let otel = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_SERVICE_NAME", "palisade-under-test"),
    ];
    let dir_arg = dir.path().to_str().unwrap();
    assert!(denies(&palisade(
        &["claude-code", dir_arg],
        &bash("s1", "t1", "rm -rf /"),
        &otel
    )));
    assert!(!denies(&palisade(
        &["claude-code", dir_arg],
        &bash("s1", "t2", "ls"),
        &otel
    )));
    let post = event(
        "s1",
        "PostToolUse",
        json!({ "tool_name": "Bash", "tool_input": { "command": "ls" }, "tool_use_id": "t2",
                "tool_response": { "stdout": "Cargo.toml", "stderr": "" } }),
    );
    let out = palisade(&["claude-code", dir_arg], &post, &otel);
    assert!(out.status.success(), "{out:?}");

    // Every process flushed before it exited: nothing to wait for.
    let spans = receiver.spans();
    let named = |name: &str| -> Vec<&(Vec<KeyValue>, Span)> {
        spans.iter().filter(|(_, s)| s.name == name).collect()
    };
    let dispatches = named("dispatch pre-tool");
    assert_eq!(dispatches.len(), 2, "{:#?}", spans);
    let guard_spans = named("hook shell-guard/pre-tool");
    assert_eq!(guard_spans.len(), 2, "{:#?}", spans);
    let mut seen = Vec::new();
    for (resource, dispatch) in &dispatches {
        let resource = attributes(resource);
        assert_eq!(
            resource["service.name"], "palisade-under-test",
            "{resource}"
        );
        assert!(resource["service.instance.id"].is_string(), "{resource}");
        assert!(
            dispatch.parent_span_id.is_empty(),
            "a dispatch is a root span"
        );
        let a = attributes(&dispatch.attributes);
        assert_eq!(a["session.id"], "s1");
        assert_eq!(a["palisade.point"], "pre-tool");
        assert!(dispatch.end_time_unix_nano >= dispatch.start_time_unix_nano);
        // Its hooks are its children, in its trace.
        let children: Vec<_> = spans
            .iter()
            .filter(|(_, s)| s.parent_span_id == dispatch.span_id)
            .map(|(_, s)| s)
            .collect();
        assert!(
            children.iter().all(|c| c.trace_id == dispatch.trace_id),
            "{children:#?}"
        );
        let mut names: Vec<_> = children.iter().map(|c| c.name.clone()).collect();
        names.sort();
        let guard = children
            .iter()
            .find(|c| c.name == "hook shell-guard/pre-tool")
            .unwrap_or_else(|| panic!("{a}: {names:?}"));
        let g = attributes(&guard.attributes);
        assert_eq!(g["palisade.plugin"], "shell-guard");
        assert_eq!(g["palisade.point"], "pre-tool");
        assert_eq!(g["session.id"], "s1");
        assert!(g["palisade.fuel_consumed"].as_i64().unwrap() > 0, "{g}");
        assert!(g["palisade.duration_us"].as_i64().is_some(), "{g}");
        assert!(guard.start_time_unix_nano >= dispatch.start_time_unix_nano);
        seen.push(json!({
            "outcome": a["palisade.outcome"],
            "decided_by": a.get("palisade.decided_by"),
            "hooks": a["palisade.hooks"],
            "children": names,
            "decision": g["palisade.decision"],
            "reason_code": g.get("palisade.reason_code"),
        }));
    }
    seen.sort_by_key(|o| o["outcome"].to_string());
    assert_eq!(
        seen,
        [
            // `ls`: the observer (priority 0) runs first, then the guard, which allows.
            json!({
                "outcome": "continue", "decided_by": null, "hooks": 2,
                "children": ["hook audit-log/pre-tool", "hook shell-guard/pre-tool"],
                "decision": "allow", "reason_code": null,
            }),
            // `rm -rf /`: the guard's honoured deny ends the dispatch.
            json!({
                "outcome": "deny", "decided_by": "shell-guard/pre-tool", "hooks": 2,
                "children": ["hook audit-log/pre-tool", "hook shell-guard/pre-tool"],
                "decision": "deny", "reason_code": "destructive-delete",
            }),
        ]
    );
    // The two dispatches are two traces; the background observer of tool-result is in a
    // third, and its log line is an event of its span.
    assert_ne!(dispatches[0].1.trace_id, dispatches[1].1.trace_id);
    let result = named("hook audit-log/tool-result");
    assert_eq!(result.len(), 1, "{spans:#?}");
    let logs: Vec<_> = result[0]
        .1
        .events
        .iter()
        .map(|e| attributes(&e.attributes))
        .collect();
    assert!(
        logs.iter().any(
            |l| l["log.level"] == "info" && l["log.message"].as_str().unwrap().contains("Bash")
        ),
        "{logs:?}"
    );

    let metrics = receiver.metrics();
    let invocations = points(&metrics, "palisade.hook.invocations");
    // Each process exported its own counts: the deny is in one of them.
    assert!(
        invocations
            .iter()
            .any(|(a, n)| a["palisade.hook"] == "shell-guard/pre-tool"
                && a["palisade.outcome"] == "deny"
                && *n == 1),
        "{invocations:?}"
    );
    let durations = points(&metrics, "palisade.hook.duration");
    assert!(
        durations
            .iter()
            .any(|(a, n)| a["palisade.hook"] == "shell-guard/pre-tool" && *n == 1),
        "{durations:?}"
    );
    let dispatched = points(&metrics, "palisade.dispatches");
    assert!(
        dispatched
            .iter()
            .any(|(a, _)| a["palisade.point"] == "pre-tool"),
        "{dispatched:?}"
    );
}

/// `palisade serve` exports while it runs (the metrics every OTEL_METRIC_EXPORT_INTERVAL,
/// spans in batches), failures by reason included, and flushes at shutdown.
#[test]
fn serve_exports_while_it_runs() {
    let receiver = Receiver::start();
    let dir = tempfile::tempdir().unwrap();
    server::scripted(
        dir.path(),
        "crashy",
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"guard\"\non_failure = \"allow\"\n\
         [config]\npre_tool = \"panic\"\n",
    );
    let endpoint = receiver.endpoint();
    let server = server::Server::start(
        dir.path(),
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_METRIC_EXPORT_INTERVAL", "100"),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    let answer = server.event(json!({
        "session_id": "served",
        "transcript_path": "/tmp/t.jsonl",
        "cwd": "/tmp",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": "ls" },
        "tool_use_id": "toolu_1"
    }));
    assert_eq!(answer.status, 200, "{answer:?}");
    // Exported while it runs: no shutdown yet.
    let until = Instant::now() + Duration::from_secs(30);
    let failures = loop {
        let metrics = receiver.metrics();
        let spans = receiver.spans();
        if metrics.iter().any(|m| m.name == "palisade.hook.failures")
            && spans.iter().any(|(_, s)| s.name == "hook crashy/pre-tool")
        {
            break points(&metrics, "palisade.hook.failures");
        }
        assert!(
            Instant::now() < until,
            "nothing exported within 30 s: {} requests; serve said:\n{}",
            receiver.0.received().len(),
            server.said()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        failures
            .iter()
            .any(|(a, n)| a["palisade.hook"] == "crashy/pre-tool"
                && a["palisade.failure.reason"] == "trap"
                && *n == 1),
        "{failures:?}"
    );
    let spans = receiver.spans();
    let (_, crashed) = spans
        .iter()
        .find(|(_, s)| s.name == "hook crashy/pre-tool")
        .unwrap();
    let a = attributes(&crashed.attributes);
    assert_eq!(a["palisade.failure.reason"], "trap", "{a}");
    assert_eq!(a["palisade.failed_closed"], false, "{a}");
    let status = crashed.status.as_ref().unwrap();
    assert_eq!(status.code, 2, "an error status: {status:?}");
    assert!(status.message.starts_with("trap: "), "{status:?}");
}

/// A receiver that takes the export and never answers delays no answer: the hook command
/// answers, waits at most its flush time (1 s), says so, and exits. A configuration it cannot
/// honour (gRPC) is named with the fix, and decides nothing either.
#[test]
fn a_receiver_that_never_answers_or_a_protocol_palisade_lacks_changes_no_decision() {
    let stalled = Server::start(|_| Reply::ok(Vec::new()).after(Duration::from_secs(120)));
    let endpoint = stalled.origin();
    let dir = plugins();
    let dir_arg = dir.path().to_str().unwrap();
    let started = Instant::now();
    let out = palisade(
        &["claude-code", dir_arg],
        &bash("s2", "t1", "rm -rf /"),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())],
    );
    let took = started.elapsed();
    assert!(denies(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("did not take the last spans and metrics within 1000 ms"),
        "{stderr}"
    );
    // Bounded (a generous bound, for a loaded machine): not the receiver's 120 s, nor the
    // exporter's 10 s timeout.
    assert!(took < Duration::from_secs(8), "took {took:?}");
    assert!(!stalled.received().is_empty(), "the export was sent");

    let out = palisade(
        &["claude-code", dir_arg],
        &bash("s3", "t1", "rm -rf /"),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ],
    );
    assert!(denies(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
            && stderr.contains("set it to http/protobuf"),
        "{stderr}"
    );
}

/// A `tools/call` of MCP 2026-07-28 that carries a W3C trace context (`_meta`'s
/// `traceparent`) through `palisade mcp`: its dispatch spans are children of the caller's
/// span, in the caller's trace, and its hooks' spans in that trace too.
#[test]
fn an_mcp_calls_trace_context_is_the_parent_of_its_spans() {
    let receiver = Receiver::start();
    let otel = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf".to_string()),
    ];
    let otel: Vec<(&str, &str)> = otel.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let dir = plugins();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01",
    });
    let lines = [
        json!({ "jsonrpc": "2.0", "id": 1, "method": "server/discover",
            "params": { "_meta": meta } }),
        json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": { "_meta": meta, "name": "echo", "arguments": { "text": "traced" } } }),
    ];
    let stdin: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let mut args = vec!["mcp", "--plugins", dir.path().to_str().unwrap(), "--"];
    let server = crate::mcp::modern_server();
    args.extend(server.iter().map(String::as_str));
    let out = palisade_until_answered(&args, &stdin, &otel, 2);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("traced"),
        "{out:?}"
    );

    let spans = receiver.spans();
    let dispatch = spans
        .iter()
        .map(|(_, s)| s)
        .find(|s| s.name == "dispatch pre-tool")
        .unwrap_or_else(|| panic!("{spans:#?}"));
    assert_eq!(hex(&dispatch.trace_id), "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(hex(&dispatch.parent_span_id), "00f067aa0ba902b7");
    let hooks: Vec<_> = spans
        .iter()
        .map(|(_, s)| s)
        .filter(|s| s.parent_span_id == dispatch.span_id)
        .collect();
    assert!(!hooks.is_empty(), "{spans:#?}");
    assert!(hooks.iter().all(|s| s.trace_id == dispatch.trace_id));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `palisade ARGS` (a proxy that answers on stdout) fed `stdin`, whose input stays open until
/// `answers` lines came back, then closes: the proxy ends as when its client goes.
fn palisade_until_answered(
    args: &[&str],
    stdin: &str,
    otel: &[(&str, &str)],
    answers: usize,
) -> Output {
    use std::io::{BufRead as _, Write as _};
    let mut child = command(args, otel).spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    let mut output = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut answered = Vec::new();
    for _ in 0..answers {
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        answered.extend_from_slice(line.as_bytes());
    }
    drop(input);
    let mut out = child.wait_with_output().unwrap();
    answered.extend_from_slice(&out.stdout);
    out.stdout = answered;
    out
}
