"""{{name}}: denies shell commands that contain a phrase of `[config] blocked`.
Built by ./build.sh (componentize-py) into {{snake}}.wasm; tested by
`palisade test . cases.jsonl`.
"""

import json

from wit_world import exports
from wit_world.imports import host, types


class PreTool(exports.PreTool):
    def on_pre_tool(self, call: types.ToolCall) -> types.PreToolDecision:
        # `[config] blocked`, as JSON (None when the key is absent).
        raw = host.config("blocked")
        blocked = json.loads(raw) if raw is not None else []
        command = json.loads(call.arguments).get("command") or ""
        for phrase in blocked:
            if phrase in command:
                host.log(host.Level.INFO, f"denied {call.name}: contains {json.dumps(phrase)}")
                message = (
                    f'Refused: the command contains "{phrase}", which this project blocks. '
                    "Find another way, or ask the user."
                )
                return types.PreToolDecision_Deny(
                    types.Deny(reason_code="blocked-command", message=message, payload=None)
                )
        return types.PreToolDecision_Allow()
