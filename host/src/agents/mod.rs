//! The agents whose hooks Palisade answers, one module each: its events and what each means,
//! its tools by kind, how it reports a tool's outcome, the answer it reads, what it applies of
//! one, and its settings entry. Every front door reads them through [`Dialect`]: the bridges
//! ([`crate::bridge`]), `palisade serve`'s routes, `install`, and a matcher's tool kinds.
//! Adding an agent is a module here implementing [`HookDialect`], and a line in
//! [`Dialect::ALL`]. May touch: nothing; data and pure functions.

pub mod claude_code;
pub mod codex;
mod dialect;
pub mod gemini;

pub use dialect::{
    AgentApplies, Answer, CONFIG_CHANGE, ELICITATION, Event, HookDialect, HookTarget, Meaning,
    Settings,
};

use crate::claude_code::HookEvent;
use crate::tool_kinds::ToolKind;
use serde_json::Value;
use std::sync::OnceLock;

/// One agent's hook protocol, as a value: which agent a bridge speaks to.
#[derive(Clone, Copy)]
pub struct Dialect(&'static dyn HookDialect);

impl Dialect {
    /// Claude Code (`@anthropic-ai/claude-code`).
    pub const CLAUDE_CODE: Dialect = Dialect(&claude_code::ClaudeCode);
    /// Codex (`@openai/codex`): `PreToolUse` honours only `deny`; `tool_response` is a string.
    pub const CODEX: Dialect = Dialect(&codex::Codex);
    /// Gemini CLI (`@google/gemini-cli`): Claude Code's events under its own names, answered
    /// in its own fields.
    pub const GEMINI: Dialect = Dialect(&gemini::Gemini);

    /// Every agent Palisade speaks to.
    pub const ALL: [Dialect; 3] = [Dialect::CLAUDE_CODE, Dialect::CODEX, Dialect::GEMINI];

    /// The dialect named `name` (`claude-code`, `codex`, `gemini`).
    pub fn from_name(name: &str) -> Option<Dialect> {
        Dialect::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Its module's answers.
    pub fn spec(self) -> &'static dyn HookDialect {
        self.0
    }

    /// Its name in commands, routes and recordings.
    pub fn name(self) -> &'static str {
        self.0.name()
    }

    /// Every event of its surface, in lifecycle order.
    pub fn events(self) -> &'static [Event] {
        self.0.events()
    }

    /// Its events that run points, in lifecycle order: what `install` registers (of them,
    /// those whose points the plugins have hooks on).
    pub fn hooked_events(self) -> impl Iterator<Item = &'static Event> {
        self.events()
            .iter()
            .filter(|e| !e.meaning.points().is_empty())
    }

    /// Its events that run no point but are recorded ([`Meaning::Observed`]): what
    /// `install --observe` registers besides.
    pub fn observed_events(self) -> impl Iterator<Item = &'static Event> {
        self.events()
            .iter()
            .filter(|e| e.meaning == Meaning::Observed)
    }

    /// Its event named `name`, if it has one.
    pub fn event(self, name: &str) -> Option<&'static Event> {
        self.events().iter().find(|e| e.name == name)
    }

    /// What its event `name` means ([`Meaning::Unmapped`] for one it does not have).
    pub fn meaning(self, name: &str) -> Meaning {
        self.event(name).map_or(Meaning::Unmapped, |e| e.meaning)
    }

    /// The canonical points its event `name` runs.
    pub fn points_for(self, name: &str) -> &'static [crate::point::Point] {
        self.meaning(name).points()
    }

    /// Whether a bridge that cannot do its work at `name` refuses it ([`Meaning::guards`]).
    pub fn fails_closed(self, name: &str) -> bool {
        self.meaning(name).guards()
    }

    /// Whether the agent waits for the answer to `name` (an unknown event: yes).
    pub fn waits(self, name: &str) -> bool {
        self.event(name).is_none_or(|e| e.waited)
    }

    /// The tool an event is about, named as the hooks' matchers see it: a tool event's
    /// `tool_name` (`None` when it is not a string, which fails on its own), the tool an
    /// event is always about ([`Meaning::tool`]), and none for the others. With
    /// [`Dialect::points_for`], what a process that serves one event loads.
    pub fn tool_of(self, input: &Value) -> Option<&str> {
        let meaning = self.meaning(input.get("hook_event_name")?.as_str()?);
        match meaning.names_a_tool() {
            true => input.get("tool_name")?.as_str(),
            false => meaning.tool(),
        }
    }

    /// [`HookDialect::read`]: the event in Claude Code's fields.
    pub fn read(self, input: &mut HookEvent) {
        self.0.read(input)
    }
}

impl PartialEq for Dialect {
    fn eq(&self, other: &Dialect) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Dialect {}

impl std::fmt::Debug for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// ACP's tool-call kinds (not a hook dialect: `palisade acp` sees them on the wire) and its
/// client-side methods, by the kind they are.
const ACP_TOOLS: &[(ToolKind, &[&str])] = &[
    (ToolKind::Shell, &["execute", "terminal/create"]),
    (ToolKind::FileRead, &["read"]),
    (ToolKind::FileWrite, &["edit", "delete", "move"]),
    (ToolKind::Search, &["search"]),
    (ToolKind::Web, &["fetch"]),
];

/// The tool names of each kind, by [`ToolKind::ALL`]'s order, across every agent and ACP, each
/// name once.
fn table() -> &'static [Vec<&'static str>] {
    static TABLE: OnceLock<Vec<Vec<&'static str>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let rows = Dialect::ALL
            .iter()
            .flat_map(|d| d.0.tools().iter())
            .chain(ACP_TOOLS.iter());
        let mut names: Vec<Vec<&'static str>> = vec![Vec::new(); ToolKind::ALL.len()];
        for (kind, tools) in rows {
            let at = ToolKind::ALL.iter().position(|k| k == kind).unwrap_or(0);
            for tool in *tools {
                if !names[at].contains(tool) {
                    names[at].push(tool);
                }
            }
        }
        names
    })
}

/// The tool names `kind` stands for, across the agents, as a matcher's alternatives (one
/// ending `.+` is a prefix).
pub fn tool_names(kind: ToolKind) -> &'static [&'static str] {
    let at = ToolKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
    &table()[at]
}

/// The kind of the tool named `tool`, if any agent gives it one.
pub fn kind_of(tool: &str) -> Option<ToolKind> {
    ToolKind::ALL.into_iter().find(|kind| {
        tool_names(*kind)
            .iter()
            .any(|p| match p.strip_suffix(".+") {
                Some(prefix) => tool.len() > prefix.len() && tool.starts_with(prefix),
                None => tool == *p,
            })
    })
}

impl ToolKind {
    /// The tool names it stands for, as a matcher's alternatives ([`tool_names`]).
    pub fn patterns(self) -> &'static [&'static str] {
        tool_names(self)
    }

    /// The kind of the tool named `tool`, if it has one ([`kind_of`]).
    pub fn of(tool: &str) -> Option<ToolKind> {
        kind_of(tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_agents_shell_is_a_shell_and_no_name_has_two_kinds() {
        for tool in [
            "Bash",
            "exec_command",
            "local_shell",
            "run_shell_command",
            "execute",
        ] {
            assert_eq!(kind_of(tool), Some(ToolKind::Shell), "{tool}");
        }
        assert_eq!(kind_of("apply_patch"), Some(ToolKind::FileWrite));
        assert_eq!(kind_of("mcp__github__create_issue"), Some(ToolKind::Mcp));
        assert_eq!(kind_of("mcp_github_create_issue"), Some(ToolKind::Mcp));
        assert_eq!(kind_of("mcp_"), None);
        assert_eq!(kind_of("TodoWrite"), None);
        let mut seen = std::collections::HashSet::new();
        for kind in ToolKind::ALL {
            for name in tool_names(kind) {
                assert!(seen.insert(*name), "{name} is in two kinds");
            }
        }
    }

    /// Each agent names each event once, and the names of the dialects are their own.
    #[test]
    fn every_agent_names_each_event_once() {
        for dialect in Dialect::ALL {
            let mut seen = std::collections::HashSet::new();
            for event in dialect.events() {
                assert!(seen.insert(event.name), "{dialect:?}: {}", event.name);
            }
            assert_eq!(Dialect::from_name(dialect.name()), Some(dialect));
        }
    }

    /// docs/bridges.md has a table per agent, one row per event: the same events as the
    /// agent's module, and the count it says.
    #[test]
    fn the_event_tables_of_the_docs_are_the_agents_tables() {
        let docs = include_str!("../../../docs/bridges.md");
        for dialect in Dialect::ALL {
            let heading = format!("### {} ", dialect.spec().title());
            let section = docs
                .split("\n#")
                .find(|s| s.starts_with(&heading[1..]))
                .unwrap_or_else(|| panic!("docs/bridges.md has no `{heading}…` section"));
            let documented: Vec<&str> = section
                .lines()
                .filter_map(|line| line.strip_prefix("| `"))
                .filter_map(|row| row.split('`').next())
                .collect();
            let named: Vec<&str> = dialect.events().iter().map(|e| e.name).collect();
            let mut sorted = (documented.clone(), named.clone());
            sorted.0.sort_unstable();
            sorted.1.sort_unstable();
            assert_eq!(
                sorted.0, sorted.1,
                "{heading}: the docs' rows and the module's events"
            );
            let count = format!("{} events.", named.len());
            assert!(
                section.contains(&count),
                "{heading}: the docs should say {count}"
            );
        }
    }
}
