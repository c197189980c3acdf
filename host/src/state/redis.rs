//! The Redis state backend ([`StateStore::redis`](super::StateStore::redis)), for a fleet of
//! hosts sharing state. May touch: the Redis server it is given.

use super::backend::{
    Backend, Bounds, Done, Namespace, Op, Outcome, Refused, StateUnavailable, Write, effect,
};
use crate::hook::BoxFuture;
use std::sync::Mutex;

/// State in Redis. Connections are taken from a small pool and used by one operation at a
/// time (a `WATCH` belongs to its connection).
pub(super) struct Redis {
    pub(super) client: redis::Client,
    pub(super) idle: Mutex<Vec<redis::aio::MultiplexedConnection>>,
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis").finish_non_exhaustive()
    }
}

/// Connections kept for reuse, at most.
const REDIS_IDLE: usize = 16;
/// Tries of an operation whose `WATCH` saw a concurrent write, before it is unavailable.
const REDIS_TRIES: usize = 32;

impl Redis {
    /// The value's key and its scope's size key.
    fn keys(ns: &Namespace, key: &str) -> (String, String) {
        let scope = match &ns.session {
            None => "g".to_string(),
            Some(id) => format!("s:{}:{id}", id.len()),
        };
        (
            format!("palisade:{}:{scope}:{key}", ns.domain),
            format!("palisade-scope:{}:{scope}", ns.domain),
        )
    }

    async fn apply_now(
        con: &mut redis::aio::MultiplexedConnection,
        ns: &Namespace,
        key: &str,
        op: &Op,
        bounds: Bounds,
    ) -> redis::RedisResult<Option<Result<Done, Refused>>> {
        let (value_key, scope_key) = Redis::keys(ns, key);
        redis::cmd("WATCH")
            .arg(&value_key)
            .arg(&scope_key)
            .query_async::<()>(con)
            .await?;
        type Read = (Option<Vec<u8>>, (Option<u64>, Option<u64>));
        let (current, (keys, bytes)): Read = redis::pipe()
            .get(&value_key)
            .cmd("HMGET")
            .arg(&scope_key)
            .arg("keys")
            .arg("bytes")
            .query_async(con)
            .await?;
        let (keys, bytes) = (keys.unwrap_or(0), bytes.unwrap_or(0));
        let unwatch = |con: &mut redis::aio::MultiplexedConnection| {
            let mut con = con.clone();
            async move { redis::cmd("UNWATCH").query_async::<()>(&mut con).await }
        };
        let (write, done) = match effect(current.as_deref(), op.clone(), keys, bytes, bounds) {
            Ok((Write::Keep, done)) => {
                unwatch(con).await?;
                return Ok(Some(Ok(done)));
            }
            Ok(effect) => effect,
            Err(refused) => {
                unwatch(con).await?;
                return Ok(Some(Err(refused)));
            }
        };
        let old = current.as_ref().map_or(0, |c| c.len() as u64);
        let mut transaction = redis::pipe();
        transaction.atomic();
        let (keys, bytes) = match write {
            Write::Put(value) => {
                let after = (
                    keys + u64::from(current.is_none()),
                    bytes - old + value.len() as u64,
                );
                transaction.set(&value_key, value).ignore();
                after
            }
            _ => {
                transaction.del(&value_key).ignore();
                (keys - u64::from(current.is_some()), bytes - old)
            }
        };
        transaction
            .cmd("HSET")
            .arg(&scope_key)
            .arg("keys")
            .arg(keys)
            .arg("bytes")
            .arg(bytes)
            .ignore();
        // `EXEC` answers nil when a watched key changed meanwhile: try again.
        let committed: Option<()> = transaction.query_async(con).await?;
        Ok(committed.map(|()| Ok(done)))
    }
}

impl Backend for Redis {
    fn apply(&self, ns: Namespace, key: String, op: Op, bounds: Bounds) -> BoxFuture<'_, Outcome> {
        Box::pin(async move {
            let unavailable = |e: redis::RedisError| StateUnavailable(format!("redis: {e}"));
            let pooled = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let mut con = match pooled {
                Some(con) => con,
                None => self
                    .client
                    .get_multiplexed_async_connection()
                    .await
                    .map_err(unavailable)?,
            };
            for _ in 0..REDIS_TRIES {
                if let Some(outcome) = Redis::apply_now(&mut con, &ns, &key, &op, bounds)
                    .await
                    .map_err(unavailable)?
                {
                    let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
                    if idle.len() < REDIS_IDLE {
                        idle.push(con);
                    }
                    return Ok(outcome);
                }
            }
            Err(StateUnavailable(format!(
                "redis: {REDIS_TRIES} tries of one operation all met a concurrent write"
            )))
        })
    }
}
