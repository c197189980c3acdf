#!/usr/bin/env bash
# The test command of README.md: installs what the tests need (into target/), runs the whole
# test suite, then builds the example plugins and checks them with the CLI. Ends with one
# summary line: `tests: N passed, N failed`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
eval "$(scripts/tools.sh)"
mkdir -p target
log="$root/target/test-output.log"
cargo test --workspace --no-fail-fast "$@" 2>&1 | tee "$log"
# The four-language examples are built and tested by cli/tests/languages.rs.
scripts/build-examples.sh --no-languages
# The binary the tests just built: `cargo run` would unify features differently and rebuild
# wasmtime for nothing.
"${CARGO_TARGET_DIR:-$root/target}/debug/palisade" check example-plugins
"${CARGO_TARGET_DIR:-$root/target}/debug/palisade" test example-plugins example-plugins/cases.jsonl
passed=$(grep -oE 'test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{n += $4} END {print n + 0}')
failed=$(grep -oE '[0-9]+ failed;' "$log" | awk '{n += $1} END {print n + 0}')
echo "tests: $passed passed, $failed failed"
