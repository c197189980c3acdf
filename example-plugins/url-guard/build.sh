#!/usr/bin/env bash
# Builds url_guard.wasm from app.py, or OUT when given: `build.sh [OUT]`. Needs componentize-py
# (pip install componentize-py==0.25.1); COMPONENTIZE_PY may name the binary.
#
# The world is url-guard.wit's (`pre-tool` and `prepare`), with the palisade:hooks package
# under deps/ of a temporary WIT folder.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here/url_guard.wasm}"
wit="$(mktemp -d)"
trap 'rm -rf "$wit"' EXIT
mkdir -p "$wit/deps/hooks"
cp "$here/../../wit/"*.wit "$wit/deps/hooks/"
cp "$here/url-guard.wit" "$wit/"
"${COMPONENTIZE_PY:-componentize-py}" -d "$wit" -w url-guard componentize -p "$here" app -o "$out"
