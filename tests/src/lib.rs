//! Helpers for the integration tests: plugin directories written on the fly, and a sink that
//! records lifecycle events.

pub mod external;
pub mod redis;
pub mod web;

use palisade::events::{Event, EventKind, EventSink};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// A temporary plugin directory.
#[derive(Debug)]
pub struct PluginDir {
    dir: tempfile::TempDir,
}

impl Default for PluginDir {
    fn default() -> Self {
        Self::new()
    }
}

impl PluginDir {
    /// An empty plugin directory.
    pub fn new() -> Self {
        PluginDir {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Adds a plugin folder `name` with `manifest` and the component at `wasm` copied in as
    /// `plugin.wasm`.
    pub fn plugin(&self, name: &str, wasm: impl AsRef<Path>, manifest: &str) -> PathBuf {
        let folder = self.dir.path().join(name);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::copy(wasm.as_ref(), folder.join("plugin.wasm"))
            .unwrap_or_else(|e| panic!("copy {}: {e}", wasm.as_ref().display()));
        std::fs::write(folder.join("plugin.toml"), manifest).unwrap();
        folder
    }

    /// Adds a plugin of the scripted test guest: `name`, and the manifest body after the
    /// `name`/`wasm` lines (hooks, limits, config).
    pub fn scripted(&self, name: &str, body: &str) -> PathBuf {
        let manifest = format!("name = \"{name}\"\nwasm = \"plugin.wasm\"\n{body}");
        self.plugin(name, palisade_fixtures::SCRIPTED, &manifest)
    }

    /// Adds a plugin folder with raw files.
    pub fn raw(&self, name: &str, files: &[(&str, &[u8])]) -> PathBuf {
        let folder = self.dir.path().join(name);
        std::fs::create_dir_all(&folder).unwrap();
        for (file, bytes) in files {
            std::fs::write(folder.join(file), bytes).unwrap();
        }
        folder
    }
}

/// Waits until per-call `plugin` has its spare instance ready (`true`, made after its last
/// call) or is refused spares (`false`); panics after a minute of neither.
pub async fn spare_settled(plugin: &palisade::Plugin) -> bool {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if plugin.spare_ready() {
            return true;
        }
        if plugin.spares_refused() {
            return false;
        }
        assert!(
            std::time::Instant::now() < until,
            "{}: no spare made or refused",
            plugin.name()
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

/// Makes `calls` calls of per-call `plugin` with `call` (given the call's number), each after
/// the first once the plugin's spare is ready, so that each takes one (panics if spares are
/// refused); their answers.
pub async fn calls_on_spares<T, F: Future<Output = T>>(
    plugin: &palisade::Plugin,
    calls: usize,
    mut call: impl FnMut(usize) -> F,
) -> Vec<T> {
    let mut answers = Vec::with_capacity(calls);
    for n in 0..calls {
        if n > 0 {
            assert!(
                spare_settled(plugin).await,
                "{}: spares refused",
                plugin.name()
            );
        }
        answers.push(call(n).await);
    }
    answers
}

/// A host builder whose compiled components go to one cache for the whole test process
/// (a directory of its own, removed with it): each test's host is new, but a component
/// compiles once, not in every test that loads it. Tests of compiling and of the cache
/// itself make their own hosts.
pub fn host() -> palisade::HostBuilder {
    static CACHE: OnceLock<tempfile::TempDir> = OnceLock::new();
    let cache = CACHE.get_or_init(|| tempfile::tempdir().unwrap());
    palisade::Host::builder().cache_dir(cache.path())
}

/// Loads `dir` with a fresh host that makes no spare instances.
pub fn load_without_spares(dir: &PluginDir) -> palisade::Plugins {
    host()
        .state(palisade::state::StateStore::memory())
        .spare_instances(false)
        .build()
        .unwrap()
        .load_dir(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Records every lifecycle event.
#[derive(Debug, Default)]
pub struct Recorder {
    events: Mutex<Vec<Event>>,
}

impl EventSink for Recorder {
    fn emit(&self, event: &Event) {
        self.events.lock().unwrap().push(event.clone());
    }
}

impl Recorder {
    /// A new recorder, shared.
    pub fn shared() -> Arc<Recorder> {
        Arc::new(Recorder::default())
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }

    /// The messages plugins logged through `host.log`, in order (not their stdout/stderr).
    pub fn logs(&self) -> Vec<String> {
        self.events()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::PluginLog { level, message }
                    if level != "stdout" && level != "stderr" =>
                {
                    Some(message)
                }
                _ => None,
            })
            .collect()
    }

    /// What plugins wrote to stdout and stderr, as `(stream, line)`, in order.
    pub fn output(&self) -> Vec<(&'static str, String)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e.kind {
                EventKind::PluginLog { level, message }
                    if level == "stdout" || level == "stderr" =>
                {
                    Some((level, message))
                }
                _ => None,
            })
            .collect()
    }

    /// `(event name, hook id)` of every hook lifecycle event, in order.
    pub fn lifecycle(&self) -> Vec<(String, String)> {
        self.events()
            .into_iter()
            .filter(|e| !matches!(e.kind, EventKind::PluginLog { .. }))
            .map(|e| (e.kind.name().to_string(), e.hook_id))
            .collect()
    }

    /// The detail of the first `hook_failed` event, if any.
    pub fn first_failure_detail(&self) -> Option<String> {
        self.events().into_iter().find_map(|e| match e.kind {
            EventKind::HookFailed { detail, .. } => Some(detail),
            _ => None,
        })
    }

    /// Forgets every event so far.
    pub fn clear(&self) {
        self.events.lock().unwrap().clear();
    }
}

/// A `pre-tool` hook table for a manifest.
pub fn pre_tool_hook(capability: &str, priority: i32) -> String {
    format!(
        "[[hooks]]\npoint = \"pre-tool\"\ncapability = \"{capability}\"\npriority = {priority}\n"
    )
}

/// Loads `dir` with a fresh host, panicking with the problems if it does not load.
pub fn load(dir: &PluginDir) -> palisade::Plugins {
    // State in memory: a test run never sees another's.
    host()
        .state(palisade::state::StateStore::memory())
        .build()
        .unwrap()
        .load_dir(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Loads `dir` with a host whose events a [`Recorder`] keeps.
pub fn load_recorded(dir: &PluginDir) -> (palisade::Plugins, Arc<Recorder>) {
    let recorder = Recorder::shared();
    let host = host()
        .state(palisade::state::StateStore::memory())
        .event_sink(recorder.clone())
        .build()
        .unwrap();
    let plugins = host.load_dir(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    (plugins, recorder)
}

/// Asserts that loading `dir` fails and that, among its problems, each `(field, says)` of
/// `expected` is a problem of that field whose message contains `says`.
pub fn assert_load_problems(dir: &PluginDir, expected: &[(&str, &str)]) {
    let problems = match palisade::Host::new().unwrap().load_dir(dir.path()) {
        Err(palisade::Error::Invalid { problems }) => problems,
        other => panic!("loaded: {other:?}"),
    };
    let found: Vec<(String, String)> = problems
        .into_iter()
        .map(|p| (p.field.unwrap_or_default(), p.message))
        .collect();
    for (field, says) in expected {
        assert!(
            found.iter().any(|(f, m)| f == field && m.contains(says)),
            "missing {field}: {says} in {found:#?}"
        );
    }
}

/// A durable JSONL audit log in a temporary folder, read back as JSON values.
#[derive(Debug)]
pub struct AuditLog {
    _dir: tempfile::TempDir,
    path: PathBuf,
    sink: Arc<palisade::JsonlSink>,
}

impl AuditLog {
    /// Every event emitted so far (once the log has written them), one JSON value per line.
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.sink
            .flush(std::time::Duration::from_secs(10))
            .unwrap_or_else(|loss| panic!("{loss}"));
        std::fs::read_to_string(&self.path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Loads `dir` with a host writing every event to a [`palisade::JsonlSink`] audit log.
pub fn load_audited(dir: &PluginDir) -> (palisade::Plugins, AuditLog) {
    let log_dir = tempfile::tempdir().unwrap();
    let path = log_dir.path().join("audit.jsonl");
    let sink = Arc::new(palisade::JsonlSink::open(&path).unwrap());
    let host = host().event_sink(sink.clone()).build().unwrap();
    let plugins = host.load_dir(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    (
        plugins,
        AuditLog {
            _dir: log_dir,
            path,
            sink,
        },
    )
}

/// Transcript entries of the agent loop, for the expected transcripts of tests.
pub mod transcript {
    use palisade::agent::Entry;

    /// A context `source` contributed.
    pub fn context(source: &str, text: &str) -> Entry {
        Entry::Context {
            source: source.into(),
            text: text.into(),
        }
    }

    /// The result of call `id`.
    pub fn result(id: &str, is_error: bool, content: &str) -> Entry {
        Entry::ToolResult {
            tool_use_id: id.into(),
            is_error,
            content: content.into(),
        }
    }
}
