#!/usr/bin/env bash
# Builds every example plugin from source and puts each component into its plugin folder,
# so `palisade check example-plugins` and `palisade run example-plugins …` work.
# --no-languages leaves out example-plugins/languages/ (the tests build those themselves).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
eval "$(scripts/tools.sh)"
# The names the build scripts of example-plugins/languages/ read their tools from.
export COMPONENTIZE_PY="$PALISADE_COMPONENTIZE_PY" COMPONENTIZE_JS="$PALISADE_COMPONENTIZE_JS" \
    CLANG="$PALISADE_CLANG" WIT_BINDGEN="$PALISADE_WIT_BINDGEN" WASM_TOOLS="$PALISADE_WASM_TOOLS" \
    WASI_ADAPTER="$PALISADE_WASI_ADAPTER"

rust_examples=(shell-guard secret-guard audit-log retry timeout bash-budget policy-file-guard classifier-guard
    rego-guard cedar-guard)
args=()
for p in "${rust_examples[@]}"; do args+=(--package "$p"); done
# Same target directory and profile as the build scripts use, so nothing is compiled twice.
CARGO_TARGET_DIR="$root/target/guests" cargo build --quiet --target wasm32-wasip2 --profile guest "${args[@]}"
for p in "${rust_examples[@]}"; do
    cp "target/guests/wasm32-wasip2/guest/${p//-/_}.wasm" "example-plugins/$p/"
done
example-plugins/url-guard/build.sh >/dev/null
if [ "${1:-}" = "--no-languages" ]; then
    echo "built: ${rust_examples[*]} url-guard" >&2
    exit 0
fi
# The four-language examples (path-guard and tool-tally in Rust, Python, JavaScript and C).
for lang in rust python js c; do
    example-plugins/languages/$lang/build.sh
done
echo "built: ${rust_examples[*]} url-guard, and path-guard + tool-tally in rust python js c" >&2
