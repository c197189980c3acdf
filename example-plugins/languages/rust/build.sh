#!/usr/bin/env bash
# Builds the Rust plugins (path-guard, tool-tally) with cargo for wasm32-wasip2 (which gives
# a component directly) into the workspace's guest target directory, then copies them.
# Usage: build.sh [OUT], as for the other languages.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="${1:-$here}"
target="${CARGO_TARGET_DIR:-$root/target/guests}"
(cd "$root" && CARGO_TARGET_DIR="$target" cargo build --quiet --target wasm32-wasip2 --profile guest \
    --package path-guard --package tool-tally)
for plugin in path-guard tool-tally; do
    mkdir -p "$out/$plugin"
    [ "$out" = "$here" ] || cp "$here/$plugin/plugin.toml" "$out/$plugin/"
    cp "$target/wasm32-wasip2/guest/${plugin//-/_}.wasm" "$out/$plugin/"
done
