//! The bounds a manifest's fields take, and their defaults.

/// Default deadline of one hook invocation (docs/semantics.md S2.4).
pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;
/// Longest deadline a manifest may set.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Default fuel of one hook invocation: about 70 ms of a tight loop on a 2 GHz core.
pub const DEFAULT_FUEL: u64 = 1_000_000_000;
/// Default linear-memory cap of a plugin instance.
pub const DEFAULT_MEMORY_MB: u64 = 64;
/// Largest memory cap a manifest may set.
pub const MAX_MEMORY_MB: u64 = 4_096;
/// Largest fuel budget a manifest may set: hours of a tight loop, far past the longest
/// deadline (so the deadline is what stops a hook given this much), and far from where the
/// host's fuel arithmetic could overflow.
pub const MAX_FUEL: u64 = 1_000_000_000_000_000;
/// Largest `plugin.toml` read; a larger file is refused unread.
pub const MAX_MANIFEST_BYTES: u64 = 1024 * 1024;
/// Default bound of the JSON crossing to and from a command or HTTP hook (docs/semantics.md
/// S2.3).
pub const DEFAULT_PAYLOAD_MAX_BYTES: usize = 128 * 1024;
/// Largest payload bound a manifest may set.
pub const MAX_PAYLOAD_MAX_BYTES: usize = 64 * 1024 * 1024;
/// Default of `[state] max_keys`.
pub const DEFAULT_STATE_KEYS: u64 = 1024;
/// Largest `[state] max_keys`.
pub const MAX_STATE_KEYS: u64 = 1_000_000;
/// Default of `[state] max_bytes`: every value of one scope together.
pub const DEFAULT_STATE_BYTES: u64 = 1024 * 1024;
/// Largest `[state] max_bytes`.
pub const MAX_STATE_BYTES: u64 = 64 * 1024 * 1024;

/// `n` MiB in bytes, saturating: callers range-check `n` first, so this never saturates for a
/// value that is used.
pub(crate) fn mb(n: u64) -> usize {
    n.checked_mul(1024 * 1024)
        .and_then(|bytes| usize::try_from(bytes).ok())
        .unwrap_or(usize::MAX)
}
