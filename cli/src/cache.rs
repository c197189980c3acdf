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
    with_pool(palisade::DEFAULT_INSTANCE_POOL)
}

/// [`quiet_host_builder`] for a process that handles one hook event and exits (the bridges):
/// no instance pool, whose reservation costs such a process more than reusing slots saves it
/// (docs/performance.md, "Choices measured"), no
/// direct calls, whose linker such a process would build for calls it makes once, no
/// spare instances, which no later call would take.
pub fn one_event_host_builder() -> palisade::HostBuilder {
    with_pool(0).direct_calls(false).spare_instances(false)
}

/// A host builder with the component cache and a pool of `slots` instances, unless
/// `PALISADE_INSTANCE_POOL=N` names another size (0: no pool; a value that is not a number is
/// ignored: a knob, never a reason not to start).
fn with_pool(slots: u32) -> palisade::HostBuilder {
    let slots = std::env::var("PALISADE_INSTANCE_POOL")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(slots);
    let builder = palisade::Host::builder()
        .instance_pool(slots)
        .forbid_fail_open(strict());
    match cache_dir() {
        Some(dir) => builder.cache_dir(dir),
        None => builder,
    }
}

/// Whether `PALISADE_STRICT` is set (to anything but `0`, `false` or nothing): every host
/// the CLI builds then refuses manifests whose guards or transforms fail open
/// ([`palisade::HostBuilder::forbid_fail_open`]). An environment variable, so that it holds
/// for the hook commands agents run as for `serve`, `mcp` and `acp`.
pub fn strict() -> bool {
    std::env::var("PALISADE_STRICT").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "no"))
}

/// The state store a `--state` option names: `memory`, a Redis URL (`redis://…`, `rediss://…`,
/// `redis+unix://…`), or the embedded store in a directory; by default the embedded store in
/// [`palisade::state::default_dir`].
pub fn state_store(spec: Option<&str>) -> palisade::state::StateStore {
    match spec {
        Some("memory") => palisade::state::StateStore::memory(),
        Some(url) if is_redis_url(url) => palisade::state::StateStore::redis(url),
        Some(dir) => palisade::state::StateStore::embedded(dir),
        None => palisade::state::StateStore::default(),
    }
}

/// Whether `spec` is a Redis URL (`redis://…`, `rediss://…`, `redis+unix://…`), not a
/// directory.
pub fn is_redis_url(spec: &str) -> bool {
    ["redis://", "rediss://", "redis+unix://"]
        .iter()
        .any(|p| spec.starts_with(p))
}
