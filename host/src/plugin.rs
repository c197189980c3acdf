//! Loading a plugin directory: one folder per plugin, each with a `plugin.toml` and its
//! component.
//!
//! The directory is read through `cap-std`: a manifest can only name a file inside its own
//! plugin folder. Absolute paths, `..` and symlinks that lead out are refused.
//!
//! Registration order — the tie-breaker after priority — is deterministic: plugins sorted by
//! name, then hooks in manifest order.

use crate::engine::{CompileProgress, Host};
use crate::error::{Error, Problem};
use crate::external::External;
use crate::manifest::{self, HookSpec, MANIFEST_FILE, Manifest, RuntimeSpec};
use crate::point::{Interface, Point};
use crate::sandbox::bindings::exports::palisade::hooks as ex;
use crate::sandbox::{PluginEnv, State};
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::ErrorKind;
use std::path::{Component as PathComponent, Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use wasmtime::component::{Component, InstancePre};

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
    pub by_point: HashMap<Point, Vec<HookRef>>,
    pub skipped: Vec<PathBuf>,
    /// Sessions alive (see [`Plugins::live_sessions`]).
    pub live_sessions: AtomicUsize,
}

/// One hook, resolved: its plugin and its spec, with its id precomputed.
#[derive(Debug, Clone)]
pub(crate) struct HookRef {
    pub plugin: usize,
    pub hook: usize,
    pub id: Arc<str>,
}

/// One loaded plugin.
pub struct Plugin {
    manifest: Manifest,
    dir: PathBuf,
    pub(crate) runtime: Runtime,
    pub(crate) env: Arc<PluginEnv>,
}

/// How a loaded plugin's hooks run.
pub(crate) enum Runtime {
    Wasm(Box<Wasm>),
    External(External),
}

/// A loaded component.
pub(crate) struct Wasm {
    pub path: PathBuf,
    pub sha256: String,
    pub size: usize,
    pub pre: InstancePre<State>,
    pub exports: Exports,
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

    fn wasm(&self) -> Option<&Wasm> {
        match &self.runtime {
            Runtime::Wasm(wasm) => Some(wasm),
            Runtime::External(_) => None,
        }
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

    /// Its validated manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The extension-point interfaces its component exports; for a command or HTTP plugin,
    /// those of the points it subscribes to (it answers whatever it is sent).
    pub fn exported_interfaces(&self) -> Vec<Interface> {
        match self.wasm() {
            Some(wasm) => wasm.exports.interfaces(),
            None => self.manifest.hooks.iter().fold(Vec::new(), |mut acc, h| {
                if !acc.contains(&h.point.interface()) {
                    acc.push(h.point.interface());
                }
                acc
            }),
        }
    }
}

/// The export indices of the interfaces a component has; `None` where it lacks one.
#[derive(Default)]
pub(crate) struct Exports {
    pub session_start: Option<ex::session_start::GuestIndices>,
    pub prompt_submit: Option<ex::prompt_submit::GuestIndices>,
    pub pre_tool: Option<ex::pre_tool::GuestIndices>,
    pub tool_guard: Option<ex::tool_guard::GuestIndices>,
    pub tool_execute: Option<ex::tool_execute::GuestIndices>,
    pub post_tool: Option<ex::post_tool::GuestIndices>,
    pub tool_result: Option<ex::tool_result::GuestIndices>,
    pub turn_stopping: Option<ex::turn_stopping::GuestIndices>,
    pub committed: Option<ex::committed::GuestIndices>,
}

impl Exports {
    fn probe(pre: &InstancePre<State>) -> Exports {
        // `GuestIndices::new` fails when the component lacks the interface: keep what loads.
        Exports {
            session_start: ex::session_start::GuestIndices::new(pre).ok(),
            prompt_submit: ex::prompt_submit::GuestIndices::new(pre).ok(),
            pre_tool: ex::pre_tool::GuestIndices::new(pre).ok(),
            tool_guard: ex::tool_guard::GuestIndices::new(pre).ok(),
            tool_execute: ex::tool_execute::GuestIndices::new(pre).ok(),
            post_tool: ex::post_tool::GuestIndices::new(pre).ok(),
            tool_result: ex::tool_result::GuestIndices::new(pre).ok(),
            turn_stopping: ex::turn_stopping::GuestIndices::new(pre).ok(),
            committed: ex::committed::GuestIndices::new(pre).ok(),
        }
    }

    pub fn has(&self, interface: Interface) -> bool {
        match interface {
            Interface::SessionStart => self.session_start.is_some(),
            Interface::PromptSubmit => self.prompt_submit.is_some(),
            Interface::PreTool => self.pre_tool.is_some(),
            Interface::ToolGuard => self.tool_guard.is_some(),
            Interface::ToolExecute => self.tool_execute.is_some(),
            Interface::PostTool => self.post_tool.is_some(),
            Interface::ToolResult => self.tool_result.is_some(),
            Interface::TurnStopping => self.turn_stopping.is_some(),
            Interface::Committed => self.committed.is_some(),
        }
    }

    fn interfaces(&self) -> Vec<Interface> {
        Point::ALL
            .iter()
            .map(|p| p.interface())
            .fold(Vec::new(), |mut acc, i| {
                if self.has(i) && !acc.contains(&i) {
                    acc.push(i);
                }
                acc
            })
    }
}

impl Host {
    /// Loads every plugin folder of `dir` (a folder with a `plugin.toml`; others are skipped
    /// and listed by [`Plugins::skipped`]).
    ///
    /// Either every plugin loads, or nothing does and [`Error::Invalid`] lists every problem
    /// found, each naming the file, the field and the fix.
    pub fn load_dir(&self, dir: impl AsRef<Path>) -> Result<Plugins, Error> {
        self.load(dir.as_ref(), None)
    }

    /// Loads the plugins of `dir` that have a hook on one of `points`: every manifest is
    /// read and validated, but only those plugins' components are loaded. For a process that
    /// serves one event and exits (a bridge run), where loading the rest is wasted time.
    pub fn load_dir_for(&self, dir: impl AsRef<Path>, points: &[Point]) -> Result<Plugins, Error> {
        self.load(dir.as_ref(), Some(points))
    }

    fn load(&self, dir: &Path, points: Option<&[Point]>) -> Result<Plugins, Error> {
        let directory_error = |source| Error::Directory {
            path: dir.to_path_buf(),
            source,
        };
        // A plugin's own folder (it has a `plugin.toml`) loads as a directory of that one
        // plugin: `palisade check .` in a plugin being written.
        if dir.join(MANIFEST_FILE).is_file() {
            let dir = dir.canonicalize().map_err(directory_error)?;
            if let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) {
                let root =
                    Dir::open_ambient_dir(parent, ambient_authority()).map_err(directory_error)?;
                let names = vec![name.to_string_lossy().into_owned()];
                return self.load_folders(parent, &root, names, points);
            }
        }
        let root = Dir::open_ambient_dir(dir, ambient_authority()).map_err(directory_error)?;
        let mut names: Vec<String> = Vec::new();
        for entry in root.entries().map_err(directory_error)? {
            let entry = entry.map_err(directory_error)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.starts_with('.') && entry.file_type().is_ok_and(|t| t.is_dir()) {
                names.push(name);
            }
        }
        names.sort();
        self.load_folders(dir, &root, names, points)
    }

    /// Loads the plugin folders `names` of `dir` (opened as `root`).
    fn load_folders(
        &self,
        dir: &Path,
        root: &Dir,
        names: Vec<String>,
        points: Option<&[Point]>,
    ) -> Result<Plugins, Error> {
        let mut problems = Vec::new();
        let mut skipped = Vec::new();
        // Manifests first (cheap), in name order.
        let mut pending = Vec::new();
        for name in names {
            let folder = dir.join(&name);
            let plugin_dir = match root.open_dir(&name) {
                Ok(d) => d,
                Err(err) => {
                    problems.push(Problem::new(&folder, format!("cannot open: {err}")));
                    continue;
                }
            };
            let manifest_path = folder.join(MANIFEST_FILE);
            let text = match plugin_dir.read_to_string(MANIFEST_FILE) {
                Ok(text) => text,
                Err(err) if err.kind() == ErrorKind::NotFound => {
                    skipped.push(folder);
                    continue;
                }
                Err(err) => {
                    problems.push(Problem::new(&manifest_path, format!("cannot read: {err}")));
                    continue;
                }
            };
            let Some(manifest) = manifest::parse(&manifest_path, &text, &mut problems) else {
                continue;
            };
            if let Some(points) = points
                && !manifest.hooks.iter().any(|h| points.contains(&h.point))
            {
                continue;
            }
            pending.push((plugin_dir, folder, manifest_path, manifest));
        }
        // Then the components, in parallel: reading, verifying and compiling (or loading
        // from the cache) is the bulk of a cold start.
        let loaded = self.load_parallel(pending);
        let mut plugins: Vec<Plugin> = Vec::new();
        for (plugin, found) in loaded {
            problems.extend(found);
            let Some(plugin) = plugin else { continue };
            if let Some(first) = plugins.iter().find(|p| p.name() == plugin.name()) {
                problems.push(
                    Problem::new(
                        plugin.dir.join(MANIFEST_FILE),
                        format!(
                            "plugin name `{}` is already used by {}",
                            plugin.name(),
                            first.dir.join(MANIFEST_FILE).display()
                        ),
                    )
                    .field("name")
                    .fix("give each plugin a unique name"),
                );
                continue;
            }
            plugins.push(plugin);
        }
        if !problems.is_empty() {
            return Err(Error::Invalid { problems });
        }
        plugins.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(Plugins::new(self.clone(), plugins, skipped))
    }

    /// Loads each pending plugin on a small pool of threads; results keep their order.
    fn load_parallel(
        &self,
        pending: Vec<(Dir, PathBuf, PathBuf, Manifest)>,
    ) -> Vec<(Option<Plugin>, Vec<Problem>)> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(pending.len());
        let work: Vec<_> = pending.into_iter().map(|p| Mutex::new(Some(p))).collect();
        let results: Vec<_> = work.iter().map(|_| Mutex::new(None)).collect();
        let next = AtomicUsize::new(0);
        let run = || {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(slot) = work.get(i) else { return };
                let taken = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
                let Some((plugin_dir, folder, manifest_path, manifest)) = taken else {
                    continue;
                };
                let mut problems = Vec::new();
                let plugin = self.load_plugin(
                    &plugin_dir,
                    &folder,
                    &manifest_path,
                    manifest,
                    &mut problems,
                );
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some((plugin, problems));
            }
        };
        if threads <= 1 {
            run();
        } else {
            std::thread::scope(|scope| {
                for _ in 1..threads {
                    scope.spawn(run);
                }
                run();
            });
        }
        results
            .into_iter()
            .filter_map(|r| r.into_inner().unwrap_or_else(|e| e.into_inner()))
            .collect()
    }

    fn load_plugin(
        &self,
        plugin_dir: &Dir,
        folder: &Path,
        manifest_path: &Path,
        manifest: Manifest,
        problems: &mut Vec<Problem>,
    ) -> Option<Plugin> {
        let runtime = match &manifest.runtime {
            RuntimeSpec::Wasm(wasm) => Runtime::Wasm(Box::new(self.load_wasm(
                plugin_dir,
                folder,
                manifest_path,
                &manifest,
                wasm,
                problems,
            )?)),
            RuntimeSpec::Command { argv } => {
                check_program(plugin_dir, manifest_path, &argv[0], problems)?;
                Runtime::External(External::Command {
                    argv: argv.clone(),
                    dir: folder.to_path_buf(),
                })
            }
            RuntimeSpec::Http { url } => Runtime::External(External::Http { url: url.clone() }),
        };
        let env = Arc::new(PluginEnv {
            name: manifest.name.clone(),
            config: manifest
                .config
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
        });
        Some(Plugin {
            manifest,
            dir: folder.to_path_buf(),
            runtime,
            env,
        })
    }

    fn load_wasm(
        &self,
        plugin_dir: &Dir,
        folder: &Path,
        manifest_path: &Path,
        manifest: &Manifest,
        wasm: &str,
        problems: &mut Vec<Problem>,
    ) -> Option<Wasm> {
        let wasm_rel = Path::new(wasm);
        let wasm_path = folder.join(wasm_rel);
        let outside = || {
            Problem::new(
                manifest_path,
                format!("`{wasm}` is outside the plugin folder"),
            )
            .field("wasm")
            .fix("put the component inside the plugin's own folder and name it relative to it")
        };
        if wasm_rel.is_absolute()
            || wasm_rel
                .components()
                .any(|c| !matches!(c, PathComponent::Normal(_) | PathComponent::CurDir))
        {
            problems.push(outside());
            return None;
        }
        // Hashed as it streams through a small buffer: on a cache hit the component is never
        // held in memory whole.
        let scanned = plugin_dir.open(wasm_rel).and_then(|file| {
            let file = file.into_std();
            let meta = file.metadata()?;
            let head = read_head(&file)?;
            let sha256 = match &self.inner.cache {
                // Remembered while the file is provably unchanged; hashed otherwise.
                Some(cache) => cache.digest(&meta, || scan(&file))?,
                None => scan(&file)?,
            };
            Ok((
                sha256,
                head,
                usize::try_from(meta.len()).unwrap_or(usize::MAX),
            ))
        });
        let (sha256, head, size) = match scanned {
            Ok(scanned) => scanned,
            Err(err) if err.kind() == ErrorKind::NotFound => {
                problems.push(
                    Problem::new(manifest_path, format!("`{wasm}` does not exist"))
                        .field("wasm")
                        .fix("build the plugin, or correct the path"),
                );
                return None;
            }
            Err(err) if err.kind() == ErrorKind::PermissionDenied || is_escape(&err) => {
                // cap-std refuses a symlink that leads out of the folder.
                problems.push(outside());
                return None;
            }
            Err(err) => {
                problems.push(Problem::new(&wasm_path, format!("cannot read: {err}")));
                return None;
            }
        };
        if let Some(pinned) = &manifest.sha256
            && *pinned != sha256
        {
            problems.push(
                Problem::new(
                    manifest_path,
                    format!("the component's sha256 is {sha256}, the manifest pins {pinned}"),
                )
                .field("sha256")
                .fix("rebuild from the pinned source, or update the pin if the change is yours"),
            );
            return None;
        }
        if let Some(problem) = check_header(&head, &wasm_path) {
            problems.push(problem);
            return None;
        }
        let engine = &self.inner.engine;
        // The bytes are read only to compile (a cache hit maps the compiled code instead):
        // that is when compiling starts.
        let started = std::cell::Cell::new(None);
        let read = || {
            started.set(Some(std::time::Instant::now()));
            if let Some(observer) = &self.inner.on_compile {
                observer(&CompileProgress::Started {
                    plugin: manifest.name.clone(),
                    bytes: size as u64,
                });
            }
            plugin_dir.read(wasm_rel)
        };
        let compiled = match &self.inner.cache {
            Some(cache) => cache.load(engine, &sha256, read),
            None => read()
                .map_err(wasmtime::Error::from)
                .and_then(|bytes| Component::from_binary(engine, &bytes)),
        };
        if let (Some(observer), Some(at)) = (&self.inner.on_compile, started.get()) {
            observer(&CompileProgress::Finished {
                plugin: manifest.name.clone(),
                bytes: size as u64,
                took: at.elapsed(),
                ok: compiled.is_ok(),
            });
        }
        let component = match compiled {
            Ok(c) => c,
            Err(err) => {
                problems.push(
                    Problem::new(&wasm_path, format!("not a valid component: {err:#}"))
                        .fix("rebuild it; a truncated or corrupted file cannot load"),
                );
                return None;
            }
        };
        if let Some(problem) = starts_within_limits(&component, manifest, manifest_path, wasm) {
            problems.push(problem);
            return None;
        }
        let pre = match self.inner.linker.instantiate_pre(&component) {
            Ok(pre) => pre,
            Err(err) => {
                problems.push(
                    Problem::new(&wasm_path, format!("cannot be linked: {err:#}"))
                        .fix("a plugin may import only palisade:hooks and WASI 0.2; remove other imports"),
                );
                return None;
            }
        };
        let exports = Exports::probe(&pre);
        let mut ok = true;
        for (i, hook) in manifest.hooks.iter().enumerate() {
            if !exports.has(hook.point.interface()) {
                ok = false;
                let exported: Vec<_> = exports.interfaces().iter().map(|i| i.wit_name()).collect();
                problems.push(
                    Problem::new(
                        manifest_path,
                        format!(
                            "subscribes to `{}`, but {} does not export `{}` (it exports: {})",
                            hook.point,
                            wasm,
                            hook.point.interface().wit_name(),
                            if exported.is_empty() {
                                "nothing of palisade:hooks".to_string()
                            } else {
                                exported.join(", ")
                            }
                        ),
                    )
                    .field(format!("hooks[{i}].point"))
                    .fix("remove the hook, or implement and export that interface in the plugin"),
                );
            }
        }
        if !ok {
            return None;
        }
        Some(Wasm {
            size,
            path: wasm_path,
            sha256,
            pre,
            exports,
        })
    }
}

/// A command's program, when it names a file: an absolute path must exist; a relative one
/// (`./hook.sh`, `bin/guard`) must be inside the plugin folder and exist. A bare name
/// (`python3`) is looked up on `PATH` when it runs.
fn check_program(
    plugin_dir: &Dir,
    manifest_path: &Path,
    program: &str,
    problems: &mut Vec<Problem>,
) -> Option<()> {
    if !program.contains('/') {
        return Some(());
    }
    let path = Path::new(program);
    let exists = if path.is_absolute() {
        std::fs::metadata(path).is_ok_and(|m| m.is_file())
    } else if path
        .components()
        .all(|c| matches!(c, PathComponent::Normal(_) | PathComponent::CurDir))
    {
        plugin_dir.metadata(path).is_ok_and(|m| m.is_file())
    } else {
        problems.push(
            Problem::new(
                manifest_path,
                format!("`{program}` leads out of the plugin folder"),
            )
            .field("command")
            .fix("name the program relative to the plugin folder (`./hook.sh`), by an absolute path, or by a name on PATH"),
        );
        return None;
    };
    if !exists {
        problems.push(
            Problem::new(manifest_path, format!("the program `{program}` does not exist"))
                .field("command")
                .fix("create the program, or correct the path (a relative path is taken from the plugin folder)"),
        );
        return None;
    }
    Some(())
}

/// The first 8 bytes of a file (fewer if it is shorter).
fn read_head(file: &std::fs::File) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut head = Vec::with_capacity(8);
    file.take(8).read_to_end(&mut head)?;
    Ok(head)
}

/// The sha256 of a file, read from its start through a small buffer.
fn scan(file: &std::fs::File) -> std::io::Result<String> {
    use std::os::unix::fs::FileExt;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut offset = 0u64;
    loop {
        let n = file.read_at(&mut buf, offset)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        offset += n as u64;
    }
    Ok(hex(&hasher.finalize()))
}

fn is_escape(err: &std::io::Error) -> bool {
    // cap-std reports an escape attempt with this message.
    err.to_string().contains("outside of the filesystem")
}

/// A component whose initial linear memory (or table) is over a hook's cap could never be
/// instantiated: every call would fail with `memory-limit`. Said at load instead, with the
/// size to set. (An interpreter built into a Python or JavaScript component starts with tens
/// of MiB.)
fn starts_within_limits(
    component: &Component,
    manifest: &Manifest,
    manifest_path: &Path,
    wasm: &str,
) -> Option<Problem> {
    const PAGE: u64 = 64 * 1024;
    const MIB: u64 = 1024 * 1024;
    let needed = component.resources_required()?;
    let initial = needed.max_initial_memory_size.unwrap_or(0) * PAGE;
    let (hook, cap) = manifest
        .hooks
        .iter()
        .map(|h| (h, h.limits.memory_bytes as u64))
        .min_by_key(|(_, cap)| *cap)?;
    if initial > cap {
        let at_least = initial.div_ceil(MIB);
        return Some(
            Problem::new(
                manifest_path,
                format!(
                    "`{wasm}` starts with {at_least} MiB of linear memory, over the {} MiB cap of \
                     its `{}` hook: it could never be instantiated",
                    cap / MIB,
                    hook.point
                ),
            )
            .field("limits.memory_mb")
            .fix(format!(
                "set `memory_mb` to at least {} (its start plus room to grow)",
                at_least + at_least / 2
            )),
        );
    }
    let table = needed.max_initial_table_size.unwrap_or(0);
    if table > crate::sandbox::MAX_TABLE_ELEMENTS as u64 {
        return Some(
            Problem::new(
                manifest_path,
                format!(
                    "`{wasm}` starts with a table of {table} elements, over the host's cap of {}",
                    crate::sandbox::MAX_TABLE_ELEMENTS
                ),
            )
            .fix("build the component with a smaller function table"),
        );
    }
    None
}

/// Tells a core module, a component and something else apart before compiling, for a clear
/// message.
fn check_header(bytes: &[u8], path: &Path) -> Option<Problem> {
    const MAGIC: &[u8] = b"\0asm";
    if bytes.len() < 8 || &bytes[..4] != MAGIC {
        return Some(
            Problem::new(path, "not a WebAssembly file (no `\\0asm` header)")
                .fix("point `wasm` at the component the build produced"),
        );
    }
    // Bytes 6..8 are the layer: 0 for a core module, 1 for a component.
    if bytes[6..8] == [0, 0] {
        return Some(
            Problem::new(path, "a core WebAssembly module, not a component")
                .fix("build for `wasm32-wasip2` (which produces a component), or wrap the module with `wasm-tools component new`"),
        );
    }
    None
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Plugins {
    fn new(host: Host, plugins: Vec<Plugin>, skipped: Vec<PathBuf>) -> Plugins {
        let mut by_point: HashMap<Point, Vec<(i32, usize, usize)>> = HashMap::new();
        for (p, plugin) in plugins.iter().enumerate() {
            for (h, hook) in plugin.manifest.hooks.iter().enumerate() {
                by_point
                    .entry(hook.point)
                    .or_default()
                    .push((hook.priority, p, h));
            }
        }
        let by_point = by_point
            .into_iter()
            .map(|(point, mut hooks)| {
                // Ascending priority, then registration order (plugin name, manifest order).
                hooks.sort();
                let refs = hooks
                    .into_iter()
                    .map(|(_, plugin, hook)| HookRef {
                        plugin,
                        hook,
                        id: format!("{}/{}", plugins[plugin].name(), point).into(),
                    })
                    .collect();
                (point, refs)
            })
            .collect();
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

    /// Folders of the directory that have no `plugin.toml` and were skipped.
    pub fn skipped(&self) -> &[PathBuf] {
        &self.inner.skipped
    }

    /// The hooks of `point` in dispatch order, with their plugin's name.
    pub fn hooks(&self, point: Point) -> impl Iterator<Item = (&str, &HookSpec)> {
        self.inner
            .by_point
            .get(&point)
            .into_iter()
            .flatten()
            .map(|r| {
                let plugin = &self.inner.plugins[r.plugin];
                (plugin.name(), &plugin.manifest.hooks[r.hook])
            })
    }
}
