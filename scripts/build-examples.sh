#!/usr/bin/env bash
# Builds every example plugin from source and puts each component into its plugin folder,
# so `palisade check example-plugins` and `palisade run example-plugins …` work.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
eval "$(scripts/tools.sh)"

rust_examples=(shell-guard secret-guard audit-log retry timeout)
args=()
for p in "${rust_examples[@]}"; do args+=(--package "$p"); done
# Same target directory and profile as the build scripts use, so nothing is compiled twice.
CARGO_TARGET_DIR="$root/target/guests" cargo build --quiet --target wasm32-wasip2 --profile guest "${args[@]}"
for p in "${rust_examples[@]}"; do
    cp "target/guests/wasm32-wasip2/guest/${p//-/_}.wasm" "example-plugins/$p/"
done
COMPONENTIZE_PY="$PALISADE_COMPONENTIZE_PY" example-plugins/url-guard/build.sh >/dev/null
echo "built: ${rust_examples[*]} url-guard" >&2
