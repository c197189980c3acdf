#!/usr/bin/env bash
# Builds {{snake}}.wasm: a Rust cdylib for wasm32-wasip2 is a component. The Rust it needs is
# pinned in rust-toolchain.toml (the guest SDK's); rustup installs it here when missing.
set -euo pipefail
cd "$(dirname "$0")"
if command -v rustup >/dev/null 2>&1; then
    rustup toolchain install >/dev/null 2>&1 || rustup toolchain install
fi
if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
    echo "adding the wasm32-wasip2 target (rustup target add wasm32-wasip2)" >&2
    rustup target add wasm32-wasip2
fi
cargo build --quiet --release --target wasm32-wasip2
# Where cargo put it: `CARGO_TARGET_DIR`, when set, else ./target.
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/{{snake}}.wasm" .
echo "built {{snake}}.wasm" >&2
