"""url-guard: a pre-tool guard written in Python (componentize-py).

Every URL a tool call would fetch — the `url` argument of a web-fetch tool, or an
http(s) URL in a shell command that runs curl, wget or similar — must be on a host of
the allow-list in `[config] allowed_hosts` (a host matches itself and its subdomains).
Anything else is asked about or denied, as `[config] unknown_host` says.
"""

import json
import re
from urllib.parse import urlsplit

from wit_world import exports
from wit_world.imports import host, types

URL = re.compile(r"""https?://[^\s'"|;&)<>]+""")
FETCHERS = re.compile(r"\b(curl|wget|http|https|aria2c|fetch|lynx|links)\b")


def config(key, default):
    raw = host.config(key)
    return default if raw is None else json.loads(raw)


_settings = None


def settings():
    """The allow-list (lowercase) and `unknown_host`, read once per instance and kept: a
    plugin's [config] does not change while it is loaded, and a host call costs more than the
    lookup. `Prepare` reads them before the instance's first call."""
    global _settings
    if _settings is None:
        allow_list = [h.lower() for h in config("allowed_hosts", [])]
        _settings = (allow_list, config("unknown_host", "ask"))
    return _settings


def urls_of(arguments):
    urls = []
    if isinstance(arguments.get("url"), str):
        urls.append(arguments["url"])
    # Gemini CLI's web_fetch takes its URLs inside a prompt.
    if isinstance(arguments.get("prompt"), str):
        urls.extend(URL.findall(arguments["prompt"]))
    for key in ("command", "cmd"):
        command = arguments.get(key)
        if isinstance(command, list):
            command = " ".join(str(part) for part in command)
        if isinstance(command, str) and FETCHERS.search(command):
            urls.extend(URL.findall(command))
    return urls


def allowed(hostname, allow_list):
    hostname = hostname.lower().rstrip(".")
    return any(hostname == a or hostname.endswith("." + a) for a in allow_list)


class Prepare(exports.Prepare):
    """Called by the host once per instance, before its first call: for a per-call plugin, on
    the instance it makes ahead of the call, so reading [config] (and the interpreter's first
    run of the code that does) is off the call's path."""

    def prepare(self) -> None:
        settings()


class PreTool(exports.PreTool):
    def on_pre_tool(self, call: types.ToolCall) -> types.PreToolDecision:
        try:
            arguments = json.loads(call.arguments)
        except ValueError:
            arguments = {}
        if not isinstance(arguments, dict):
            return types.PreToolDecision_Allow()
        allow_list, unknown = settings()
        for url in urls_of(arguments):
            hostname = urlsplit(url).hostname or ""
            if allowed(hostname, allow_list):
                continue
            if unknown == "deny":
                message = (
                    f"Refused: {hostname or url} is not on this project's list of allowed "
                    f"hosts ({', '.join(allow_list) or 'none'}). Use an allowed source, or "
                    "ask the user to add the host to url-guard's allowed_hosts."
                )
                payload = json.dumps({"url": url, "host": hostname})
                return types.PreToolDecision_Deny(
                    types.Deny(reason_code="host-not-allowed", message=message, payload=payload)
                )
            return types.PreToolDecision_Ask(
                types.Ask(reason=f"{call.name} wants to fetch {url}; {hostname} is not on the allow-list")
            )
        return types.PreToolDecision_Allow()
