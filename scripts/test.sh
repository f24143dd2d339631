#!/usr/bin/env bash
# The whole test suite, real models included. Installs first if needed (see install.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec "${HAMMER_VENV:-.venv}/bin/python" -m pytest "$@"
