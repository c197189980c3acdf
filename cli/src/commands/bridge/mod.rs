//! `palisade claude-code DIR`, `palisade codex DIR`, `palisade gemini DIR` — one subcommand
//! per agent of [`Dialect::ALL`]: Palisade as an agent's hook command.

mod warm;

use crate::hook_io::{DEFAULT_BUDGET_MS, answer, read_stdin_by, write};
use palisade::agents::Meaning;
use palisade::bridge::{self, Dialect, Reply};
use palisade::events::EventSink;
use palisade::{JsonlSink, Plugins};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use warm::compile_in_background;

/// What the budget keeps back for writing the answer.
const ANSWER_MARGIN: Duration = Duration::from_millis(50);
/// The longest the process waits for observers once it has answered.
const MAX_DRAIN: Duration = Duration::from_secs(2);

/// Reads one hook event (JSON) on stdin, runs the plugins, answers in the agent's JSON.
#[derive(clap::Args, Debug)]
pub struct BridgeCommand {
    /// The plugin directory.
    dir: PathBuf,
    /// Append every lifecycle event to this JSONL audit log.
    #[arg(long)]
    audit_log: Option<PathBuf>,
    /// Also record the agent's event itself in the audit log (an `agent_event` line), so
    /// that `palisade replay` and `palisade diff` can replay the session from the log. Off by
    /// default: it writes the agent's prompts, tool inputs and tool results to the log.
    #[arg(long, requires = "audit_log")]
    record: bool,
    /// Print the time spent loading and dispatching on stderr.
    #[arg(long)]
    timings: bool,
    /// The event's budget in milliseconds: reading it, loading the plugins and every
    /// foreground hook. When it runs out, the event gets its fail-closed answer.
    #[arg(long, default_value_t = DEFAULT_BUDGET_MS, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    budget_ms: u64,
    /// The host's preparation, begun before the async runtime ([`BridgeCommand::begin`]).
    #[arg(skip)]
    preparing: Option<Preparing>,
}

/// Records what the bridge is doing, so that a budget that runs out can name it.
#[derive(Default)]
struct Doing {
    what: Mutex<String>,
    /// How many components are compiling (they were not in the cache).
    compiling: AtomicUsize,
    /// Whether a load waits for another process's compile of a component.
    warming: std::sync::atomic::AtomicBool,
}

impl Doing {
    fn set(&self, what: impl Into<String>) {
        *self.what.lock().unwrap_or_else(|e| e.into_inner()) = what.into();
    }

    fn get(&self) -> String {
        self.what.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Passes events on, and remembers the hook that started last.
struct Watch {
    doing: Arc<Doing>,
    inner: Option<Arc<dyn EventSink>>,
}

impl EventSink for Watch {
    fn emit(&self, event: &palisade::events::Event) {
        if let palisade::events::EventKind::HookStarted = event.kind {
            self.doing
                .set(format!("running the hook `{}`", event.hook_id));
        }
        if let Some(inner) = &self.inner {
            inner.emit(event);
        }
    }

    fn dispatched(&self, dispatch: &palisade::events::Dispatch) {
        if let Some(inner) = &self.inner {
            inner.dispatched(dispatch);
        }
    }

    /// The starts (to name the hook that overran) and what the inner sink wants; nothing else
    /// is made for a bridge without an audit log or OpenTelemetry.
    fn interest(&self) -> palisade::events::Interest {
        let started = palisade::events::Interest {
            started: true,
            ..palisade::events::Interest::ENDS
        };
        self.inner
            .as_ref()
            .map_or(started, |inner| inner.interest().or(started))
    }
}

/// An agent's hook command: `palisade AGENT DIR`, a subcommand for each agent Palisade speaks
/// to ([`Dialect::ALL`]), all with [`BridgeCommand`]'s arguments.
pub type HookCommand = super::PerAgent<BridgeCommand>;

impl super::AgentArgs for BridgeCommand {
    fn about(dialect: Dialect) -> String {
        let (name, title) = (dialect.name(), dialect.spec().title());
        format!(
            "{title}'s hook command: reads one hook event (JSON) on stdin, runs the plugins, \
             answers in {title}'s JSON. See `palisade install {name}`"
        )
    }
}

impl HookCommand {
    /// Begins building the event's host on a thread of its own ([`BridgeCommand::begin`]).
    pub fn begin(&mut self) {
        self.args.begin();
    }

    /// Answers the event, within the budget.
    pub async fn execute(self) -> anyhow::Result<ExitCode> {
        self.args.execute(self.dialect).await
    }
}

impl BridgeCommand {
    /// Begins building the event's host on a thread of its own, before the process builds
    /// its async runtime.
    pub fn begin(&mut self) {
        if self.preparing.is_none() {
            self.preparing = Some(Preparing::start(&self.dir, self.audit_log.clone()));
        }
    }

    /// Answers the event in `dialect`, within the budget.
    async fn execute(self, dialect: Dialect) -> anyhow::Result<ExitCode> {
        bridge_event(dialect, self).await
    }
}

/// The audit log's opening and the host's building, on a thread of their own
/// ([`BridgeCommand::begin`]); that thread then maps the component the event's plugins loaded
/// as their largest the last time, once the event says which ([`crate::ahead`]).
struct Preparing {
    doing: Arc<Doing>,
    /// What the thread prepared, once it has.
    prepared: std::sync::mpsc::Receiver<Result<Prepared, String>>,
    thread: std::io::Result<std::thread::JoinHandle<()>>,
    /// What names the event's components ([`crate::ahead::key`]), for the component to map
    /// ahead.
    ahead: std::sync::mpsc::Sender<String>,
    /// What the hint said, once read there (so that the load need not read it again).
    hinted: Arc<std::sync::OnceLock<Option<String>>>,
}

impl std::fmt::Debug for Preparing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Preparing").finish_non_exhaustive()
    }
}

impl Preparing {
    fn start(dir: &Path, audit_log: Option<PathBuf>) -> Preparing {
        let doing = Arc::new(Doing::default());
        let (prepared_here, prepared) = std::sync::mpsc::channel();
        let (ahead, ahead_told) = std::sync::mpsc::channel::<String>();
        let hinted = Arc::new(std::sync::OnceLock::<Option<String>>::new());
        let thread = {
            let (doing, dir, hinted) = (doing.clone(), dir.to_path_buf(), hinted.clone());
            std::thread::Builder::new()
                .name("palisade-prepare".into())
                .spawn(move || {
                    let prepared = prepare(&doing, &dir, audit_log.as_deref());
                    let host = match &prepared {
                        Ok(Prepared { host: Ok(host), .. }) => Some(host.clone()),
                        _ => None,
                    };
                    let _ = prepared_here.send(prepared);
                    let (Some(host), Ok(key)) = (host, ahead_told.recv()) else {
                        return;
                    };
                    if let Some(sha256) = hinted.get_or_init(|| crate::ahead::hint(&key)) {
                        host.load_ahead(sha256);
                    }
                })
        };
        Preparing {
            doing,
            prepared,
            thread,
            ahead,
            hinted,
        }
    }
}

/// What [`prepare`] makes.
struct Prepared {
    audit: Option<Arc<JsonlSink>>,
    host: Result<palisade::Host, palisade::Error>,
}

/// Opens the audit log and builds the host of one bridged event (plugins of `dir`); `Err`: the
/// audit log cannot be opened (why).
fn prepare(doing: &Arc<Doing>, dir: &Path, audit_log: Option<&Path>) -> Result<Prepared, String> {
    let audit = match audit_log {
        None => None,
        Some(path) => Some(
            crate::audit::open(path)
                .map_err(|e| format!("cannot open the audit log {}: {e}", path.display()))?,
        ),
    };
    let watch = Arc::new(Watch {
        doing: doing.clone(),
        inner: crate::telemetry::with(audit.clone().map(|audit| audit as Arc<dyn EventSink>)),
    });
    let builder = crate::facts::appending(crate::cache::one_event_host_builder())
        .event_sink(watch)
        .on_compile(compile_observer(doing, dir));
    let host = builder.build();
    Ok(Prepared { audit, host })
}

/// Keeps `doing` up to date with the components compiling while the plugins of `dir` load.
fn compile_observer(doing: &Arc<Doing>, dir: &Path) -> palisade::CompileObserver {
    let (doing, loading) = (
        doing.clone(),
        format!("loading the plugins of {}", dir.display()),
    );
    let dir = dir.display().to_string();
    Arc::new(move |progress| match progress {
        palisade::CompileProgress::Started { plugin, .. } => {
            doing.compiling.fetch_add(1, Ordering::Relaxed);
            doing.set(format!(
                "compiling the component of `{plugin}` (it is not in the cache yet)"
            ));
        }
        palisade::CompileProgress::Finished { .. } => {
            let before = doing.compiling.fetch_sub(1, Ordering::Relaxed);
            if before == 1 {
                doing.set(loading.clone());
            }
        }
        palisade::CompileProgress::Waiting { plugin } => {
            doing.warming.store(true, Ordering::Relaxed);
            doing.set(format!(
                "waiting for the compile of the component of `{plugin}` already under way \
                 (the component cache is warming; `palisade check {dir}` warms it ahead)"
            ));
        }
        _ => {}
    })
}

/// One bridged event, answered within `options.budget_ms`: reading it, loading (and compiling)
/// the plugins and every foreground hook all count. When the budget runs out, the event's
/// fail-closed answer goes out, naming what overran. The answer is written and flushed
/// before observers are awaited; they get what is left of the budget (at most
/// [`MAX_DRAIN`]), and what they have not finished then is cut off and recorded as dropped.
/// The process exits within the budget whatever the plugins do: an agent waits for the hook
/// process to exit, not only for its output.
async fn bridge_event(dialect: Dialect, mut options: BridgeCommand) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let budget = Duration::from_millis(options.budget_ms);
    let deadline = started + budget;
    let preparing = match options.preparing.take() {
        Some(preparing) => preparing,
        None => Preparing::start(&options.dir, options.audit_log.clone()),
    };
    let doing = preparing.doing.clone();
    doing.set("reading the hook event on stdin");
    let event = Arc::new(Mutex::new(String::new()));
    let answer_by = deadline.checked_sub(ANSWER_MARGIN).unwrap_or(deadline);
    let work = decide(dialect, &options, preparing, &event, started, answer_by);
    match tokio::time::timeout_at(answer_by.into(), work).await {
        Ok(Ok((reply, lifecycle))) => {
            // The event's facts and decisions are on the fact stream before the agent hears
            // the answer, or the answer is the event's refusal.
            let reply = match crate::facts::flush_before_answering(
                answer_by.saturating_duration_since(Instant::now()),
            ) {
                Ok(()) => reply,
                Err(e) => {
                    let event = event.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    bridge::failure(dialect, &event, &e.to_string())
                }
            };
            write(&reply);
            // Observers get what is left of the budget, and no more than MAX_DRAIN.
            let left = deadline.saturating_duration_since(Instant::now());
            lifecycle
                .session()
                .drain_background_for(left.min(MAX_DRAIN))
                .await;
            // And the audit log what is left after them.
            crate::audit::flush(flush_within(deadline));
            crate::telemetry::shutdown();
            crate::hook_io::exit_now(reply.exit_code)
        }
        Ok(Err(early)) => answer(early, flush_within(deadline)),
        Err(_) => {
            let event = event.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let mut message = format!(
                "the event's budget of {} ms ran out while {}; refused, since what the \
                 plugins decide could not be known in time (raise --budget-ms, or the \
                 hook's timeout_ms)",
                budget.as_millis(),
                doing.get()
            );
            let warming = doing.warming.load(Ordering::Relaxed);
            if warming && !message.contains("cache is warming") {
                message.push_str(&format!(
                    "; a component it needs was being compiled by another process (the \
                     component cache is warming; `palisade check {}` warms it ahead)",
                    options.dir.display()
                ));
            }
            if doing.compiling.load(Ordering::Relaxed) > 0 || warming {
                message.push_str(&compile_in_background(&options.dir));
            }
            // An event not read yet refuses, as a tool call.
            let refusal = match event.is_empty() {
                true => bridge::failure_at(Meaning::ToolCall, &message),
                false => bridge::failure(dialect, &event, &message),
            };
            answer(refusal, flush_within(deadline))
        }
    }
}

/// How long the audit log may take to write its last lines once the event is answered: what
/// is left of the budget, [`MAX_DRAIN`] at most. The process must be gone before the agent's
/// own timeout, which would take the hook as no objection, whatever it answered.
fn flush_within(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .min(MAX_DRAIN)
}

/// Reads the event, loads the plugins its points need and runs them; `Err`: the answer of a
/// bridge that cannot decide (fail closed where the event has a veto).
async fn decide(
    dialect: Dialect,
    options: &BridgeCommand,
    preparing: Preparing,
    event: &Mutex<String>,
    started: Instant,
    answer_by: Instant,
) -> Result<(Reply, palisade::Lifecycle), Reply> {
    // The audit log opens, the host is built and the manifests are read on two blocking
    // threads while the event is read here: nothing else runs on this thread meanwhile, and
    // the read keeps to the budget.
    let doing = &preparing.doing.clone();
    let starting = start_load(options, preparing);
    let Some(raw) = read_stdin_by(answer_by) else {
        // The budget's answer, naming the read as what overran.
        return std::future::pending().await;
    };
    let input: Value = match raw.and_then(|raw| read_event(&raw).map_err(|e| e.to_string())) {
        Ok(input) => input,
        // Without the event name, nothing says whether blocking is safe: block, since
        // the most likely caller of a guard is a tool call.
        Err(e) => {
            return Err(bridge::failure_at(
                Meaning::ToolCall,
                &format!("cannot read the hook event on stdin: {e}"),
            ));
        }
    };
    let name = input
        .get("hook_event_name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    *event.lock().unwrap_or_else(|e| e.into_inner()) = name.clone();
    match dialect.waits(&name) {
        true => crate::hook_io::end_with_the_agent(),
        false => crate::hook_io::outlive_the_agent(),
    }
    // The event itself with --record; that an event with no point happened, in any audit log.
    let meaning = dialect.meaning(&name);
    let record = match (options.record, meaning) {
        (true, _) => Some(bridge::agent_event(dialect, &input)),
        (false, Meaning::Observed) => Some(bridge::observed_event(dialect, &input)),
        (false, _) => None,
    };
    let tool = dialect.tool_of(&input).map(str::to_owned);
    let event = EventToLoad {
        name: name.clone(),
        points: meaning.points(),
        tool,
        record,
    };
    let (plugins, loads) = load(starting, options, dialect, event, doing).await?;
    // Each plugin instantiates once here, at its first call, and the calls run one after the
    // other: the later ones' instances are made on the other core meanwhile.
    plugins.make_instances_ahead(meaning.points());
    let loaded = started.elapsed();
    let session_id = input
        .get("session_id")
        .and_then(Value::as_str)
        .unwrap_or("unknown-session")
        .to_string();
    let lifecycle = palisade::Lifecycle::new(plugins.session(session_id));
    // The hooks run while the components load (a hook waits for its own at its turn). A
    // component that does not load refuses the event, as a load that failed before any hook
    // ran did: the dispatch is dropped as soon as that is known, and its answer, if it came
    // first, is not the event's.
    let reply = {
        let mut loads = std::pin::pin!(loads);
        let mut dispatch = std::pin::pin!(bridge::handle_in(&lifecycle, dialect, &input));
        tokio::select! {
            biased;
            loaded = &mut loads => {
                loaded?;
                dispatch.await
            }
            reply = &mut dispatch => {
                loads.await?;
                reply
            }
        }
    };
    if options.timings {
        let count = plugins.iter().count();
        eprintln!(
            "palisade: {name}: read the event and checked its {count} plugin{} in {:.2} ms, ran \
             {} (their components loading meanwhile) in {:.2} ms",
            if count == 1 { "" } else { "s" },
            loaded.as_secs_f64() * 1e3,
            if reply.points.is_empty() {
                "nothing".to_string()
            } else {
                reply.points.join(", ")
            },
            (started.elapsed() - loaded).as_secs_f64() * 1e3,
        );
    }
    Ok((reply, lifecycle))
}

/// A bridged event's load, begun before its event is read: on a thread of its own, which opens
/// the audit log, builds the host and reads the plugins' manifests meanwhile, then waits for
/// the event.
struct Starting {
    event: std::sync::mpsc::Sender<EventToLoad>,
    /// What names the event's components, for the component to map ahead.
    ahead: std::sync::mpsc::Sender<String>,
    checked: tokio::sync::oneshot::Receiver<Plugins>,
    loads: tokio::task::JoinHandle<Result<(), NotLoaded>>,
}

/// What a load needs of its event: its name, the points it runs, its tool, and what the audit
/// log records of it.
struct EventToLoad {
    name: String,
    points: &'static [palisade::Point],
    tool: Option<String>,
    record: Option<Value>,
}

/// Begins the load of `options.dir` for an event not yet read ([`load`] goes on with it): on a
/// thread of its own, so the budget can still answer whatever takes long — a compile, or an
/// audit log that cannot be opened in time (a FIFO no one reads).
fn start_load(options: &BridgeCommand, preparing: Preparing) -> Starting {
    let dir = options.dir.clone();
    let audit_log = options.audit_log.clone();
    let Preparing {
        doing,
        prepared: prepared_there,
        thread: preparing,
        ahead,
        hinted,
    } = preparing;
    let (event, told) = std::sync::mpsc::channel::<EventToLoad>();
    let (checked, plugins) = tokio::sync::oneshot::channel();
    // The manifests are read on a blocking thread while the event is read and the host built
    // ([`Preparing`]), whose problems are the load's, reported with it: the components load
    // after both, the largest first, unless the host's thread has it mapped already.
    let loads = tokio::task::spawn_blocking(move || {
        let manifests = palisade::Manifests::read(&dir);
        let prepared = match preparing {
            Ok(thread) => match prepared_there.recv() {
                Ok(prepared) => prepared,
                // It ended before it prepared: it panicked, and so does this thread (had it
                // not, here, then).
                Err(_) => match thread.join() {
                    Err(panic) => std::panic::resume_unwind(panic),
                    Ok(()) => prepare(&doing, &dir, audit_log.as_deref()),
                },
            },
            // No thread to be had: here, then.
            Err(_) => prepare(&doing, &dir, audit_log.as_deref()),
        };
        // No event (it could not be read): nothing to load, and no one waits for this.
        let Ok(EventToLoad {
            name,
            points,
            tool,
            record,
        }) = told.recv()
        else {
            return Ok(());
        };
        let Prepared { audit, host } = prepared.map_err(NotLoaded::AuditLog)?;
        if let (Some(audit), Some(record)) = (audit, record) {
            audit.record(&record);
        }
        doing.set(loading(&dir));
        let (plugins, loads) = host
            .and_then(|host| manifests.load_overlapped(&host, points, tool.as_deref()))
            .map_err(|e| NotLoaded::Plugins(e.into()))?;
        // The hooks begin; this thread loads its share of the components meanwhile.
        let _ = checked.send(plugins.clone());
        loads.finish().map_err(|e| NotLoaded::Plugins(e.into()))?;
        let key = crate::ahead::key(&dir, &name, tool.as_deref());
        let before = hinted.get_or_init(|| crate::ahead::hint(&key));
        crate::ahead::remember(&key, before.as_deref(), &plugins);
        Ok(())
    });
    Starting {
        event,
        ahead,
        checked: plugins,
        loads,
    }
}

/// Goes on with the load `starting` for `event` of `dialect` (for its tool, when it is about
/// one: a hook whose matcher does not take it does not run), recording the agent's event in
/// the audit log (its `record`, when asked to). Returns the plugins once their manifests are
/// checked, with the components still loading ([`palisade::Manifests::load_overlapped`]),
/// and the end of their loads: `Err`, the event's refusal, when one did not load.
async fn load(
    starting: Starting,
    options: &BridgeCommand,
    dialect: Dialect,
    event: EventToLoad,
    doing: &Arc<Doing>,
) -> Result<(Plugins, impl Future<Output = Result<(), Reply>> + use<>), Reply> {
    // Said before the loading thread is told the event: it says `loading` once it has it.
    doing.set(match &options.audit_log {
        Some(log) => format!("opening the audit log {}", log.display()),
        None => loading(&options.dir),
    });
    let Starting {
        event: told,
        ahead,
        checked,
        loads,
    } = starting;
    let name = event.name.clone();
    let _ = ahead.send(crate::ahead::key(
        &options.dir,
        &name,
        event.tool.as_deref(),
    ));
    let _ = told.send(event);
    let (event, shown) = (name.clone(), options.dir.clone());
    let refusal = move |e: NotLoaded| match e {
        NotLoaded::AuditLog(problem) => bridge::failure(dialect, &event, &problem),
        NotLoaded::Plugins(e) => bridge::failure(
            dialect,
            &event,
            &format!("cannot load the plugins of {}: {e:#}", shown.display()),
        ),
    };
    let loads = async move {
        loads
            .await
            .unwrap_or_else(|panic| Err(NotLoaded::Plugins(panic.into())))
            .map_err(refusal)
    };
    match checked.await {
        Ok(plugins) => Ok((plugins, loads)),
        // The load ended before the plugins were checked: why is its outcome.
        Err(_) => Err(match loads.await {
            Err(refused) => refused,
            Ok(()) => bridge::failure(
                dialect,
                &name,
                "the plugins' load ended without handing them over",
            ),
        }),
    }
}

/// What a bridged event is doing while the plugins of `dir` load, for the budget's message.
fn loading(dir: &Path) -> String {
    format!(
        "loading the plugins of {} (compiling any not in the cache)",
        dir.display()
    )
}

/// Why a bridged event has no plugins to run.
enum NotLoaded {
    /// The audit log cannot be opened (this says why).
    AuditLog(String),
    Plugins(anyhow::Error),
}

/// A hook event as JSON, read as the agent meant it: a lone surrogate's escape (which
/// JavaScript writes and serde_json refuses) is read as U+FFFD, so the event is judged rather
/// than refused unread.
pub fn read_event(raw: &[u8]) -> serde_json::Result<Value> {
    crate::jsonrpc::parse(&String::from_utf8_lossy(raw))
}

/// [`read_event`], straight into a [`palisade::claude_code::HookEvent`]: one pass, no JSON
/// tree. An event this cannot read, [`read_event`] reads to say why.
pub fn read_hook_event(raw: &[u8]) -> serde_json::Result<palisade::claude_code::HookEvent> {
    crate::jsonrpc::parse_as(&String::from_utf8_lossy(raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use palisade::events::Interest;

    fn watch(inner: Option<Arc<dyn EventSink>>) -> Watch {
        Watch {
            doing: Arc::default(),
            inner,
        }
    }

    /// A bridge always hears which hook started (its budget's message names it), and
    /// otherwise only what its audit log or exporter wants: without them, no log line and no
    /// dispatch report is made.
    #[test]
    fn a_watch_wants_the_starts_and_what_its_sink_wants() {
        let started = Interest {
            started: true,
            ..Interest::ENDS
        };
        assert_eq!(watch(None).interest(), started);
        let dir = tempfile::tempdir().unwrap();
        let audit = JsonlSink::open(dir.path().join("audit.jsonl")).unwrap();
        assert_eq!(
            watch(Some(Arc::new(audit))).interest(),
            Interest {
                dispatches: false,
                ..Interest::ALL
            }
        );
        let metrics: Arc<dyn EventSink> = Arc::new(crate::metrics::Metrics::default());
        assert_eq!(metrics.interest(), Interest::ENDS);
        assert_eq!(watch(Some(metrics)).interest(), started);
    }
}
