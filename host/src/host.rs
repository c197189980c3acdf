//! The host: what every plugin of it shares — its engines (`runtime::engines`), its event
//! sink, its component cache, its state store and fact stream — and [`HostBuilder`], which
//! configures it. Loading plugins into it is the loader's work; running them the runtime's.

use crate::error::Error;
use crate::events::EventSink;
use crate::runtime::engines::{DEFAULT_INSTANCE_POOL, Engines};
use crate::runtime::functions::Functions;
use std::sync::Arc;
use std::time::Duration;

/// The engines, the event sink, the component cache and the state store: everything plugins
/// share. Cheap to clone.
///
/// ```no_run
/// # async fn example() -> Result<(), palisade::Error> {
/// use palisade::{Host, ToolCall};
///
/// let host = Host::new()?;
/// let plugins = host.load_dir("plugins")?;
/// let session = plugins.session("session-1");
/// let call = ToolCall::new("t1", "Bash", serde_json::json!({"command": "rm -rf /"}));
/// let decision = session.pre_tool(&call).await;
/// println!("{decision:?}");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Host {
    pub(crate) inner: Arc<HostInner>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").finish_non_exhaustive()
    }
}

pub(crate) struct HostInner {
    /// Its engines and their linkers.
    pub engines: Engines,
    pub sink: Option<Arc<dyn EventSink>>,
    /// What the sink wants ([`EventSink::interest`], asked once); nothing without a sink.
    pub interest: crate::events::Interest,
    /// The sink, for plugins' logs: none when the sink does not want them.
    pub log_sink: Option<Arc<dyn EventSink>>,
    pub background_queue: usize,
    /// Whether `tool-result` observers run detached ([`HostBuilder::detached_tool_result`]).
    pub detached_tool_result: bool,
    pub cache: Option<crate::runtime::cache::Cache>,
    /// Components mapped from the cache ahead of their load ([`Host::load_ahead`]).
    pub ahead: crate::runtime::cache::Ahead,
    pub on_compile: Option<CompileObserver>,
    pub wrapped_deadline: Duration,
    /// Where granted plugin state is kept.
    pub state: crate::state::StateStore,
    /// Where committed facts and decisions are appended ([`HostBuilder::fact_stream`]).
    pub facts: Option<crate::facts::FactStream>,
    pub limits: LoadLimits,
}

/// Default bound of a session's background queue: more in-flight background invocations
/// than this are dropped, counted and reported as `dropped-saturated`.
pub const DEFAULT_BACKGROUND_QUEUE: usize = 64;
/// The overall deadline of a tool call wrapped by `tool-execute` hooks, by default: a
/// wrapper's own deadline stops while the tool runs, so this is what bounds a wrapper that
/// calls `next()` again and again.
pub const DEFAULT_WRAPPED_EXECUTION_DEADLINE: Duration = Duration::from_secs(600);
/// The largest component file loaded, by default (a Python or JavaScript component, which
/// carries its interpreter, is 12–18 MiB).
pub const DEFAULT_MAX_COMPONENT_BYTES: u64 = 256 * 1024 * 1024;

/// What loading accepts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoadLimits {
    pub max_component_bytes: u64,
    /// Refuse manifests whose guards or transforms fail open ([`HostBuilder::forbid_fail_open`]).
    pub forbid_fail_open: bool,
}

/// Configures a [`Host`].
pub struct HostBuilder {
    sink: Option<Arc<dyn EventSink>>,
    background_queue: usize,
    detached_tool_result: bool,
    cache_dir: Option<std::path::PathBuf>,
    on_compile: Option<CompileObserver>,
    wrapped_deadline: Duration,
    max_component_bytes: u64,
    forbid_fail_open: bool,
    state: Option<crate::state::StateStore>,
    facts: Option<crate::facts::FactStream>,
    instance_pool: u32,
    direct_calls: bool,
    spare_instances: bool,
}

/// What the host reports when it compiles a component, that is when the component is not in
/// the cache yet. A large component (a Python or JavaScript interpreter inside, 12–18 MB)
/// takes seconds, so a tool shows progress; loads from the cache report nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompileProgress {
    /// Compiling `plugin`'s component, of `bytes` bytes, has started.
    Started {
        /// The plugin's name.
        plugin: String,
        /// The component's size.
        bytes: u64,
    },
    /// Another load (another process's: an event's, a background `palisade check`) is
    /// compiling `plugin`'s component: this one waits for that compile instead of starting
    /// its own, and maps its result.
    Waiting {
        /// The plugin's name.
        plugin: String,
    },
    /// It has ended.
    Finished {
        /// The plugin's name.
        plugin: String,
        /// The component's size.
        bytes: u64,
        /// How long it took.
        took: Duration,
        /// Whether it compiled (a failure is reported as a load problem too).
        ok: bool,
    },
}

/// Receives [`CompileProgress`], from the threads that load plugins (in parallel).
pub type CompileObserver = Arc<dyn Fn(&CompileProgress) + Send + Sync>;

impl Default for HostBuilder {
    fn default() -> Self {
        HostBuilder {
            sink: None,
            background_queue: DEFAULT_BACKGROUND_QUEUE,
            detached_tool_result: false,
            cache_dir: None,
            on_compile: None,
            wrapped_deadline: DEFAULT_WRAPPED_EXECUTION_DEADLINE,
            max_component_bytes: DEFAULT_MAX_COMPONENT_BYTES,
            forbid_fail_open: false,
            state: None,
            facts: None,
            instance_pool: DEFAULT_INSTANCE_POOL,
            direct_calls: true,
            spare_instances: true,
        }
    }
}

impl std::fmt::Debug for HostBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuilder")
            .field("sink", &self.sink.is_some())
            .finish()
    }
}

impl HostBuilder {
    /// Sends every lifecycle event to `sink`.
    pub fn event_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Bounds each session's background queue (default
    /// [`DEFAULT_BACKGROUND_QUEUE`](crate::DEFAULT_BACKGROUND_QUEUE)); work beyond it is
    /// dropped and reported.
    pub fn background_queue(mut self, bound: usize) -> Self {
        self.background_queue = bound.max(1);
        self
    }

    /// Runs the foreground `tool-result` observers detached, in the session's background
    /// queue, instead of awaiting them before a call's outcome is returned. By default they
    /// are awaited, one after another, each under its own deadline (docs/semantics.md, "The
    /// tool pipeline"): none is dropped, and each sees the result before the agent goes on.
    /// Detached, a slow observer adds nothing to a call's latency, but under load its work
    /// can be dropped (`dropped-saturated`) and it can run after later facts.
    pub fn detached_tool_result(mut self, detached: bool) -> Self {
        self.detached_tool_result = detached;
        self
    }

    /// Keeps compiled components in `dir`, so a component is compiled once per engine
    /// configuration and digest (see the cache's module docs for how entries are sealed).
    pub fn cache_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Calls `observer` when a component starts and ends compiling (cache misses only).
    pub fn on_compile(mut self, observer: CompileObserver) -> Self {
        self.on_compile = Some(observer);
        self
    }

    /// The overall deadline of a tool call wrapped by `tool-execute` hooks (default
    /// [`DEFAULT_WRAPPED_EXECUTION_DEADLINE`]); past it the call's outcome is an error and
    /// the tool is cancelled.
    pub fn wrapped_execution_deadline(mut self, deadline: Duration) -> Self {
        self.wrapped_deadline = deadline;
        self
    }

    /// The largest component file loaded (default [`DEFAULT_MAX_COMPONENT_BYTES`]); a larger
    /// one is refused at load, unread. Manifests are capped at
    /// [`MAX_MANIFEST_BYTES`](crate::manifest::MAX_MANIFEST_BYTES).
    pub fn max_component_bytes(mut self, bytes: u64) -> Self {
        self.max_component_bytes = bytes;
        self
    }

    /// Refuses, at load, every manifest with a hook that would fail open: a foreground hook
    /// that can change an outcome (a guard, a transform, a wrapper, a steer) on a point that
    /// fails closed, with `on_failure = "allow"`. Foreground failures fail closed by rule; this makes it one an operator enforces, not one each plugin's author
    /// chooses (docs/semantics.md, "Failures").
    pub fn forbid_fail_open(mut self, forbid: bool) -> Self {
        self.forbid_fail_open = forbid;
        self
    }

    /// Keeps the state plugins are granted (`[state]`) in `store` (default:
    /// [`StateStore::default`](crate::state::StateStore::default), the embedded store in the
    /// user's state directory, opened at the first state call).
    pub fn state(mut self, store: crate::state::StateStore) -> Self {
        self.state = Some(store);
        self
    }

    /// Appends every fact the host's sessions commit, and every foreground decision their
    /// lifecycles make, to `stream`, in order, keyed by interaction id; a decision waits for
    /// the stream to take the records before it, and fails closed when it cannot (see
    /// [`crate::facts`]). Default: no stream.
    pub fn fact_stream(mut self, stream: crate::facts::FactStream) -> Self {
        self.facts = Some(stream);
        self
    }

    /// Sizes the instance pool (default [`DEFAULT_INSTANCE_POOL`] component instances); `0`
    /// turns pooling off, so that every instance is allocated on demand.
    pub fn instance_pool(mut self, slots: u32) -> Self {
        self.instance_pool = slots;
        self
    }

    /// Whether a plugin whose imports include nothing that may wait (no plugin state, files,
    /// HTTP, clock subscription or `next()`) is called directly, on the caller's thread,
    /// rather than on a fiber (default: yes; see [`Plugin::direct_calls`](crate::Plugin::direct_calls)).
    /// A direct call is cheaper; a process that calls each plugin once (a bridge handling one
    /// hook event) gains nothing from it, and without it skips building the direct linker.
    pub fn direct_calls(mut self, on: bool) -> Self {
        self.direct_calls = on;
        self
    }

    /// Whether each per-call plugin keeps a spare instance, made after one of its calls
    /// (on the tokio runtime of that call) for the next one to take (default: yes). The
    /// call that takes it does not wait for instantiating, only for a new instance's first
    /// call, while calls come no faster than
    /// spares are made: the CPU is the same, the wait moves. It holds one
    /// instance (a slot of the pool) per per-call plugin. A process that serves one hook
    /// event (a bridge) would make spares no call takes; it turns them off. What may be made
    /// ahead and what is not: [`InstanceLifetime::PerCall`](crate::InstanceLifetime::PerCall).
    pub fn spare_instances(mut self, on: bool) -> Self {
        self.spare_instances = on;
        self
    }

    /// Builds the host and starts its epoch ticker.
    pub fn build(self) -> Result<Host, Error> {
        // Compiled functions are kept in the cache, when there is one.
        let functions = self
            .cache_dir
            .as_ref()
            .map(|_| Arc::new(Functions::default()));
        let engines = Engines::new(
            self.instance_pool,
            self.direct_calls,
            self.spare_instances,
            functions.clone(),
        )
        .map_err(|message| Error::Engine { message })?;
        let cache = match self.cache_dir.as_ref().zip(functions) {
            Some((dir, functions)) => Some(
                crate::runtime::cache::Cache::open(dir, &engines.engine, functions).map_err(
                    |e| Error::Engine {
                        message: format!("cannot open the component cache {}: {e}", dir.display()),
                    },
                )?,
            ),
            None => None,
        };
        let interest = match &self.sink {
            Some(sink) => sink.interest(),
            None => crate::events::Interest::ENDS,
        };
        Ok(Host {
            inner: Arc::new(HostInner {
                engines,
                interest,
                log_sink: self.sink.clone().filter(|_| interest.logs),
                sink: self.sink,
                background_queue: self.background_queue,
                detached_tool_result: self.detached_tool_result,
                cache,
                ahead: Default::default(),
                on_compile: self.on_compile,
                wrapped_deadline: self.wrapped_deadline,
                state: self.state.unwrap_or_default(),
                facts: self.facts,
                limits: LoadLimits {
                    max_component_bytes: self.max_component_bytes,
                    forbid_fail_open: self.forbid_fail_open,
                },
            }),
        })
    }
}

impl Host {
    /// A host with no event sink.
    pub fn new() -> Result<Host, Error> {
        HostBuilder::default().build()
    }

    /// Configures a host.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

    /// Maps the compiled component with digest `sha256` (a component's sha256, lowercase
    /// hex) from the component cache now, on this thread, so that the load that needs it —
    /// begun meanwhile on another thread, reading the manifests first — takes it from here,
    /// waiting for the mapping if it is not done, instead of mapping it then. For a process
    /// that handles one event (the bridges), the largest component is most of the event, and
    /// its load can begin before the manifests that name it are read.
    ///
    /// Only what the cache holds, verified as every load verifies it, is mapped: nothing is
    /// compiled, and a digest the cache does not hold (or that is not a sha256) costs a
    /// lookup. A load uses the component only if its own component file has that digest;
    /// one mapped for a digest no load needs is kept until the host is dropped.
    #[doc(hidden)]
    pub fn load_ahead(&self, sha256: &str) {
        let is_digest = sha256.len() == 64
            && sha256
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if let (Some(cache), true) = (&self.inner.cache, is_digest) {
            self.inner
                .ahead
                .map(cache, &self.inner.engines.engine, sha256);
        }
    }
}
