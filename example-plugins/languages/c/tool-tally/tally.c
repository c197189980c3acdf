// tool-tally in C (wit-bindgen c + clang + wasi-libc): an observer that counts a session's
// tool calls and failed results and logs each one. Written in Rust, Python and JavaScript
// beside this one, with the same log lines (example-plugins/languages/cases.jsonl checks them).
// The counts are host-kept session state (`[state]`), so they survive the instance.

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "tool_tally.h"

// Adds `by` to this session's counter `key`; the new count (-1 if refused: an observer cannot
// deny).
static long long count(const char *key, long long by) {
  tool_tally_string_t name;
  tool_tally_string_set(&name, key);
  int64_t now;
  palisade_hooks_state_error_t refused;
  if (!palisade_hooks_state_increment(PALISADE_HOOKS_STATE_SCOPE_SESSION, &name, by, &now, &refused))
    return -1;
  return now;
}

static void info(const char *format, ...) __attribute__((format(printf, 1, 2)));
static void info(const char *format, ...) {
  char line[512];
  va_list args;
  va_start(args, format);
  vsnprintf(line, sizeof line, format, args);
  va_end(args);
  tool_tally_string_t message;
  tool_tally_string_set(&message, line);
  palisade_hooks_host_log(PALISADE_HOOKS_HOST_LEVEL_INFO, &message);
}

void exports_palisade_hooks_pre_tool_on_pre_tool(
    exports_palisade_hooks_pre_tool_tool_call_t *call,
    exports_palisade_hooks_pre_tool_pre_tool_decision_t *ret) {
  long long calls = count("calls", 1);
  info("call %lld: %.*s", calls, (int)call->name.len, (const char *)call->name.ptr);
  ret->tag = PALISADE_HOOKS_TYPES_PRE_TOOL_DECISION_ALLOW;
  exports_palisade_hooks_pre_tool_tool_call_free(call);
}

void exports_palisade_hooks_tool_result_on_tool_result(
    exports_palisade_hooks_tool_result_tool_call_t *call,
    exports_palisade_hooks_tool_result_tool_outcome_t *outcome) {
  long long results = count("results", 1);
  long long failed = count("failed", outcome->is_error ? 1 : 0);
  info("result %lld: %.*s %s, %lld failed so far", results, (int)call->name.len,
       (const char *)call->name.ptr, outcome->is_error ? "failed" : "ok", failed);
  exports_palisade_hooks_tool_result_tool_call_free(call);
  exports_palisade_hooks_tool_result_tool_outcome_free(outcome);
}
