//! The WebAssembly engines a host runs components in, and the linkers of Palisade's imports
//! for them: the bottom of the runtime, which needs nothing of the host above it.
//!
//! One [`wasmtime::Engine`] per host (never a global): component model on, fuel metering on,
//! epoch interruption driven by a ticker thread, the component-model concurrency support off
//! (no guest needs the async ABI, and it doubles the cost of a small call).
//!
//! Instances come from wasmtime's pooling allocator: slots reserved once and reused, with
//! each memory's initial image mapped copy-on-write, so a fresh instance costs microseconds
//! and an idle one only the pages it wrote. Where Linux reports written pages (6.7+), a freed
//! slot keeps up to 1 MiB of them mapped, rewritten to the image, so the next instance in it
//! takes no page faults. When the pool is full (or its reservation cannot be made, or a
//! component does not fit its slots) an instance comes from a second engine, configured
//! identically but allocating on demand, built at the first need: a full pool costs time,
//! never a failure.

use crate::runtime::bindings;
use crate::runtime::functions::Functions;
use crate::runtime::limits::{MAX_CORE_INSTANCES, MAX_MEMORIES, MAX_TABLE_ELEMENTS, MAX_TABLES};
use crate::runtime::sandbox::State;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Enabled, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances: the granularity of every deadline.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// An engine and the linker of Palisade's imports for it.
pub(crate) struct Runtime {
    pub engine: Engine,
    pub linker: Linking,
}

/// A host's engines: the one components are compiled for and instantiated in first, and the
/// on-demand one behind it, with their linkers and the epoch ticker.
pub(crate) struct Engines {
    /// The engine components are compiled for and instantiated in first (pooled, unless the
    /// pool is off or could not be reserved).
    pub engine: Engine,
    pub linker: Linking,
    /// Whether `engine` allocates from a pool.
    pub pooled: bool,
    /// Whether plugins may be called directly (`HostBuilder::direct_calls`).
    direct_calls: bool,
    /// Whether per-call plugins get spare instances (`HostBuilder::spare_instances`).
    pub spares: bool,
    /// The on-demand engine, for instances the pool has no slot for: built at the first need
    /// (`Err`: it could not be, which fails only those instances).
    on_demand: OnceLock<Result<Runtime, String>>,
    stop_ticker: Arc<AtomicBool>,
}

impl Engines {
    /// The engines of a pool of `instance_pool` slots (`0`: none), compiling through
    /// `functions` when there is a cache; starts the epoch ticker.
    pub fn new(
        instance_pool: u32,
        direct_calls: bool,
        spares: bool,
        functions: Option<Arc<Functions>>,
    ) -> Result<Engines, String> {
        // A pool whose reservation the machine refuses (a low `ulimit -v`) is no pool.
        let pooled = match instance_pool {
            0 => None,
            slots => runtime(Some(pool(slots)), functions.clone(), direct_calls).ok(),
        };
        let (Runtime { engine, linker }, pooled) = match pooled {
            Some(runtime) => (runtime, true),
            None => (
                runtime(None, functions, direct_calls).map_err(|e| format!("{e:#}"))?,
                false,
            ),
        };
        let stop_ticker = Arc::new(AtomicBool::new(false));
        spawn_ticker(engine.weak(), stop_ticker.clone())
            .map_err(|e| format!("cannot start the epoch ticker thread: {e}"))?;
        Ok(Engines {
            engine,
            linker,
            pooled,
            direct_calls,
            spares,
            on_demand: OnceLock::new(),
            stop_ticker,
        })
    }

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

impl Drop for Engines {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
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
    #[cfg(feature = "http")]
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
