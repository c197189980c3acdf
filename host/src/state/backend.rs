//! What every state backend implements and shares: whose values ([`Namespace`]), the
//! operations ([`Op`]) and their answers, the bounds, and the one rule of what an operation
//! does to a key ([`effect`]), so that the backends differ only in where they keep values.

use crate::hook::BoxFuture;
use std::path::Path;
use std::sync::Arc;

/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 256;

/// Whose values: one domain's, in one session or in all.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Namespace {
    /// The state domain: a `shared` name, or a folder's own ([`folder_domain`]).
    pub domain: Arc<str>,
    /// The session's id; `None` for the domain's global scope.
    pub session: Option<Arc<str>>,
}

/// The state domain of the plugin folder `folder` when its manifest shares none: `@` and the
/// sha256 of the folder's canonical path. Every process that loads the folder, by whatever
/// path, meets the same values; a plugin in another folder never does, whatever its name; and
/// no `shared` name (spelled as a plugin name, without `@`) is ever this.
pub(crate) fn folder_domain(folder: &Path) -> std::io::Result<String> {
    let canonical = folder.canonicalize()?;
    let digest = crate::digest::sha256_hex(canonical.as_os_str().as_encoded_bytes());
    Ok(format!("@{digest}"))
}

impl Namespace {
    /// The scope as one text column: `g` or `s:<session id>`.
    pub(crate) fn scope(&self) -> String {
        match &self.session {
            None => "g".into(),
            Some(id) => format!("s:{id}"),
        }
    }
}

/// What a scope may hold, from the manifest's `[state]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bounds {
    pub max_keys: u64,
    pub max_bytes: u64,
}

/// One state operation.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    Get,
    Set(Vec<u8>),
    Delete,
    CompareAndSwap {
        expected: Option<Vec<u8>>,
        new: Option<Vec<u8>>,
    },
    Increment(i64),
}

/// What an operation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Done {
    Value(Option<Vec<u8>>),
    Flag(bool),
    Count(i64),
}

/// Why an operation was refused (the store is fine).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    TooLarge,
    TooManyKeys,
    NotACounter,
}

/// The backend could not do the operation: the hook stops with `state-unavailable`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the state store is unavailable: {0}")]
pub struct StateUnavailable(pub String);

pub(crate) type Outcome = Result<Result<Done, Refused>, StateUnavailable>;

/// A state backend: every operation must be atomic and check `bounds` in the same step.
pub(crate) trait Backend: Send + Sync + std::fmt::Debug {
    fn apply(&self, ns: Namespace, key: String, op: Op, bounds: Bounds) -> BoxFuture<'_, Outcome>;
}

/// What an operation does to its key.
#[derive(Debug)]
pub(crate) enum Write {
    Keep,
    Remove,
    Put(Vec<u8>),
}

/// The effect of `op` on `current`, the scope holding `keys` keys and `bytes` bytes: what to
/// write, and the answer.
pub(crate) fn effect(
    current: Option<&[u8]>,
    op: Op,
    keys: u64,
    bytes: u64,
    bounds: Bounds,
) -> Result<(Write, Done), Refused> {
    let (write, done) = match op {
        Op::Get => return Ok((Write::Keep, Done::Value(current.map(<[u8]>::to_vec)))),
        Op::Set(value) => (Write::Put(value), Done::Flag(true)),
        Op::Delete => (Write::Remove, Done::Flag(current.is_some())),
        Op::CompareAndSwap { expected, new } => {
            if current != expected.as_deref() {
                return Ok((Write::Keep, Done::Flag(false)));
            }
            (new.map_or(Write::Remove, Write::Put), Done::Flag(true))
        }
        Op::Increment(by) => {
            let count = match current {
                None => 0,
                Some(bytes) => {
                    i64::from_le_bytes(bytes.try_into().map_err(|_| Refused::NotACounter)?)
                }
            };
            let count = count.wrapping_add(by);
            (Write::Put(count.to_le_bytes().to_vec()), Done::Count(count))
        }
    };
    if let Write::Put(new) = &write {
        let old = current.map_or(0, |c| c.len() as u64);
        if current.is_none() && keys >= bounds.max_keys {
            return Err(Refused::TooManyKeys);
        }
        if bytes - old.min(bytes) + new.len() as u64 > bounds.max_bytes {
            return Err(Refused::TooLarge);
        }
    }
    Ok((write, done))
}

/// `url` without its password, for messages.
pub(crate) fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://…@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}
