#!/usr/bin/env bash
# Installs `palisade` as one static executable (Linux, musl libc) into ~/.cargo/bin: the build
# to give an agent that starts a hook process at every event. It answers a bridged event
# faster than the glibc build of `cargo install --path cli --profile dist`, since it starts
# with no dynamic loader and without glibc's start-up probing of the CPU (dozens of CPUID
# instructions, which a hypervisor may trap one by one); see README.md, Benchmarks.
#
# Needs what the README's set-up needs (rustup, python3/pip): it adds the Rust target, and
# installs Zig's C compiler from PyPI into target/tools (nothing system-wide) for the C parts
# of the dependencies (SQLite, ring, BLAKE3, mimalloc), which must be compiled against musl.
# Arguments go to `cargo install` (e.g. `--root DIR`). Idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
arch="$(uname -m)"
target="$arch-unknown-linux-musl"
ZIGLANG_VERSION=0.17.0

(cd "$root" && rustup target add "$target" >&2)

zig_dir="$root/target/tools/zig-$ZIGLANG_VERSION"
if [ ! -x "$zig_dir/ziglang/zig" ]; then
    echo "installing Zig $ZIGLANG_VERSION (its C compiler, for musl) into $zig_dir" >&2
    python3 -m pip install --quiet --disable-pip-version-check --target "$zig_dir" \
        "ziglang==$ZIGLANG_VERSION"
fi

# cc-rs finds the C compiler for the target here; the wrapper makes `zig cc` compile for it.
export PALISADE_ZIG="$zig_dir/ziglang/zig" PALISADE_ZIG_TARGET="$arch-linux-musl"
export "CC_${target//-/_}=$root/scripts/musl-cc"
cd "$root"
exec cargo install --locked --path cli --profile dist --target "$target" "$@"
