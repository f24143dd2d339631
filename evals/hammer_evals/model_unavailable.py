"""A model that cannot run at all, told apart from a model that answered wrong.

A benchmark records a failed answer and goes on to the next question. When the model cannot run
(its backend is not installed, its file is missing, its server is down), every question would fail
the same way and still be scored as if it had been asked: irrelevance questions "correct" (no
call was made), the rest wrong, exit status 0. These errors end the run instead, with the fix.

Example:
    >>> error = unavailable("ChatHammer", ImportError("No module named 'llama_cpp'"), "pip install x")
    >>> str(error).endswith("Fix: pip install x")
    True
"""

from __future__ import annotations

from hammer_plugins.values.errors import (
    HammerError,
    InvalidModelFileError,
    ModelChecksumError,
    ModelNotFoundError,
    ServerAuthenticationError,
    ServerModelNotFoundError,
    ServerUnavailableError,
)

CANNOT_RUN: tuple[type[BaseException], ...] = (
    ImportError,  # the backend or a package the harness imports (BackendNotInstalledError is one)
    ModelNotFoundError, InvalidModelFileError, ModelChecksumError,
    ServerUnavailableError, ServerAuthenticationError, ServerModelNotFoundError,
)
"""Errors after which no question can be answered: the run stops rather than scoring them."""

BENCH_FIX = "pip install 'hammer-evals[bench]'"
"""What ``hammer bench`` needs beyond the engine (llama-cpp-python comes with it)."""


class ModelUnavailableError(HammerError):
    """The model cannot run, so the benchmark stopped without scoring the questions it could not ask."""


def unavailable(runner: str, error: BaseException, fix: str) -> ModelUnavailableError:
    """The error that ends a run: which runner, why, and the fix (the cause's own, else ``fix``)."""
    text = f"{type(error).__name__}: {error}"
    if "Fix:" not in text:
        text += f". Fix: {fix}"
    return ModelUnavailableError(f"{runner} cannot run the model, so the run stopped and scored no question "
                                 f"it could not ask. {text}")


__all__ = ["BENCH_FIX", "CANNOT_RUN", "ModelUnavailableError", "unavailable"]
