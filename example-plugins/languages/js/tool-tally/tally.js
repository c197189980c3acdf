// tool-tally in JavaScript (componentize-js): an observer that counts a session's tool calls
// and failed results and logs each one. Written in Rust, Python and C beside this one, with the
// same log lines (example-plugins/languages/cases.jsonl checks them). The counts are host-kept
// session state (`[state]`), so they survive the instance.

import { log } from "palisade:hooks/host@0.1.0";
import { increment } from "palisade:hooks/state@0.1.0";

// Adds `by` to this session's counter `key`; the new count (-1 if refused: an observer cannot
// deny). A result<_, error> throws its error; an s64 is a BigInt.
function count(key, by) {
  try {
    return increment("session", key, BigInt(by));
  } catch {
    return -1;
  }
}

export const preTool = {
  onPreTool(call) {
    const calls = count("calls", 1);
    log("info", `call ${calls}: ${call.name}`);
    return { tag: "allow" };
  },
};

export const toolResult = {
  onToolResult(call, outcome) {
    const results = count("results", 1);
    const failed = count("failed", outcome.isError ? 1 : 0);
    const status = outcome.isError ? "failed" : "ok";
    log("info", `result ${results}: ${call.name} ${status}, ${failed} failed so far`);
  },
};
