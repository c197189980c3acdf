#!/usr/bin/env bash
# Builds {{snake}}.wasm from app.py with componentize-py
# (`pip install componentize-py==0.25.1`; COMPONENTIZE_PY may name the binary).
set -euo pipefail
cd "$(dirname "$0")"
"${COMPONENTIZE_PY:-componentize-py}" -d wit -w pre-tool-hook componentize app -o {{snake}}.wasm >/dev/null
echo "built {{snake}}.wasm" >&2
