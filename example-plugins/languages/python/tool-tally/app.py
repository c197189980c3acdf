"""tool-tally in Python (componentize-py): an observer that counts a session's tool calls and
failed results and logs each one. Written in Rust, JavaScript and C beside this one, with the
same log lines (example-plugins/languages/cases.jsonl checks them).
"""

from wit_world import exports
from wit_world.imports import host, types

# Per session: the manifest asks for a `per-session` instance.
calls = 0
results = 0
failed = 0


class PreTool(exports.PreTool):
    def on_pre_tool(self, call: types.ToolCall) -> types.PreToolDecision:
        global calls
        calls += 1
        host.log(host.Level.INFO, f"call {calls}: {call.name}")
        return types.PreToolDecision_Allow()


class ToolResult(exports.ToolResult):
    def on_tool_result(self, call: types.ToolCall, outcome: types.ToolOutcome) -> None:
        global results, failed
        results += 1
        if outcome.is_error:
            failed += 1
        status = "failed" if outcome.is_error else "ok"
        host.log(host.Level.INFO, f"result {results}: {call.name} {status}, {failed} failed so far")
