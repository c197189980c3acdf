//! `secret-guard`: denies reads and writes of secret files — `.env*`, SSH keys, `*.pem`,
//! cloud credentials — by any file tool, and shell commands that name one.
//!
//! A file tool is recognised by its arguments (`file_path`, `path`, `notebook_path`,
//! `filename`), so new tools are covered without configuration. Operators add patterns in
//! `[config] extra_patterns` and exempt files in `[config] allow` (globs over the file name,
//! `*` matching any run of characters).

use palisade_sdk::{Config, Deny, Plugin, PreTool, PreToolDecision, ToolCall, export};
use std::borrow::Cow;

/// The [`Glob`]s of the patterns, made when the plugin is compiled: a fresh instance (a bridged
/// hook event makes one per event) neither allocates nor scans them.
macro_rules! globs {
    ($($pattern:literal),* $(,)?) => {
        &[$(Glob::of($pattern)),*]
    };
}

/// File-name globs of secrets.
const SECRET_NAMES: &[Glob] = globs![
    ".env",
    ".env.*",
    "*.env",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.keystore",
    "*.jks",
    "credentials",
    "credentials.json",
    "*credentials*.json",
    ".netrc",
    ".pgpass",
    ".git-credentials",
    "secrets.yaml",
    "secrets.yml",
    "*.tfvars",
];

/// Path fragments of secret stores, whatever the file name.
const SECRET_DIRS: &[&str] = &[
    ".ssh/",
    ".aws/",
    ".gnupg/",
    ".kube/config",
    ".docker/config.json",
];

/// Templates that look like secrets but are meant to be shared.
const SAFE_NAMES: &[Glob] = globs![".env.example", ".env.sample", ".env.template", "*.pub"];

/// The arguments read, in one pass: the file tools' paths, then the shell tools' commands.
const ARG_KEYS: [&str; 6] = [
    "file_path",
    "path",
    "notebook_path",
    "filename",
    "command",
    "cmd",
];
/// How many of [`ARG_KEYS`] are paths.
const PATHS: usize = 4;

/// A file-name glob: `*` matches any run of characters (none included) and every other
/// character only itself. Its stars are found once (the built-in ones when the plugin is
/// compiled, an operator's when it starts), not again for every word of every command it is
/// tried on.
struct Glob {
    pattern: Cow<'static, str>,
    /// The byte offsets of its first and last `*`; `None` without one.
    stars: Option<(usize, usize)>,
}

impl Glob {
    /// A built-in pattern.
    const fn of(pattern: &'static str) -> Glob {
        Glob {
            pattern: Cow::Borrowed(pattern),
            stars: stars(pattern),
        }
    }

    /// An operator's pattern.
    fn new(pattern: String) -> Glob {
        let stars = stars(&pattern);
        Glob {
            pattern: Cow::Owned(pattern),
            stars,
        }
    }

    /// Whether `name` matches.
    ///
    /// In one pass, without backtracking: the text before the first `*` must begin the name,
    /// the text after the last `*` must end it, and the pieces between must occur in order in
    /// what is left, each at its first occurrence (taking the first one never rules out a
    /// match the later pieces need). This runs for every pattern and every word of every
    /// shell command, so it matters that a name that cannot match is turned down by its first
    /// or last bytes.
    fn matches(&self, name: &str) -> bool {
        let Some((first, last)) = self.stars else {
            return *self.pattern == *name;
        };
        let (head, tail) = (&self.pattern[..first], &self.pattern[last + 1..]);
        if name.len() < head.len() + tail.len() || !name.starts_with(head) || !name.ends_with(tail)
        {
            return false;
        }
        // Both ends are whole characters (a matched prefix and suffix), and they do not overlap.
        let mut rest = &name[head.len()..name.len() - tail.len()];
        if first == last {
            return true;
        }
        for piece in self.pattern[first + 1..last].split('*') {
            match rest.find(piece) {
                Some(at) => rest = &rest[at + piece.len()..],
                None => return false,
            }
        }
        true
    }
}

/// The byte offsets of the first and last `*` of `pattern`, if it has one.
const fn stars(pattern: &str) -> Option<(usize, usize)> {
    let bytes = pattern.as_bytes();
    let (mut at, mut first, mut last) = (0, None, 0);
    while at < bytes.len() {
        if bytes[at] == b'*' {
            if first.is_none() {
                first = Some(at);
            }
            last = at;
        }
        at += 1;
    }
    match first {
        Some(first) => Some((first, last)),
        None => None,
    }
}

struct SecretGuard {
    /// `[config] extra_patterns`: more names that are secrets.
    extra: Vec<Glob>,
    /// `[config] allow`: names that are not, whatever the patterns say.
    allow: Vec<Glob>,
}

impl SecretGuard {
    fn with(extra: Vec<String>, allow: Vec<String>) -> SecretGuard {
        SecretGuard {
            extra: extra.into_iter().map(Glob::new).collect(),
            allow: allow.into_iter().map(Glob::new).collect(),
        }
    }

    /// Why `path` is a secret, if it is one.
    fn secret_reason(&self, path: &str) -> Option<String> {
        let path = path.trim_matches(|c| c == '"' || c == '\'');
        let name = path.rsplit('/').next().unwrap_or(path);
        if SAFE_NAMES
            .iter()
            .chain(&self.allow)
            .any(|g| g.matches(name))
        {
            return None;
        }
        if let Some(glob) = SECRET_NAMES
            .iter()
            .chain(&self.extra)
            .find(|g| g.matches(name))
        {
            return Some(format!("its name matches `{}`", glob.pattern));
        }
        // Every secret store's fragment has a `/`: a bare name is in none of them.
        if name.len() == path.len() {
            return None;
        }
        SECRET_DIRS
            .iter()
            .find(|dir| path.contains(*dir))
            .map(|dir| format!("it is inside `{}`", dir.trim_end_matches('/')))
    }
}

impl Plugin for SecretGuard {
    fn new(config: &Config) -> Self {
        SecretGuard::with(
            config.get("extra_patterns").unwrap_or_default(),
            config.get("allow").unwrap_or_default(),
        )
    }
}

impl PreTool for SecretGuard {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        // Only these fields, read in one pass (not the whole arguments as a value).
        let args = call.arg_strs(ARG_KEYS);
        let (paths, commands) = args.split_at(PATHS);
        let paths = paths.iter().filter_map(|path| path.as_deref());
        // Shell tools: every word of the command that looks like a path.
        let words = commands
            .iter()
            .filter_map(|command| command.as_deref())
            .flat_map(|command| {
                command
                    .split(|c: char| c.is_whitespace() || ";&|<>()".contains(c))
                    .filter(|w| !w.is_empty() && !w.starts_with('-'))
            });
        for path in paths.chain(words) {
            if let Some(why) = self.secret_reason(path) {
                let payload = serde_json::json!({ "path": path, "tool": call.name });
                return PreToolDecision::Deny(
                    Deny::new(
                        "secret-file",
                        format!(
                            "Refused: `{path}` holds secrets ({why}), and tools may not read or \
                             write secret files. If you need a configuration value, ask the user \
                             for it, or read a template such as `.env.example` instead."
                        ),
                    )
                    .with_payload(&payload),
                );
            }
        }
        PreToolDecision::Allow
    }
}

export!(SecretGuard: PreTool);

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition of a match, by trying every split: what [`glob`] must answer.
    fn glob_by_definition(pattern: &str, name: &str) -> bool {
        match pattern.split_once('*') {
            None => pattern == name,
            Some((head, rest)) => {
                let Some(tail) = name.strip_prefix(head) else {
                    return false;
                };
                (0..=tail.len())
                    .filter(|&i| tail.is_char_boundary(i))
                    .any(|i| glob_by_definition(rest, &tail[i..]))
            }
        }
    }

    #[test]
    fn glob_answers_as_the_definition() {
        let built_in = SECRET_NAMES.iter().chain(SAFE_NAMES).map(|g| &*g.pattern);
        let patterns = built_in.chain([
            "", "*", "**", "a*", "*a", "a*a", "*a*", "a**b", "*ab*ab*", "ab*b*ba", "é*", "*é*é",
            "x*y*z", "*.*.*",
        ]);
        let names = [
            "",
            "a",
            "aa",
            "aaa",
            "ab",
            "aab",
            "abab",
            "ababab",
            "abba",
            "ba",
            "b",
            "é",
            "éé",
            "aéé",
            "xyz",
            "xzy",
            "xyyz",
            ".env",
            ".env.local",
            "a.env",
            ".env.example",
            "id_rsa",
            "id_rsa.pub",
            "server.pem",
            "pem",
            ".pem",
            "credentials",
            "credentials.json",
            "gcp-credentials-prod.json",
            "credentials.json.bak",
            "a.b.c",
            "a.b",
            "..",
            "secrets.yml",
            "main.tfvars",
            "cargo",
            "test",
        ];
        for pattern in patterns {
            for name in names {
                assert_eq!(
                    Glob::new(pattern.to_string()).matches(name),
                    glob_by_definition(pattern, name),
                    "`{pattern}` on `{name}`"
                );
            }
        }
    }

    #[test]
    fn globs() {
        let glob = |pattern: &'static str, name| Glob::of(pattern).matches(name);
        assert!(glob(".env.*", ".env.local"));
        assert!(glob("*.pem", "server.pem"));
        assert!(glob("id_rsa*", "id_rsa.old"));
        assert!(!glob("*.pem", "pem.txt"));
        assert!(glob("*credentials*.json", "gcp-credentials-prod.json"));
    }

    #[test]
    fn secrets_and_templates() {
        let guard = SecretGuard::with(Vec::new(), Vec::new());
        assert!(guard.secret_reason("/app/.env").is_some());
        assert!(guard.secret_reason("/home/u/.ssh/id_ed25519").is_some());
        assert!(guard.secret_reason("/home/u/.aws/config").is_some());
        assert!(guard.secret_reason("'/home/u/.kube/config'").is_some());
        assert!(guard.secret_reason("/app/.env.example").is_none());
        assert!(guard.secret_reason("/home/u/.ssh/id_rsa.pub").is_none());
        assert!(guard.secret_reason("src/main.rs").is_none());
        assert!(guard.secret_reason("config").is_none());
        let allowing = SecretGuard::with(Vec::new(), vec!["dev.pem".into()]);
        assert!(allowing.secret_reason("/app/dev.pem").is_none());
        let extra = SecretGuard::with(vec!["*.secret".into()], Vec::new());
        assert!(extra.secret_reason("db.secret").is_some());
    }

    /// A bare name (no `/`) is not looked for in the secret stores: none of them can be in it.
    #[test]
    fn every_secret_store_has_a_slash() {
        assert!(SECRET_DIRS.iter().all(|dir| dir.contains('/')));
    }
}
