#!/usr/bin/env bash
# Builds the JavaScript plugins (path-guard, tool-tally) into components beside their
# sources. Needs the componentize-js CLI (`npm install @bytecodealliance/componentize-js@0.23.0`);
# COMPONENTIZE_JS may name it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# Usage: build.sh [OUT] (see ../common.sh).
source "$here/../common.sh"
js="${COMPONENTIZE_JS:-componentize-js}"
# `-d http fetch-event`: leave out StarlingMonkey's HTTP support, which would import wasi:http.
"$js" --wit "$wit" --world-name path-guard -d http fetch-event \
    -o "$out/path-guard/path_guard.wasm" "$here/path-guard/guard.js" >/dev/null
"$js" --wit "$wit" --world-name tool-tally -d http fetch-event \
    -o "$out/tool-tally/tool_tally.wasm" "$here/tool-tally/tally.js" >/dev/null
