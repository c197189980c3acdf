//! Host services and conveniences on the WIT types.

use crate::bindings::palisade::hooks::{host, tool_dispatch};
use crate::{
    Ask, ContentBlock, Deny, GuardDecision, PostToolAction, PostToolDecision, PreToolDecision,
    ToolCall, ToolOutcome,
};
use serde::de::DeserializeOwned;

/// Structured logging through the host, attributed to this plugin.
///
/// Guest stdout and stderr are captured and capped by the host; these functions are the way
/// to leave a readable trace.
pub mod log {
    use super::host::{self, Level};

    /// Logs at `trace` level.
    pub fn trace(message: &str) {
        host::log(Level::Trace, message);
    }
    /// Logs at `debug` level.
    pub fn debug(message: &str) {
        host::log(Level::Debug, message);
    }
    /// Logs at `info` level.
    pub fn info(message: &str) {
        host::log(Level::Info, message);
    }
    /// Logs at `warn` level.
    pub fn warn(message: &str) {
        host::log(Level::Warn, message);
    }
    /// Logs at `error` level.
    pub fn error(message: &str) {
        host::log(Level::Error, message);
    }
}

/// State the host keeps for this plugin (the manifest's `[state]` grant): it outlives the
/// instance — eviction, reload, a trapped call, a restart — and, with a shared backend, is one
/// across hosts. [`session`] is this plugin's values in this agent session, [`global`] in
/// every session; no other plugin sees them.
///
/// ```no_run
/// # fn count() -> Result<(), palisade_sdk::state::Error> {
/// // At most 50 shell commands per session, whatever happens to the instance.
/// let n = palisade_sdk::state::session().increment("bash-calls", 1)?;
/// # let _ = n;
/// # Ok(())
/// # }
/// ```
///
/// A store that fails stops the hook (the host reports `state-unavailable`, and a guard fails
/// closed): the calls below only return the refusals of a working store ([`Error`]).
pub mod state {
    use crate::bindings::palisade::hooks::state::{self as raw, Scope};
    pub use raw::Error;
    use serde::Serialize;
    use serde::de::DeserializeOwned;

    /// One scope of this plugin's values.
    #[derive(Debug, Clone, Copy)]
    pub struct Store(Scope);

    /// This plugin's values in this agent session (needs `scopes = ["session"]`).
    pub fn session() -> Store {
        Store(Scope::Session)
    }

    /// This plugin's values in every session (needs `scopes = ["global"]`).
    pub fn global() -> Store {
        Store(Scope::Global)
    }

    impl Store {
        /// The value of `key`, if any.
        pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
            raw::get(self.0, key)
        }

        /// Sets `key` to `value`.
        pub fn set(&self, key: &str, value: &[u8]) -> Result<(), Error> {
            raw::set(self.0, key, value)
        }

        /// Removes `key`; whether it was there.
        pub fn delete(&self, key: &str) -> Result<bool, Error> {
            raw::delete(self.0, key)
        }

        /// Sets `key` to `new` (removes it, for `None`) only if its value is `expected`
        /// (absent, for `None`), atomically; whether it did.
        pub fn compare_and_swap(
            &self,
            key: &str,
            expected: Option<&[u8]>,
            new: Option<&[u8]>,
        ) -> Result<bool, Error> {
            raw::compare_and_swap(self.0, key, expected, new)
        }

        /// Adds `by` to the counter at `key` (from 0 if absent), atomically; the new count.
        pub fn increment(&self, key: &str, by: i64) -> Result<i64, Error> {
            raw::increment(self.0, key, by)
        }

        /// The value of `key` as `T`, stored as JSON by [`Store::set_json`].
        ///
        /// # Panics
        ///
        /// If the stored value is not `T`'s JSON: the hook traps, and a guard fails closed,
        /// rather than read a corrupt value as absent.
        pub fn get_json<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, Error> {
            Ok(self.get(key)?.map(|bytes| {
                serde_json::from_slice(&bytes)
                    .unwrap_or_else(|e| panic!("state `{key}` is not the JSON expected: {e}"))
            }))
        }

        /// Sets `key` to `value`, as JSON.
        pub fn set_json<T: Serialize>(&self, key: &str, value: &T) -> Result<(), Error> {
            let bytes = serde_json::to_vec(value).expect("a serializable value serializes");
            self.set(key, &bytes)
        }
    }
}

/// The value of `key` in the `[config]` table of this plugin's manifest, deserialized.
///
/// `None` when the key is absent, or when its value does not fit `T` (a warning is logged,
/// naming the key).
pub fn config<T: DeserializeOwned>(key: &str) -> Option<T> {
    let json = host::config(key)?;
    match serde_json::from_str(&json) {
        Ok(value) => Some(value),
        Err(err) => {
            log::warn(&format!(
                "config key `{key}` has an unexpected shape: {err}"
            ));
            None
        }
    }
}

/// The plugin's `[config]` table (from its manifest), as [`crate::Plugin::new`] receives it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Config {
    _private: (),
}

impl Config {
    /// The value of `key`, deserialized: see [`config`].
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        config(key)
    }
}

/// Who is calling: the session, the invocation and this hook's id.
pub fn invocation() -> host::Invocation {
    host::current_invocation()
}

/// Inside `tool-execute`: runs the rest of the chain and returns its normalized outcome.
/// `timeout_ms` shortens the deadline of that inner call.
pub fn next(timeout_ms: Option<u32>) -> ToolOutcome {
    tool_dispatch::next(timeout_ms)
}

impl ToolCall {
    /// The arguments as a JSON value (`Null` if the host ever sent something unparsable).
    pub fn args(&self) -> serde_json::Value {
        serde_json::from_str(&self.arguments).unwrap_or(serde_json::Value::Null)
    }

    /// The string argument `key` (for example `command` of a shell tool), if there is one.
    pub fn arg_str(&self, key: &str) -> Option<String> {
        match self.args().get(key)? {
            serde_json::Value::String(s) => Some(s.clone()),
            _ => None,
        }
    }

    /// The arguments deserialized into `T`.
    pub fn parse_args<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.arguments)
    }
}

impl Deny {
    /// A denial with a machine-readable `reason_code` and a `message` for the model.
    pub fn new(reason_code: impl Into<String>, message: impl Into<String>) -> Self {
        Deny {
            reason_code: reason_code.into(),
            message: message.into(),
            payload: None,
        }
    }

    /// Attaches structured detail.
    pub fn with_payload(mut self, payload: &serde_json::Value) -> Self {
        self.payload = Some(payload.to_string());
        self
    }
}

impl PreToolDecision {
    /// Denies the call.
    pub fn deny(reason_code: impl Into<String>, message: impl Into<String>) -> Self {
        PreToolDecision::Deny(Deny::new(reason_code, message))
    }

    /// Asks the embedder's approver first.
    pub fn ask(reason: impl Into<String>) -> Self {
        PreToolDecision::Ask(Ask {
            reason: reason.into(),
        })
    }
}

impl GuardDecision {
    /// Vetoes the call.
    pub fn deny(reason_code: impl Into<String>, message: impl Into<String>) -> Self {
        GuardDecision::Deny(Deny::new(reason_code, message))
    }
}

impl PostToolDecision {
    /// Keeps the result as it is, with no contexts.
    pub fn accept() -> Self {
        PostToolDecision {
            action: PostToolAction::Accept,
            contexts: Vec::new(),
        }
    }

    /// Blocks the result; the model sees `feedback` instead.
    pub fn block(feedback: impl Into<String>) -> Self {
        PostToolDecision {
            action: PostToolAction::Block(feedback.into()),
            contexts: Vec::new(),
        }
    }

    /// Adds a context, appended after the batch's results settle.
    pub fn with_context(mut self, context: impl Into<String>) -> Self {
        self.contexts.push(context.into());
        self
    }
}

impl ToolOutcome {
    /// A successful outcome with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        ToolOutcome {
            content_blocks: vec![ContentBlock::Text(text.into())],
            is_error: false,
            value: None,
        }
    }

    /// A failed outcome with one text block.
    pub fn error(text: impl Into<String>) -> Self {
        ToolOutcome {
            is_error: true,
            ..ToolOutcome::text(text)
        }
    }

    /// The text blocks, joined by newlines.
    pub fn joined_text(&self) -> String {
        let texts: Vec<&str> = self
            .content_blocks
            .iter()
            .filter_map(|block| match block {
                ContentBlock::Text(text) => Some(text.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n")
    }
}
