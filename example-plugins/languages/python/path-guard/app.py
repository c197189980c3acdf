"""path-guard in Python (componentize-py). The same plugin is written in Rust, JavaScript and
C beside this one (example-plugins/languages/); cases.jsonl there expects the same decisions
of all four.

Every string of a tool call's arguments (keys and values) is checked against the patterns of
[config] (plain substrings): strings that contain an `except` pattern are skipped; the first
`deny` pattern (in the order of the list) that a remaining string contains denies the call
(`protected-path`); failing that, the first `ask` pattern found asks the user.
"""

import json

from wit_world import exports
from wit_world.imports import host, types


def config(key):
    raw = host.config(key)
    return [] if raw is None else json.loads(raw)


_configured = None


def configured():
    """The `deny`, `ask` and `except` lists, read once per instance and kept: a plugin's
    [config] does not change while it is loaded, and a host call costs more than the lookup.
    `Prepare` reads them before the instance's first call."""
    global _configured
    if _configured is None:
        _configured = (config("deny"), config("ask"), config("except"))
    return _configured


def strings(value):
    """Every string of `value`, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from strings(item)


def found(patterns, checked):
    """The first pattern that one of `checked` contains."""
    return next((p for p in patterns if p and any(p in s for s in checked)), None)


class Prepare(exports.Prepare):
    """Called by the host once per instance, before its first call: for a per-call plugin, on
    the instance it makes ahead of the call, off the call's path."""

    def prepare(self) -> None:
        configured()


class PreTool(exports.PreTool):
    def on_pre_tool(self, call: types.ToolCall) -> types.PreToolDecision:
        deny, ask, excepted = configured()
        checked = [
            s for s in strings(json.loads(call.arguments)) if not any(e and e in s for e in excepted)
        ]
        pattern = found(deny, checked)
        if pattern is not None:
            message = (
                f'Refused: {call.name} would touch a protected path ("{pattern}"). Work without '
                "it, or ask the user to change path-guard's deny list."
            )
            payload = json.dumps({"pattern": pattern})
            return types.PreToolDecision_Deny(
                types.Deny(reason_code="protected-path", message=message, payload=payload)
            )
        pattern = found(ask, checked)
        if pattern is not None:
            return types.PreToolDecision_Ask(
                types.Ask(reason=f'{call.name} would touch "{pattern}"; allow it?')
            )
        return types.PreToolDecision_Allow()
