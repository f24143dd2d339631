"""Fail a test that runs a model without a marker that says so (real_model, transformers_model, vllm).

``-m "not real_model and not transformers_model and not vllm"`` (``bash scripts/test.sh --fast``) must
run no model; a marker that lies turns the fast loop into a slow one, and a parallel one into two llama.cpp
processes thrashing 2 cores. tests/conftest.py installs these checks once per session; they act only while
an unmarked test runs (its fixtures included), and fail it with ``pytest.fail`` (a BaseException, so no
``except Exception`` in the code under test swallows it). What counts as running a model:

- in this process: ``llama_cpp.Llama`` on a real model file (``vocab_only=True`` reads only the tokenizer, and
  a damaged file of a few bytes only tests an error message: both allowed), or ``TransformersBackend.load``;
- a child process given a real model (a ``.gguf`` of 16 MiB or more on its command line: llama-server,
  llama-cpp-python's server, ``hammer --model-path``), or vLLM (``vllm`` on its command line);
- a ``hammer`` child left to find the default model by itself: it gets ``$HAMMER_MODEL_PATH`` pointing at a
  file that does not exist, whose name says why, so it stops with a ModelNotFoundError naming this guard.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

MODEL_MARKERS = ("real_model", "transformers_model", "vllm")
MIN_MODEL_BYTES = 16 << 20  # stand-in GGUFs here: a few bytes to 4 MB (a truncated real one); the smallest real model: 98 MB
GUARD_MODEL_PATH = "/nonexistent/hammer-tests/this-test-runs-a-model-so-mark-it-pytest.mark.real_model.gguf"

_current: str | None = None  # the node id of the unmarked test now running, else None


def runs_models(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(name) for name in MODEL_MARKERS)


def _refuse(what: str) -> None:
    pytest.fail(f"{_current} runs a model ({what}) but has none of the markers {', '.join(MODEL_MARKERS)}. "
                "Fix: mark it @pytest.mark.real_model (or transformers_model / vllm), or make it run no model: "
                "tests without those markers run in `bash scripts/test.sh --fast`, in parallel.", pytrace=False)


def _argv(args: Any) -> list[str]:
    if isinstance(args, (str, bytes, os.PathLike)):
        return [os.fsdecode(args)]
    return [os.fsdecode(a) if isinstance(a, (bytes, os.PathLike)) else str(a) for a in args]


def _is_model_file(arg: str) -> bool:
    for candidate in (arg, arg.partition("=")[2]):  # --model=/x.gguf as well as --model /x.gguf
        if candidate.endswith(".gguf"):
            try:
                return Path(candidate).stat().st_size >= MIN_MODEL_BYTES
            except OSError:
                return False
    return False


def _is_hammer(argv: Sequence[str]) -> bool:
    return any(a in ("hammer_plugins.cli", "hammer_plugins.cli.main") or Path(a).name == "hammer" for a in argv[:4])


def model_in_command(argv: Sequence[str]) -> str | None:
    """What in ``argv`` runs a model, else None.

    Example:
        >>> model_in_command(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"])
        'vLLM: python -m vllm.entrypoints.openai.api_server'
        >>> model_in_command(["/tmp/llama-server", "-m", "/tmp/model.gguf"]) is None  # a stand-in's tiny file
        True
    """
    if any(a == "vllm" or a.startswith("vllm.") or Path(a).name == "vllm" for a in argv[:4]):
        return "vLLM: " + " ".join(argv[:3])
    model = next((a for a in argv if _is_model_file(a)), None)
    if model is not None:
        return f"a child process given {model}: {Path(argv[0]).name}"
    return None


def install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wrap the places a model starts; they check :data:`_current` on each call."""
    original_popen = subprocess.Popen.__init__

    @functools.wraps(original_popen)
    def popen(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        if _current is not None:
            argv = _argv(args)
            what = model_in_command(argv)
            if what is not None:
                _refuse(what)
            env = os.environ if kwargs.get("env") is None else kwargs["env"]
            if _is_hammer(argv) and not {"HAMMER_MODEL_PATH", "HAMMER_MODEL"} & set(env):
                kwargs["env"] = {**env, "HAMMER_MODEL_PATH": GUARD_MODEL_PATH}
        original_popen(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)

    import llama_cpp

    # In __new__, before an object exists: a refused half-built Llama would fail again in its __del__.
    def llama(cls: type, *args: Any, **kwargs: Any) -> Any:
        path = str(kwargs.get("model_path", args[0] if args else ""))
        if _current is not None and not kwargs.get("vocab_only") and _is_model_file(path):
            _refuse(f"llama_cpp.Llama({path!r})")
        return object.__new__(cls)

    monkeypatch.setattr(llama_cpp.Llama, "__new__", staticmethod(llama))

    from hammer_plugins.backends.transformers import TransformersBackend

    original_load: Callable[[Any], None] = TransformersBackend.load

    @functools.wraps(original_load)
    def load(self: Any) -> None:
        if _current is not None and not self.is_loaded:
            _refuse("TransformersBackend.load()")
        original_load(self)

    monkeypatch.setattr(TransformersBackend, "load", load)


def guarding(item: pytest.Item) -> Callable[[], None]:
    """Start guarding ``item`` if it is unmarked; returns the function that stops."""
    global _current
    _current = None if runs_models(item) else item.nodeid

    def stop() -> None:
        global _current
        _current = None

    return stop
