//! The compiled-component cache every command loads plugins through.

use std::path::PathBuf;

/// The compiled-component cache: `$PALISADE_CACHE_DIR`, else `$XDG_CACHE_HOME/palisade`, else
/// `~/.cache/palisade`; `None` when `PALISADE_CACHE_DIR=off` (or there is no home).
pub fn cache_dir() -> Option<PathBuf> {
    match std::env::var_os("PALISADE_CACHE_DIR") {
        Some(dir) if dir == "off" => None,
        Some(dir) => Some(PathBuf::from(dir)),
        None => match (std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
            (Some(cache), _) => Some(PathBuf::from(cache).join("palisade")),
            (None, Some(home)) => Some(PathBuf::from(home).join(".cache/palisade")),
            (None, None) => None,
        },
    }
}

/// A host builder with the compiled-component cache of [`cache_dir`], that shows progress
/// while components compile.
pub fn host_builder() -> palisade::HostBuilder {
    quiet_host_builder().on_compile(crate::progress::observer())
}

/// [`host_builder`] without progress: for the bridges, whose stderr belongs to the agent.
pub fn quiet_host_builder() -> palisade::HostBuilder {
    let mut builder = palisade::Host::builder();
    // `PALISADE_INSTANCE_POOL=N`: the pool's size in component instances (0: no pool). A
    // value that is not a number is ignored (a knob, never a reason not to start).
    if let Some(slots) = std::env::var("PALISADE_INSTANCE_POOL")
        .ok()
        .and_then(|v| v.trim().parse().ok())
    {
        builder = builder.instance_pool(slots);
    }
    match cache_dir() {
        Some(dir) => builder.cache_dir(dir),
        None => builder,
    }
}

/// The state store a `--state` option names: `memory`, a Redis URL (`redis://…`, `rediss://…`,
/// `redis+unix://…`), or the embedded store in a directory; by default the embedded store in
/// [`palisade::state::default_dir`].
pub fn state_store(spec: Option<&str>) -> palisade::StateStore {
    match spec {
        Some("memory") => palisade::StateStore::memory(),
        Some(url)
            if ["redis://", "rediss://", "redis+unix://"]
                .iter()
                .any(|p| url.starts_with(p)) =>
        {
            palisade::StateStore::redis(url)
        }
        Some(dir) => palisade::StateStore::embedded(dir),
        None => palisade::StateStore::default(),
    }
}
