//! The manifest's single-field rules as typed values: each field type checks itself while
//! serde reads it. A value that breaks its rule does not stop the read (serde would stop at the
//! first error): it is kept as its problem ([`Checked::Invalid`]), so `palisade check` still
//! lists every problem of every field at once. Rules across fields stay in `manifest.rs`.

use super::bounds::{
    DEFAULT_FUEL, DEFAULT_PAYLOAD_MAX_BYTES, DEFAULT_STATE_BYTES, DEFAULT_STATE_KEYS, MAX_FUEL,
    MAX_MEMORY_MB, MAX_PAYLOAD_MAX_BYTES, MAX_STATE_BYTES, MAX_STATE_KEYS, MAX_TIMEOUT_MS, mb,
};
use crate::error::Problem;
use crate::tool_kinds::ToolKind;
use regex::Regex;
use serde::{Deserialize, Deserializer};
use std::path::Path;
use std::time::Duration;

/// A field's rule: from what serde reads (`Raw`) to the checked value, or why not.
pub(super) trait Rule: Sized {
    type Raw: for<'de> Deserialize<'de>;
    fn check(raw: Self::Raw) -> Result<Self, Invalid>;
}

/// Why a value breaks its field's rule, and how to mend it.
#[derive(Debug, Clone)]
pub(super) struct Invalid {
    message: String,
    fix: String,
}

fn invalid(message: impl Into<String>, fix: impl Into<String>) -> Invalid {
    Invalid {
        message: message.into(),
        fix: fix.into(),
    }
}

/// A field's value as read: checked, or its problem.
#[derive(Debug, Clone)]
pub(super) enum Checked<T> {
    Valid(T),
    Invalid(Invalid),
}

impl<'de, T: Rule> Deserialize<'de> for Checked<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // A value of the wrong type (a string for a number) still stops the read: TOML's own
        // error says where.
        let raw = T::Raw::deserialize(deserializer)?;
        Ok(match T::check(raw) {
            Ok(value) => Checked::Valid(value),
            Err(why) => Checked::Invalid(why),
        })
    }
}

impl<T: Clone> Checked<T> {
    /// The value; or `None`, with the problem pushed for `field` of the manifest at `path`.
    pub fn take(&self, path: &Path, field: &str, problems: &mut Vec<Problem>) -> Option<T> {
        match self {
            Checked::Valid(value) => Some(value.clone()),
            Checked::Invalid(why) => {
                problems.push(
                    Problem::new(path, why.message.clone())
                        .field(field)
                        .fix(why.fix.clone()),
                );
                None
            }
        }
    }
}

/// An optional field's value: `None` when it is absent, or invalid (its problem pushed).
pub(super) fn take<T: Clone>(
    field: &Option<Checked<T>>,
    path: &Path,
    name: &str,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    field.as_ref()?.take(path, name, problems)
}

/// `name`, if it is spelled as a plugin name is (lowercase letters, digits, `-` and `_`); or
/// why not, as the invalid `what` (with `example`, a valid one).
fn name(name: String, what: &str, example: &str) -> Result<String, Invalid> {
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !valid {
        return Err(invalid(
            format!("invalid {what} `{name}`"),
            format!("use lowercase letters, digits, `-` and `_` only, e.g. `{example}`"),
        ));
    }
    Ok(name)
}

/// A plugin name: lowercase letters, digits, `-` and `_`.
#[derive(Debug, Clone)]
pub(super) struct PluginName(pub String);

impl Rule for PluginName {
    type Raw = String;
    fn check(raw: String) -> Result<Self, Invalid> {
        name(raw, "plugin name", "shell-guard").map(PluginName)
    }
}

/// A shared state domain, `[state] shared`: spelled as a plugin name, so that it never takes
/// the form of a folder's own domain (`crate::state::folder_domain`).
#[derive(Debug, Clone)]
pub(super) struct StateDomain(pub String);

impl Rule for StateDomain {
    type Raw = String;
    fn check(raw: String) -> Result<Self, Invalid> {
        name(raw, "state namespace", "team-budget").map(StateDomain)
    }
}

/// A sha256 pin: 64 hex digits, kept lowercase.
#[derive(Debug, Clone)]
pub(super) struct Sha256(pub String);

impl Rule for Sha256 {
    type Raw = String;
    fn check(sha: String) -> Result<Self, Invalid> {
        if sha.len() != 64 || !sha.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(invalid(
                "not a sha256 digest",
                "64 hex digits, as printed by `sha256sum`, or remove the field",
            ));
        }
        Ok(Sha256(sha.to_ascii_lowercase()))
    }
}

/// A deadline, `timeout_ms`: 1 ms to [`MAX_TIMEOUT_MS`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Timeout(pub Duration);

impl Rule for Timeout {
    type Raw = u64;
    fn check(ms: u64) -> Result<Self, Invalid> {
        if ms == 0 || ms > MAX_TIMEOUT_MS {
            return Err(invalid(
                format!("timeout of {ms} ms is out of range"),
                format!("1 to {MAX_TIMEOUT_MS} ms"),
            ));
        }
        Ok(Timeout(Duration::from_millis(ms)))
    }
}

/// A fuel budget: 1 to [`MAX_FUEL`].
#[derive(Debug, Clone, Copy)]
pub(super) struct Fuel(pub u64);

impl Rule for Fuel {
    type Raw = u64;
    fn check(fuel: u64) -> Result<Self, Invalid> {
        if fuel == 0 || fuel > MAX_FUEL {
            return Err(invalid(
                format!("fuel of {fuel} is out of range"),
                format!("1 to {MAX_FUEL} (default {DEFAULT_FUEL})"),
            ));
        }
        Ok(Fuel(fuel))
    }
}

/// A memory cap, `memory_mb`: 1 to [`MAX_MEMORY_MB`] MiB, in bytes.
#[derive(Debug, Clone, Copy)]
pub(super) struct MemoryCap(pub usize);

impl Rule for MemoryCap {
    type Raw = u64;
    fn check(memory: u64) -> Result<Self, Invalid> {
        // Checked before any arithmetic: `memory_mb * 1 MiB` must not overflow.
        if memory == 0 || memory > MAX_MEMORY_MB {
            return Err(invalid(
                format!("memory cap of {memory} MiB is out of range"),
                format!("1 to {MAX_MEMORY_MB} MiB"),
            ));
        }
        Ok(MemoryCap(mb(memory)))
    }
}

/// A payload bound, `payload_max_bytes`: 1 to [`MAX_PAYLOAD_MAX_BYTES`].
#[derive(Debug, Clone, Copy)]
pub(super) struct PayloadBound(pub usize);

impl Rule for PayloadBound {
    type Raw = usize;
    fn check(bytes: usize) -> Result<Self, Invalid> {
        if bytes == 0 || bytes > MAX_PAYLOAD_MAX_BYTES {
            return Err(invalid(
                format!("payload bound of {bytes} bytes is out of range"),
                format!("1 to {MAX_PAYLOAD_MAX_BYTES} bytes (default {DEFAULT_PAYLOAD_MAX_BYTES})"),
            ));
        }
        Ok(PayloadBound(bytes))
    }
}

/// An environment variable's name: letters, digits and `_`, not starting with a digit.
#[derive(Debug, Clone)]
pub(super) struct EnvName(pub String);

impl Rule for EnvName {
    type Raw = String;
    fn check(name: String) -> Result<Self, Invalid> {
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(invalid(
                format!("`{name}` is not an environment variable name"),
                "letters, digits and `_`, not starting with a digit (`GITHUB_TOKEN`)",
            ));
        }
        Ok(EnvName(name))
    }
}

/// A tool-name matcher: the pattern, and its compiled form anchored to the whole name.
#[derive(Debug, Clone)]
pub(super) struct ToolMatcher {
    pub pattern: String,
    pub compiled: Matcher,
}

/// A tool-name matcher, ready to match.
#[derive(Debug, Clone)]
pub(crate) enum Matcher {
    /// A pattern of names separated by `|` (`Bash`, `Edit|Write`, `Bash|mcp__.+`), each of
    /// ASCII letters, digits, `_`, `-` and `/` (which a regex matches as themselves), optionally
    /// ending in `.*` or `.+`. Compared as strings: no regex compiled (a bridge reads every
    /// manifest on every event, and one regex with `.` builds a UTF-8 automaton of some
    /// hundreds of KiB) or run. Answers exactly as the anchored regex would.
    Names(Box<[Name]>),
    /// Any other pattern, anchored to the whole name.
    Regex(Regex),
}

/// One alternative of [`Matcher::Names`]: a literal name, or a prefix and what may follow it.
#[derive(Debug, Clone)]
pub(crate) struct Name {
    /// The literal part.
    text: String,
    /// What may follow the literal part.
    rest: Rest,
}

/// What may follow a [`Name`]'s literal part, as the regex `.` reads it: any character but a
/// line feed.
#[derive(Debug, Clone, Copy)]
enum Rest {
    /// Nothing: the name is exactly the literal.
    Nothing,
    /// `.*`: any characters, or none.
    Any,
    /// `.+`: at least one character.
    OneOrMore,
}

impl Name {
    /// Reads one alternative of a pattern; `None` unless it is a literal, optionally followed
    /// by `.*` or `.+`.
    fn read(alternative: &str) -> Option<Name> {
        let (text, rest) = if let Some(text) = alternative.strip_suffix(".*") {
            (text, Rest::Any)
        } else if let Some(text) = alternative.strip_suffix(".+") {
            (text, Rest::OneOrMore)
        } else {
            (alternative, Rest::Nothing)
        };
        let literal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '/');
        text.chars().all(literal).then(|| Name {
            text: text.to_string(),
            rest,
        })
    }

    fn matches(&self, name: &str) -> bool {
        let Some(tail) = name.strip_prefix(self.text.as_str()) else {
            return false;
        };
        match self.rest {
            Rest::Nothing => tail.is_empty(),
            Rest::Any => !tail.contains('\n'),
            Rest::OneOrMore => !tail.is_empty() && !tail.contains('\n'),
        }
    }
}

impl Matcher {
    /// Whether the tool `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Matcher::Names(names) => names.iter().any(|n| n.matches(name)),
            Matcher::Regex(re) => re.is_match(name),
        }
    }
}

impl Rule for ToolMatcher {
    type Raw = String;
    fn check(pattern: String) -> Result<Self, Invalid> {
        let expanded = with_kinds(&pattern)?;
        let names: Option<Box<[Name]>> = expanded.split('|').map(Name::read).collect();
        if let Some(names) = names {
            return Ok(ToolMatcher {
                pattern,
                compiled: Matcher::Names(names),
            });
        }
        match matcher(&expanded) {
            Ok(re) => Ok(ToolMatcher {
                pattern,
                compiled: Matcher::Regex(re),
            }),
            Err(err) => Err(invalid(
                format!("invalid tool-name pattern: {err}"),
                "a regular expression such as `Bash|shell` or `mcp__github__.*`",
            )),
        }
    }
}

/// `pattern` with each alternative that names a tool kind (`@shell`, [`ToolKind`]) replaced
/// by the tool names of that kind. A kind stands alone between `|`s.
fn with_kinds(pattern: &str) -> Result<String, Invalid> {
    if !pattern.contains('@') {
        return Ok(pattern.to_string());
    }
    let kinds = || {
        ToolKind::ALL
            .iter()
            .map(|kind| format!("`{kind}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut alternatives = Vec::new();
    for alternative in pattern.split('|') {
        match alternative.strip_prefix('@') {
            Some(name) => match ToolKind::named(name) {
                Some(kind) => alternatives.extend(crate::agents::tool_names(kind).iter().copied()),
                None => {
                    return Err(invalid(
                        format!("`@{name}` is not a tool kind"),
                        format!("name one of {}, or the tools themselves", kinds()),
                    ));
                }
            },
            None if alternative.contains('@') => {
                return Err(invalid(
                    format!("`{alternative}`: a tool kind stands alone between `|`s"),
                    format!("write it as `…|@shell|…`; the kinds are {}", kinds()),
                ));
            }
            None => alternatives.push(alternative),
        }
    }
    Ok(alternatives.join("|"))
}

/// Compiles a tool-name matcher. The pattern is checked alone first, so that it cannot close
/// the anchoring group around it (`Bash)|(?:Read` would otherwise match `Bashful_tool`): a
/// match is always of the whole name. The compiled size is bounded, so a manifest cannot make
/// the host build an enormous automaton.
fn matcher(pattern: &str) -> Result<Regex, regex::Error> {
    const SIZE_LIMIT: usize = 1024 * 1024;
    let build = |p: &str| {
        regex::RegexBuilder::new(p)
            .size_limit(SIZE_LIMIT)
            .dfa_size_limit(SIZE_LIMIT)
            .build()
    };
    build(pattern)?;
    build(&format!("^(?:{pattern})$"))
}

/// An HTTP hook's endpoint: an absolute `http://` or `https://` URL.
#[derive(Debug, Clone)]
pub(super) struct HttpUrl(pub String);

impl Rule for HttpUrl {
    type Raw = String;
    fn check(url: String) -> Result<Self, Invalid> {
        if !(url.starts_with("http://") || url.starts_with("https://"))
            || url.len() < "http://x".len()
        {
            return Err(invalid(
                format!("`{url}` is not an http(s) URL"),
                "an absolute URL such as `http://127.0.0.1:8080/hook`",
            ));
        }
        Ok(HttpUrl(url))
    }
}

/// `[state] max_keys`: 1 to [`MAX_STATE_KEYS`].
#[derive(Debug, Clone, Copy)]
pub(super) struct StateKeys(pub u64);

impl Rule for StateKeys {
    type Raw = u64;
    fn check(keys: u64) -> Result<Self, Invalid> {
        if keys == 0 || keys > MAX_STATE_KEYS {
            return Err(invalid(
                format!("a state scope of {keys} keys is out of range"),
                format!("1 to {MAX_STATE_KEYS} (default {DEFAULT_STATE_KEYS})"),
            ));
        }
        Ok(StateKeys(keys))
    }
}

/// `[state] max_bytes`: 1 to [`MAX_STATE_BYTES`].
#[derive(Debug, Clone, Copy)]
pub(super) struct StateBytes(pub u64);

impl Rule for StateBytes {
    type Raw = u64;
    fn check(bytes: u64) -> Result<Self, Invalid> {
        if bytes == 0 || bytes > MAX_STATE_BYTES {
            return Err(invalid(
                format!("a state scope of {bytes} bytes is out of range"),
                format!("1 to {MAX_STATE_BYTES} bytes (default {DEFAULT_STATE_BYTES})"),
            ));
        }
        Ok(StateBytes(bytes))
    }
}

/// An `http` grant's origin: `http` or `https`, a host, an optional port, and nothing else (no
/// user, no path, no query): what a plugin may reach is the whole origin.
#[derive(Debug, Clone)]
pub(super) struct HttpOrigin {
    pub https: bool,
    pub host: url::Host<String>,
    pub port: u16,
}

impl Rule for HttpOrigin {
    type Raw = String;
    fn check(text: String) -> Result<Self, Invalid> {
        let fix = "an origin: `https://host`, `https://host:8443` or `http://10.0.0.5:8080`";
        let url = url::Url::parse(&text)
            .map_err(|e| invalid(format!("`{text}` is not a URL ({e})"), fix))?;
        let https = match url.scheme() {
            "https" => true,
            "http" => false,
            other => {
                return Err(invalid(
                    format!("`{text}`: the scheme `{other}` is not http or https"),
                    fix,
                ));
            }
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid(
                format!("`{text}` names a user"),
                "an origin carries no credentials: the plugin sends its own headers",
            ));
        }
        if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
            return Err(invalid(
                format!("`{text}` has a path, query or fragment"),
                format!(
                    "grant the origin (`{}`): the grant is every path of it",
                    url.origin().ascii_serialization()
                ),
            ));
        }
        let host = url
            .host()
            .ok_or_else(|| invalid(format!("`{text}` names no host"), fix))?
            .to_owned();
        if let url::Host::Ipv4(ip) = host
            && (ip.is_unspecified() || ip.is_multicast() || ip.is_broadcast())
        {
            return Err(invalid(
                format!("`{text}`: {ip} is not an address a request can go to"),
                "a unicast address",
            ));
        }
        if let url::Host::Ipv6(ip) = host
            && (ip.is_unspecified() || ip.is_multicast())
        {
            return Err(invalid(
                format!("`{text}`: {ip} is not an address a request can go to"),
                "a unicast address",
            ));
        }
        let port = url
            .port_or_known_default()
            .ok_or_else(|| invalid(format!("`{text}` has no port"), fix))?;
        Ok(HttpOrigin { https, host, port })
    }
}
