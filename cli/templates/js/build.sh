#!/usr/bin/env bash
# Builds {{snake}}.wasm from hook.js with the componentize-js CLI
# (`npm install @bytecodealliance/componentize-js@0.23.0`; COMPONENTIZE_JS may name it).
# `-d http fetch-event` leaves out the HTTP support, which would import wasi:http.
set -euo pipefail
cd "$(dirname "$0")"
js="${COMPONENTIZE_JS:-}"
if [ -z "$js" ]; then
    # On PATH, else where Palisade's test command installed it ({{tools}}).
    for candidate in componentize-js "{{tools}}/js/componentize-js"; do
        if command -v "$candidate" >/dev/null 2>&1; then js="$candidate"; break; fi
    done
fi
if [ -z "$js" ]; then
    echo "componentize-js not found: npm install -g @bytecodealliance/componentize-js@0.23.0, or set COMPONENTIZE_JS" >&2
    exit 1
fi
"$js" --wit wit --world-name pre-tool-hook -d http fetch-event -o {{snake}}.wasm hook.js >/dev/null
echo "built {{snake}}.wasm" >&2
