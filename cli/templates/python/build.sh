#!/usr/bin/env bash
# Builds {{snake}}.wasm from app.py with componentize-py
# (`pip install componentize-py==0.25.1`; COMPONENTIZE_PY may name the binary).
set -euo pipefail
cd "$(dirname "$0")"
py="${COMPONENTIZE_PY:-}"
if [ -z "$py" ]; then
    # On PATH, else where Palisade's test command installed it ({{tools}}).
    for candidate in componentize-py "{{tools}}/venv/bin/componentize-py"; do
        if command -v "$candidate" >/dev/null 2>&1; then py="$candidate"; break; fi
    done
fi
if [ -z "$py" ]; then
    echo "componentize-py not found: pip install componentize-py==0.25.1, or set COMPONENTIZE_PY" >&2
    exit 1
fi
"$py" -d wit -w pre-tool-hook componentize app -o {{snake}}.wasm >/dev/null
echo "built {{snake}}.wasm" >&2
