#!/usr/bin/env bash
# Builds {{snake}}.wasm from hook.js with the componentize-js CLI
# (`npm install @bytecodealliance/componentize-js@0.23.0`; COMPONENTIZE_JS may name it).
# `-d http fetch-event` leaves out the HTTP support, which would import wasi:http.
set -euo pipefail
cd "$(dirname "$0")"
"${COMPONENTIZE_JS:-componentize-js}" --wit wit --world-name pre-tool-hook -d http fetch-event \
    -o {{snake}}.wasm hook.js >/dev/null
echo "built {{snake}}.wasm" >&2
