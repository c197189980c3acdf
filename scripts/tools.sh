#!/usr/bin/env bash
# Installs the non-Rust tools the tests need into the build tree (target/tools), so a fresh
# machine with only rustup, python3/pip and node/npm can run everything. Idempotent.
# Prints the environment variables to export.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tools="$root/target/tools"
mkdir -p "$tools"

COMPONENTIZE_PY_VERSION=0.25.1
venv="$tools/venv"
if ! "$venv/bin/componentize-py" --version 2>/dev/null | grep -q "$COMPONENTIZE_PY_VERSION"; then
    echo "installing componentize-py $COMPONENTIZE_PY_VERSION into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "componentize-py==$COMPONENTIZE_PY_VERSION"
fi
echo "export PALISADE_COMPONENTIZE_PY=$venv/bin/componentize-py"
