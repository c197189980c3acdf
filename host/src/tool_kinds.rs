//! What a tool does, whatever an agent calls it: a shell command is `Bash` in Claude Code,
//! `exec_command` or `local_shell` in Codex, `run_shell_command` in Gemini CLI and a call of
//! kind `execute` in ACP. A manifest's `matcher` names a kind as `@shell`; each agent's module
//! (`agents`) says which of its tools' names each kind stands for. May touch: nothing.

/// A kind of tool, across agents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolKind {
    /// Runs a shell command (`@shell`).
    Shell,
    /// Reads files (`@file-read`).
    FileRead,
    /// Writes, edits, patches, moves or deletes files (`@file-write`).
    FileWrite,
    /// Searches files or lists folders (`@search`).
    Search,
    /// Fetches a URL or searches the web (`@web`).
    Web,
    /// A tool of an MCP server (`@mcp`): `mcp__<server>__<tool>` (Claude Code, Codex),
    /// `mcp_<server>_<tool>` (Gemini CLI).
    Mcp,
    /// Starts or talks to a sub-agent (`@subagent`).
    Subagent,
}

/// Each kind's name in a matcher, in the order of [`ToolKind::ALL`].
const NAMES: [&str; 7] = [
    "shell",
    "file-read",
    "file-write",
    "search",
    "web",
    "mcp",
    "subagent",
];

impl ToolKind {
    /// Every kind.
    pub const ALL: [ToolKind; 7] = [
        ToolKind::Shell,
        ToolKind::FileRead,
        ToolKind::FileWrite,
        ToolKind::Search,
        ToolKind::Web,
        ToolKind::Mcp,
        ToolKind::Subagent,
    ];

    /// Its name in a matcher, after the `@` (`shell`, `file-write`, …).
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }

    /// The kind named `name` (`shell`, `file-write`, …).
    pub fn named(name: &str) -> Option<ToolKind> {
        ToolKind::ALL.into_iter().find(|kind| kind.name() == name)
    }
}

impl std::fmt::Display for ToolKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "@{}", self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_name_that_reads_back() {
        for kind in ToolKind::ALL {
            assert_eq!(ToolKind::named(kind.name()), Some(kind));
        }
    }
}
