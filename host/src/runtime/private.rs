//! The compile cache's private files, for the cache and its function store alike: written whole
//! through a temporary file and a rename, owner-only (files 0600 in directories 0700 that no
//! one else can write), and sealed with a keyed MAC. May touch: the files it is given.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A temporary file's name beside `path`, unique to this write: the process and a count of
/// its writes. (The process alone is not enough: two of its threads writing one file at once
/// would truncate each other's temporary file and rename or link it from under the other.)
pub(crate) fn temporary(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".tmp{}-{n}", std::process::id()));
    path.with_file_name(name)
}

/// Writes `bytes` to `path` through a temporary file (mode 0600) and a rename.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = temporary(path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(tmp, path)
}

/// Creates `dir` (mode 0700) if needed, and checks that no one but its owner — this user —
/// can write to it.
pub(crate) fn private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(dir)?;
        let me = nix::unistd::geteuid().as_raw();
        if meta.uid() != me {
            return Err(std::io::Error::other(format!(
                "{} belongs to another user (uid {}); use a cache directory of your own",
                dir.display(),
                meta.uid()
            )));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(std::io::Error::other(format!(
                "{} can be written by other users; make it private (`chmod 700`) or use \
                 another cache directory",
                dir.display()
            )));
        }
    }
    Ok(())
}

/// The MAC of `code` under `key`.
pub(crate) fn seal(key: &[u8; 32], code: &[u8]) -> blake3::Hash {
    blake3::keyed_hash(key, code)
}
