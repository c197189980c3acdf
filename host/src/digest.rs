//! Digests, in the form manifests pin and the cache keys: sha256 in lowercase hex.

use sha2::{Digest, Sha256};

/// `bytes`' sha256, in lowercase hex.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// `bytes` in lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
