//! The one place the WebAssembly engine is configured.
//!
//! One [`wasmtime::Engine`] per [`Host`] (never a global): component model on, fuel metering
//! on, epoch interruption driven by a ticker thread, the component-model concurrency support
//! off (no guest needs the async ABI, and it doubles the cost of a small call).
//!
//! Instances come from wasmtime's pooling allocator: slots reserved once and reused, with
//! each memory's initial image mapped copy-on-write, so a fresh instance costs microseconds
//! and an idle one only the pages it wrote. Where Linux reports written pages (6.7+), a freed
//! slot keeps up to 1 MiB of them mapped, rewritten to the image, so the next instance in it
//! takes no page faults. When the pool is full (or its reservation cannot be made, or a
//! component does not fit its slots) an instance comes from a second engine,
//! configured identically but allocating on demand, built at the first need: a full pool
//! costs time, never a failure.

use crate::error::Error;
use crate::events::EventSink;
use crate::runtime::functions::Functions;
use crate::runtime::sandbox::{MAX_CORE_INSTANCES, MAX_MEMORIES, MAX_TABLE_ELEMENTS, MAX_TABLES};
use crate::runtime::sandbox::{State, bindings};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances: the granularity of every deadline.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// The engine, its linker and the event sink: everything plugins share. Cheap to clone.
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
    /// The engine components are compiled for and instantiated in first (pooled, unless the
    /// pool is off or could not be reserved).
    pub engine: Engine,
    pub linker: Linking,
    /// Whether `engine` allocates from a pool.
    pub pooled: bool,
    /// Whether plugins may be called directly ([`HostBuilder::direct_calls`]).
    direct_calls: bool,
    /// Whether per-call plugins get spare instances ([`HostBuilder::spare_instances`]).
    pub spares: bool,
    /// The on-demand engine, for instances the pool has no slot for: built at the first need
    /// (`Err`: it could not be, which fails only those instances).
    on_demand: OnceLock<Result<Runtime, String>>,
    pub sink: Option<Arc<dyn EventSink>>,
    /// What the sink wants ([`EventSink::interest`], asked once); nothing without a sink.
    pub interest: crate::Interest,
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
    stop_ticker: Arc<AtomicBool>,
}

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

/// An engine and the linker of Palisade's imports for it.
pub(crate) struct Runtime {
    pub engine: Engine,
    pub linker: Linking,
}

impl HostInner {
    /// The linkers of `engine`, which is this host's first engine or its on-demand one.
    pub(crate) fn linkers(&self, engine: &Engine) -> Result<&Linkers, String> {
        if Engine::same(engine, &self.engine) {
            return self.linker.get();
        }
        self.on_demand().map(|(_, linkers)| linkers)
    }

    /// The engine that allocates instances on demand, and its linker: `engine` itself when it
    /// is not pooled.
    pub(crate) fn on_demand(&self) -> Result<(&Engine, &Linkers), String> {
        if !self.pooled {
            return Ok((&self.engine, self.linker.get()?));
        }
        self.on_demand
            .get_or_init(|| {
                let runtime =
                    runtime(None, None, self.direct_calls).map_err(|e| format!("{e:#}"))?;
                spawn_ticker(runtime.engine.weak(), self.stop_ticker.clone())
                    .map_err(|e| format!("cannot start the epoch ticker thread: {e}"))?;
                Ok(runtime)
            })
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|r| Ok((&r.engine, r.linker.get()?)))
    }
}

/// How many component instances the pool holds by default: live per-session instances and
/// per-call instances in flight together (a `serve` with many sessions goes past it, and its
/// further instances come from the on-demand engine).
pub const DEFAULT_INSTANCE_POOL: u32 = 1_000;

/// Most bytes of a freed slot's linear memory kept mapped and reset in place: all a Rust
/// guard writes, the first MiB of what an interpreter writes. A freed slot holds at most this
/// much until an instance reuses it. Less slows interpreters' calls, more speeds up none
/// (docs/performance.md, "Choices measured").
const KEEP_RESIDENT_MEMORY: usize = 1 << 20;
/// Likewise for a freed slot's tables.
const KEEP_RESIDENT_TABLE: usize = 256 << 10;

/// The pool for `slots` component instances. Each slot admits what the sandbox admits (its
/// caps are enforced per plugin by the resource limiter, below these): a memory of up to
/// [`MAX_MEMORY_MB`](crate::manifest::MAX_MEMORY_MB) (only reserved, never committed, until
/// used), and as many memories, tables and core instances per component as the limiter
/// allows, so that no component that loads on demand fails to fit.
fn pool(slots: u32) -> PoolingAllocationConfig {
    let per_component = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(slots)
        // A Python or JavaScript component is a few core instances and memories; a Rust one
        // two or three.
        .total_core_instances(slots.saturating_mul(4))
        .total_memories(slots.saturating_mul(2))
        .total_tables(slots.saturating_mul(4))
        .total_stacks(slots)
        .max_core_instances_per_component(per_component(MAX_CORE_INSTANCES))
        .max_memories_per_component(per_component(MAX_MEMORIES))
        .max_tables_per_component(per_component(MAX_TABLES))
        .max_memories_per_module(per_component(MAX_MEMORIES))
        .max_tables_per_module(per_component(MAX_TABLES))
        .table_elements(MAX_TABLE_ELEMENTS)
        .max_memory_size(
            usize::try_from(crate::manifest::MAX_MEMORY_MB * 1024 * 1024).unwrap_or(usize::MAX),
        )
        // An interpreter's core instance has thousands of functions and globals.
        .max_core_instance_size(16 << 20)
        .max_component_instance_size(16 << 20);
    // Where the kernel can say which pages an instance wrote (Linux 6.7+), a freed slot is
    // reset by rewriting those pages only, up to a bound, and they stay mapped: the next
    // instance in the slot takes no page faults and the process no TLB shootdowns. Without it, the bound would be spent rewriting the
    // lowest bytes whether written or not, which costs more than it saves.
    if PoolingAllocationConfig::is_pagemap_scan_available() {
        pool.pagemap_scan(Enabled::Yes)
            .linear_memory_keep_resident(KEEP_RESIDENT_MEMORY)
            .table_keep_resident(KEEP_RESIDENT_TABLE);
    }
    pool
}

/// The engine's configuration: `pool` when instances come from a pool, else on demand;
/// compiling through `functions` when there is a cache.
fn config(pool: Option<PoolingAllocationConfig>, functions: Option<Arc<Functions>>) -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .concurrency_support(false)
        .parallel_compilation(true)
        // Smaller compiled code loads faster from the cache (every bridged hook event is
        // a cold process): no wasm-offset address map (traps still name the function), no
        // native unwind tables (wasm traps unwind through wasmtime's own frames).
        .generate_address_map(false)
        .native_unwind_info(false);
    if let Some(pool) = pool {
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    }
    if let Some(functions) = functions {
        // Infallible: it only records the store.
        let _ = config.enable_incremental_compilation(functions);
    }
    config
}

/// An engine and its linker (being built, see [`Linking`]).
fn runtime(
    pool: Option<PoolingAllocationConfig>,
    functions: Option<Arc<Functions>>,
    direct_calls: bool,
) -> wasmtime::Result<Runtime> {
    let engine = Engine::new(&config(pool, functions))?;
    let linker = Linking::start(&engine, direct_calls);
    Ok(Runtime { engine, linker })
}

/// The linkers of Palisade's imports for `engine` (the direct one if `direct_calls`).
fn linker(engine: &Engine, direct_calls: bool) -> wasmtime::Result<Linkers> {
    let mut linker = Linker::<State>::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    // Linked for every component; a request is refused unless its manifest grants the
    // origin.
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    bindings::AllHooks::add_to_linker::<State, HasSelf<State>>(&mut linker, |s| s)?;
    // WASI's `insecure-seed` replaced by the state's, which makes no WASI context (see
    // `State`'s `insecure_seed`).
    linker.allow_shadowing(true);
    wasmtime_wasi::p2::bindings::random::insecure_seed::add_to_linker::<State, HasSelf<State>>(
        &mut linker,
        |s| s,
    )?;
    linker.allow_shadowing(false);
    Ok(Linkers {
        full: linker,
        direct: match direct_calls {
            true => Some(crate::runtime::direct::linker(engine)?),
            false => None,
        },
    })
}

/// An engine's two linkers.
pub(crate) struct Linkers {
    /// Every import Palisade offers.
    full: Linker<State>,
    /// The imports of an instance called directly, on the caller's thread
    /// ([`crate::runtime::direct`]); `None` when the host's calls all go on fibers
    /// ([`HostBuilder::direct_calls`]).
    direct: Option<Linker<State>>,
}

impl Linkers {
    /// Links `component`: to the direct linker when it has all its imports (`true`: its
    /// instances are called directly), else to the full one.
    pub fn link(
        &self,
        component: &wasmtime::component::Component,
    ) -> wasmtime::Result<(wasmtime::component::InstancePre<State>, bool)> {
        if let Some(Ok(pre)) = self.direct.as_ref().map(|l| l.instantiate_pre(component)) {
            return Ok((pre, true));
        }
        self.full(component).map(|pre| (pre, false))
    }

    /// Links `component` to the full linker.
    pub fn full(
        &self,
        component: &wasmtime::component::Component,
    ) -> wasmtime::Result<wasmtime::component::InstancePre<State>> {
        self.full.instantiate_pre(component)
    }
}

/// An engine's linkers, built at their first use (linking the first component).
pub(crate) struct Linking {
    engine: Engine,
    direct_calls: bool,
    built: OnceLock<Result<Linkers, String>>,
}

impl Linking {
    fn start(engine: &Engine, direct_calls: bool) -> Linking {
        Linking {
            engine: engine.clone(),
            direct_calls,
            built: OnceLock::new(),
        }
    }

    /// The linkers, once built (`Err`: they could not be, which fails every component linked
    /// with them).
    pub fn get(&self) -> Result<&Linkers, String> {
        self.built
            .get_or_init(|| {
                linker(&self.engine, self.direct_calls)
                    .map_err(|e| format!("cannot build the linker: {e:#}"))
            })
            .as_ref()
            .map_err(Clone::clone)
    }
}

impl Drop for HostInner {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
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
            background_queue: crate::session::DEFAULT_BACKGROUND_QUEUE,
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
        let engine_error = |e: wasmtime::Error| Error::Engine {
            message: format!("{e:#}"),
        };
        // Compiled functions are kept in the cache, when there is one.
        let functions = self
            .cache_dir
            .as_ref()
            .map(|_| Arc::new(Functions::default()));
        // A pool whose reservation the machine refuses (a low `ulimit -v`) is no pool.
        let pooled = match self.instance_pool {
            0 => None,
            slots => runtime(Some(pool(slots)), functions.clone(), self.direct_calls).ok(),
        };
        let (Runtime { engine, linker }, pooled) = match pooled {
            Some(runtime) => (runtime, true),
            None => (
                runtime(None, functions.clone(), self.direct_calls).map_err(engine_error)?,
                false,
            ),
        };

        let cache = match self.cache_dir.as_ref().zip(functions) {
            Some((dir, functions)) => Some(
                crate::runtime::cache::Cache::open(dir, &engine, functions).map_err(|e| {
                    Error::Engine {
                        message: format!("cannot open the component cache {}: {e}", dir.display()),
                    }
                })?,
            ),
            None => None,
        };
        let stop_ticker = Arc::new(AtomicBool::new(false));
        spawn_ticker(engine.weak(), stop_ticker.clone()).map_err(|e| Error::Engine {
            message: format!("cannot start the epoch ticker thread: {e}"),
        })?;
        let interest = match &self.sink {
            Some(sink) => sink.interest(),
            None => crate::Interest::ENDS,
        };
        Ok(Host {
            inner: Arc::new(HostInner {
                engine,
                linker,
                pooled,
                direct_calls: self.direct_calls,
                spares: self.spare_instances,
                on_demand: OnceLock::new(),
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
                stop_ticker,
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
            self.inner.ahead.map(cache, &self.inner.engine, sha256);
        }
    }
}

fn spawn_ticker(engine: wasmtime::EngineWeak, stop: Arc<AtomicBool>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("palisade-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(EPOCH_TICK);
                match engine.upgrade() {
                    Some(engine) => engine.increment_epoch(),
                    None => break,
                }
            }
        })?;
    Ok(())
}
