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

# The real agents the bridge tests drive offline (tests/agents.rs in host/): Claude Code and
# Codex, from npm, pinned.
CLAUDE_CODE_VERSION=2.1.332
CODEX_VERSION=0.171.0
agents="$tools/agents"
installed() { node -e "process.stdout.write(require('$agents/node_modules/$1/package.json').version)" 2>/dev/null; }
if [ "$(installed @anthropic-ai/claude-code)" != "$CLAUDE_CODE_VERSION" ] || [ "$(installed @openai/codex)" != "$CODEX_VERSION" ]; then
    echo "installing Claude Code $CLAUDE_CODE_VERSION and Codex $CODEX_VERSION into $agents" >&2
    mkdir -p "$agents"
    [ -f "$agents/package.json" ] || echo '{"private": true}' > "$agents/package.json"
    npm install --prefix "$agents" --no-audit --no-fund --loglevel=error \
        "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION" >&2
fi
echo "export PALISADE_CLAUDE=$agents/node_modules/.bin/claude"
echo "export PALISADE_CODEX=$agents/node_modules/.bin/codex"
