"""tool-tally in Python (componentize-py): an observer that counts a session's tool calls and
failed results and logs each one. The counts are host-kept session state (`[state]`), so they
survive the instance. Written in Rust, JavaScript and C beside this one, with the
same log lines (example-plugins/languages/cases.jsonl checks them).
"""

from wit_world import exports
from wit_world.imports import host, state, types


def count(key: str, by: int) -> int:
    """Adds `by` to this session's counter `key`; the new count (-1 if refused: an observer
    cannot deny)."""
    try:
        return state.increment(state.Scope.SESSION, key, by)
    except Exception:
        return -1


class PreTool(exports.PreTool):
    def on_pre_tool(self, call: types.ToolCall) -> types.PreToolDecision:
        calls = count("calls", 1)
        host.log(host.Level.INFO, f"call {calls}: {call.name}")
        return types.PreToolDecision_Allow()


class ToolResult(exports.ToolResult):
    def on_tool_result(self, call: types.ToolCall, outcome: types.ToolOutcome) -> None:
        results = count("results", 1)
        failed = count("failed", 1 if outcome.is_error else 0)
        status = "failed" if outcome.is_error else "ok"
        host.log(host.Level.INFO, f"result {results}: {call.name} {status}, {failed} failed so far")
