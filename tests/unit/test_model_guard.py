"""tests/model_guard.py: a test without a model marker that runs a model fails, naming the marker to add.

These tests have no marker, so the guard is on while they run: each starts a model the way a mislabelled test
would, and expects the guard's failure (``pytest.fail``'s exception) instead of a loaded model."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from model_guard import GUARD_MODEL_PATH, model_in_command

REFUSED = pytest.fail.Exception


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A file of a real model's size (sparse: nothing written); the guard refuses before anything reads it."""
    path = tmp_path / "model.gguf"
    with path.open("wb") as out:
        out.truncate(32 << 20)
    return path


def test_llama_cpp_weights_are_refused(model: Path) -> None:
    import llama_cpp

    with pytest.raises(REFUSED, match=r"runs a model \(llama_cpp.Llama\('.*model.gguf'\)\).*@pytest.mark.real_model"):
        llama_cpp.Llama(model_path=str(model))


def test_the_vocabulary_alone_is_allowed(qwen_lltokenizer: object) -> None:
    assert qwen_lltokenizer is not None  # llama_cpp.Llama(vocab_only=True): the tokenizer, no weights


def test_a_transformers_load_is_refused() -> None:
    from hammer_plugins.backends.transformers import TransformersBackend

    with pytest.raises(REFUSED, match=r"TransformersBackend.load\(\)"):
        TransformersBackend(model="nobody/no-such-model").load()


def test_a_process_given_a_real_model_file_is_refused(model: Path, tmp_path: Path) -> None:
    with pytest.raises(REFUSED, match="a child process given .*model.gguf: llama-server"):
        subprocess.run(["llama-server", "-m", str(model)], check=False)
    with pytest.raises(REFUSED, match="vLLM"):
        subprocess.run([sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tmp_path)], check=False)
    assert model_in_command(["llama-server", "-m", str(tmp_path / "stand-in.gguf")]) is None  # a stand-in server's


def test_a_hammer_process_left_to_the_default_model_stops_naming_the_marker() -> None:
    done = subprocess.run([sys.executable, "-m", "hammer_plugins.cli", "call", "hi"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and GUARD_MODEL_PATH in done.stderr and "does not exist" in done.stderr, done.stderr
