#!/usr/bin/env bash
# Install the agent CLIs the Responses and Messages tests drive (tests/openai_server/test_agent_clis_real.py):
# Codex CLI (speaks only the Responses API) and Claude Code (the Messages API), pinned, from npm, into
# ~/.cache/hammer-plugins/npm (or $HAMMER_CACHE_DIR/npm). About 30 s and 800 MB the first time; a second run
# with the same pins returns at once. Needs node and npm (Debian: apt-get install nodejs npm).
set -euo pipefail
CODEX="@openai/codex@0.171.0"
CLAUDE="@anthropic-ai/claude-code@2.1.332"
prefix="${HAMMER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hammer-plugins}/npm"
stamp="$prefix/.installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$CODEX $CLAUDE" ] && [ -x "$prefix/node_modules/.bin/codex" ] \
    && [ -x "$prefix/node_modules/.bin/claude" ]; then
  exit 0
fi
if ! command -v npm >/dev/null; then
  echo "install_agent_clis: npm is missing; the Codex CLI and Claude Code tests need it. Fix: apt-get install nodejs npm" >&2
  exit 1
fi
mkdir -p "$prefix"
npm install --no-audit --no-fund --loglevel=error --prefix "$prefix" "$CODEX" "$CLAUDE" >&2
echo "$CODEX $CLAUDE" > "$stamp"
