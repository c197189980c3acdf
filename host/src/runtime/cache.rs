//! The compiled-component cache: a component is compiled once per engine configuration and
//! component digest, then loaded from disk in microseconds instead of compiled again (a Python
//! component takes seconds to compile).
//!
//! Entries live in `<dir>/<engine hash>/<component sha256>.cwasm`. Deserializing compiled code
//! runs it natively, so the cache never deserializes bytes it did not write: every entry is
//! sealed with a keyed BLAKE3 MAC under a key created (mode 0600) in the cache directory, and
//! an entry whose seal does not verify is ignored and rewritten. Keep the directory private to
//! the user who runs the host. (BLAKE3 rather than HMAC-SHA256: verifying the seal is on the
//! cold-start path of every bridged hook event, and BLAKE3 is several times faster.)
//!
//! The seal also records the entry file's fingerprint (device, inode, size, mtime, ctime) at
//! sealing, under the MAC: a file with that fingerprint is the one written then — the kernel
//! moves ctime on every write and no one can set it back — so it is not hashed again. A
//! component's sha256 is remembered the same way (`digests/`), keyed by its file's identity.

use super::functions::Functions;
use super::private::{private_dir, seal, temporary, write_private};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use wasmtime::Engine;
use wasmtime::component::Component;

const KEY_FILE: &str = "key";

/// A compiled-component cache in a directory.
#[derive(Debug, Clone)]
pub(crate) struct Cache {
    dir: PathBuf,
    key: [u8; 32],
    /// The compiled-function cache in `<dir>/functions`, which the engine compiles through.
    functions: Arc<Functions>,
}

impl Cache {
    /// Opens (creating) the cache at `dir` for `engine`'s configuration, and places
    /// `functions`, the store `engine` compiles through, in it.
    ///
    /// The directory must be the user's own: one that others can write to could have an
    /// entry swapped between its verification and its mapping, so it is refused.
    pub fn open(dir: &Path, engine: &Engine, functions: Arc<Functions>) -> std::io::Result<Cache> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        // `b3-`: the seal's format, so entries sealed another way are never even read.
        let entries = dir.join(format!("b3-{:016x}", hasher.finish()));
        private_dir(dir)?;
        private_dir(&entries)?;
        let key = key(dir)?;
        functions.place(entries.join("functions"), key);
        Ok(Cache {
            dir: entries,
            key,
            functions,
        })
    }

    /// The sha256 remembered for the file whose metadata is `meta`, when the file is
    /// provably unchanged since it was hashed (same device, inode, size, mtime and ctime —
    /// the kernel moves ctime on every write, and no one can set it back). The record is
    /// sealed like an entry.
    pub fn recall(&self, meta: &std::fs::Metadata) -> Option<String> {
        let print = fingerprint(meta)?;
        let path = self.dir.join("digests").join(print.identity());
        let fields = self.read_record(&path)?;
        match fields.as_slice() {
            [recorded, sha256] if *recorded == print.full() => Some(sha256.clone()),
            _ => None,
        }
    }

    /// Remembers that the file whose metadata was `before` when its bytes were read, and
    /// `after` once they were, has digest `sha256` — only if nothing changed in between.
    pub fn remember(&self, before: &std::fs::Metadata, after: &std::fs::Metadata, sha256: &str) {
        let (Some(print), Some(after)) = (fingerprint(before), fingerprint(after)) else {
            return;
        };
        if print.full() != after.full() {
            return;
        }
        let path = self.dir.join("digests").join(print.identity());
        // Remembering is an optimisation: a failure only costs the next load a hash.
        let _ = private_dir(&self.dir.join("digests"))
            .and_then(|()| self.write_record(&path, &[&print.full(), sha256]));
    }

    /// The component with digest `sha256`: from the cache, or compiled from `bytes()` and
    /// stored. `bytes` is only read on a miss.
    ///
    /// One compile of a component at a time, across processes: a load that finds another
    /// (another event's, a background `palisade check`) compiling it calls `waiting`, waits for
    /// that compile and maps its result, instead of competing with it for the same cores.
    pub fn load(
        &self,
        engine: &Engine,
        sha256: &str,
        bytes: impl FnOnce() -> std::io::Result<Vec<u8>>,
        waiting: impl FnOnce(),
    ) -> wasmtime::Result<Component> {
        if let Some(component) = self.cached(engine, sha256) {
            return Ok(component);
        }
        // Without a lock file (a read-only cache) every load compiles, as before.
        let lock = self.compile_lock(sha256);
        if let Some(lock) = &lock
            && lock.try_lock().is_err()
        {
            waiting();
            let _ = lock.lock();
            if let Some(component) = self.cached(engine, sha256) {
                return Ok(component);
            }
        }
        let code_path = self.dir.join(format!("{sha256}.cwasm"));
        let seal_path = self.dir.join(format!("{sha256}.seal"));
        let component = {
            let _compiling = self.functions.compiling();
            Component::from_binary(engine, &bytes()?)?
        };
        if let Ok(code) = component.serialize() {
            // A cache that cannot be written only costs time.
            let _ = self.store(&code_path, &seal_path, &code);
        }
        Ok(component)
    }

    /// The lock file of the compile of `sha256` (held while it compiles; see [`Cache::load`]),
    /// never opened through a link planted in its place.
    fn compile_lock(&self, sha256: &str) -> Option<std::fs::File> {
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
        }
        options.open(self.dir.join(format!("{sha256}.lock"))).ok()
    }

    /// The component with digest `sha256` if the cache holds it (verified, mapped), else
    /// `None`: nothing is compiled.
    pub fn cached(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let code_path = self.dir.join(format!("{sha256}.cwasm"));
        let seal_path = self.dir.join(format!("{sha256}.seal"));
        let file = self.verified(&code_path, &seal_path)?;
        map(engine, &file).ok()
    }

    /// Whether the entry's code is what this cache wrote. The seal records the code's MAC
    /// and the file's fingerprint when it was sealed (the record itself MACed): a file with
    /// that fingerprint is the file written then, untouched; any other is hashed in full
    /// (streaming through a small buffer) and checked against the MAC, and its seal renewed.
    ///
    /// Returns the open file that was verified: it is the one to map, so that nothing can be
    /// swapped in between.
    fn verified(&self, code_path: &Path, seal_path: &Path) -> Option<std::fs::File> {
        let fields = self.read_record(seal_path)?;
        let [code_mac, sealed_print] = fields.as_slice() else {
            return None;
        };
        let mut file = std::fs::File::open(code_path).ok()?;
        let print = file.metadata().ok().as_ref().and_then(fingerprint)?;
        if *sealed_print == print.full() {
            return Some(file);
        }
        let mut hasher = blake3::Hasher::new_keyed(&self.key);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match std::io::Read::read(&mut file, &mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    hasher.update(&buf[..n]);
                }
                Err(_) => return None,
            }
        }
        // Compared as MACs, in constant time (`blake3::Hash`).
        let expected = blake3::Hash::from_hex(code_mac).ok()?;
        if hasher.finalize() != expected {
            return None;
        }
        let _ = self.write_record(seal_path, &[code_mac, &print.full()]);
        Some(file)
    }

    /// Reads a record written by [`Cache::write_record`]: its fields, if its MAC verifies.
    fn read_record(&self, path: &Path) -> Option<Vec<String>> {
        let text = std::fs::read_to_string(path).ok()?;
        let (body, mac) = text.trim_end().rsplit_once(' ')?;
        let mac = blake3::Hash::from_hex(mac).ok()?;
        (seal(&self.key, body.as_bytes()) == mac)
            .then(|| body.split(' ').map(str::to_string).collect())
    }

    /// Writes `fields` (no spaces inside) and their MAC as one line.
    fn write_record(&self, path: &Path, fields: &[&str]) -> std::io::Result<()> {
        let body = fields.join(" ");
        let mac = seal(&self.key, body.as_bytes());
        write_private(path, format!("{body} {}\n", mac.to_hex()).as_bytes())
    }

    fn store(&self, code_path: &Path, seal_path: &Path, code: &[u8]) -> std::io::Result<()> {
        // The code first, then its seal: a reader never finds a seal without its code. The
        // fingerprint is taken after the rename (which moves the file's ctime).
        write_private(code_path, code)?;
        let print = fingerprint(&std::fs::metadata(code_path)?)
            .map(|p| p.full())
            .unwrap_or_else(|| "-".into());
        let mac = seal(&self.key, code).to_hex();
        self.write_record(seal_path, &[&mac, &print])
    }
}

/// Maps the compiled component in `file`, the open file that was just verified.
fn map(engine: &Engine, file: &std::fs::File) -> wasmtime::Result<Component> {
    // Linux: mapped through the open file's own descriptor (`/proc/self/fd/N` opens the very
    // inode the descriptor holds, whatever the path now names), not copied. Elsewhere, the
    // verified file's bytes are read and loaded.
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let path = format!("/proc/self/fd/{}", file.as_raw_fd());
        // SAFETY: the file is a `Component::serialize` output that this cache wrote and
        // sealed with its private key, verified through this very descriptor, for this
        // engine configuration, in a directory only this user can write to. Mapping it
        // directly spares copying megabytes of code into fresh pages on every cold start.
        #[expect(
            unsafe_code,
            reason = "loading precompiled code this host wrote and sealed"
        )]
        let component = unsafe { Component::deserialize_file(engine, &path) };
        component
    }
    #[cfg(not(target_os = "linux"))]
    {
        use std::io::{Read, Seek};
        let mut file = file;
        let mut bytes = Vec::new();
        file.seek(std::io::SeekFrom::Start(0))?;
        file.read_to_end(&mut bytes)?;
        // SAFETY: as above; these are the verified file's bytes.
        #[expect(
            unsafe_code,
            reason = "loading precompiled code this host wrote and sealed"
        )]
        let component = unsafe { Component::deserialize(engine, &bytes) };
        component
    }
}

/// What identifies a file's content without reading it: its device and inode, size, and
/// modification and change times to the nanosecond.
struct Fingerprint {
    dev: u64,
    ino: u64,
    rest: String,
}

impl Fingerprint {
    fn identity(&self) -> String {
        format!("{}-{}", self.dev, self.ino)
    }

    fn full(&self) -> String {
        format!("{}-{}-{}", self.dev, self.ino, self.rest)
    }
}

#[cfg(unix)]
fn fingerprint(meta: &std::fs::Metadata) -> Option<Fingerprint> {
    use std::os::unix::fs::MetadataExt;
    Some(Fingerprint {
        dev: meta.dev(),
        ino: meta.ino(),
        rest: format!(
            "{}-{}.{}-{}.{}",
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec()
        ),
    })
}

#[cfg(not(unix))]
fn fingerprint(_meta: &std::fs::Metadata) -> Option<Fingerprint> {
    // No change time to trust: always hash.
    None
}

/// The cache's sealing key, created on first use from the OS's random source, readable by its
/// owner only. A key file that is not the user's own, or that others can read, is refused:
/// whoever knows the key can seal compiled code that this host would then run natively.
fn key(dir: &Path) -> std::io::Result<[u8; 32]> {
    let path = dir.join(KEY_FILE);
    match read_key(&path) {
        Ok(key) => return Ok(key),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| {
        std::io::Error::other(format!(
            "no randomness from the operating system for the cache key: {e}"
        ))
    })?;
    // Written whole to a private temporary file, then linked into place: the link is atomic
    // and fails if another process got there first, so no one ever reads half a key.
    let tmp = temporary(&path);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&tmp)?;
    file.write_all(&key)?;
    file.sync_all()?;
    drop(file);
    let linked = std::fs::hard_link(&tmp, &path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(key),
        // Another process created it first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read_key(&path),
        Err(e) => Err(e),
    }
}

/// Reads the key file, checking on the open file that it is a private file of this user.
fn read_key(path: &Path) -> std::io::Result<[u8; 32]> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata()?;
        let me = nix::unistd::geteuid().as_raw();
        if !meta.is_file() || meta.uid() != me {
            return Err(std::io::Error::other(format!(
                "the cache key {} is not a file of yours (uid {}); delete it, and a new key \
                 is made",
                path.display(),
                meta.uid()
            )));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(std::io::Error::other(format!(
                "the cache key {} can be read by other users (mode {:o}); delete it (a new \
                 key is made, and the cache is compiled again), since it may be known",
                path.display(),
                meta.mode() & 0o777
            )));
        }
    }
    let mut bytes = Vec::new();
    file.take(33).read_to_end(&mut bytes)?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
        std::io::Error::other(format!(
            "the cache key file {} is corrupt; delete it",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads of one process making the key of a new cache at once (hosts built side by
    /// side, as a test suite does) all get it, and the one key: their temporary files are
    /// their own (they shared one per process, and a thread's link found it removed by
    /// another's: "No such file or directory").
    #[test]
    fn threads_making_one_cache_key_at_once_all_get_the_same_key() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let start = std::sync::Barrier::new(8);
            let keys: Vec<std::io::Result<[u8; 32]>> = std::thread::scope(|scope| {
                let threads: Vec<_> = (0..8)
                    .map(|_| {
                        scope.spawn(|| {
                            start.wait();
                            key(dir.path())
                        })
                    })
                    .collect();
                threads.into_iter().map(|t| t.join().unwrap()).collect()
            });
            let kept = read_key(&dir.path().join(KEY_FILE)).unwrap();
            for key in keys {
                assert_eq!(key.unwrap(), kept);
            }
        }
    }

    /// Likewise for entries written by two threads at once: each write is whole.
    #[test]
    fn threads_writing_one_entry_at_once_all_succeed_and_it_is_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("entry");
        let bytes = vec![7u8; 1 << 20];
        for _ in 0..20 {
            let start = std::sync::Barrier::new(8);
            std::thread::scope(|scope| {
                for _ in 0..8 {
                    scope.spawn(|| {
                        start.wait();
                        write_private(&path, &bytes).unwrap();
                    });
                }
            });
            assert_eq!(std::fs::read(&path).unwrap(), bytes);
        }
    }

    #[test]
    fn a_seal_depends_on_the_key_and_every_byte() {
        let key = [7u8; 32];
        let code = vec![1u8; 4096];
        let mut other = code.clone();
        other[4095] ^= 1;
        assert_eq!(seal(&key, &code), seal(&key, &code));
        assert_ne!(seal(&key, &code), seal(&key, &other));
        assert_ne!(seal(&key, &code), seal(&[8u8; 32], &code));
    }
}

/// Compiled components mapped from the cache ahead of the load that needs them
/// ([`Host::load_ahead`](crate::Host::load_ahead)), by digest. A load takes the one with its
/// component's digest, waiting for its mapping if it is under way.
#[derive(Default)]
pub(crate) struct Ahead {
    slots: std::sync::Mutex<Vec<(String, Arc<AheadSlot>)>>,
}

/// One component mapped ahead: `None` once it turned out not to be in the cache (or its
/// mapping failed, or panicked).
type AheadSlot = std::sync::OnceLock<Option<Component>>;

impl Ahead {
    /// Maps the component with digest `sha256` from `cache` now, on this thread, for the
    /// load that will need it; nothing if one was mapped (or is being mapped) already.
    pub fn map(&self, cache: &Cache, engine: &Engine, sha256: &str) {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            if slots.iter().any(|(digest, _)| digest == sha256) {
                return;
            }
            let slot = Arc::new(AheadSlot::new());
            slots.push((sha256.to_string(), slot.clone()));
            slot
        };
        // A load waiting for the slot is never left waiting: whatever happens here, it ends
        // filled, `None` unless the component was mapped.
        struct Filled<'a>(&'a AheadSlot);
        impl Drop for Filled<'_> {
            fn drop(&mut self) {
                let _ = self.0.set(None);
            }
        }
        let filled = Filled(&slot);
        let _ = slot.set(cache.cached(engine, sha256));
        drop(filled);
    }

    /// The component with digest `sha256` mapped ahead, once its mapping is done (`None`:
    /// none was begun, or it is not in the cache). Taken: a later load of the same digest
    /// maps its own.
    pub fn take(&self, sha256: &str) -> Option<Component> {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            let at = slots.iter().position(|(digest, _)| digest == sha256)?;
            slots.swap_remove(at).1
        };
        slot.wait().clone()
    }
}
