//! Loading a plugin directory: one folder per plugin, each with a `plugin.toml` and its
//! component (or its command, or its URL), into [`Plugins`].
//!
//! The directory is read through `cap-std`: a manifest can only name a file inside its own
//! plugin folder. Absolute paths, `..` and symlinks that lead out are refused. Every problem
//! of every plugin is reported at once, each naming the file, the field and the fix.
//!
//! Registration order — the tie-breaker after priority — is deterministic: plugins sorted by
//! name, then hooks in manifest order.

mod checks;
mod component;
mod files;
mod grants;
mod parallel;
mod read;

use crate::error::{Error, Problem};
use crate::host::Host;
use crate::manifest::{MANIFEST_FILE, Manifest, RuntimeSpec};
use crate::plugin::{Plugin, Plugins, Skipped};
use crate::point::Point;
use crate::runtime::Runtime;
use crate::runtime::external::{External, Target};
use crate::runtime::loading::{Loading, Setter};
use crate::runtime::sandbox::{GrantedState, PluginEnv};
use cap_std::fs::Dir;
use checks::check_program;
use grants::{granted, state_domain};
use parallel::{Jobs, Parallel};
use read::{Pending, Read, Wanted, read_dir};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which plugins of a directory [`Host::load`] loads: every plugin folder (the default), or,
/// for a process that serves one event and exits (a bridge run), only those whose hooks that
/// event would run. Every manifest is read and validated either way; only the wanted
/// plugins' components are loaded.
#[derive(Clone, Copy)]
pub struct LoadRequest<'a> {
    dir: &'a Path,
    points: Option<&'a [Point]>,
    tool: Option<&'a str>,
}

impl std::fmt::Debug for LoadRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadRequest")
            .field("dir", &self.dir)
            .field("points", &self.points)
            .field("tool", &self.tool)
            .finish()
    }
}

impl<'a> LoadRequest<'a> {
    /// Every plugin folder of `dir` (a folder with a `plugin.toml`; others are skipped and
    /// listed by [`Plugins::skipped`]).
    pub fn dir(dir: &'a Path) -> LoadRequest<'a> {
        LoadRequest {
            dir,
            points: None,
            tool: None,
        }
    }

    /// Only the plugins with a hook on one of `points`.
    pub fn points(self, points: &'a [Point]) -> LoadRequest<'a> {
        LoadRequest {
            points: Some(points),
            ..self
        }
    }

    /// For an event about the tool named `tool` (as the hooks' matchers see it): a hook on a
    /// point that has a tool counts only if its matcher takes `tool`, since it is not run
    /// otherwise. A bridged `Read` thus loads none of the plugins that only guard shell
    /// commands.
    pub fn tool(self, tool: &'a str) -> LoadRequest<'a> {
        LoadRequest {
            tool: Some(tool),
            ..self
        }
    }

    /// Which plugins are wanted: `None`, all of them.
    fn wanted(&self) -> Option<Wanted<'a>> {
        match (self.points, self.tool) {
            (None, None) => None,
            (points, tool) => Some(Wanted {
                points: points.unwrap_or(&Point::ALL),
                tool,
            }),
        }
    }
}

impl Host {
    /// Loads the plugins `request` names.
    ///
    /// Either every plugin loads, or nothing does and [`Error::Invalid`] lists every problem
    /// found, each naming the file, the field and the fix.
    pub fn load(&self, request: LoadRequest<'_>) -> Result<Plugins, Error> {
        let read = read_dir(request.dir)?;
        self.load_read(read, request.wanted(), false)
            .map(|(plugins, _)| plugins)
    }

    /// Loads every plugin folder of `dir`: [`Host::load`] of [`LoadRequest::dir`].
    pub fn load_dir(&self, dir: impl AsRef<Path>) -> Result<Plugins, Error> {
        self.load(LoadRequest::dir(dir.as_ref()))
    }

    /// Loads the plugins `read` of those `wanted` (all, for `None`); `overlapped`: see
    /// [`Manifests::load_overlapped`].
    fn load_read(
        &self,
        read: Read,
        wanted: Option<Wanted<'_>>,
        overlapped: bool,
    ) -> Result<(Plugins, Option<Loads>), Error> {
        let Read {
            mut pending,
            mut problems,
            skipped,
        } = read;
        if let Some(wanted) = &wanted {
            pending.retain(|p| wanted.wants(&p.manifest));
        }
        // Loaded for an event: the plugins about to run. Should one keep state, the store
        // opens meanwhile, rather than in its hook's time.
        let open_state = wanted.is_some() && pending.iter().any(|p| p.manifest.state.is_some());
        if overlapped {
            return self
                .overlap(pending, open_state, problems, skipped)
                .map(|(plugins, loads)| (plugins, Some(loads)));
        }
        // Then the components, in parallel: reading, verifying and compiling (or loading
        // from the cache) is the bulk of a cold start.
        let loaded = self.load_parallel(pending, open_state);
        let mut plugins: Vec<Plugin> = Vec::new();
        for (plugin, found) in loaded {
            problems.extend(found);
            if let Some(plugin) = plugin {
                add_unique(&mut plugins, plugin, &mut problems);
            }
        }
        if !problems.is_empty() {
            return Err(Error::Invalid { problems });
        }
        plugins.sort_by(|a, b| a.name().cmp(b.name()));
        Ok((Plugins::new(self.clone(), plugins, skipped), None))
    }

    /// The rest of an overlapped load: every plugin checked but for its component, whose
    /// load begins on the helper threads.
    fn overlap(
        &self,
        pending: Vec<Pending>,
        open_state: bool,
        mut problems: Vec<Problem>,
        skipped: Vec<Skipped>,
    ) -> Result<(Plugins, Loads), Error> {
        let mut plugins: Vec<Plugin> = Vec::new();
        let (mut jobs, mut sizes) = (Vec::new(), Vec::new());
        for pending in pending {
            let size = pending.component_size();
            let Some(planned) = self.plan(pending, &mut problems) else {
                continue;
            };
            let runtime = match planned.runtime {
                Some(runtime) => runtime,
                None => {
                    let loading = Loading::new(usize::try_from(size).unwrap_or(usize::MAX));
                    jobs.push(ComponentJob {
                        plugin_dir: planned.plugin_dir,
                        folder: planned.folder.clone(),
                        manifest_path: planned.manifest_path,
                        manifest: planned.manifest.clone(),
                        setter: Setter::new(loading.clone()),
                    });
                    sizes.push(size);
                    Runtime::Loading(loading)
                }
            };
            let plugin = Plugin {
                manifest: planned.manifest,
                dir: planned.folder,
                link: planned.link,
                runtime,
                env: planned.env,
            };
            add_unique(&mut plugins, plugin, &mut problems);
        }
        // Nothing runs: the jobs dropped here refuse their components.
        if !problems.is_empty() {
            return Err(Error::Invalid { problems });
        }
        plugins.sort_by(|a, b| a.name().cmp(b.name()));
        let work: fn(&Host, ComponentJob) -> Vec<Problem> = Host::load_component;
        let loads = Loads {
            host: self.clone(),
            parallel: self.start_parallel(jobs, &sizes, open_state, work),
        };
        Ok((Plugins::new(self.clone(), plugins, skipped), loads))
    }

    /// Loads the pending plugins in parallel, one thread per core at most (this one among
    /// them), each taking the next pending plugin until none is left; the results keep the
    /// order of `pending`. Plain threads rather than rayon's pool: a process that handles one
    /// hook event loads a few components from the cache in about a millisecond, and rayon's
    /// idle workers, spinning before they sleep, would take the cores it loads on. (A compile
    /// still runs its functions on rayon's pool, through wasmtime's parallel compilation.)
    ///
    /// With `open_state`, the state store is opened ahead of the hooks that use it, and the
    /// load does not wait for it (a store that is slow to open, or busy, holds up only the
    /// hooks that use it): by the first helper, once it has loaded what it takes — in
    /// parallel with the largest component's load — or, with no helper, on a thread of its
    /// own ([`StateStore::open_ahead`](crate::state::StateStore::open_ahead)). Not on a thread of its
    /// own beside the helpers: on two cores, a third busy thread takes the idle core, and the
    /// helper waits behind the thread loading the largest component while the other core
    /// idles.
    fn load_parallel(&self, pending: Vec<Pending>, open_state: bool) -> Vec<Loaded> {
        let sizes: Vec<u64> = pending.iter().map(Pending::component_size).collect();
        let work: fn(&Host, Pending) -> Loaded = |host, pending| {
            let mut problems = Vec::new();
            (host.load_plugin(pending, &mut problems), problems)
        };
        self.start_parallel(pending, &sizes, open_state, work)
            .finish(self)
    }

    /// Begins `work` on each of `items` (of component files `sizes` bytes long) on helper
    /// threads, as [`Host::load_parallel`] describes; [`Parallel::finish`] does this thread's
    /// share.
    fn start_parallel<T: Send + 'static, R: Send + 'static>(
        &self,
        items: Vec<T>,
        sizes: &[u64],
        open_state: bool,
        work: fn(&Host, T) -> R,
    ) -> Parallel<T, R> {
        let count = items.len();
        let threads = match count {
            0 | 1 => 1,
            _ => std::thread::available_parallelism().map_or(1, |n| n.get().min(count)),
        };
        // The largest components first: the thread that takes a Python component (3 ms
        // from the cache) then takes it at the start, not after the others, which the other
        // threads load meanwhile. (One thread takes them all, in any order.)
        let mut order: Vec<usize> = (0..count).collect();
        if threads > 1 {
            order.sort_by_key(|&i| std::cmp::Reverse(sizes[i]));
        }
        let jobs = Arc::new(Jobs {
            order,
            slots: items
                .into_iter()
                .map(|item| std::sync::Mutex::new(Some(item)))
                .collect(),
            next: std::sync::atomic::AtomicUsize::new(0),
        });
        let state = &self.inner.state;
        let mut open_state = open_state && state.unopened();
        let (sender, received) = std::sync::mpsc::channel::<(usize, R)>();
        for _ in 1..threads {
            let (host, jobs, sender) = (self.clone(), jobs.clone(), sender.clone());
            let open = open_state.then(|| state.opener());
            let opens = open.is_some();
            let helper = std::thread::Builder::new()
                .name("palisade-load".into())
                .spawn(move || {
                    jobs.run(&host, work, |loaded| {
                        // The receiver goes only once every plugin is in.
                        let _ = sender.send(loaded);
                    });
                    // Done loading: the load waits no longer for this thread.
                    drop(sender);
                    open.map_or_else(crate::state::Opened::nothing, |open| open())
                });
            if let (Ok(helper), true) = (helper, opens) {
                state.opening_on(helper);
                open_state = false;
            }
        }
        drop(sender);
        if open_state {
            state.open_ahead();
        }
        // The calling thread loads too ([`Parallel::finish`]), and alone when no helper
        // could start.
        Parallel {
            jobs,
            work,
            received,
        }
    }

    fn load_plugin(&self, pending: Pending, problems: &mut Vec<Problem>) -> Option<Plugin> {
        let planned = self.plan(pending, problems)?;
        let runtime = match planned.runtime {
            Some(runtime) => runtime,
            None => Runtime::Wasm(Box::new(self.load_wasm(
                &planned.plugin_dir,
                &planned.folder,
                &planned.manifest_path,
                &planned.manifest,
                planned.manifest.runtime.wasm_file()?,
                problems,
            )?)),
        };
        Some(Plugin {
            manifest: planned.manifest,
            dir: planned.folder,
            link: planned.link,
            runtime,
            env: planned.env,
        })
    }

    /// Checks all of a plugin but its component: a command's program, the grants of a
    /// component's. `runtime` is `None` for a component, which is the rest of its load.
    fn plan(&self, pending: Pending, problems: &mut Vec<Problem>) -> Option<Planned> {
        let Pending {
            plugin_dir,
            folder,
            link,
            manifest_path,
            manifest,
        } = pending;
        if self.inner.limits.forbid_fail_open {
            let before = problems.len();
            for (i, hook) in manifest.hooks.iter().enumerate() {
                if hook.fails_open() {
                    problems.push(
                        Problem::new(
                            &manifest_path,
                            format!(
                                "the `{}` hook fails open (`on_failure = \"allow\"`), and this \
                                 host forbids it: a crash or timeout of it would let through \
                                 what it exists to stop",
                                hook.point
                            ),
                        )
                        .field(format!("hooks[{i}].on_failure"))
                        .fix("remove `on_failure = \"allow\"` (failures then fail closed), or make the hook observe-only"),
                    );
                }
            }
            if problems.len() > before {
                return None;
            }
        }
        if !cfg!(feature = "http") {
            let field = match &manifest.runtime {
                RuntimeSpec::Http { .. } => Some("url"),
                _ if !manifest.http.is_empty() => Some("http"),
                _ => None,
            };
            if let Some(field) = field {
                problems.push(
                    Problem::new(
                        &manifest_path,
                        "this build of palisade has no `http` feature: it can neither call an \
                         HTTP hook nor grant a component `wasi:http`",
                    )
                    .field(field)
                    .fix("build palisade with its `http` feature (a default one)"),
                );
                return None;
            }
        }
        let runtime = match &manifest.runtime {
            RuntimeSpec::Wasm(_) => None,
            RuntimeSpec::Command { argv } => {
                check_program(&plugin_dir, &manifest_path, &argv[0], problems)?;
                Some(Runtime::External(External {
                    target: Target::Command {
                        argv: argv.clone(),
                        env: manifest.env.clone(),
                        // The real folder: a symlinked plugin's command runs where it lives.
                        dir: link.clone().unwrap_or_else(|| folder.clone()),
                    },
                    protocol: manifest.protocol,
                }))
            }
            RuntimeSpec::Http { url } => Some(Runtime::External(External {
                target: Target::Http { url: url.clone() },
                protocol: manifest.protocol,
            })),
        };
        let (vars, folders) = match &runtime {
            None => granted(
                &manifest,
                link.as_deref().unwrap_or(&folder),
                &manifest_path,
                problems,
            )?,
            Some(_) => (Vec::new(), Vec::new()),
        };
        let state = match manifest.state.clone() {
            None => None,
            Some(grant) => Some(GrantedState {
                domain: state_domain(&grant, link.as_deref().unwrap_or(&folder), &manifest_path)
                    .map_err(|problem| problems.push(problem))
                    .ok()?,
                grant,
                store: self.inner.state.clone(),
            }),
        };
        let env = Arc::new(PluginEnv {
            vars,
            folders,
            http: manifest.http.clone().into(),
            name: manifest.name.clone(),
            config: manifest
                .config
                .iter()
                .map(|(k, v)| (k.clone(), v.to_string()))
                .collect(),
            state,
        });
        Some(Planned {
            plugin_dir,
            folder,
            link,
            manifest_path,
            manifest,
            runtime,
            env,
        })
    }

    /// Loads the component of an overlapped load's plugin, handing it (or its problems) to
    /// the plugin's calls waiting for it; its problems are also the load's.
    fn load_component(&self, job: ComponentJob) -> Vec<Problem> {
        let mut problems = Vec::new();
        let manifest = &job.manifest;
        let loaded = manifest.runtime.wasm_file().and_then(|wasm| {
            self.load_wasm(
                &job.plugin_dir,
                &job.folder,
                &job.manifest_path,
                manifest,
                wasm,
                &mut problems,
            )
        });
        job.setter.set(match loaded {
            Some(wasm) => Ok(Box::new(wasm)),
            None => Err(problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")),
        });
        problems
    }
}

/// A plugin with all but its component checked ([`Host::plan`]).
struct Planned {
    plugin_dir: Dir,
    folder: PathBuf,
    link: Option<PathBuf>,
    manifest_path: PathBuf,
    manifest: Manifest,
    /// `None`: a component, still to load.
    runtime: Option<Runtime>,
    env: Arc<PluginEnv>,
}

/// The component of an overlapped load's plugin, to load.
struct ComponentJob {
    plugin_dir: Dir,
    folder: PathBuf,
    manifest_path: PathBuf,
    manifest: Manifest,
    setter: Setter,
}

/// A plugin directory's manifests, read and checked ([`Manifests::read`]) ahead of the event
/// whose plugins are then loaded from them ([`Manifests::load_overlapped`]).
#[doc(hidden)]
pub struct Manifests {
    read: Result<Read, Error>,
}

impl std::fmt::Debug for Manifests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Manifests").finish_non_exhaustive()
    }
}

impl Manifests {
    /// Reads and checks the manifests of `dir`, which needs no host: a bridge reads them
    /// while it reads its event and its host is built. Problems are reported by the load,
    /// with any it finds then.
    pub fn read(dir: impl AsRef<Path>) -> Manifests {
        Manifests {
            read: read_dir(dir.as_ref()),
        }
    }

    /// Loads with `host` the plugins with a hook on one of `points` (and, for a tool's event,
    /// a matcher that takes `tool`), for a process that runs one event and exits (a bridge),
    /// with the components loading while the event's hooks run: returns once every manifest
    /// is read and checked — a problem of any manifest, wanted or not, of a grant or of a
    /// command's program is an error here, before anything runs — with the components still
    /// loading, on helper threads and in [`Loads::finish`], which the caller runs (on a
    /// blocking thread) meanwhile. A hook whose component is still loading waits for it at
    /// its turn (its deadline counting from then), so the hooks before a large component (a
    /// Python interpreter's, 3 ms from the cache) run while it loads instead of after.
    ///
    /// A component that does not load: [`Loads::finish`] returns its problems, as
    /// [`Host::load`] would have, and its hooks fail (`unavailable`), closed where a failure
    /// is. The caller refuses the event with those problems, as it would have before running
    /// anything; the hooks ordered before that component's may have run (as they run before a
    /// guard that refuses).
    pub fn load_overlapped(
        self,
        host: &Host,
        points: &[Point],
        tool: Option<&str>,
    ) -> Result<(Plugins, Loads), Error> {
        let (plugins, loads) = host.load_read(self.read?, Some(Wanted { points, tool }), true)?;
        Ok((plugins, loads.expect("an overlapped load has its loads")))
    }
}

/// Adds `plugin` to `plugins`, unless one of them has its name (a problem).
fn add_unique(plugins: &mut Vec<Plugin>, plugin: Plugin, problems: &mut Vec<Problem>) {
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
        return;
    }
    plugins.push(plugin);
}

/// The components of a [`Manifests::load_overlapped`], loading: [`Loads::finish`] does the
/// calling thread's share and waits for the rest.
#[doc(hidden)]
pub struct Loads {
    host: Host,
    parallel: Parallel<ComponentJob, Vec<Problem>>,
}

impl std::fmt::Debug for Loads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loads")
            .field("components", &self.parallel.jobs.slots.len())
            .finish_non_exhaustive()
    }
}

impl Loads {
    /// Loads this thread's share of the components and waits for the others': `Err` lists
    /// the problems of every component that did not load (their hooks failed), as
    /// [`Host::load`] would have. Blocks: run it where blocking is allowed.
    /// Dropped unfinished, the components no thread took are refused (their hooks fail).
    pub fn finish(self) -> Result<(), Error> {
        let problems: Vec<Problem> = self
            .parallel
            .finish(&self.host)
            .into_iter()
            .flatten()
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::Invalid { problems })
        }
    }
}

/// A plugin as loading it ended: the plugin, unless a problem stopped it, and its problems.
type Loaded = (Option<Plugin>, Vec<Problem>);
