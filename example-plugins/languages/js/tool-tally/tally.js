// tool-tally in JavaScript (componentize-js): an observer that counts a session's tool calls
// and failed results and logs each one. Written in Rust, Python and C beside this one, with the
// same log lines (example-plugins/languages/cases.jsonl checks them).

import { log } from "palisade:hooks/host@0.1.0";

// Per session: the manifest asks for a `per-session` instance.
let calls = 0;
let results = 0;
let failed = 0;

export const preTool = {
  onPreTool(call) {
    calls += 1;
    log("info", `call ${calls}: ${call.name}`);
    return { tag: "allow" };
  },
};

export const toolResult = {
  onToolResult(call, outcome) {
    results += 1;
    if (outcome.isError) failed += 1;
    const status = outcome.isError ? "failed" : "ok";
    log("info", `result ${results}: ${call.name} ${status}, ${failed} failed so far`);
  },
};
