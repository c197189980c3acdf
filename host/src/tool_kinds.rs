//! What a tool does, whatever an agent calls it: a shell command is `Bash` in Claude Code,
//! `exec_command` or `local_shell` in Codex, `run_shell_command` in Gemini CLI and a call of
//! kind `execute` in ACP. A manifest's `matcher` names a kind as `@shell`; the table below
//! says which names each kind stands for, for the agents Palisade speaks to today.

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

/// Each kind, in the order of [`ToolKind::ALL`]: its name in a matcher, and the tool names
/// (or, `mcp_.+`, the name prefix) it stands for. Claude Code 2.1, Codex 0.17x, Gemini CLI 0.61 and ACP's tool-call kinds.
const TABLE: &[(ToolKind, &str, &[&str])] = &[
    (
        ToolKind::Shell,
        "shell",
        &[
            // Claude Code.
            "Bash",
            "PowerShell",
            "Monitor",
            // Codex (its hooks see a shell call as `Bash` too).
            "shell",
            "shell_command",
            "exec_command",
            "local_shell",
            // Gemini CLI.
            "run_shell_command",
            // ACP: a tool call of kind `execute`, and a client-side terminal.
            "execute",
            "terminal/create",
        ],
    ),
    (
        ToolKind::FileRead,
        "file-read",
        &["Read", "read_file", "read_many_files", "read"],
    ),
    (
        ToolKind::FileWrite,
        "file-write",
        &[
            "Write",
            "Edit",
            "MultiEdit",
            "NotebookEdit",
            "apply_patch",
            "write_file",
            "replace",
            "edit",
            "delete",
            "move",
        ],
    ),
    (
        ToolKind::Search,
        "search",
        &[
            "Glob",
            "Grep",
            "LS",
            "glob",
            "grep_search",
            "list_directory",
            "list_dir",
            "search",
        ],
    ),
    (
        ToolKind::Web,
        "web",
        &[
            "WebFetch",
            "WebSearch",
            "web_fetch",
            "google_web_search",
            "fetch",
        ],
    ),
    (ToolKind::Mcp, "mcp", &["mcp_.+"]),
    (
        ToolKind::Subagent,
        "subagent",
        &[
            "Agent",
            "Task",
            "SendMessage",
            "spawn_agent",
            "invoke_agent",
        ],
    ),
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

    fn row(self) -> &'static (ToolKind, &'static str, &'static [&'static str]) {
        &TABLE[self as usize]
    }

    /// Its name in a matcher, after the `@` (`shell`, `file-write`, …).
    pub fn name(self) -> &'static str {
        self.row().1
    }

    /// The kind named `name` (`shell`, `file-write`, …).
    pub fn named(name: &str) -> Option<ToolKind> {
        TABLE
            .iter()
            .find(|(_, n, _)| *n == name)
            .map(|(kind, _, _)| *kind)
    }

    /// The tool names it stands for, as a matcher's alternatives (`mcp_.+`: a prefix).
    pub fn patterns(self) -> &'static [&'static str] {
        self.row().2
    }

    /// The kind of the tool named `tool`, if it has one.
    pub fn of(tool: &str) -> Option<ToolKind> {
        ToolKind::ALL.into_iter().find(|kind| {
            kind.patterns().iter().any(|p| match p.strip_suffix(".+") {
                Some(prefix) => tool.len() > prefix.len() && tool.starts_with(prefix),
                None => tool == *p,
            })
        })
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
    fn every_kind_has_a_row_and_a_name_that_reads_back() {
        assert_eq!(TABLE.len(), ToolKind::ALL.len());
        for kind in ToolKind::ALL {
            assert_eq!(kind.row().0, kind);
            assert_eq!(ToolKind::named(kind.name()), Some(kind));
        }
    }

    #[test]
    fn each_agents_shell_is_a_shell_and_no_name_has_two_kinds() {
        for tool in [
            "Bash",
            "exec_command",
            "local_shell",
            "run_shell_command",
            "execute",
        ] {
            assert_eq!(ToolKind::of(tool), Some(ToolKind::Shell), "{tool}");
        }
        assert_eq!(ToolKind::of("apply_patch"), Some(ToolKind::FileWrite));
        assert_eq!(
            ToolKind::of("mcp__github__create_issue"),
            Some(ToolKind::Mcp)
        );
        assert_eq!(ToolKind::of("mcp_github_create_issue"), Some(ToolKind::Mcp));
        assert_eq!(ToolKind::of("mcp_"), None);
        assert_eq!(ToolKind::of("TodoWrite"), None);
        let mut seen = std::collections::HashSet::new();
        for (_, _, names) in TABLE {
            for name in *names {
                assert!(seen.insert(*name), "{name} is in two kinds");
            }
        }
    }
}
