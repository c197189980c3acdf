//! OpenTelemetry: the lifecycle as OTLP traces and metrics, for the commands that serve an
//! agent (the hook bridges, `serve`, `mcp`, `acp`, `run`). Off unless an OTLP endpoint is
//! configured by the standard variables (`OTEL_EXPORTER_OTLP_ENDPOINT`, or the per-signal
//! `…_TRACES_ENDPOINT` / `…_METRICS_ENDPOINT`); see docs/telemetry.md.
//!
//! - **Traces**: a span per dispatch of a point that ran a hook (`dispatch <point>`: its
//!   outcome, the hook that decided it), with a child span per hook (`hook <id>`: point,
//!   plugin, decision, reason code, fuel, duration, failure reason; its log lines as span
//!   events). A dispatch is a trace of its own; `session.id` ties a session's together.
//! - **Metrics**: invocations by hook, point and outcome; failures by reason; dropped work;
//!   fuel; hook and dispatch latency histograms.
//!
//! Telemetry is never on the decision path: spans and points are queued (bounded: a full
//! queue drops them) and exported by the SDK's own threads, so a slow or dead receiver delays
//! no answer. At exit the queue is flushed, for at most a bounded time ([`shutdown`]).

use bytes::Bytes;
use opentelemetry::metrics::{Counter, Histogram, MeterProvider as _};
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt as _, TraceFlags, TraceId,
    TraceState, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, SdkTracer, SdkTracerProvider};
use palisade::events::{Dispatch, Event, EventKind, EventSink};
use std::cell::Cell;
use std::collections::HashMap;
use std::io::Read as _;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// The upper bounds of the latency histograms' buckets, in seconds (hooks run in
/// microseconds to seconds; the SDK's default buckets are for milliseconds).
const BUCKETS: [f64; 14] = [
    0.000_005, 0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.005, 0.01, 0.05,
    0.1, 0.5, 1.0,
];

/// The largest answer body read from a receiver.
const MAX_ANSWER_BYTES: u64 = 4 << 20;

/// How long a hook command (one event per process) waits at exit for its spans and points to
/// be sent: its agent waits for it to exit.
pub const HOOK_COMMAND_FLUSH: Duration = Duration::from_secs(1);

/// The export of a process: its providers, and the sink that feeds them.
struct Telemetry {
    traces: Option<SdkTracerProvider>,
    metrics: Option<SdkMeterProvider>,
    sink: Arc<OtelSink>,
    /// How long [`shutdown`] waits.
    flush: Duration,
}

static TELEMETRY: OnceLock<Option<Telemetry>> = OnceLock::new();

/// Starts the export if the environment configures it (see the module docs); a variable that
/// cannot be honoured is named in a warning on standard error, and its signal is not exported.
/// `hook_command`: the process answers one event (its flush at exit is short).
///
/// Call it before the async runtime starts: the exporters' client runs on threads of its own.
pub fn init(hook_command: bool) {
    TELEMETRY.get_or_init(|| {
        let telemetry = configure(hook_command);
        if let Err(problem) = &telemetry {
            eprintln!("palisade: warning: OpenTelemetry: {problem}; nothing is exported");
        }
        telemetry.ok().flatten()
    });
}

/// `inner`, with the export added when it is on.
pub fn with(inner: Option<Arc<dyn EventSink>>) -> Option<Arc<dyn EventSink>> {
    let Some(Some(telemetry)) = TELEMETRY.get() else {
        return inner;
    };
    let otel = telemetry.sink.clone() as Arc<dyn EventSink>;
    Some(match inner {
        Some(inner) => Arc::new(crate::metrics::Tee(inner, Some(otel))),
        None => otel,
    })
}

/// Sends what is queued and stops the export, waiting at most the flush time (1 s for a hook
/// command, else `OTEL_EXPORTER_OTLP_TIMEOUT`, at most 10 s). Safe to call more than once.
pub fn shutdown() {
    let Some(Some(telemetry)) = TELEMETRY.get() else {
        return;
    };
    let (traces, metrics) = (telemetry.traces.clone(), telemetry.metrics.clone());
    let (done, wait) = std::sync::mpsc::channel();
    // On a thread of its own, so the wait is bounded whatever the providers do.
    let flushing = std::thread::Builder::new()
        .name("palisade-otel-flush".into())
        .spawn(move || {
            if let Some(traces) = traces {
                let _ = traces.shutdown();
            }
            if let Some(metrics) = metrics {
                let _ = metrics.shutdown();
            }
            let _ = done.send(());
        });
    if flushing.is_ok() && wait.recv_timeout(telemetry.flush).is_err() {
        eprintln!(
            "palisade: warning: OpenTelemetry: the receiver did not take the last spans and \
             metrics within {} ms; they are lost",
            telemetry.flush.as_millis()
        );
    }
}

/// A variable's value, unless unset or empty.
fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The protocol `signal` (`TRACES`, `METRICS`) is exported in: `http/protobuf` unless its
/// variable or the general one says `http/json`.
fn protocol(signal: &str) -> Result<Protocol, String> {
    let specific = format!("OTEL_EXPORTER_OTLP_{signal}_PROTOCOL");
    let (name, value) = match var(&specific) {
        Some(value) => (specific, value),
        None => match var("OTEL_EXPORTER_OTLP_PROTOCOL") {
            Some(value) => ("OTEL_EXPORTER_OTLP_PROTOCOL".to_string(), value),
            None => return Ok(Protocol::HttpBinary),
        },
    };
    match value.trim() {
        "http/protobuf" => Ok(Protocol::HttpBinary),
        "http/json" => Ok(Protocol::HttpJson),
        "grpc" => Err(format!(
            "{name}=grpc: palisade exports OTLP over HTTP; set it to http/protobuf (the \
             receiver's port is usually 4318, not gRPC's 4317)"
        )),
        other => Err(format!(
            "{name}={other}: not a protocol; use http/protobuf or http/json"
        )),
    }
}

/// Whether `signal` (`TRACES`, `METRICS`) is configured: an endpoint for it, and its
/// `OTEL_<signal>_EXPORTER` is not `none`.
fn wanted(signal: &str) -> Result<bool, String> {
    let endpoint = var("OTEL_EXPORTER_OTLP_ENDPOINT")
        .or_else(|| var(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT")))
        .is_some();
    let exporter = format!("OTEL_{signal}_EXPORTER");
    match var(&exporter).as_deref().map(str::trim) {
        None | Some("otlp") => Ok(endpoint),
        Some("none") => Ok(false),
        Some(other) => Err(format!(
            "{exporter}={other}: palisade exports otlp (or none)"
        )),
    }
}

/// The exporters' timeout: `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds), 10 s by default.
fn timeout() -> Result<Duration, String> {
    match var("OTEL_EXPORTER_OTLP_TIMEOUT") {
        None => Ok(Duration::from_secs(10)),
        Some(ms) => ms
            .trim()
            .parse::<u64>()
            .map(Duration::from_millis)
            .map_err(|_| format!("OTEL_EXPORTER_OTLP_TIMEOUT={ms}: not a number of milliseconds")),
    }
}

fn configure(hook_command: bool) -> Result<Option<Telemetry>, String> {
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(None);
    }
    let (want_traces, want_metrics) = (wanted("TRACES")?, wanted("METRICS")?);
    if !want_traces && !want_metrics {
        return Ok(None);
    }
    let timeout = timeout()?;
    let client = Client::new(timeout)?;
    let resource = resource();
    let mut problems = Vec::new();
    let traces = want_traces
        .then(|| {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(protocol("TRACES")?)
                .with_timeout(timeout)
                .with_http_client(client.clone())
                .build()
                .map_err(|e| format!("traces: {e}"))?;
            Ok::<_, String>(
                SdkTracerProvider::builder()
                    .with_batch_exporter(exporter)
                    .with_id_generator(Ids::default())
                    .with_resource(resource.clone())
                    .build(),
            )
        })
        .and_then(|r| r.map_err(|p| problems.push(p)).ok());
    let metrics = want_metrics
        .then(|| {
            let exporter = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_protocol(protocol("METRICS")?)
                .with_timeout(timeout)
                .with_http_client(client.clone())
                .build()
                .map_err(|e| format!("metrics: {e}"))?;
            Ok::<_, String>(
                SdkMeterProvider::builder()
                    .with_periodic_exporter(exporter)
                    .with_resource(resource.clone())
                    .build(),
            )
        })
        .and_then(|r| r.map_err(|p| problems.push(p)).ok());
    if !problems.is_empty() {
        eprintln!(
            "palisade: warning: OpenTelemetry: {}; that signal is not exported",
            problems.join("; ")
        );
    }
    if traces.is_none() && metrics.is_none() {
        return Ok(None);
    }
    let sink = Arc::new(OtelSink {
        tracer: traces.as_ref().map(|p| {
            use opentelemetry::trace::TracerProvider as _;
            p.tracer("palisade")
        }),
        instruments: metrics.as_ref().map(Instruments::new),
        salt: Salt::new(),
        logs: Mutex::default(),
    });
    let flush = if hook_command {
        HOOK_COMMAND_FLUSH.min(timeout)
    } else {
        timeout.min(Duration::from_secs(10))
    };
    Ok(Some(Telemetry {
        traces,
        metrics,
        sink,
        flush,
    }))
}

/// The process's resource: the SDK's (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`), with
/// `service.name` `palisade` unless they name one, the version, and an instance id of this
/// process (a hook command is one process per event: their series must not collide).
fn resource() -> Resource {
    let named = var("OTEL_SERVICE_NAME").is_some()
        || var("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|a| a.contains("service.name="));
    let mut builder = Resource::builder();
    if !named {
        builder = builder.with_service_name("palisade");
    }
    let mut id = [0u8; 16];
    let _ = getrandom::fill(&mut id);
    let id: String = id.iter().map(|b| format!("{b:02x}")).collect();
    builder
        .with_attributes([
            KeyValue::new("service.version", env!("CARGO_PKG_VERSION")),
            KeyValue::new("service.instance.id", id),
        ])
        .build()
}

/// The exporters' HTTP client: reqwest's blocking client (the SDK's export threads are not
/// async), no redirects, bounded answers; a failure is reported once a minute at most.
#[derive(Debug, Clone)]
struct Client {
    inner: reqwest::blocking::Client,
    warned: Arc<Mutex<Option<Instant>>>,
}

impl Client {
    fn new(timeout: Duration) -> Result<Client, String> {
        let inner = reqwest::blocking::Client::builder()
            .timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Client {
            inner,
            warned: Arc::default(),
        })
    }

    fn warn(&self, problem: &str) {
        let mut warned = self.warned.lock().unwrap_or_else(|e| e.into_inner());
        if warned.is_none_or(|at| at.elapsed() > Duration::from_secs(60)) {
            *warned = Some(Instant::now());
            eprintln!("palisade: warning: OpenTelemetry: {problem}");
        }
    }

    fn send(&self, request: http::Request<Bytes>) -> Result<http::Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let url = parts.uri.to_string();
        let mut response = self
            .inner
            .request(parts.method, &url)
            .headers(parts.headers)
            .body(body.to_vec())
            .send()
            .inspect_err(|e| self.warn(&format!("cannot export to {url}: {e}")))?;
        let mut answer = http::Response::builder().status(response.status());
        if let Some(headers) = answer.headers_mut() {
            *headers = std::mem::take(response.headers_mut());
        }
        let mut body = Vec::new();
        response.take(MAX_ANSWER_BYTES).read_to_end(&mut body)?;
        let answer = answer.body(Bytes::from(body))?;
        if !answer.status().is_success() {
            self.warn(&format!("{url} answered {}", answer.status()));
        }
        Ok(answer)
    }
}

#[async_trait::async_trait]
impl HttpClient for Client {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, HttpError> {
        self.send(request)
    }
}

/// The span a W3C `traceparent` names (`00-TRACE-SPAN-FLAGS`), as a remote parent; `None`
/// for a malformed one (`palisade::events::in_trace` lets only well-formed ones through).
fn remote(trace_parent: &str) -> Option<SpanContext> {
    let mut parts = trace_parent.split('-').skip(1);
    let trace = TraceId::from_hex(parts.next()?).ok()?;
    let span = SpanId::from_hex(parts.next()?).ok()?;
    let flags = u8::from_str_radix(parts.next()?, 16).ok()?;
    Some(SpanContext::new(
        trace,
        span,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    ))
}

thread_local! {
    /// The ids the next span built on this thread takes (a dispatch's span: its id was given
    /// to its hooks' spans before it ended).
    static NEXT_TRACE: Cell<Option<TraceId>> = const { Cell::new(None) };
    static NEXT_SPAN: Cell<Option<SpanId>> = const { Cell::new(None) };
}

/// Random ids, but for a dispatch's span, which takes the ids derived from its invocation.
#[derive(Debug, Default)]
struct Ids(RandomIdGenerator);

impl IdGenerator for Ids {
    fn new_trace_id(&self) -> TraceId {
        NEXT_TRACE.take().unwrap_or_else(|| self.0.new_trace_id())
    }

    fn new_span_id(&self) -> SpanId {
        NEXT_SPAN.take().unwrap_or_else(|| self.0.new_span_id())
    }
}

/// The secret of this process from which a dispatch's trace and span ids are derived: its
/// hooks' spans (which end first) and its own span agree on them without a table.
struct Salt([u64; 3]);

/// SplitMix64's finalizer: a bijection of u64 that mixes every bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Salt {
    fn new() -> Salt {
        let mut bytes = [0u8; 24];
        let _ = getrandom::fill(&mut bytes);
        let word = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap());
        Salt([word(0), word(1), word(2)])
    }

    /// The trace and span id of dispatch `invocation` (`inv-…`).
    fn ids(&self, invocation: &str) -> (TraceId, SpanId) {
        let n = invocation
            .strip_prefix("inv-")
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .unwrap_or_else(|| {
                use std::hash::{Hash as _, Hasher as _};
                let mut h = std::hash::DefaultHasher::new();
                invocation.hash(&mut h);
                h.finish()
            });
        let low = mix(self.0[1] ^ n);
        let trace = (u128::from(mix(self.0[0])) << 64) | u128::from(low);
        let span = mix(self.0[2] ^ n).max(1);
        (TraceId::from(trace), SpanId::from(span))
    }
}

/// The metric instruments.
struct Instruments {
    invocations: Counter<u64>,
    failures: Counter<u64>,
    dropped: Counter<u64>,
    fuel: Counter<u64>,
    duration: Histogram<f64>,
    dispatches: Counter<u64>,
    dispatch_duration: Histogram<f64>,
}

impl Instruments {
    fn new(provider: &SdkMeterProvider) -> Instruments {
        let meter = provider.meter("palisade");
        Instruments {
            invocations: meter
                .u64_counter("palisade.hook.invocations")
                .with_unit("{invocation}")
                .with_description(
                    "Finished hook invocations by hook, point and outcome (a decision, \
                     failed, or a shadow hook's would_...)",
                )
                .build(),
            failures: meter
                .u64_counter("palisade.hook.failures")
                .with_unit("{failure}")
                .with_description("Hook failures by hook and reason")
                .build(),
            dropped: meter
                .u64_counter("palisade.hook.dropped")
                .with_unit("{invocation}")
                .with_description(
                    "Work dropped: background invocations refused by a full session queue \
                     (dropped-saturated), or cut off before they finished (dropped)",
                )
                .build(),
            fuel: meter
                .u64_counter("palisade.hook.fuel")
                .with_unit("{instruction}")
                .with_description("Fuel spent by wasm hooks")
                .build(),
            duration: meter
                .f64_histogram("palisade.hook.duration")
                .with_unit("s")
                .with_description("Wall time of hook invocations")
                .with_boundaries(BUCKETS.to_vec())
                .build(),
            dispatches: meter
                .u64_counter("palisade.dispatches")
                .with_unit("{dispatch}")
                .with_description("Dispatches of a point by outcome")
                .build(),
            dispatch_duration: meter
                .f64_histogram("palisade.dispatch.duration")
                .with_unit("s")
                .with_description("Wall time of dispatches, until decided")
                .with_boundaries(BUCKETS.to_vec())
                .build(),
        }
    }
}

/// A log line of a hook, kept until its span is made.
type LogLine = (SystemTime, &'static str, String);

/// More hooks with log lines waiting for their end than this, and the waiting lines are
/// dropped (their end never came: a process cut off).
const MAX_WAITING_LOGS: usize = 4096;

/// The event sink that makes spans and points.
struct OtelSink {
    tracer: Option<SdkTracer>,
    instruments: Option<Instruments>,
    salt: Salt,
    /// Log lines by (invocation, hook), until the hook's end event.
    logs: Mutex<HashMap<(String, String), Vec<LogLine>>>,
}

/// The end of an invocation, as the span and the points see it.
struct End<'a> {
    duration_us: u64,
    fuel: u64,
    outcome: &'a str,
    attributes: Vec<KeyValue>,
    failure: Option<(String, &'a str)>,
}

fn end_of(kind: &EventKind) -> Option<End<'_>> {
    Some(match kind {
        EventKind::HookCompleted {
            duration_us,
            fuel_consumed,
            decision,
            honoured,
        } => End {
            duration_us: *duration_us,
            fuel: *fuel_consumed,
            outcome: decision,
            attributes: vec![KeyValue::new("palisade.honoured", *honoured)],
            failure: None,
        },
        EventKind::HookDenied {
            duration_us,
            fuel_consumed,
            reason_code,
            message,
        } => End {
            duration_us: *duration_us,
            fuel: *fuel_consumed,
            outcome: "deny",
            attributes: vec![
                KeyValue::new("palisade.honoured", true),
                KeyValue::new("palisade.reason_code", reason_code.clone()),
                KeyValue::new("palisade.message", message.clone()),
            ],
            failure: None,
        },
        EventKind::HookFailed {
            duration_us,
            fuel_consumed,
            reason,
            detail,
            failed_closed,
        } => End {
            duration_us: *duration_us,
            fuel: *fuel_consumed,
            outcome: "failed",
            attributes: vec![KeyValue::new("palisade.failed_closed", *failed_closed)],
            failure: Some((reason.to_string(), detail)),
        },
        EventKind::HookShadowed {
            duration_us,
            fuel_consumed,
            decision,
            reason_code,
            message,
            failure,
        } => End {
            duration_us: *duration_us,
            fuel: *fuel_consumed,
            outcome: decision,
            attributes: vec![
                KeyValue::new("palisade.honoured", false),
                KeyValue::new("palisade.enforce", false),
                KeyValue::new("palisade.reason_code", reason_code.clone()),
                KeyValue::new("palisade.message", message.clone()),
            ]
            .into_iter()
            .chain(failure.map(|f| KeyValue::new("palisade.failure.reason", f.to_string())))
            .collect(),
            failure: None,
        },
        _ => return None,
    })
}

impl OtelSink {
    fn log(&self, event: &Event, level: &'static str, message: &str) {
        if self.tracer.is_none() {
            return;
        }
        let mut logs = self.logs.lock().unwrap_or_else(|e| e.into_inner());
        if logs.len() >= MAX_WAITING_LOGS {
            logs.clear();
        }
        logs.entry((event.invocation_id.clone(), event.hook_id.clone()))
            .or_default()
            .push((SystemTime::now(), level, message.to_string()));
    }

    fn count(&self, event: &Event, end: &End) {
        let Some(m) = &self.instruments else {
            return;
        };
        let hook = KeyValue::new("palisade.hook", event.hook_id.clone());
        let point = KeyValue::new("palisade.point", event.point.to_string());
        m.invocations.add(
            1,
            &[
                hook.clone(),
                point.clone(),
                KeyValue::new("palisade.outcome", end.outcome.to_string()),
            ],
        );
        if let Some((reason, _)) = &end.failure {
            let reason = KeyValue::new("palisade.failure.reason", reason.clone());
            m.failures
                .add(1, &[hook.clone(), point.clone(), reason.clone()]);
            if reason.value.as_str().starts_with("dropped") {
                m.dropped.add(1, &[hook.clone(), point.clone(), reason]);
            }
        }
        m.fuel.add(end.fuel, std::slice::from_ref(&hook));
        m.duration
            .record(end.duration_us as f64 / 1e6, &[hook, point]);
    }

    fn span(&self, event: &Event, end: End) {
        let Some(tracer) = &self.tracer else {
            return;
        };
        let (trace, dispatch) = self.salt.ids(&event.invocation_id);
        // In the caller's trace, when it sent one (its dispatch span is too).
        let trace = match event.trace_parent.as_deref().and_then(remote) {
            Some(caller) => caller.trace_id(),
            None => trace,
        };
        let parent = Context::new().with_remote_span_context(SpanContext::new(
            trace,
            dispatch,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ));
        let ended = SystemTime::now();
        let started = ended
            .checked_sub(Duration::from_micros(end.duration_us))
            .unwrap_or(ended);
        let mut attributes = vec![
            KeyValue::new("session.id", event.session_id.clone()),
            KeyValue::new("palisade.invocation_id", event.invocation_id.clone()),
            KeyValue::new("palisade.point", event.point.to_string()),
            KeyValue::new("palisade.plugin", event.plugin.clone()),
            KeyValue::new("palisade.hook", event.hook_id.clone()),
            KeyValue::new("palisade.decision", end.outcome.to_string()),
            KeyValue::new("palisade.fuel_consumed", end.fuel as i64),
            KeyValue::new("palisade.duration_us", end.duration_us as i64),
        ];
        attributes.extend(end.attributes);
        // A sub-agent's hook: which sub-agent (GenAI's semantic conventions name an agent so).
        if let Some(agent) = &event.agent_id {
            attributes.push(KeyValue::new("gen_ai.agent.id", agent.clone()));
        }
        if let Some(kind) = &event.agent_type {
            attributes.push(KeyValue::new("gen_ai.agent.name", kind.clone()));
        }
        if let Some((reason, _)) = &end.failure {
            attributes.push(KeyValue::new("palisade.failure.reason", reason.clone()));
        }
        let mut span = tracer.build_with_context(
            tracer
                .span_builder(format!("hook {}", event.hook_id))
                .with_kind(SpanKind::Internal)
                .with_start_time(started)
                .with_attributes(attributes),
            &parent,
        );
        let logs = self
            .logs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(event.invocation_id.clone(), event.hook_id.clone()));
        for (at, level, message) in logs.into_iter().flatten() {
            span.add_event_with_timestamp(
                "log",
                at,
                vec![
                    KeyValue::new("log.level", level),
                    KeyValue::new("log.message", message),
                ],
            );
        }
        if let Some((reason, detail)) = end.failure {
            span.set_status(Status::error(format!("{reason}: {detail}")));
        }
        span.end_with_timestamp(ended);
    }
}

impl EventSink for OtelSink {
    fn emit(&self, event: &Event) {
        if let EventKind::PluginLog { level, message } = &event.kind {
            return self.log(event, level, message);
        }
        let Some(end) = end_of(&event.kind) else {
            return;
        };
        self.count(event, &end);
        self.span(event, end);
    }

    fn dispatched(&self, dispatch: &Dispatch) {
        let point = dispatch.point.to_string();
        if let Some(m) = &self.instruments {
            let at = [KeyValue::new("palisade.point", point.clone())];
            m.dispatches.add(
                1,
                &[
                    at[0].clone(),
                    KeyValue::new("palisade.outcome", dispatch.outcome),
                ],
            );
            m.dispatch_duration
                .record(dispatch.duration_us as f64 / 1e6, &at);
        }
        let Some(tracer) = &self.tracer else {
            return;
        };
        let (trace, span_id) = self.salt.ids(&dispatch.invocation_id);
        let mut attributes = vec![
            KeyValue::new("session.id", dispatch.session_id.clone()),
            KeyValue::new("palisade.invocation_id", dispatch.invocation_id.clone()),
            KeyValue::new("palisade.point", point.clone()),
            KeyValue::new("palisade.outcome", dispatch.outcome),
            KeyValue::new("palisade.hooks", i64::from(dispatch.hooks)),
            KeyValue::new("palisade.duration_us", dispatch.duration_us as i64),
        ];
        if let Some(hook) = &dispatch.decided_by {
            attributes.push(KeyValue::new("palisade.decided_by", hook.clone()));
        }
        // A child of the caller's span, when the request carried its trace context.
        let caller = dispatch.trace_parent.as_deref().and_then(remote);
        let parent = match &caller {
            Some(caller) => Context::new().with_remote_span_context(caller.clone()),
            None => Context::new(),
        };
        NEXT_TRACE.set(Some(caller.map_or(trace, |c| c.trace_id())));
        NEXT_SPAN.set(Some(span_id));
        let mut span = tracer.build_with_context(
            tracer
                .span_builder(format!("dispatch {point}"))
                .with_kind(SpanKind::Internal)
                .with_start_time(dispatch.started)
                .with_attributes(attributes),
            &parent,
        );
        NEXT_TRACE.set(None);
        NEXT_SPAN.set(None);
        span.end_with_timestamp(dispatch.started + Duration::from_micros(dispatch.duration_us));
    }
}
