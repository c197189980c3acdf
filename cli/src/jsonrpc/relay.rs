//! Ids the proxy owns. Every request a proxy relays from one peer to the other goes out under
//! a fresh, random id of the proxy's, and its answer comes back under the peer's own id. So no
//! peer's choice of id can collide with, spoof or overwrite a request in flight: not the
//! proxy's own (a server answering Palisade's question in the user's name), not the other
//! peer's (an answer routed past the hooks that judge it). An answer whose id the proxy did
//! not send is dropped, never passed on raw.

use serde_json::Value;
use std::collections::HashMap;
use std::sync::Mutex;

/// A new id of the proxy's own: 128 bits that neither peer can predict — a counter through
/// SipHash under keys the OS's randomness chose for this process (std's `RandomState`), so
/// that minting one costs no system call.
pub fn own_id() -> Value {
    use std::hash::BuildHasher;
    use std::sync::atomic::{AtomicU64, Ordering};
    static KEYS: std::sync::OnceLock<(std::hash::RandomState, std::hash::RandomState)> =
        std::sync::OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let (high, low) =
        KEYS.get_or_init(|| (std::hash::RandomState::new(), std::hash::RandomState::new()));
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Value::String(format!(
        "palisade-{:016x}{:016x}",
        high.hash_one(n),
        low.hash_one(n)
    ))
}

/// The key of an id in the tables: its JSON text (`1` and `"1"` are different ids).
pub fn key(id: &Value) -> String {
    id.to_string()
}

/// A request relayed under an id of the proxy's.
pub struct Relayed {
    /// The id the peer sent it with, which its answer goes back under.
    pub peer_id: Value,
}

/// One peer's requests in flight, relayed under the proxy's ids.
pub struct Relay {
    inner: Mutex<Tables>,
}

struct Tables {
    /// The peer's id, by the proxy's.
    by_own: HashMap<String, Relayed>,
    /// The proxy's id, by the peer's.
    by_peer: HashMap<String, Value>,
}

/// A request whose id the peer already has in flight: refused, since its answer could not be
/// told from the other one's.
#[derive(Debug)]
pub struct DuplicateId;

impl std::fmt::Display for DuplicateId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a request with this id is still in flight: ids must be unique")
    }
}

impl Default for Relay {
    fn default() -> Relay {
        Relay {
            inner: Mutex::new(Tables {
                by_own: HashMap::new(),
                by_peer: HashMap::new(),
            }),
        }
    }
}

impl Relay {
    fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the peer's request `peer_id` in flight: the id of the proxy's to send it with.
    pub fn relay(&self, peer_id: &Value) -> Result<Value, DuplicateId> {
        let mut tables = self.tables();
        let peer_key = key(peer_id);
        if tables.by_peer.contains_key(&peer_key) {
            return Err(DuplicateId);
        }
        let own = own_id();
        tables.by_peer.insert(peer_key, own.clone());
        let relayed = Relayed {
            peer_id: peer_id.clone(),
        };
        tables.by_own.insert(key(&own), relayed);
        Ok(own)
    }

    /// [`Relay::relay`], or the sender answered on `back` that the id is in flight (`None`).
    pub fn relay_or_refuse(&self, peer_id: &Value, back: &super::Writer) -> Option<Value> {
        match self.relay(peer_id) {
            Ok(own) => Some(own),
            Err(duplicate) => {
                let code = super::strict::INVALID_REQUEST;
                back.error(peer_id, code, duplicate.to_string(), None);
                None
            }
        }
    }

    /// [`Relay::answered`]; an answer to no request in flight is logged as dropped, as
    /// `proxy`'s, from `from`.
    pub fn answered_or_drop(&self, own: &Value, proxy: &str, from: &str) -> Option<Relayed> {
        let answered = self.answered(own);
        if answered.is_none() {
            let id = crate::output::printable(&super::truncate(&key(own))).into_owned();
            eprintln!(
                "palisade {proxy}: dropped an answer from the {from} to no request in flight \
                 (id {id})"
            );
        }
        answered
    }

    /// The request answered under the proxy's id `own`, out of flight; `None` when the proxy
    /// sent no such request (or it was answered already).
    pub fn answered(&self, own: &Value) -> Option<Relayed> {
        let mut tables = self.tables();
        let relayed = tables.by_own.remove(&key(own))?;
        tables.by_peer.remove(&key(&relayed.peer_id));
        Some(relayed)
    }

    /// The peer's id of the request relayed under the proxy's id `own`, while it is in flight.
    pub fn peer_of(&self, own: &Value) -> Option<Value> {
        self.tables()
            .by_own
            .get(&key(own))
            .map(|relayed| relayed.peer_id.clone())
    }

    /// The proxy's id of the peer's request `peer_id`, while it is in flight.
    pub fn own_of(&self, peer_id: &Value) -> Option<Value> {
        self.tables().by_peer.get(&key(peer_id)).cloned()
    }

    /// Whether the peer's request `peer_id` is in flight.
    pub fn in_flight(&self, peer_id: &Value) -> bool {
        self.tables().by_peer.contains_key(&key(peer_id))
    }

    /// Takes every request out of flight.
    pub fn drain(&self) -> Vec<Relayed> {
        let mut tables = self.tables();
        tables.by_peer.clear();
        tables.by_own.drain().map(|(_, relayed)| relayed).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_reused_id_is_refused_while_in_flight_and_an_unknown_answer_is_nobodys() {
        let relay = Relay::default();
        let first = relay.relay(&json!(7)).unwrap();
        assert!(relay.relay(&json!(7)).is_err());
        // The peer's own id, or a guess, answers nothing.
        assert!(relay.answered(&json!(7)).is_none());
        assert!(relay.answered(&json!("palisade-0")).is_none());
        assert_eq!(relay.answered(&first).unwrap().peer_id, json!(7));
        assert!(relay.answered(&first).is_none(), "answered once");
        // Once answered, the id may be used again, under another id of the proxy's.
        let again = relay.relay(&json!(7)).unwrap();
        assert_ne!(again, first);
    }

    #[test]
    fn own_ids_are_unpredictable() {
        let ids: std::collections::HashSet<String> = (0..1000).map(|_| key(&own_id())).collect();
        assert_eq!(ids.len(), 1000);
        assert!(own_id().as_str().unwrap().len() >= 40);
    }
}
