#!/usr/bin/env bash
# The test suite. Installs first if needed (see install.sh).
#
#   bash scripts/test.sh           the whole suite, real models included (the README's command; CI runs it)
#   bash scripts/test.sh --fast    only the tests that run no model and need no network: the developer loop
#   bash scripts/test.sh ARGS...   ARGS go to pytest (files, -k, -x, --durations=0, ...)
#
# The whole suite runs in two phases: the tests that run no model in parallel on 2 pytest-xdist workers,
# then the model tests (markers real_model, transformers_model, vllm), after building llama.cpp's C++
# llama-server once (cached; see build_llama_server.sh), on 2 workers each confined to its share of the CPUs
# (two llama.cpp processes unconfined on 2 cores thrash; confined, each decodes on its own core).
# Codex CLI and Claude Code come from npm for the agent-client tests (cached; see install_agent_clis.sh), and
# Debian's Chromium for the playground's browser tests (install_browser.sh).
# ARGS that choose markers themselves (-m) run as one serial pytest instead. The exit status is the first
# failing phase's; a phase that selects no test (pytest's 5) fails nothing, unless no phase ran a test.
set -euo pipefail
cd "$(dirname "$0")/.."
NO_MODEL="not real_model and not transformers_model and not vllm"
MODEL="real_model or transformers_model or vllm"
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
# (apt-get; once) before a run with the model phase. HAMMER_SKIP_TOOL_INSTALLS=1 leaves them alone: the tests of
# this script (tests/unit/test_test_script.py, in the no-model phase) set it, since that phase needs no network.
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

run_phase() {  # run_phase NAME PYTEST-ARGS...: prints nothing itself; returns pytest's status
  local name="$1"
  shift
  echo "test.sh: phase '$name': pytest $*" >&2
  set +e
  "${pytest[@]}" "$@"
  local code=$?
  set -e
  return "$code"
}

codes=()
# --fast needs no network: the tests that install from the package index (marker index) wait for the whole run.
first="$NO_MODEL"
[ "$fast" = 1 ] && first="$NO_MODEL and not index"
run_phase "no model, $WORKERS workers" -n "$WORKERS" -m "$first" "${args[@]+"${args[@]}"}" && codes+=(0) || codes+=($?)
if [ "$fast" = 0 ]; then
  interrupted=0
  case "${codes[0]}" in 2|3|4) interrupted=1 ;; esac
  for arg in "${args[@]+"${args[@]}"}"; do
    case "$arg" in -x|--exitfirst) [ "${codes[0]}" = 1 ] && interrupted=1 ;; esac
  done
  if [ "$interrupted" = 0 ]; then
    bash scripts/build_llama_server.sh >/dev/null
    # Each worker, and every model and server it starts, gets a share of the CPUs (tests/conftest.py), so the models
    # decode with one thread per CPU of their own instead of two workers' threads spinning on the same cores; a
    # module runs whole on one worker (its fixtures start once), the slowest modules first.
    export HAMMER_TEST_PIN_WORKERS=1
    run_phase "models, $WORKERS workers, CPUs shared out" -n "$WORKERS" --dist loadfile --no-loadscope-reorder \
      -m "$MODEL" "${args[@]+"${args[@]}"}" && codes+=(0) || codes+=($?)
  fi
fi

status=0
ran=0
for code in "${codes[@]}"; do
  case "$code" in
    0) ran=1 ;;
    5) ;;  # that phase selected no test: nothing failed
    *) [ "$status" = 0 ] && status="$code" ;;
  esac
done
if [ "$status" = 0 ] && [ "$ran" = 0 ]; then
  status=5  # no phase ran a test, as pytest says for one run
fi
echo "test.sh: phase exit codes ${codes[*]} -> $status" >&2
exit "$status"
