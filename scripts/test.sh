#!/usr/bin/env bash
# The whole test suite, real models included. Installs first if needed (see install.sh), then builds
# llama.cpp's C++ llama-server once for the server tests (cached; see build_llama_server.sh), and installs
# Codex CLI and Claude Code from npm for the agent-client tests (cached; see install_agent_clis.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
bash scripts/build_llama_server.sh >/dev/null
bash scripts/install_agent_clis.sh
exec "${HAMMER_VENV:-.venv}/bin/python" -m pytest "$@"
