//! What is checked of a plugin before it runs: a command's program, a component's header, its
//! exports against the points it subscribes to, and whether it can start within its hooks'
//! memory caps. May touch: the plugin folders it is given (read only).

use super::files::is_escape;
use super::files::open_regular;
use crate::error::Problem;
use crate::manifest::Manifest;
use crate::runtime::component::Exports;
use cap_std::fs::Dir;
use std::io::ErrorKind;
use std::path::Component as PathComponent;
use std::path::Path;
use wasmtime::component::Component;

/// A command's program, when it names a file: an absolute path must exist; a relative one
/// (`./hook.sh`, `bin/guard`) must be inside the plugin folder and exist. A bare name
/// (`python3`) is looked up on `PATH` when it runs.
pub(super) fn check_program(
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

/// Opens the component `wasm` names, a regular file inside the plugin's folder of at most
/// `max` bytes; anything else is a problem.
pub(super) fn open_component(
    plugin_dir: &Dir,
    manifest_path: &Path,
    wasm: &str,
    wasm_path: &Path,
    max: u64,
    problems: &mut Vec<Problem>,
) -> Option<std::fs::File> {
    let wasm_rel = Path::new(wasm);
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
    // What is pinned is what runs: the file is opened once, and its digest, the pin
    // check, the cache key and (on a cache miss) the compiled bytes all come from that
    // open file — the bytes hashed are the bytes compiled.
    match open_regular(plugin_dir, wasm_rel, max) {
        Ok((file, _)) => Some(file),
        Err(err) if err.kind() == ErrorKind::NotFound => {
            problems.push(
                Problem::new(manifest_path, format!("`{wasm}` does not exist"))
                    .field("wasm")
                    .fix("build the plugin, or correct the path"),
            );
            None
        }
        Err(err) if err.kind() == ErrorKind::PermissionDenied || is_escape(&err) => {
            // cap-std refuses a symlink that leads out of the folder.
            problems.push(outside());
            None
        }
        Err(err) => {
            problems.push(
                Problem::new(wasm_path, format!("cannot load: {err}")).fix(format!(
                    "point `wasm` at the regular file the build produced (components over \
                     {max} bytes need a host built with a larger `max_component_bytes`)"
                )),
            );
            None
        }
    }
}

/// Whether the component exports every point the manifest subscribes to, each with the
/// signature the host calls, and `prepare`, if it exports that, as the host calls it; every
/// one that does not is a problem.
#[allow(clippy::too_many_arguments)]
pub(super) fn subscriptions_exported(
    engine: &wasmtime::Engine,
    component: &Component,
    exports: &Exports,
    manifest: &Manifest,
    manifest_path: &Path,
    wasm_path: &Path,
    wasm: &str,
    problems: &mut Vec<Problem>,
) -> bool {
    let mut ok = true;
    // `prepare` is optional; but one the host cannot call would leave every instance
    // unprepared, whatever its plugin counts on it for: refused, not skipped.
    if let Some(Err(mismatch)) = crate::runtime::signatures::check_prepare(engine, component) {
        ok = false;
        problems.push(
            Problem::new(wasm_path, format!("{wasm} {mismatch}"))
                .field("wasm")
                .fix("build the plugin against the palisade:hooks@0.1.0 WIT (the SDK, or the `wit/` folder `palisade new` writes), or export no `prepare`"),
        );
    }
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
        return false;
    }
    for (i, hook) in manifest.hooks.iter().enumerate() {
        if let Err(mismatch) =
            crate::runtime::signatures::check(engine, component, hook.point.interface())
        {
            ok = false;
            problems.push(
                Problem::new(wasm_path, format!("{wasm} {mismatch}"))
                    .field(format!("hooks[{i}].point"))
                    .fix("build the plugin against the palisade:hooks@0.1.0 WIT (the SDK, or the `wit/` folder `palisade new` writes)"),
            );
        }
    }
    ok
}

/// A component whose initial linear memory (or table) is over a hook's cap could never be
/// instantiated: every call would fail with `memory-limit`. Said at load instead, with the
/// size to set. (An interpreter built into a Python or JavaScript component starts with tens
/// of MiB.)
pub(super) fn starts_within_limits(
    component: &Component,
    manifest: &Manifest,
    manifest_path: &Path,
    wasm: &str,
) -> Option<Problem> {
    const PAGE: u64 = 64 * 1024;
    const MIB: u64 = 1024 * 1024;
    let needed = component.resources_required()?;
    let initial = needed
        .max_initial_memory_size
        .unwrap_or(0)
        .saturating_mul(PAGE);
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
    if table > crate::runtime::limits::MAX_TABLE_ELEMENTS as u64 {
        return Some(
            Problem::new(
                manifest_path,
                format!(
                    "`{wasm}` starts with a table of {table} elements, over the host's cap of {}",
                    crate::runtime::limits::MAX_TABLE_ELEMENTS
                ),
            )
            .fix("build the component with a smaller function table"),
        );
    }
    None
}

/// Tells a core module, a component and something else apart before compiling, for a clear
/// message.
pub(super) fn check_header(bytes: &[u8], path: &Path) -> Option<Problem> {
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
