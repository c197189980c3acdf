//! Reading a plugin folder's files without leaving it: manifests and components are opened
//! through `cap-std`, as regular files, bounded in size, and a path that leads out (absolute,
//! `..`, a symlink) is a problem naming it. May touch: the plugin folders it is given.

use crate::error::Problem;
use crate::manifest;
use crate::manifest::MANIFEST_FILE;
use cap_std::fs::Dir;
use std::path::Path;

pub(super) fn broken_link(path: &Path, err: &std::io::Error) -> Problem {
    Problem::new(path, format!("a symlink that cannot be followed: {err}"))
        .fix("point the symlink at the plugin's folder, or remove it")
}

/// Opens `path` in `dir` for reading, refusing anything but a regular file of at most `max`
/// bytes. Opened without blocking: a FIFO (or a device) where a plugin's file should be
/// would otherwise hang the load — and an agent treats a hook that never answers as no
/// objection. The checks are made on the opened file, so nothing can be swapped in between.
/// Returns the file and its length.
pub(super) fn open_regular(
    dir: &Dir,
    path: &Path,
    max: u64,
) -> std::io::Result<(std::fs::File, u64)> {
    let mut options = cap_std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    cap_std::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK | libc::O_NOCTTY);
    let file = dir.open_with(path, &options)?.into_std();
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other(
            "not a regular file (a FIFO, socket, device or folder cannot be a plugin's file)",
        ));
    }
    if meta.len() > max {
        return Err(std::io::Error::other(format!(
            "{} bytes, over the limit of {max} bytes",
            meta.len()
        )));
    }
    // O_NONBLOCK stays set: it means nothing for a regular file's reads.
    Ok((file, meta.len()))
}

/// Reads a plugin's `plugin.toml` (a regular file of at most
/// [`MAX_MANIFEST_BYTES`](manifest::MAX_MANIFEST_BYTES)).
pub(super) fn read_manifest(dir: &Dir) -> std::io::Result<String> {
    use std::io::Read;
    let (file, len) = open_regular(dir, Path::new(MANIFEST_FILE), manifest::MAX_MANIFEST_BYTES)?;
    // Room for all of it (and the end's zero-length read): read in one call, not in pieces
    // of 32, 64, 128… bytes, each a system call of the event's start.
    let mut text = String::with_capacity(usize::try_from(len).map_or(0, |len| len + 1));
    file.take(manifest::MAX_MANIFEST_BYTES)
        .read_to_string(&mut text)?;
    Ok(text)
}

/// The first 8 bytes of a file (fewer if it is shorter).
pub(super) fn read_head(file: &std::fs::File) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut head = vec![0u8; 8];
    let mut filled = 0;
    while filled < head.len() {
        match file.read_at(&mut head[filled..], filled as u64)? {
            0 => break,
            n => filled += n,
        }
    }
    head.truncate(filled);
    Ok(head)
}

/// The whole file, from its start, refusing more than `max` bytes (it may have grown since
/// it was opened).
pub(super) fn read_all(file: &std::fs::File, max: u64) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let expected = file.metadata()?.len();
    let mut bytes = Vec::with_capacity(usize::try_from(expected.min(max)).unwrap_or(0));
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read_at(&mut buf, bytes.len() as u64)?;
        if n == 0 {
            return Ok(bytes);
        }
        if bytes.len() as u64 + n as u64 > max {
            return Err(std::io::Error::other(format!(
                "over the limit of {max} bytes"
            )));
        }
        bytes.extend_from_slice(&buf[..n]);
    }
}

pub(super) fn is_escape(err: &std::io::Error) -> bool {
    // cap-std reports an escape attempt with this message.
    err.to_string().contains("outside of the filesystem")
}
