//! The compiled-component cache: a component is compiled once per engine configuration and
//! component digest, then loaded from disk in microseconds instead of compiled again (a Python
//! component takes seconds to compile).
//!
//! Entries live in `<dir>/<engine hash>/<component sha256>.cwasm`. Deserializing compiled code
//! runs it natively, so the cache never deserializes bytes it did not write: every entry is
//! sealed with an HMAC-SHA256 under a key created (mode 0600) in the cache directory, and an
//! entry whose seal does not verify is ignored and rewritten. Keep the directory private to
//! the user who runs the host.

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use wasmtime::Engine;
use wasmtime::component::Component;

const KEY_FILE: &str = "key";
const SEAL_LEN: usize = 32;

/// A compiled-component cache in a directory.
#[derive(Debug, Clone)]
pub(crate) struct Cache {
    dir: PathBuf,
    key: [u8; 32],
}

impl Cache {
    /// Opens (creating) the cache at `dir` for `engine`'s configuration.
    pub fn open(dir: &Path, engine: &Engine) -> std::io::Result<Cache> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let dir = dir.join(format!("{:016x}", hasher.finish()));
        std::fs::create_dir_all(&dir)?;
        let key = key(dir.parent().unwrap_or(&dir))?;
        Ok(Cache { dir, key })
    }

    /// The component with digest `sha256`: from the cache, or compiled from `bytes` and stored.
    pub fn load(&self, engine: &Engine, sha256: &str, bytes: &[u8]) -> wasmtime::Result<Component> {
        let path = self.dir.join(format!("{sha256}.cwasm"));
        if let Ok(sealed) = std::fs::read(&path)
            && let Some(code) = self.unseal(&sealed)
        {
            // SAFETY: the bytes are a `Component::serialize` output that this cache sealed
            // with its private key (verified just above), for this engine configuration.
            #[expect(
                unsafe_code,
                reason = "loading precompiled code this host wrote and sealed"
            )]
            let component = unsafe { Component::deserialize(engine, code) };
            if let Ok(component) = component {
                return Ok(component);
            }
        }
        let component = Component::from_binary(engine, bytes)?;
        if let Ok(code) = component.serialize() {
            // A cache that cannot be written only costs time.
            let _ = self.store(&path, &code);
        }
        Ok(component)
    }

    fn store(&self, path: &Path, code: &[u8]) -> std::io::Result<()> {
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&hmac(&self.key, code))?;
        file.write_all(code)?;
        file.sync_all()?;
        std::fs::rename(tmp, path)
    }

    fn unseal<'a>(&self, sealed: &'a [u8]) -> Option<&'a [u8]> {
        if sealed.len() < SEAL_LEN {
            return None;
        }
        let (seal, code) = sealed.split_at(SEAL_LEN);
        let expected = hmac(&self.key, code);
        // Constant-time comparison.
        let diff = seal
            .iter()
            .zip(expected.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        (diff == 0).then_some(code)
    }
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

/// HMAC-SHA256 (RFC 2104).
fn hmac(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

#[cfg(test)]
mod tests {
    use super::hmac;

    #[test]
    fn hmac_sha256_matches_rfc_4231_test_case_2() {
        // HMAC zero-pads short keys to the block size, so "Jefe" padded to 32 bytes is "Jefe".
        let mut key = [0u8; 32];
        key[..4].copy_from_slice(b"Jefe");
        let mac = hmac(&key, b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
