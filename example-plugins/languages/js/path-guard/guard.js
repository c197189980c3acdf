// path-guard in JavaScript (componentize-js). The same plugin is written in Rust, Python and C
// beside this one (example-plugins/languages/); cases.jsonl there expects the same decisions
// of all four.
//
// Every string of a tool call's arguments (keys and values) is checked against the patterns
// of [config] (plain substrings): strings that contain an `except` pattern are skipped; the
// first `deny` pattern (in the order of the list) that a remaining string contains denies the
// call (`protected-path`); failing that, the first `ask` pattern found asks the user.

import { config as hostConfig } from "palisade:hooks/host@0.1.0";

function config(key) {
  const raw = hostConfig(key);
  return raw === undefined ? [] : JSON.parse(raw);
}

// Every string of `value`, keys included.
function* strings(value) {
  if (typeof value === "string") {
    yield value;
  } else if (Array.isArray(value)) {
    for (const item of value) yield* strings(item);
  } else if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      yield key;
      yield* strings(item);
    }
  }
}

// The first pattern that one of `checked` contains.
function found(patterns, checked) {
  return patterns.find((p) => p && checked.some((s) => s.includes(p)));
}

export const preTool = {
  onPreTool(call) {
    const deny = config("deny");
    const ask = config("ask");
    const excepted = config("except");
    const checked = [...strings(JSON.parse(call.arguments))].filter(
      (s) => !excepted.some((e) => e && s.includes(e)),
    );
    let pattern = found(deny, checked);
    if (pattern !== undefined) {
      return {
        tag: "deny",
        val: {
          reasonCode: "protected-path",
          message:
            `Refused: ${call.name} would touch a protected path ("${pattern}"). Work without ` +
            "it, or ask the user to change path-guard's deny list.",
          payload: JSON.stringify({ pattern }),
        },
      };
    }
    pattern = found(ask, checked);
    if (pattern !== undefined) {
      return { tag: "ask", val: { reason: `${call.name} would touch "${pattern}"; allow it?` } };
    }
    return { tag: "allow" };
  },
};
