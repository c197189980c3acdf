// path-guard in C (wit-bindgen c + clang + wasi-libc). The same plugin is written in Rust,
// Python and JavaScript beside this one (example-plugins/languages/); cases.jsonl there
// expects the same decisions of all four.
//
// Every string of a tool call's arguments (keys and values) is checked against the patterns
// of [config] (plain substrings): strings that contain an `except` pattern are skipped; the
// first `deny` pattern (in the order of the list) that a remaining string contains denies the
// call (`protected-path`); failing that, the first `ask` pattern found asks the user.
//
// C has no JSON library at hand, and this plugin needs only the strings of a document: the
// host always sends valid JSON, and in valid JSON every `"` outside a string starts one, so a
// scan for strings (decoding their escapes) finds them all, keys included.

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "path_guard.h"

typedef path_guard_string_t string_t;

// A growable list of NUL-terminated strings.
typedef struct {
  char **items;
  size_t len, cap;
} strings_t;

static void push(strings_t *list, char *s) {
  if (list->len == list->cap) {
    list->cap = list->cap ? 2 * list->cap : 16;
    list->items = realloc(list->items, list->cap * sizeof(char *));
    if (!list->items) abort();
  }
  list->items[list->len++] = s;
}

static void strings_free(strings_t *list) {
  for (size_t i = 0; i < list->len; i++) free(list->items[i]);
  free(list->items);
  *list = (strings_t){0};
}

static int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int read_hex4(const char *p, const char *end) {
  if (end - p < 4) return -1;
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hex(p[i]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

// Appends the UTF-8 encoding of `cp` to `out`; returns the bytes written.
static size_t utf8(unsigned cp, char *out) {
  if (cp < 0x80) { out[0] = (char)cp; return 1; }
  if (cp < 0x800) { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | cp >> 12); out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F)); return 3;
  }
  out[0] = (char)(0xF0 | cp >> 18); out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
  out[2] = (char)(0x80 | (cp >> 6 & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F)); return 4;
}

// Every string of the JSON document `json`, decoded, in document order.
static strings_t json_strings(const char *json, size_t len) {
  strings_t list = {0};
  const char *p = json, *end = json + len;
  while (p < end) {
    if (*p++ != '"') continue;
    // A decoded string is never longer than its encoding.
    char *s = malloc((size_t)(end - p) + 1), *o = s;
    if (!s) abort();
    while (p < end && *p != '"') {
      if (*p != '\\') { *o++ = *p++; continue; }
      if (++p == end) break;
      char c = *p++;
      switch (c) {
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
          int cp = read_hex4(p, end);
          if (cp < 0) break;
          p += 4;
          // A surrogate pair: \uD83D\uDE00.
          if (cp >= 0xD800 && cp < 0xDC00 && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
            int low = read_hex4(p + 2, end);
            if (low >= 0xDC00 && low < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
              p += 6;
            }
          }
          o += utf8((unsigned)cp, o);
          break;
        }
        default: *o++ = c; break;  // \" \\ \/
      }
    }
    p++;  // the closing quote
    *o = '\0';
    push(&list, s);
  }
  return list;
}

// The JSON list of strings `[config] key`, or an empty list.
static strings_t config(const char *key) {
  string_t k, value;
  path_guard_string_set(&k, key);
  if (!palisade_hooks_host_config(&k, &value)) return (strings_t){0};
  strings_t list = json_strings((const char *)value.ptr, value.len);
  path_guard_string_free(&value);
  return list;
}

// The `deny`, `ask` and `except` lists, read once per instance and kept: a plugin's [config]
// does not change while it is loaded, and a host call costs more than the lookup. Read by
// `prepare` (below), which the host calls before the instance's first call: for a per-call
// plugin, on the instance it makes ahead of the call, off the call's path.
static strings_t deny, ask, except;
static int have_patterns;

static void read_patterns(void) {
  if (have_patterns) return;
  deny = config("deny");
  ask = config("ask");
  except = config("except");
  have_patterns = 1;
}

static int contains_any(const strings_t *patterns, const char *s) {
  for (size_t i = 0; i < patterns->len; i++)
    if (patterns->items[i][0] && strstr(s, patterns->items[i])) return 1;
  return 0;
}

// The first pattern that one of the checked strings contains, or NULL.
static const char *found(const strings_t *patterns, const strings_t *checked) {
  for (size_t i = 0; i < patterns->len; i++) {
    const char *p = patterns->items[i];
    if (!p[0]) continue;
    for (size_t j = 0; j < checked->len; j++)
      if (strstr(checked->items[j], p)) return p;
  }
  return NULL;
}

// A string the host takes ownership of, formatted like printf.
static string_t owned(const char *format, ...) __attribute__((format(printf, 1, 2)));
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

// `s` as a JSON string literal, quotes included.
static char *json_quote(const char *s) {
  char *out = malloc(6 * strlen(s) + 3), *o = out;
  if (!out) abort();
  *o++ = '"';
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') { *o++ = '\\'; *o++ = (char)c; }
    else if (c < 0x20) o += sprintf(o, "\\u%04x", c);
    else *o++ = (char)c;
  }
  *o++ = '"';
  *o = '\0';
  return out;
}

bool exports_palisade_hooks_prepare_prepare(string_t *err) {
  (void)err;
  read_patterns();
  return true;
}

void exports_palisade_hooks_pre_tool_on_pre_tool(
    exports_palisade_hooks_pre_tool_tool_call_t *call,
    exports_palisade_hooks_pre_tool_pre_tool_decision_t *ret) {
  read_patterns();
  strings_t all = json_strings((const char *)call->arguments.ptr, call->arguments.len);
  strings_t checked = {0};  // borrows from `all`
  for (size_t i = 0; i < all.len; i++)
    if (!contains_any(&except, all.items[i])) push(&checked, all.items[i]);
  int name_len = (int)call->name.len;
  const char *name = (const char *)call->name.ptr;

  const char *pattern;
  if ((pattern = found(&deny, &checked))) {
    char *quoted = json_quote(pattern);
    ret->tag = PALISADE_HOOKS_TYPES_PRE_TOOL_DECISION_DENY;
    path_guard_string_dup(&ret->val.deny.reason_code, "protected-path");
    ret->val.deny.message = owned(
        "Refused: %.*s would touch a protected path (\"%s\"). Work without it, or ask the user "
        "to change path-guard's deny list.",
        name_len, name, pattern);
    ret->val.deny.payload.is_some = true;
    ret->val.deny.payload.val = owned("{\"pattern\":%s}", quoted);
    free(quoted);
  } else if ((pattern = found(&ask, &checked))) {
    ret->tag = PALISADE_HOOKS_TYPES_PRE_TOOL_DECISION_ASK;
    ret->val.ask.reason = owned("%.*s would touch \"%s\"; allow it?", name_len, name, pattern);
  } else {
    ret->tag = PALISADE_HOOKS_TYPES_PRE_TOOL_DECISION_ALLOW;
  }

  free(checked.items);
  strings_free(&all);
  exports_palisade_hooks_pre_tool_tool_call_free(call);
}
