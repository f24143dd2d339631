#!/usr/bin/env bash
# Debian's headless Chromium for the playground's browser tests (tests/openai_server/test_playground_browser_real.py):
# Playwright's Python API drives it at /usr/bin/chromium (Playwright's own browser download cannot reach its
# host from every machine). A second run returns at once. Needs root (or sudo) and apt-get.
set -euo pipefail
[ -x /usr/bin/chromium ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_browser: no apt-get here; install Chromium at /usr/bin/chromium for the browser tests" >&2
  exit 1
fi
sudo=()
[ "$(id -u)" = 0 ] || sudo=(sudo)
started=$(date +%s)
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
echo "install_browser: chromium installed in $(( $(date +%s) - started ))s" >&2
