// path-guard in JavaScript (componentize-js). The same plugin is written in Rust, Python and C
// beside this one (example-plugins/languages/); cases.jsonl there expects the same decisions
// of all four.
//
// Every string of a tool call's arguments (keys and values) is checked against the patterns
// of [config] (plain substrings): strings that contain an `except` pattern are skipped; the
// first `deny` pattern (in the order of the list) that a remaining string contains denies the
// call (`protected-path`); failing that, the first `ask` pattern found asks the user.

import { config as hostConfig } from "palisade:hooks/host@0.1.0";

// Plain loops rather than a generator, spreads and Array.prototype.find/some/filter: a new
// instance of the engine pays, at its first call, for every function that call runs (calling
// them at the top level, before componentize-js snapshots the engine, does not help), and
// those run several of SpiderMonkey's builtins written in JavaScript. A per-call plugin's
// every call is a first call (`cargo bench -p palisade --bench instances -- js/spare`:
// 285 µs with them, 237 µs without, on one machine).

function config(key) {
  const raw = hostConfig(key);
  return raw === undefined ? [] : JSON.parse(raw);
}

// The lists of [config], read once per instance and kept: a plugin's [config] does not
// change while it is loaded, and each host call costs ~13 µs here even warm
// (componentize-js's import glue), the instance's first ~70 µs. Read by `prepare` (below),
// which the host calls before the instance's first call: for a per-call plugin, on the
// instance it makes ahead of the call, off the call's path. Not at the top level: that runs
// when componentize-js snapshots the engine, before any host exists.
let lists;
function configured() {
  if (lists === undefined) {
    lists = { deny: config("deny"), ask: config("ask"), excepted: config("except") };
  }
  return lists;
}

// Pushes every string of `value`, keys included, onto `out`.
function strings(value, out) {
  if (typeof value === "string") {
    out.push(value);
  } else if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) strings(value[i], out);
  } else if (value !== null && typeof value === "object") {
    for (const key in value) {
      out.push(key);
      strings(value[key], out);
    }
  }
  return out;
}

// Whether `s` contains one of `patterns` (empty ones never match).
function containsAny(s, patterns) {
  for (let i = 0; i < patterns.length; i++) {
    if (patterns[i] && s.includes(patterns[i])) return true;
  }
  return false;
}

// The first pattern that one of `checked` contains.
function found(patterns, checked) {
  for (let i = 0; i < patterns.length; i++) {
    const p = patterns[i];
    if (!p) continue;
    for (let j = 0; j < checked.length; j++) {
      if (checked[j].includes(p)) return p;
    }
  }
  return undefined;
}

export const prepare = {
  prepare() {
    configured();
  },
};

export const preTool = {
  onPreTool(call) {
    const { deny, ask, excepted } = configured();
    const all = strings(JSON.parse(call.arguments), []);
    const checked = [];
    for (let i = 0; i < all.length; i++) {
      if (!containsAny(all[i], excepted)) checked.push(all[i]);
    }
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
