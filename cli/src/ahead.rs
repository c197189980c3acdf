//! The bridges' one start-up trick (docs/performance.md, "Start-up tricks removed", has
//! what it saves and why the others went): an event maps its plugins' largest compiled
//! component from the cache while it reads their manifests, the component its plugin
//! directory, point and tool loaded as their largest the last time: [`hint`] names it,
//! [`palisade::Host::load_ahead`] maps it, and [`remember`] keeps the digest for the next
//! event.

use std::path::{Path, PathBuf};

/// What names the components an event of `dir` loads: its plugin directory, its point and
/// its tool.
pub fn key(dir: &Path, name: &str, tool: Option<&str>) -> String {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    format!("{}\0{name}\0{}", dir.display(), tool.unwrap_or(""))
}

/// The digest of the largest component that the event named `key` (its plugin directory,
/// point and tool: [`remember`]) loaded the last time, if one is remembered: a bridge
/// maps it from the cache while it reads its manifests ([`palisade::Host::load_ahead`]).
/// Only a hint: `load_ahead` ignores what is not a digest, the load uses the component only
/// if a plugin's component file has that digest, and the cache maps only what it verifies.
pub fn hint(key: &str) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(ahead_path(key)?)
        .ok()?
        .take(128)
        .read_to_string(&mut text)
        .ok()?;
    Some(text.trim_end().to_string())
}

/// Remembers the digest of the largest component among `plugins` (loaded) for the event
/// named `key` ([`hint`]), unless it is `before`, what is remembered. A hint that
/// cannot be written only costs the next event its head start.
pub fn remember(key: &str, before: Option<&str>, plugins: &palisade::Plugins) {
    let largest = plugins
        .iter()
        .filter_map(|plugin| Some((plugin.size()?, plugin.sha256()?)))
        .max();
    let (Some((_, sha256)), Some(path)) = (largest, ahead_path(key)) else {
        return;
    };
    if before == Some(sha256) {
        return;
    }
    let Some(dir) = path.parent() else { return };
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    let temporary = path.with_extension(format!("{}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new();
    file.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
    let written = builder
        .create(dir)
        .and_then(|()| file.open(&temporary))
        .and_then(|mut file| std::io::Write::write_all(&mut file, format!("{sha256}\n").as_bytes()))
        .and_then(|()| std::fs::rename(&temporary, &path));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
}

/// Where the hint of [`hint`] for `key` is kept: `<cache>/ahead/<hash of key>`.
fn ahead_path(key: &str) -> Option<PathBuf> {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    key.hash(&mut hasher);
    Some(
        crate::cache::cache_dir()?
            .join("ahead")
            .join(format!("{:016x}", hasher.finish())),
    )
}
