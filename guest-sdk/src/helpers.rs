//! Host services and conveniences on the WIT types.

use crate::bindings::palisade::hooks::{host, tool_dispatch};
use crate::{
    Ask, ContentBlock, Deny, GuardDecision, PostToolAction, PostToolDecision, PreToolDecision,
    ToolCall, ToolKind, ToolOutcome,
};
use serde::de::{self, DeserializeOwned, Deserializer, IgnoredAny, MapAccess, Visitor};
use std::borrow::Cow;
use std::fmt;

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
/// across hosts. [`session`](state::session) is this plugin's values in this agent session,
/// [`global`](state::global) in every session; no other plugin sees them.
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
/// closed): the calls below only return the refusals of a working store
/// ([`Error`](state::Error)).
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
    /// What the tool does, whatever the agent calls it ([`ToolKind::Shell`] for `Bash`,
    /// `exec_command` or `run_shell_command`), as the host's table says and a manifest's
    /// `matcher` reads it (`@shell`); `None` for a tool of no known kind. [`ToolCall::name`]
    /// stays the agent's own name.
    pub fn kind(&self) -> Option<ToolKind> {
        host::kind_of(&self.name)
    }

    /// The arguments as a JSON value (`Null` if the host ever sent something unparsable).
    /// To read a few fields, [`ToolCall::arg_strs`] costs far less: it builds no value.
    pub fn args(&self) -> serde_json::Value {
        serde_json::from_str(&self.arguments).unwrap_or(serde_json::Value::Null)
    }

    /// The string argument `key` (for example `command` of a shell tool), if there is one:
    /// [`ToolCall::arg_strs`] for one key.
    pub fn arg_str(&self, key: &str) -> Option<String> {
        let [value] = self.arg_strs([key]);
        value.map(Cow::into_owned)
    }

    /// The string arguments named by `keys`, in their order: `None` where the key is absent
    /// or its value is not a string ([`ToolCall::arg_values`], strings only).
    pub fn arg_strs<const N: usize>(&self, keys: [&str; N]) -> [Option<Cow<'_, str>>; N] {
        self.arg_values(keys).map(|value| match value {
            Some(ArgValue::Text(text)) => Some(text),
            _ => None,
        })
    }

    /// The arguments named by `keys`, in their order, each as an [`ArgValue`] (`None` where
    /// the key is absent; a key written twice counts with its last value).
    ///
    /// Read in one pass over the arguments' JSON text that keeps only those values, their
    /// strings borrowed from the text unless they have escapes: for a guard that judges a few
    /// fields, much cheaper than [`ToolCall::args`], which builds the whole value. Its answers
    /// are those of `args().get(key)`, but for one case: a value nested deeper than the JSON
    /// parser's depth limit makes `args()` fail whole (`Null`: every key absent), while this
    /// pass skips it and still reads the rest. (Palisade's hosts refuse an event nested that
    /// deep before any hook runs.) A text that is not a JSON object has none of the keys.
    pub fn arg_values<const N: usize>(&self, keys: [&str; N]) -> [Option<ArgValue<'_>>; N] {
        let mut seed = Wanted {
            keys,
            values: std::array::from_fn(|_| None),
        };
        let mut json = serde_json::Deserializer::from_str(&self.arguments);
        match (&mut json).deserialize_map(&mut seed) {
            // Anything after the object makes the text no JSON, as `args()` reads it.
            Ok(()) if json.end().is_ok() => seed.values,
            _ => std::array::from_fn(|_| None),
        }
    }

    /// The arguments deserialized into `T`.
    pub fn parse_args<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_str(&self.arguments)
    }
}

impl ToolKind {
    /// Its name in a manifest's `matcher`, after the `@` (`shell`, `file-write`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ToolKind::Shell => "shell",
            ToolKind::FileRead => "file-read",
            ToolKind::FileWrite => "file-write",
            ToolKind::Search => "search",
            ToolKind::Web => "web",
            ToolKind::Mcp => "mcp",
            ToolKind::Subagent => "subagent",
        }
    }
}

/// An argument as [`ToolCall::arg_values`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgValue<'a> {
    /// A string.
    Text(Cow<'a, str>),
    /// An array, as its strings in order (an argv); its other elements are skipped.
    Texts(Vec<Cow<'a, str>>),
    /// Anything else: a number, a boolean, `null`, an object.
    Other,
}

/// The pass of [`ToolCall::arg_values`]: the values of `keys`.
struct Wanted<'k, 'de, const N: usize> {
    keys: [&'k str; N],
    values: [Option<ArgValue<'de>>; N],
}

impl<'de, const N: usize> Visitor<'de> for &mut Wanted<'_, 'de, N> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<(), M::Error> {
        let Wanted { keys, values } = self;
        while let Some(place) = map.next_key_seed(Place(keys))? {
            match place {
                Some(at) => values[at] = Some(map.next_value_seed(Read { list: true })?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A key of the arguments, as its place among the wanted keys (`None`: not wanted): compared
/// where it lies in the text, not copied.
struct Place<'a, 'k, const N: usize>(&'a [&'k str; N]);

impl<'de, const N: usize> de::DeserializeSeed<'de> for Place<'_, '_, N> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<const N: usize> Visitor<'_> for Place<'_, '_, N> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|wanted| *wanted == key))
    }
}

/// Reads a wanted value (`list`), or an element of a wanted array (not `list`: an array or
/// object there is skipped, not read). What is skipped goes by `IgnoredAny`, which the JSON
/// parser walks without recursing: no depth limit, no deep stack.
#[derive(Clone, Copy)]
struct Read {
    list: bool,
}

impl<'de> de::DeserializeSeed<'de> for Read {
    type Value = ArgValue<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<ArgValue<'de>, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Read {
    type Value = ArgValue<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_borrowed_str<E: de::Error>(self, text: &'de str) -> Result<ArgValue<'de>, E> {
        Ok(ArgValue::Text(Cow::Borrowed(text)))
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<ArgValue<'de>, E> {
        Ok(ArgValue::Text(Cow::Owned(text.to_owned())))
    }

    fn visit_seq<S: de::SeqAccess<'de>>(self, mut seq: S) -> Result<ArgValue<'de>, S::Error> {
        if !self.list {
            return IgnoredAny.visit_seq(seq).map(|_| ArgValue::Other);
        }
        let mut texts = Vec::new();
        while let Some(element) = seq.next_element_seed(Read { list: false })? {
            if let ArgValue::Text(text) = element {
                texts.push(text);
            }
        }
        Ok(ArgValue::Texts(texts))
    }

    fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<ArgValue<'de>, M::Error> {
        IgnoredAny.visit_map(map).map(|_| ArgValue::Other)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<ArgValue<'de>, E> {
        Ok(ArgValue::Other)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<ArgValue<'de>, E> {
        Ok(ArgValue::Other)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<ArgValue<'de>, E> {
        Ok(ArgValue::Other)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<ArgValue<'de>, E> {
        Ok(ArgValue::Other)
    }

    fn visit_unit<E: de::Error>(self) -> Result<ArgValue<'de>, E> {
        Ok(ArgValue::Other)
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

#[cfg(test)]
mod tests {
    use crate::{ArgValue, ToolCall};
    use serde_json::Value;

    fn call(arguments: String) -> ToolCall {
        ToolCall {
            tool_use_id: "t".into(),
            name: "Bash".into(),
            arguments,
            provenance: None,
        }
    }

    /// `arg_values` answers what `args().get(key)` answers (and `arg_strs` what `as_str`
    /// answers): duplicate keys (the last counts), values of every kind, arrays with other
    /// values in them, escapes (in values and keys), texts that are not objects or not JSON,
    /// trailing text.
    #[test]
    fn arg_values_read_what_the_parsed_arguments_have() {
        let keys = ["command", "file_path", "cmd", "absent"];
        let texts = [
            r#"{"command":"ls -la","file_path":"/etc/passwd"}"#,
            r#"{"file_path":"a","file_path":"b","command":5,"cmd":"rm -rf /"}"#,
            r#"{"command":"echo \"hi\"\nrm","comm\u0061nd2":"x","\u0063md":"y"}"#,
            r#"{"command":["rm","-rf","/"],"file_path":{"p":".env"},"cmd":null}"#,
            r#"{"cmd":["a",1,null,{"b":"c"},["d"],"e\u0021"],"command":[]}"#,
            r#"{"command":true,"file_path":-1.5e3,"cmd":[[["x"]]]}"#,
            r#"{"Command":"rm -rf /","file_path":""}"#,
            r#"{}"#,
            r#"[]"#,
            r#"["command","rm -rf /"]"#,
            r#""rm -rf /""#,
            r#"null"#,
            r#"not json"#,
            r#""#,
            r#"{"command":"ls"} trailing"#,
            r#"{"command":"ls"}  "#,
            r#"{"command":"\ud800"}"#,
            r#"{"command":"rm -rf /""#,
        ];
        for text in texts {
            let call = call(text.into());
            let args = call.args();
            let expected = keys.map(|key| {
                args.get(key).map(|value| match value {
                    Value::String(text) => ArgValue::Text(text.as_str().into()),
                    Value::Array(parts) => ArgValue::Texts(
                        parts
                            .iter()
                            .filter_map(Value::as_str)
                            .map(Into::into)
                            .collect(),
                    ),
                    _ => ArgValue::Other,
                })
            });
            assert_eq!(call.arg_values(keys), expected, "{text}");
            let strings = keys.map(|key| args.get(key).and_then(Value::as_str));
            assert_eq!(
                call.arg_strs(keys).each_ref().map(|v| v.as_deref()),
                strings,
                "{text}"
            );
            assert_eq!(call.arg_str("command").as_deref(), strings[0], "{text}");
        }
    }

    /// `parse_args` (which the Rust tutorial shows) deserializes the arguments into a type.
    #[test]
    fn parse_args_reads_the_arguments_into_a_type() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Shell {
            command: String,
        }
        let shell: Shell = call(r#"{"command":"ls","other":1}"#.into())
            .parse_args()
            .unwrap();
        assert_eq!(shell.command, "ls");
        assert!(call("not json".into()).parse_args::<Shell>().is_err());
    }

    /// Where they differ: a value nested past the parser's depth limit made `args()` fail
    /// whole, hiding every field; the pass skips it (in an array too) and reads the rest.
    #[test]
    fn a_deep_value_does_not_hide_the_rest() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let call = call(format!(
            r#"{{"a":{deep},"command":"rm -rf /","cmd":["rm",{deep},"-rf"]}}"#
        ));
        assert!(call.args().is_null());
        let [command, cmd] = call.arg_values(["command", "cmd"]);
        assert_eq!(command, Some(ArgValue::Text("rm -rf /".into())));
        assert_eq!(cmd, Some(ArgValue::Texts(vec!["rm".into(), "-rf".into()])));
    }
}
