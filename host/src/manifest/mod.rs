//! `plugin.toml`: what the operator grants a plugin.
//!
//! The component says what a plugin *can* do (its exports); the manifest says what it *may*
//! do. Unknown fields are errors, so a typo never silently grants or drops a limit.
//!
//! ```toml
//! name = "shell-guard"                 # unique in the plugin directory
//! wasm = "shell_guard.wasm"            # inside this plugin's folder only
//! sha256 = "…"                         # optional pin of the component's bytes
//! instance = "per-session"             # or "per-call"
//!
//! [limits]                             # defaults for every hook of the plugin
//! timeout_ms = 50                      # default 5000
//! fuel = 10_000_000                    # default 1_000_000_000
//! memory_mb = 16                       # default 64
//!
//! [[hooks]]
//! point = "pre-tool"
//! capability = "guard"                 # or a list: ["guard", "transform"]
//! mode = "foreground"                  # or "background" (observe only)
//! priority = 10                        # ascending; ties keep registration order
//! matcher = "Bash|shell"               # tool-name regex, matched whole; default: every tool
//! on_failure = "deny"                  # or "allow" (fail open); default "deny"
//! enforce = true                       # false: a shadow hook, recorded as `would_…`, never honoured
//!
//! [config]                             # free-form; the plugin reads it through `config`
//! patterns = ["rm -rf /", "mkfs"]
//! ```
//!
//! Instead of `wasm`, a plugin may name an external runtime (exactly one of the three):
//!
//! ```toml
//! command = "./guard.sh --strict"      # run by `sh -c` in the plugin folder; or an argv list:
//! # command = ["python3", "guard.py"]
//! env = ["GITHUB_TOKEN"]               # host variables it gets besides PATH, HOME, LANG
//! # url = "http://127.0.0.1:8080/hook" # or: POST the same JSON to a URL
//! [limits]
//! timeout_ms = 5000                    # default 5000
//! payload_max_bytes = 131072           # default 128 KiB, for the input and for the answer
//! ```
//!
//! Command and HTTP hooks speak Claude Code's hook protocol, or with `protocol = "palisade"`
//! Palisade's own (see `docs/runtimes.md`); `fuel`,
//! `memory_mb`, `sha256` and `instance` apply to wasm components only.

mod bounds;
mod checked;
pub(crate) mod parse;

use crate::error::Problem;
use crate::point::{Capability, InstanceLifetime, Mode, OnFailure, Point};
use bounds::mb;
pub use bounds::{
    DEFAULT_FUEL, DEFAULT_MEMORY_MB, DEFAULT_PAYLOAD_MAX_BYTES, DEFAULT_STATE_BYTES,
    DEFAULT_STATE_KEYS, DEFAULT_TIMEOUT_MS, MAX_FUEL, MAX_MANIFEST_BYTES, MAX_MEMORY_MB,
    MAX_PAYLOAD_MAX_BYTES, MAX_STATE_BYTES, MAX_STATE_KEYS, MAX_TIMEOUT_MS,
};
pub(crate) use checked::Matcher;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// The file name of a plugin's manifest inside its folder.
pub const MANIFEST_FILE: &str = "plugin.toml";

/// The resource limits of one hook invocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Wall-clock deadline, enforced by epoch interruption (and around host calls).
    pub timeout: Duration,
    /// Fuel: a bound on the instructions executed.
    pub fuel: u64,
    /// Linear-memory cap, in bytes.
    pub memory_bytes: usize,
    /// Bound of the JSON sent to a command or HTTP hook, and of its answer.
    pub payload_max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_millis(DEFAULT_TIMEOUT_MS),
            fuel: DEFAULT_FUEL,
            memory_bytes: mb(DEFAULT_MEMORY_MB),
            payload_max_bytes: DEFAULT_PAYLOAD_MAX_BYTES,
        }
    }
}

/// A validated manifest.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The plugin's unique name.
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// How its hooks run: a component, a command or a URL.
    pub runtime: RuntimeSpec,
    /// The pinned sha256 of the component, lowercase hex.
    pub sha256: Option<String>,
    /// How long an instance lives.
    pub instance: InstanceLifetime,
    /// The hooks, in manifest order.
    pub hooks: Vec<HookSpec>,
    /// The `[config]` table, as JSON.
    pub config: serde_json::Map<String, serde_json::Value>,
    /// Environment variables of the host a plugin is given: a command hook's (besides
    /// `PATH`, `HOME` and `LANG`), read when it runs; a component's, read once at load (a
    /// missing one is a load problem). It gets no others.
    pub env: Vec<String>,
    /// Folders a component may read (`files`), each at its guest path; nothing else of the
    /// host's filesystem, and nothing writable.
    pub files: Vec<FileGrant>,
    /// The wire protocol a command or HTTP hook speaks (components have none).
    pub protocol: Protocol,
    /// The host-kept state it may use (`[state]`); `None`: none.
    pub state: Option<StateGrant>,
    /// The origins a component may send HTTP requests to (`http`); no others.
    pub http: Vec<HttpGrant>,
}

/// An origin a component may send `wasi:http` requests to: its scheme, host and port, any
/// path. Nothing else is reachable, a redirect included (each request is checked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpGrant {
    /// `https` (true) or `http`.
    pub https: bool,
    /// The host, and the addresses it may lead to.
    pub host: HttpHost,
    /// The port (the scheme's default when the manifest names none).
    pub port: u16,
}

/// The host of an [`HttpGrant`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpHost {
    /// A name, resolved once for each request: the request goes to an address it resolved to
    /// that is in `network`, and to no other (a name cannot be rebound to reach an address
    /// the operator did not allow).
    Name {
        /// The name, lowercase (international names in their ASCII form).
        name: String,
        /// The addresses it may lead to.
        network: Network,
    },
    /// An address, which the request goes to as it is.
    Address(std::net::IpAddr),
}

/// The addresses a granted host name may lead to (`network`). An address in none of these —
/// link-local (cloud metadata services live there), unspecified, multicast, broadcast,
/// reserved — is never reached through a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Network {
    /// Globally routable addresses only. The default.
    Public,
    /// Private networks only: 10/8, 172.16/12, 192.168/16, 100.64/10 (shared), fc00::/7.
    Private,
    /// This machine only: 127/8, ::1.
    Loopback,
}

impl Network {
    /// Its name, as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Network::Public => "public",
            Network::Private => "private",
            Network::Loopback => "loopback",
        }
    }
}

impl std::fmt::Display for HttpGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        match &self.host {
            HttpHost::Name { name, network } => write!(
                f,
                "{scheme}://{name}:{} ({} addresses)",
                self.port,
                network.as_str()
            ),
            HttpHost::Address(std::net::IpAddr::V6(ip)) => {
                write!(f, "{scheme}://[{ip}]:{}", self.port)
            }
            HttpHost::Address(ip) => write!(f, "{scheme}://{ip}:{}", self.port),
        }
    }
}

/// A folder a component may read: `path` (relative to the plugin folder, or absolute) at
/// `guest` (an absolute path in the component's filesystem).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileGrant {
    /// The folder on the host, as the manifest names it.
    pub path: String,
    /// Where the component sees it.
    pub guest: String,
}

/// What host-kept state a plugin may use (`[state]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateGrant {
    /// May it use its per-session scope?
    pub session: bool,
    /// May it use its global scope (every session's)?
    pub global: bool,
    /// Most keys in one scope.
    pub max_keys: u64,
    /// Most bytes in one scope, every value together.
    pub max_bytes: u64,
    /// The state domain the plugin shares with every plugin that names the same (`shared`);
    /// `None`: its values are its plugin folder's own, seen by no other plugin.
    pub shared: Option<String>,
}

/// The wire protocol of a command or HTTP hook (`protocol = "…"`; see `docs/runtimes.md`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Protocol {
    /// Claude Code's hook protocol: an existing Claude Code hook runs unchanged. The default.
    #[default]
    ClaudeCode,
    /// Palisade's own (docs/semantics.md S2.2): the request is the point's typed payload, the answer only an
    /// optional `decision` — the point's WIT answer as JSON, with `reason_code` and `payload`.
    Palisade,
}

impl Protocol {
    /// The protocol's name, as written in manifests.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::ClaudeCode => "claude-code",
            Protocol::Palisade => "palisade",
        }
    }
}

/// How a plugin's hooks run (its runtime family).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuntimeSpec {
    /// A WebAssembly component: the path of its file, relative to the plugin folder.
    Wasm(String),
    /// An external program, started once per invocation in the plugin folder.
    Command {
        /// The program and its arguments (`["sh", "-c", line]` for a command line).
        argv: Vec<String>,
    },
    /// An HTTP endpoint that takes a POST per invocation.
    Http {
        /// The URL (`http` or `https`).
        url: String,
    },
}

impl RuntimeSpec {
    /// The component's file, for a wasm plugin.
    pub(crate) fn wasm_file(&self) -> Option<&str> {
        match self {
            RuntimeSpec::Wasm(wasm) => Some(wasm),
            _ => None,
        }
    }

    /// The runtime family's name: `wasm`, `command` or `http`.
    pub fn family(&self) -> &'static str {
        match self {
            RuntimeSpec::Wasm(_) => "wasm",
            RuntimeSpec::Command { .. } => "command",
            RuntimeSpec::Http { .. } => "http",
        }
    }

    /// What it runs, for display: the component's path, the command line or the URL.
    pub fn target(&self) -> String {
        match self {
            RuntimeSpec::Wasm(path) => path.clone(),
            RuntimeSpec::Command { argv } => match argv.as_slice() {
                [sh, c, line] if sh == "sh" && c == "-c" => line.clone(),
                _ => argv.join(" "),
            },
            RuntimeSpec::Http { url } => url.clone(),
        }
    }
}

/// One validated hook subscription.
#[derive(Debug, Clone)]
pub struct HookSpec {
    /// The point it subscribes to.
    pub point: Point,
    /// What its decisions may change, sorted and without duplicates.
    pub capabilities: Vec<Capability>,
    /// Foreground or background.
    pub mode: Mode,
    /// Ascending: lower runs first.
    pub priority: i32,
    /// The tool-name pattern, as written.
    pub matcher: Option<String>,
    /// `matcher`, compiled: the names it lists, or an anchored regex.
    pub(crate) compiled_matcher: Option<Matcher>,
    /// What a runtime failure means.
    pub on_failure: OnFailure,
    /// The invocation limits.
    pub limits: Limits,
    /// False for a shadow hook (`enforce = false`): it runs exactly as it would, but what it
    /// answers (and its failures) is recorded as `hook_shadowed`, never honoured.
    pub enforce: bool,
}

impl HookSpec {
    /// Whether the hook holds `capability`.
    pub fn has(&self, capability: Capability) -> bool {
        self.capabilities.contains(&capability)
    }

    /// Whether the hook's answer can change an outcome: it holds more than `observe`.
    pub fn can_change_outcome(&self) -> bool {
        self.capabilities.iter().any(|c| *c != Capability::Observe)
    }

    /// Whether a runtime failure of this hook fails closed (see [`Point::fails_closed`]): a
    /// foreground hook that could change the outcome, on a point that has a closed answer,
    /// unless `on_failure = "allow"`. An observe-only hook's failure is recorded only: its
    /// answers are never honoured, so its failure lets nothing through (docs/semantics.md
    /// S2.15).
    pub fn fails_closed(&self) -> bool {
        self.on_failure == OnFailure::Deny && self.failure_decides()
    }

    /// Whether a runtime failure of this hook would fail closed but for its
    /// `on_failure = "allow"`: it fails open.
    pub fn fails_open(&self) -> bool {
        self.on_failure == OnFailure::Allow && self.failure_decides()
    }

    /// Whether this hook's failure decides its point, as `on_failure` says: a foreground hook
    /// that can change the outcome, on a point that has a closed answer.
    pub fn failure_decides(&self) -> bool {
        self.mode == Mode::Foreground && self.point.fails_closed() && self.can_change_outcome()
    }

    /// Whether the hook runs for a tool of this name (always, without a matcher).
    pub fn matches_tool(&self, name: &str) -> bool {
        self.compiled_matcher
            .as_ref()
            .is_none_or(|matcher| matcher.matches(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A matcher may name a kind of tool (`@shell`), which stands for what each agent calls
    /// it; an unknown kind, or one inside a larger regex, is a problem naming the field.
    #[test]
    fn a_matcher_names_tool_kinds_across_agents() {
        let parse = |matcher: &str| {
            let text = format!(
                "name = \"m\"\nwasm = \"m.wasm\"\n[[hooks]]\npoint = \"pre-tool\"\n\
                 capability = \"guard\"\nmatcher = \"{matcher}\"\n"
            );
            let mut problems = Vec::new();
            let manifest = parse::parse(Path::new("m/plugin.toml"), &text, &mut problems);
            (manifest, problems)
        };
        let (manifest, problems) = parse("@shell|@mcp|Read");
        let hook = &manifest.unwrap_or_else(|| panic!("{problems:?}")).hooks[0];
        assert!(
            matches!(hook.compiled_matcher, Some(Matcher::Names(_))),
            "every kind's names are compared as strings, `terminal/create` too"
        );
        for tool in [
            "Bash",
            "exec_command",
            "local_shell",
            "run_shell_command",
            "execute",
            "terminal/create",
            "mcp__github__create_issue",
            "mcp_github_create_issue",
            "Read",
        ] {
            assert!(hook.matches_tool(tool), "{tool}");
        }
        for tool in ["Write", "apply_patch", "WebFetch", "mcp_", "Bashful"] {
            assert!(!hook.matches_tool(tool), "{tool}");
        }
        let (manifest, _) = parse("@file-write");
        let hook = &manifest.unwrap().hooks[0];
        assert!(matches!(hook.compiled_matcher, Some(Matcher::Names(_))));
        assert!(hook.matches_tool("apply_patch") && hook.matches_tool("Edit"));
        for (matcher, says) in [
            ("@shel", "`@shel` is not a tool kind"),
            ("(@shell)", "a tool kind stands alone"),
        ] {
            let (manifest, problems) = parse(matcher);
            assert!(manifest.is_none());
            let problem = format!("{problems:?}");
            assert!(
                problem.contains(says) && problem.contains("hooks[0].matcher"),
                "{problem}"
            );
        }
    }

    /// A pattern of names (each optionally ending in `.*` or `.+`) is matched by string
    /// comparison, and answers exactly as its regex does; any other pattern goes to the regex.
    #[test]
    fn the_names_fast_path_answers_as_the_regex() {
        let names = [
            "Bash",
            "bash",
            "Bashful",
            "Bash\n",
            "Edit",
            "Write",
            "mcp__",
            "mcp__gh__x",
            "mcp__\n",
            "mcp__x\ny",
            "mcp__é",
            "terminal/create",
            "terminal/",
            "mcp_",
            "a-b",
            "",
            "\n",
            "é",
            "B",
        ];
        for (pattern, literal) in [
            ("Bash", true),
            ("Edit|Write", true),
            ("Bash|", true),
            ("a-b|mcp__gh__x", true),
            ("Bash.*", true),
            ("mcp__.*", true),
            ("mcp__.+", true),
            ("Bash|shell|mcp__.+", true),
            (".*", true),
            (".+", true),
            ("|.+", true),
            ("B.*|Bash", true),
            ("Bash|terminal/create", true),
            ("terminal/.+", true),
            ("a.*b", false),
            ("mcp__.+.+", false),
            ("Bash.?", false),
            ("B(ash)?", false),
            ("[Bb]ash", false),
        ] {
            let text = format!(
                "name = \"m\"\nwasm = \"m.wasm\"\n[[hooks]]\npoint = \"pre-tool\"\n\
                 capability = \"guard\"\nmatcher = \"{pattern}\"\n"
            );
            let mut problems = Vec::new();
            let manifest = parse::parse(Path::new("m/plugin.toml"), &text, &mut problems)
                .unwrap_or_else(|| panic!("{problems:?}"));
            let hook = &manifest.hooks[0];
            let by_name = matches!(hook.compiled_matcher, Some(Matcher::Names(_)));
            assert_eq!(by_name, literal, "{pattern}");
            let re = regex::Regex::new(&format!("^(?:{pattern})$")).unwrap();
            for name in names {
                assert_eq!(
                    hook.matches_tool(name),
                    re.is_match(name),
                    "{pattern} on {name:?}"
                );
            }
        }
    }
}
