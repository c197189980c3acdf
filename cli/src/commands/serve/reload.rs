//! Reloading `palisade serve`'s plugin directory: on `SIGHUP`, and with `--watch` when a
//! file in it changes (polled by a fingerprint of names, sizes and times). May touch: the
//! plugin directory (read only).

use super::Server;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::signal::unix::Signal;

pub(super) async fn reload_on_sighup(server: Arc<Server>, mut hup: Signal) {
    while hup.recv().await.is_some() {
        server.reload("SIGHUP").await;
    }
}

/// Every file of a plugin directory, with its size and modification time.
pub(super) type Fingerprint = Vec<(PathBuf, u64, Option<SystemTime>)>;

/// What the plugin directory looks like: every file two levels down, with its size and
/// modification time. A change reloads (once it has stopped changing for a poll, so a
/// half-copied component is not loaded).
pub(super) fn fingerprint(dir: &Path) -> Fingerprint {
    let mut seen = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), 0usize)];
    while let Some((path, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&path) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() && depth < 2 {
                stack.push((path, depth + 1));
            } else {
                seen.push((path, meta.len(), meta.modified().ok()));
            }
        }
    }
    seen.sort();
    seen
}

/// Reloads `server` whenever its plugin directory differs from `known` (its fingerprint when
/// the live set was loaded) and has stopped changing.
pub(super) async fn watch(server: Arc<Server>, known: Fingerprint) {
    let dir = server.options.plugins.clone();
    watch_dir(&dir, known, || {
        server.reload("the plugin directory changed")
    })
    .await
}

/// The poll loop of [`watch`]: calls `reload` each time `dir` differs from `known` and then
/// stays the same for one poll.
pub(super) async fn watch_dir<F: Future<Output = ()>>(
    dir: &Path,
    mut known: Fingerprint,
    mut reload: impl FnMut() -> F,
) {
    const POLL: Duration = Duration::from_millis(500);
    let mut pending: Option<Fingerprint> = None;
    loop {
        tokio::time::sleep(POLL).await;
        let now = fingerprint(dir);
        match &pending {
            // Changed, then stable for one poll: reload.
            Some(last) if *last == now => {
                pending = None;
                if now != known {
                    known = now;
                    reload().await;
                }
            }
            _ if now != known => pending = Some(now),
            _ => pending = None,
        }
    }
}
