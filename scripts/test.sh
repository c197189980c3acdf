#!/usr/bin/env bash
# The test command of README.md: installs what the tests need (into target/), runs the whole
# test suite, then checks the example plugins with the CLI.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
eval "$(scripts/tools.sh)"
cargo test --workspace "$@"
scripts/build-examples.sh
cargo run --quiet -p palisade -- check example-plugins
