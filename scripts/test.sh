#!/usr/bin/env bash
# The test suite. Installs first if needed (see install.sh).
#
#   bash scripts/test.sh           the whole suite, real models included (the README's command; CI runs it)
#   bash scripts/test.sh --fast    only the tests that run no model and need no network: the developer loop
#   bash scripts/test.sh ARGS...   ARGS go to pytest (files, -k, -x, --durations=0, ...)
#
# The whole suite is one pytest run on 2 pytest-xdist workers, after building llama.cpp's C++ llama-server once
# (cached; see build_llama_server.sh). Each worker is confined to its share of the CPUs with every model and
# server it starts (two llama.cpp processes unconfined on 2 cores thrash; confined, each decodes on its own core).
# Codex CLI and Claude Code come from npm for the agent-client tests (cached; see install_agent_clis.sh), and
# Debian's Chromium for the playground's browser tests (install_browser.sh).
# ARGS that choose markers themselves (-m) run as one serial pytest instead. The exit status is pytest's.
set -euo pipefail
cd "$(dirname "$0")/.."
NO_MODEL="not real_model and not transformers_model and not vllm"
WORKERS="${HAMMER_TEST_WORKERS:-2}"

fast=0
args=()
for arg in "$@"; do
  if [ "$arg" = "--fast" ]; then fast=1; else args+=("$arg"); fi
done
chooses_markers=0
for arg in "${args[@]+"${args[@]}"}"; do
  case "$arg" in -m|-m*) chooses_markers=1 ;; esac
done

bash scripts/install.sh
# The agent CLIs (npm; cached, about 30 s the first time) and Debian's Chromium for the playground's browser tests
# (apt-get; once) before the whole run. HAMMER_SKIP_TOOL_INSTALLS=1 leaves them alone: the tests of this script
# (tests/unit/test_test_script.py, which run no model) set it, since they need no network.
if [ "$fast" != 1 ] && [ "${HAMMER_SKIP_TOOL_INSTALLS:-0}" != 1 ]; then
  bash scripts/install_agent_clis.sh
  bash scripts/install_browser.sh
fi
pytest=("${HAMMER_VENV:-.venv}/bin/python" -m pytest)

if [ "$chooses_markers" = 1 ]; then
  [ "$fast" = 1 ] && { echo "test.sh: --fast chooses markers itself; drop -m or --fast" >&2; exit 4; }
  bash scripts/build_llama_server.sh >/dev/null
  exec "${pytest[@]}" "${args[@]}"
fi

if [ "$fast" = 1 ]; then
  # The developer loop: no model, and no network (the tests that install from the package index wait for the whole run).
  echo "test.sh: the tests that run no model, $WORKERS workers" >&2
  exec "${pytest[@]}" -n "$WORKERS" -m "$NO_MODEL and not index" "${args[@]+"${args[@]}"}"
fi

bash scripts/build_llama_server.sh >/dev/null
# One run of every test on $WORKERS workers. Each worker, and every model and server it starts, gets a share of the
# CPUs (tests/conftest.py), so the models decode with one thread per CPU of their own instead of two workers' threads
# spinning on the same cores. A module runs whole on one worker (its fixtures start once): the slowest model modules
# first, then the other model modules, then the tests that run no model, which fill both workers to the end.
export HAMMER_TEST_PIN_WORKERS=1
echo "test.sh: every test, $WORKERS workers, CPUs shared out" >&2
exec "${pytest[@]}" -n "$WORKERS" --dist loadfile --no-loadscope-reorder "${args[@]+"${args[@]}"}"
