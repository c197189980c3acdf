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

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

const KEY_FILE: &str = "key";

/// A compiled-component cache in a directory.
#[derive(Debug, Clone)]
pub(crate) struct Cache {
    dir: PathBuf,
    key: [u8; 32],
}

impl Cache {
    /// Opens (creating) the cache at `dir` for `engine`'s configuration.
    ///
    /// The directory must be the user's own: one that others can write to could have an
    /// entry swapped between its verification and its mapping, so it is refused.
    pub fn open(dir: &Path, engine: &Engine) -> std::io::Result<Cache> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        // `b3-`: the seal's format, so entries sealed another way are never even read.
        let entries = dir.join(format!("b3-{:016x}", hasher.finish()));
        private_dir(dir)?;
        private_dir(&entries)?;
        let key = key(dir)?;
        Ok(Cache { dir: entries, key })
    }

    /// The sha256 of the file whose metadata is `meta`: remembered from an earlier load when
    /// the file is provably unchanged since (same device, inode, size, mtime and ctime — the
    /// kernel moves ctime on every write, and no one can set it back), else computed by
    /// `compute` and remembered. The record is sealed like an entry.
    pub fn digest(
        &self,
        meta: &std::fs::Metadata,
        compute: impl FnOnce() -> std::io::Result<String>,
    ) -> std::io::Result<String> {
        let Some(print) = fingerprint(meta) else {
            return compute();
        };
        let path = self.dir.join("digests").join(print.identity());
        if let Some(fields) = self.read_record(&path)
            && let [recorded, sha256] = fields.as_slice()
            && *recorded == print.full()
        {
            return Ok(sha256.clone());
        }
        let sha256 = compute()?;
        // Remembering is an optimisation: a failure only costs the next load a hash.
        let _ = private_dir(&self.dir.join("digests"))
            .and_then(|()| self.write_record(&path, &[&print.full(), &sha256]));
        Ok(sha256)
    }

    /// The component with digest `sha256`: from the cache, or compiled from `bytes()` and
    /// stored. `bytes` is only read on a miss.
    pub fn load(
        &self,
        engine: &Engine,
        sha256: &str,
        bytes: impl FnOnce() -> std::io::Result<Vec<u8>>,
    ) -> wasmtime::Result<Component> {
        let code_path = self.dir.join(format!("{sha256}.cwasm"));
        let seal_path = self.dir.join(format!("{sha256}.seal"));
        if self.verify(&code_path, &seal_path) {
            // SAFETY: the file is a `Component::serialize` output that this cache wrote and
            // sealed with its private key, verified just above, for this engine
            // configuration, in a directory only this user can write to. Mapping it directly
            // spares copying megabytes of code into fresh pages on every cold start.
            #[expect(
                unsafe_code,
                reason = "loading precompiled code this host wrote and sealed"
            )]
            let component = unsafe { Component::deserialize_file(engine, &code_path) };
            if let Ok(component) = component {
                return Ok(component);
            }
        }
        let component = Component::from_binary(engine, &bytes()?)?;
        if let Ok(code) = component.serialize() {
            // A cache that cannot be written only costs time.
            let _ = self.store(&code_path, &seal_path, &code);
        }
        Ok(component)
    }

    /// Whether the entry's code is what this cache wrote. The seal records the code's MAC
    /// and the file's fingerprint when it was sealed (the record itself MACed): a file with
    /// that fingerprint is the file written then, untouched; any other is hashed in full
    /// (streaming through a small buffer) and checked against the MAC, and its seal renewed.
    fn verify(&self, code_path: &Path, seal_path: &Path) -> bool {
        let Some(fields) = self.read_record(seal_path) else {
            return false;
        };
        let [code_mac, sealed_print] = fields.as_slice() else {
            return false;
        };
        let Ok(mut file) = std::fs::File::open(code_path) else {
            return false;
        };
        let Some(print) = file.metadata().ok().as_ref().and_then(fingerprint) else {
            return false;
        };
        if *sealed_print == print.full() {
            return true;
        }
        let mut hasher = blake3::Hasher::new_keyed(&self.key);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match std::io::Read::read(&mut file, &mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    hasher.update(&buf[..n]);
                }
                Err(_) => return false,
            }
        }
        // Compared as MACs, in constant time (`blake3::Hash`).
        let Ok(expected) = blake3::Hash::from_hex(code_mac) else {
            return false;
        };
        if hasher.finalize() != expected {
            return false;
        }
        let _ = self.write_record(seal_path, &[code_mac, &print.full()]);
        true
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

/// Writes `bytes` to `path` through a temporary file (mode 0600) and a rename.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
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
fn private_dir(dir: &Path) -> std::io::Result<()> {
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

/// The cache's sealing key, created on first use, readable by its owner only.
fn key(dir: &Path) -> std::io::Result<[u8; 32]> {
    let path = dir.join(KEY_FILE);
    if let Ok(bytes) = std::fs::read(&path)
        && let Ok(key) = <[u8; 32]>::try_from(bytes.as_slice())
    {
        return Ok(key);
    }
    let mut seed = Sha256::new();
    seed.update(std::process::id().to_le_bytes());
    seed.update(format!("{:?}", std::time::SystemTime::now()).as_bytes());
    let mut entropy = [0u8; 32];
    // The OS's randomness where there is one; the seed above otherwise.
    if let Ok(mut random) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = random.read_exact(&mut entropy);
    }
    seed.update(entropy);
    let key: [u8; 32] = seed.finalize().into();
    // Written whole to a private temporary file, then linked into place: the link is atomic
    // and fails if another process got there first, so no one ever reads half a key.
    let tmp = dir.join(format!("{KEY_FILE}.tmp{}", std::process::id()));
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
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let bytes = std::fs::read(&path)?;
            <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| {
                std::io::Error::other(format!(
                    "the cache key file {} is corrupt; delete it",
                    path.display()
                ))
            })
        }
        Err(e) => Err(e),
    }
}

/// The MAC of `code` under `key`.
fn seal(key: &[u8; 32], code: &[u8]) -> blake3::Hash {
    blake3::keyed_hash(key, code)
}

#[cfg(test)]
mod tests {
    use super::*;

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
