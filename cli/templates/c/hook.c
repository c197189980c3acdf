// {{name}}: denies shell commands that contain a phrase of `[config] blocked`.
// Built by ./build.sh (wit-bindgen c, clang for wasm32-wasi, wasm-tools) into {{snake}}.wasm;
// tested by `palisade test . cases.jsonl`.

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pre_tool_hook.h"  // written by `wit-bindgen c` (see build.sh)

typedef pre_tool_hook_string_t string_t;

// A heap string that the host takes ownership of, formatted like printf.
static string_t owned(const char *format, ...) {
  va_list args;
  va_start(args, format);
  int n = vsnprintf(NULL, 0, format, args);
  va_end(args);
  char *buf = malloc((size_t)n + 1);
  if (!buf) abort();
  va_start(args, format);
  vsnprintf(buf, (size_t)n + 1, format, args);
  va_end(args);
  return (string_t){(uint8_t *)buf, (size_t)n};
}

// The decoded JSON string that starts after the quote at `p`, as a new NUL-terminated string;
// `*next` is set after its closing quote. (Enough JSON for this hook: \uXXXX escapes of
// non-ASCII characters are kept as written.)
static char *json_string(const char *p, const char *end, const char **next) {
  char *s = malloc((size_t)(end - p) + 1), *o = s;
  if (!s) abort();
  while (p < end && *p != '"') {
    if (*p == '\\' && p + 1 < end) {
      p++;
      switch (*p) {
        case 'n': *o++ = '\n'; break;
        case 't': *o++ = '\t'; break;
        case 'r': *o++ = '\r'; break;
        case 'u': *o++ = '\\'; *o++ = 'u'; break;
        default: *o++ = *p; break;  // \" \\ \/
      }
      p++;
    } else {
      *o++ = *p++;
    }
  }
  *o = '\0';
  *next = p < end ? p + 1 : end;
  return s;
}

// The string value of `"key":` in the JSON object `json`, or NULL.
static char *json_field(const char *json, size_t len, const char *key) {
  const char *end = json + len;
  size_t key_len = strlen(key);
  for (const char *p = json; p < end; p++) {
    if (*p != '"') continue;
    const char *after;
    char *name = json_string(p + 1, end, &after);
    int match = strlen(name) == key_len && memcmp(name, key, key_len) == 0;
    free(name);
    p = after;
    while (p < end && (*p == ' ' || *p == ':')) p++;
    if (match && p < end && *p == '"') return json_string(p + 1, end, &after);
    p--;
  }
  return NULL;
}

void exports_palisade_hooks_pre_tool_on_pre_tool(
    exports_palisade_hooks_pre_tool_tool_call_t *call,
    exports_palisade_hooks_pre_tool_pre_tool_decision_t *ret) {
  ret->tag = PALISADE_HOOKS_TYPES_PRE_TOOL_DECISION_ALLOW;
  string_t key, blocked;
  pre_tool_hook_string_set(&key, "blocked");
  char *command = json_field((const char *)call->arguments.ptr, call->arguments.len, "command");
  // `[config] blocked`, as JSON: a list of strings.
  if (command && palisade_hooks_host_config(&key, &blocked)) {
    const char *p = (const char *)blocked.ptr, *end = p + blocked.len;
    while (p < end && ret->tag == PALISADE_HOOKS_TYPES_PRE_TOOL_DECISION_ALLOW) {
      if (*p++ != '"') continue;
      char *phrase = json_string(p, end, &p);
      if (phrase[0] && strstr(command, phrase)) {
        string_t line = owned("denied %.*s: contains \"%s\"", (int)call->name.len,
                              (const char *)call->name.ptr, phrase);
        palisade_hooks_host_log(PALISADE_HOOKS_HOST_LEVEL_INFO, &line);
        pre_tool_hook_string_free(&line);
        ret->tag = PALISADE_HOOKS_TYPES_PRE_TOOL_DECISION_DENY;
        pre_tool_hook_string_dup(&ret->val.deny.reason_code, "blocked-command");
        ret->val.deny.message = owned(
            "Refused: the command contains \"%s\", which this project blocks. Find another "
            "way, or ask the user.", phrase);
        ret->val.deny.payload.is_some = false;
      }
      free(phrase);
    }
    pre_tool_hook_string_free(&blocked);
  }
  free(command);
  // Arguments are the callee's to free.
  exports_palisade_hooks_pre_tool_tool_call_free(call);
}
