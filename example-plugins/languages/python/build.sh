#!/usr/bin/env bash
# Builds the Python plugins (path-guard, tool-tally) into components beside their sources.
# Needs componentize-py (`pip install componentize-py==0.25.1`); COMPONENTIZE_PY may name it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# Usage: build.sh [OUT] (see ../common.sh).
source "$here/../common.sh"
py="${COMPONENTIZE_PY:-componentize-py}"
"$py" -d "$wit" -w path-guard componentize -p "$here/path-guard" app \
    -o "$out/path-guard/path_guard.wasm" >/dev/null
"$py" -d "$wit" -w tool-tally componentize -p "$here/tool-tally" app \
    -o "$out/tool-tally/tool_tally.wasm" >/dev/null
