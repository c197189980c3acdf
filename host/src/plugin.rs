//! A loaded plugin set: each plugin's manifest and runtime (a component's compiled,
//! pre-linked code and the interfaces it exports; or its command or URL). Loading one is
//! [`crate::loader`]'s work.

use crate::host::Host;
use crate::manifest::{HookSpec, Manifest};
use crate::point::{Interface, Point};
use crate::runtime::sandbox::PluginEnv;
use crate::runtime::{Runtime, Wasm};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

/// A loaded, validated set of plugins, ready to serve sessions. Cheap to clone.
#[derive(Clone)]
pub struct Plugins {
    pub(crate) inner: Arc<PluginsInner>,
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugins")
            .field("plugins", &self.inner.plugins)
            .finish_non_exhaustive()
    }
}

pub(crate) struct PluginsInner {
    pub host: Host,
    pub plugins: Vec<Plugin>,
    /// Per point, its hooks in dispatch order.
    pub by_point: ByPoint,
    pub skipped: Vec<Skipped>,
    /// Sessions alive (see [`Plugins::live_sessions`]).
    pub live_sessions: AtomicUsize,
}

/// Per point, its hooks in dispatch order: a list per point, found by the point's index
/// (every dispatch looks its point up: no hashing).
pub(crate) struct ByPoint([Vec<HookRef>; Point::ALL.len()]);

impl ByPoint {
    /// The hooks of `point`, in dispatch order.
    pub fn get(&self, point: Point) -> &[HookRef] {
        &self.0[point.index()]
    }
}

/// One hook, resolved: its plugin and its spec, with its id precomputed.
#[derive(Debug, Clone)]
pub(crate) struct HookRef {
    pub plugin: usize,
    pub hook: usize,
    pub id: Arc<str>,
}

/// An entry of a plugin directory that was not loaded as a plugin, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Skipped {
    /// The entry.
    pub path: PathBuf,
    /// Why it is not a plugin (`no plugin.toml`, `a file, not a folder`, ...).
    pub reason: String,
}

/// One loaded plugin.
pub struct Plugin {
    pub(crate) manifest: Manifest,
    pub(crate) dir: PathBuf,
    /// Where the folder's symlink leads, when the plugin's folder is a symlink.
    pub(crate) link: Option<PathBuf>,
    pub(crate) runtime: Runtime,
    pub(crate) env: Arc<PluginEnv>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("name", &self.manifest.name)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Plugin {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.manifest.name
    }

    /// Its folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where its folder leads, when the folder is a symlink (which loading follows).
    pub fn symlink_target(&self) -> Option<&Path> {
        self.link.as_deref()
    }

    fn wasm(&self) -> Option<&Wasm> {
        self.runtime.wasm()
    }

    /// Its component file (`None` for a command or HTTP plugin).
    pub fn wasm_path(&self) -> Option<&Path> {
        self.wasm().map(|w| w.path.as_path())
    }

    /// The sha256 of its component, lowercase hex (`None` for a command or HTTP plugin).
    pub fn sha256(&self) -> Option<&str> {
        self.wasm().map(|w| w.sha256.as_str())
    }

    /// The component's size in bytes (`None` for a command or HTTP plugin).
    pub fn size(&self) -> Option<usize> {
        self.wasm().map(|w| w.size)
    }

    /// Whether its hooks are called directly, on the caller's thread, rather than on a fiber.
    /// A component is called directly when it imports nothing that may wait on the world —
    /// no plugin state, files, HTTP or `next()` — which makes a warm call a fraction of a
    /// microsecond. It turns false for good once one of its calls (or instantiations) runs
    /// for an epoch tick or more ([`EPOCH_TICK`](crate::EPOCH_TICK), 1 ms), or waits for a
    /// clock (a sleep): a long call on a fiber yields the thread at every tick, and a sleep
    /// lets others run, where a direct call holds the thread to its end (a sleep, to its
    /// deadline at most). Its new instances are linked for calls on a fiber then; a session's
    /// instance made before keeps its synchronous imports, where a sleep fails its call,
    /// closed.
    /// `false` for a command or HTTP plugin.
    pub fn direct_calls(&self) -> bool {
        self.wasm().is_some_and(|w| {
            w.code.loaded.direct && !w.code.ran_long.load(std::sync::atomic::Ordering::Relaxed)
        })
    }

    /// How many of its calls took a spare instance, made ahead of them instead of for them
    /// (a per-call plugin's, see [`HostBuilder::spare_instances`](crate::HostBuilder::spare_instances)).
    /// 0 for other plugins.
    pub fn calls_on_spares(&self) -> u64 {
        self.wasm().map_or(0, |w| w.spares.taken())
    }

    /// Whether a spare instance is ready for its next call.
    pub fn spare_ready(&self) -> bool {
        self.wasm().is_some_and(|w| w.spares.ready())
    }

    /// Whether it gets no spare instances any more: one was spoiled (its instantiation made
    /// a Palisade host call other than `config`, or an HTTP request), failed or overran its
    /// `timeout_ms` (see [`InstanceLifetime::PerCall`](crate::InstanceLifetime::PerCall)).
    pub fn spares_refused(&self) -> bool {
        self.wasm().is_some_and(|w| w.spares.off())
    }

    /// Its validated manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Whether its component exports `prepare` (each instance is prepared before its first
    /// call); `false` for a command or HTTP plugin.
    pub fn prepares(&self) -> bool {
        self.wasm()
            .is_some_and(|wasm| wasm.code.loaded.exports.prepare.is_some())
    }

    /// The extension-point interfaces its component exports; for a command or HTTP plugin,
    /// those of the points it subscribes to (it answers whatever it is sent).
    pub fn exported_interfaces(&self) -> Vec<Interface> {
        match self.wasm() {
            Some(wasm) => wasm.code.loaded.exports.interfaces(),
            None => self.manifest.hooks.iter().fold(Vec::new(), |mut acc, h| {
                if !acc.contains(&h.point.interface()) {
                    acc.push(h.point.interface());
                }
                acc
            }),
        }
    }
}

impl Plugins {
    pub(crate) fn new(host: Host, plugins: Vec<Plugin>, skipped: Vec<Skipped>) -> Plugins {
        let mut by_point: [Vec<(i32, usize, usize)>; Point::ALL.len()] = Default::default();
        for (p, plugin) in plugins.iter().enumerate() {
            for (h, hook) in plugin.manifest.hooks.iter().enumerate() {
                by_point[hook.point.index()].push((hook.priority, p, h));
            }
        }
        let by_point = ByPoint(std::array::from_fn(|i| {
            let point = Point::ALL[i];
            let mut hooks = std::mem::take(&mut by_point[i]);
            // Ascending priority, then registration order (plugin name, manifest order).
            hooks.sort();
            hooks
                .into_iter()
                .map(|(_, plugin, hook)| HookRef {
                    plugin,
                    hook,
                    id: format!("{}/{}", plugins[plugin].name(), point).into(),
                })
                .collect()
        }));
        Plugins {
            inner: Arc::new(PluginsInner {
                host,
                plugins,
                by_point,
                skipped,
                live_sessions: Default::default(),
            }),
        }
    }

    /// The plugins, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &Plugin> {
        self.inner.plugins.iter()
    }

    /// Entries of the directory that are not plugins, each with the reason: folders with no
    /// `plugin.toml`, files, and anything else that is not a folder. Hidden entries (`.git`)
    /// are not listed.
    pub fn skipped(&self) -> &[Skipped] {
        &self.inner.skipped
    }

    /// Begins making, on a blocking thread, the first instance of each component plugin with
    /// a hook at `points` (all but the first hook's, whose call comes at once; the largest
    /// components first, then in the order their hooks run), ahead of its first call: for a
    /// process that serves one event and exits (the agents' hook commands), where every
    /// plugin instantiates once, at its first call, and the calls run one after the other on
    /// one thread. Made ahead, the instantiations of the later hooks overlap the earlier
    /// hooks' calls (a command hook's process above all) on another core. A call whose instance is being made waits for it; one whose making has
    /// not begun makes its own.
    ///
    /// Only for plugins granted no folders (`files`): instantiating runs guest code (start
    /// functions, `prepare`), and one that can reach no file does nothing outside its own
    /// instance while it is made — which matters here, since it may be made for a hook that
    /// does not run (a guard before it refused). Otherwise an instance made ahead is a spare
    /// instance ([`HostBuilder::spare_instances`](crate::HostBuilder::spare_instances)): a
    /// Palisade host call other than `config`, or an HTTP request, while it is made spoils it,
    /// as does failing or overrunning its `timeout_ms`; the plugin's calls then make their
    /// own. Isolation is unchanged: the call (or session) that takes it is the first to use
    /// it. Does nothing outside a tokio runtime; the makings stop when it shuts down.
    pub fn make_instances_ahead(&self, points: &[Point]) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // Each with its limits, and whether it is queued yet: a component still loading
        // ([`Manifests::load_overlapped`](crate::Manifests::load_overlapped)) is queued once
        // loaded, by the making task, which waits for it.
        let mut queued: Vec<(usize, crate::manifest::Limits, bool)> = Vec::new();
        // The first component's call comes at once: made ahead, it would only be waited for.
        let mut first = None;
        for &point in points {
            for hook in self.inner.by_point.get(point) {
                let plugin = &self.inner.plugins[hook.plugin];
                if plugin.runtime.component_size().is_none() {
                    continue;
                }
                if *first.get_or_insert(hook.plugin) == hook.plugin
                    || queued.iter().any(|&(p, _, _)| p == hook.plugin)
                    || !plugin.env.folders.is_empty()
                {
                    continue;
                }
                let limits = plugin.manifest.hooks[hook.hook].limits;
                match plugin.wasm() {
                    Some(wasm) if wasm.spares.queue_first() => {
                        queued.push((hook.plugin, limits, true));
                    }
                    Some(_) => {}
                    None => queued.push((hook.plugin, limits, false)),
                }
            }
        }
        if queued.is_empty() {
            return;
        }
        // The largest components first (a stable sort: the hook order among equals). The
        // calls come in hook order, and one whose making has not begun makes its own: a small
        // component's instance costs its call about what it costs the helper, but a large
        // one's (a Python interpreter's, a millisecond or more) made by its call stalls the
        // event; begun first, it overlaps everything the event does before that call.
        queued.sort_by_key(|&(p, _, _)| {
            std::cmp::Reverse(self.inner.plugins[p].runtime.component_size())
        });
        // The makings stop when the runtime shuts down (their timers would fail then): this
        // end is dropped with the task that holds it, before the runtime's timers end.
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        runtime.spawn(async move {
            let _stop = stop;
            std::future::pending::<()>().await
        });
        let (plugins, handle) = (self.clone(), runtime.clone());
        runtime.spawn_blocking(move || {
            handle.block_on(async {
                let sink = &plugins.inner.host.inner.log_sink;
                let making = async {
                    for (p, limits, claimed) in queued {
                        let plugin = &plugins.inner.plugins[p];
                        let Some(wasm) = plugin.runtime.loaded().await else {
                            continue;
                        };
                        // Still loading when queued: its call may have come meanwhile (and
                        // made its own instance).
                        if claimed || wasm.spares.queue_first() {
                            wasm.spares
                                .make_first(plugin.env.clone(), sink.clone(), limits)
                                .await;
                        }
                    }
                };
                tokio::select! {
                    biased;
                    _ = stopped => {}
                    () = making => {}
                }
            })
        });
    }

    /// The hooks of `point` in dispatch order, with their plugin's name.
    pub fn hooks(&self, point: Point) -> impl Iterator<Item = (&str, &HookSpec)> {
        self.inner.by_point.get(point).iter().map(|r| {
            let plugin = &self.inner.plugins[r.plugin];
            (plugin.name(), &plugin.manifest.hooks[r.hook])
        })
    }
}
