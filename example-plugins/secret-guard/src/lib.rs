//! `secret-guard`: denies reads and writes of secret files — `.env*`, SSH keys, `*.pem`,
//! cloud credentials — by any file tool, and shell commands that name one.
//!
//! A file tool is recognised by its arguments (`file_path`, `path`, `notebook_path`,
//! `filename`), so new tools are covered without configuration. Operators add patterns in
//! `[config] extra_patterns` and exempt files in `[config] allow` (globs over the file name,
//! `*` matching any run of characters).

use palisade_sdk::{Config, Deny, Plugin, PreTool, PreToolDecision, ToolCall, export};

/// File-name globs of secrets.
const SECRET_NAMES: &[&str] = &[
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
const SAFE_NAMES: &[&str] = &[".env.example", ".env.sample", ".env.template", "*.pub"];

const PATH_KEYS: &[&str] = &["file_path", "path", "notebook_path", "filename"];

/// Whether `name` matches `pattern`, where `*` matches any run of characters (none
/// included) and every other character only itself.
///
/// In one pass, without backtracking: the text before the first `*` must begin the name, the
/// text after the last `*` must end it, and the pieces between must occur in order in what is
/// left, each at its first occurrence (taking the first one never rules out a match the
/// later pieces need). This runs for every pattern and every word of every shell command, so
/// it matters that a name that cannot match is turned down by its first or last bytes.
fn glob(pattern: &str, name: &str) -> bool {
    let Some((head, after_head)) = pattern.split_once('*') else {
        return pattern == name;
    };
    let (middle, last) = after_head.rsplit_once('*').unwrap_or(("", after_head));
    if name.len() < head.len() + last.len() || !name.starts_with(head) || !name.ends_with(last) {
        return false;
    }
    // Both ends are whole characters (a matched prefix and suffix), and they do not overlap.
    let mut rest = &name[head.len()..name.len() - last.len()];
    for piece in middle.split('*') {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    true
}

/// Why `path` is a secret, if it is one.
fn secret_reason(path: &str, extra: &[String], allow: &[String]) -> Option<String> {
    let path = path.trim_matches(|c| c == '"' || c == '\'');
    let name = path.rsplit('/').next().unwrap_or(path);
    if SAFE_NAMES.iter().any(|p| glob(p, name)) || allow.iter().any(|p| glob(p, name)) {
        return None;
    }
    if let Some(p) = SECRET_NAMES
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str))
        .find(|p| glob(p, name))
    {
        return Some(format!("its name matches `{p}`"));
    }
    SECRET_DIRS
        .iter()
        .find(|dir| path.contains(*dir))
        .map(|dir| format!("it is inside `{}`", dir.trim_end_matches('/')))
}

struct SecretGuard {
    /// `[config] extra_patterns`: more names that are secrets.
    extra: Vec<String>,
    /// `[config] allow`: names that are not, whatever the patterns say.
    allow: Vec<String>,
}

impl Plugin for SecretGuard {
    fn new(config: &Config) -> Self {
        SecretGuard {
            extra: config.get("extra_patterns").unwrap_or_default(),
            allow: config.get("allow").unwrap_or_default(),
        }
    }
}

impl PreTool for SecretGuard {
    fn on_pre_tool(&mut self, call: ToolCall) -> PreToolDecision {
        let SecretGuard { extra, allow } = self;
        let args = call.args();
        let mut candidates: Vec<String> = PATH_KEYS
            .iter()
            .filter_map(|key| args.get(*key)?.as_str().map(str::to_string))
            .collect();
        // Shell tools: every word of the command that looks like a path.
        for key in ["command", "cmd"] {
            if let Some(command) = args.get(key).and_then(|v| v.as_str()) {
                candidates.extend(
                    command
                        .split(|c: char| c.is_whitespace() || ";&|<>()".contains(c))
                        .filter(|w| !w.is_empty() && !w.starts_with('-'))
                        .map(str::to_string),
                );
            }
        }
        for path in candidates {
            if let Some(why) = secret_reason(&path, extra, allow) {
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
        let patterns = SECRET_NAMES.iter().chain(SAFE_NAMES).copied().chain([
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
                    glob(pattern, name),
                    glob_by_definition(pattern, name),
                    "`{pattern}` on `{name}`"
                );
            }
        }
    }

    #[test]
    fn globs() {
        assert!(glob(".env.*", ".env.local"));
        assert!(glob("*.pem", "server.pem"));
        assert!(glob("id_rsa*", "id_rsa.old"));
        assert!(!glob("*.pem", "pem.txt"));
        assert!(glob("*credentials*.json", "gcp-credentials-prod.json"));
    }

    #[test]
    fn secrets_and_templates() {
        let none: Vec<String> = Vec::new();
        assert!(secret_reason("/app/.env", &none, &none).is_some());
        assert!(secret_reason("/home/u/.ssh/id_ed25519", &none, &none).is_some());
        assert!(secret_reason("/home/u/.aws/config", &none, &none).is_some());
        assert!(secret_reason("/app/.env.example", &none, &none).is_none());
        assert!(secret_reason("/home/u/.ssh/id_rsa.pub", &none, &none).is_none());
        assert!(secret_reason("src/main.rs", &none, &none).is_none());
        assert!(secret_reason("/app/dev.pem", &none, &["dev.pem".into()]).is_none());
    }
}
