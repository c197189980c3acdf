#!/usr/bin/env bash
# The test command of README.md: installs what the tests need (into target/), runs the whole
# test suite, then builds the example plugins and checks them with the CLI. Ends with one
# summary line: `tests: N passed, N failed`.
#
# The installs are mostly downloads: they run while the tests build. Arguments go to
# `cargo test` (e.g. `scripts/test.sh -p palisade-cli --test all mcp::`).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
mkdir -p target
log="$root/target/test-output.log"
tools_env="$root/target/tools.env"
started=$SECONDS
stamp() { echo "test.sh: $1 after $((SECONDS - started)) s" >&2; }

# The pinned toolchain (rust-toolchain.toml) first, installed once before the installs and
# the build run side by side: two rustup installs of one toolchain at once can collide.
# Explicitly: rustup 1.28 does not install it on first use, nor does a later one set not to
# (`RUSTUP_AUTO_INSTALL=0`, `rustup set auto-install disable`).
if command -v rustup >/dev/null; then
    rustup toolchain install
fi
cargo --version >/dev/null
scripts/tools.sh >"$tools_env.partial" &
tools=$!
# Every test binary, built before the installs end. The benches are not built here (fourteen
# binaries that each link wasmtime, two minutes of the 2-core VM): `cargo clippy --workspace
# --all-targets`, which every change passes before it is committed (CONTRIBUTING.md), checks
# that they compile.
# The policy plugins (rego-guard, cedar-guard) have no native tests: built for the host, their
# policy engines would compile a second time for nothing (they are built as components for
# the tests, and by build-examples.sh).
native=(--workspace --exclude rego-guard --exclude cedar-guard)
build_failed=0
if [ $# -eq 0 ]; then
    cargo test "${native[@]}" --no-run || build_failed=1
fi
stamp "the build"
if ! wait "$tools"; then
    echo "test.sh: installing the test tools failed (see above); nothing was tested" >&2
    exit 1
fi
mv "$tools_env.partial" "$tools_env"
stamp "the tool installs"
eval "$(cat "$tools_env")"
# The example plugins build while the tests run, in what CPU the tests leave idle while they
# wait on agents and servers, rather than after them.
# The four-language examples are built and tested by cli/tests/languages.rs. No test reads
# the components this writes into example-plugins/.
examples_log="$root/target/build-examples.log"
scripts/build-examples.sh --no-languages >"$examples_log" 2>&1 &
examples=$!
# The proxies' fuzz oracle (cli/fuzz, a workspace of its own that compiles the CLI's strict
# reader from its file): its tests run on the stable toolchain, and keep that file building
# there; alongside the tests, as the examples are built. The fuzz targets themselves need
# nightly (docs/bridges.md).
fuzz_log="$root/target/fuzz-oracle.log"
fuzz=""
if [ $# -eq 0 ]; then
    (cd cli/fuzz && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}/fuzz" \
        cargo test --lib --no-fail-fast) >"$fuzz_log" 2>&1 &
    fuzz=$!
fi
tests_failed=0
# Four tests at a time: the CLI's mostly wait on other processes (agents, servers, proxies,
# toolchains), so four keep the two cores busy. One `cargo test` over the workspace: run per
# package, its features would be unified apart and the dependencies built again
# (docs/performance.md, "The test suite's wall time").
RUST_TEST_THREADS="${RUST_TEST_THREADS:-4}" cargo test "${native[@]}" --no-fail-fast "$@" 2>&1 |
    tee "$log" || tests_failed=1
if [ -n "$fuzz" ]; then
    wait "$fuzz" || tests_failed=1
    tee -a "$log" <"$fuzz_log"
fi
stamp "the tests"
if ! wait "$examples"; then
    cat "$examples_log" >&2
    echo "test.sh: building the example plugins failed (see above)" >&2
    exit 1
fi
cat "$examples_log" >&2
# Through the tests' component cache: url-guard's functions are mostly those of the Python
# plugins the tests compiled.
export PALISADE_CACHE_DIR="${CARGO_TARGET_DIR:-$root/target}/tmp/languages-cache"
# The binary the tests just built: `cargo run` would unify features differently and rebuild
# wasmtime for nothing.
"${CARGO_TARGET_DIR:-$root/target}/debug/palisade" check example-plugins
"${CARGO_TARGET_DIR:-$root/target}/debug/palisade" test example-plugins example-plugins/cases.jsonl
stamp "everything"
passed=$(grep -oE 'test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{n += $4} END {print n + 0}')
failed=$(grep -oE '[0-9]+ failed;' "$log" | awk '{n += $1} END {print n + 0}')
if [ "$build_failed" -ne 0 ]; then
    echo "test.sh: a test binary did not build (see above)" >&2
    failed=$((failed + 1))
fi
if [ "$tests_failed" -ne 0 ] && [ "$failed" -eq 0 ]; then
    echo "test.sh: cargo test failed (see above)" >&2
    failed=1
fi
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
