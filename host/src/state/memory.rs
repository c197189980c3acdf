//! The in-process state backend ([`StateStore::memory`](super::StateStore::memory)): for
//! tests and short-lived embedders. May touch: nothing outside the process.

use super::backend::{Backend, Bounds, Namespace, Op, Outcome, Write, effect};
use crate::hook::BoxFuture;
use std::collections::HashMap;
use std::sync::Mutex;

/// State in memory.
#[derive(Debug, Default)]
pub(super) struct Memory {
    scopes: Mutex<HashMap<Namespace, Scope>>,
}

#[derive(Debug, Default)]
struct Scope {
    values: HashMap<String, Vec<u8>>,
    bytes: u64,
}

impl Backend for Memory {
    fn apply(&self, ns: Namespace, key: String, op: Op, bounds: Bounds) -> BoxFuture<'_, Outcome> {
        let mut scopes = self.scopes.lock().unwrap_or_else(|e| e.into_inner());
        let scope = scopes.entry(ns).or_default();
        let current = scope.values.get(&key).map(Vec::as_slice);
        let outcome = effect(current, op, scope.values.len() as u64, scope.bytes, bounds).map(
            |(write, done)| {
                if !matches!(write, Write::Keep)
                    && let Some(old) = scope.values.remove(&key)
                {
                    scope.bytes -= old.len() as u64;
                }
                if let Write::Put(new) = write {
                    scope.bytes += new.len() as u64;
                    scope.values.insert(key, new);
                }
                done
            },
        );
        Box::pin(std::future::ready(Ok(outcome)))
    }
}
