//! A folder the manifest grants the plugin (`files`), watched for edits: a plugin that reads
//! its policy or configuration from files (`rego-guard`, `cedar-guard`) reads them again when
//! a file changes, with no reload of the plugin.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A granted folder, and what its files were when last looked at: each file's path, size and
/// modification time.
#[derive(Debug, Clone)]
pub struct WatchedFolder {
    path: PathBuf,
    seen: Vec<(PathBuf, u64, Option<SystemTime>)>,
}

impl WatchedFolder {
    /// The folder at `path` (as the manifest's grant names it inside the plugin), looked at
    /// once now.
    pub fn new(path: impl Into<PathBuf>) -> WatchedFolder {
        let path = path.into();
        let seen = look(&path);
        WatchedFolder { path, seen }
    }

    /// The folder's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its files when last looked at, in name order (not its subfolders'); none when it cannot
    /// be read.
    pub fn files(&self) -> impl Iterator<Item = &Path> {
        self.seen.iter().map(|(path, _, _)| path.as_path())
    }

    /// Looks again: whether a file was added, removed, or changed its size or time since the
    /// last look.
    pub fn changed(&mut self) -> bool {
        let now = look(&self.path);
        let changed = now != self.seen;
        self.seen = now;
        changed
    }
}

fn look(path: &Path) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    let mut files: Vec<_> = std::fs::read_dir(path)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let meta = entry.metadata().ok()?;
            meta.is_file()
                .then(|| (entry.path(), meta.len(), meta.modified().ok()))
        })
        .collect();
    files.sort();
    files
}
