#!/usr/bin/env bash
# Builds url_guard.wasm from app.py. Needs componentize-py (pip install componentize-py==0.25.1);
# COMPONENTIZE_PY may name the binary.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
"${COMPONENTIZE_PY:-componentize-py}" -d "$here/../../wit" -w pre-tool-hook componentize \
    -p "$here" app -o "$here/url_guard.wasm"
