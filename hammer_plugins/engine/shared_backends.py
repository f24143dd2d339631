"""The backend an engine's settings name, created once per configuration and shared in the process.

Many engines (every ``ChatHammer`` a framework constructs, say) with the same model settings share
one loaded model; its lock serializes their calls. The engine asks here for its backend by a key of
its settings, so the process never loads the same model twice.

Example:
    >>> from hammer_plugins.engine.shared_backends import model_prompt_format
    >>> model_prompt_format("my-model.gguf", None, "llama_cpp")
    'hammer2.1'
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hammer_plugins.backends.base import BackendInterface
from hammer_plugins.models.presets import find_preset
from hammer_plugins.models.source import best_pulled_preset
from hammer_plugins.prompt.render import PromptFormat

_SHARED_BACKENDS: dict[tuple[Any, ...], BackendInterface] = {}
_SHARED_LOCK = threading.Lock()


def model_prompt_format(model_path: str | Path | None, model: str | None, backend: str | BackendInterface) -> PromptFormat:
    """The prompt layout of the model these settings name: a preset's (Hammer 2.0/1.0 differ), else 2.1."""
    if model_path is not None or not isinstance(backend, str) or backend == "server":
        return "hammer2.1"
    preset = find_preset(model) if model else best_pulled_preset() if backend != "transformers" else None
    return preset.prompt_format if preset else "hammer2.1"  # type: ignore[return-value]


def shared_key(backend_name: str, model_path: str | Path | None, model: str | None,
               options: Mapping[str, Any]) -> tuple[Any, ...]:
    """The key one loaded model is shared under: the backend, the model and every backend option."""
    return (backend_name, str(model_path or ""), str(model or ""), tuple(sorted((k, repr(v)) for k, v in options.items())))


def shared_backend(key: tuple[Any, ...], create: Callable[[], BackendInterface]) -> BackendInterface:
    """The process's backend for ``key``, created by ``create`` the first time."""
    with _SHARED_LOCK:
        backend = _SHARED_BACKENDS.get(key)
        if backend is None:
            backend = create()
            _SHARED_BACKENDS[key] = backend
    return backend


def loaded(key: tuple[Any, ...]) -> bool:
    """Whether the backend shared under ``key`` exists and has its model in memory (never loads anything)."""
    with _SHARED_LOCK:
        shared = _SHARED_BACKENDS.get(key)
    return shared is not None and shared.is_loaded
