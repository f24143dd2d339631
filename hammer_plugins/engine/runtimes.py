"""Which runtime an engine's settings name, created once per configuration and shared in the process.

Many engines (every ``ChatHammer`` a framework constructs, say) with the same model settings share
one loaded model; its lock serializes their calls. The engine asks here for its backend by a key of
its settings, so the process never loads the same model twice.

Example:
    >>> from hammer_plugins.engine.runtimes import model_prompt_format
    >>> model_prompt_format("my-model.gguf", None, "llama_cpp")
    'hammer2.1'
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hammer_plugins.backends.base import Runtime
from hammer_plugins.models.presets import find_preset
from hammer_plugins.models.source import best_pulled_preset
from hammer_plugins.prompt.render import PromptFormat

BACKEND_NAMES = ("llama_cpp", "llama.cpp", "transformers", "server")

# The runtime options HammerEngine names itself; the rest of its keyword arguments go to the backend.
RUNTIME_OPTIONS = ("n_ctx", "n_threads", "n_gpu_layers", "device", "dtype", "prefix_cache")

_SHARED_BACKENDS: dict[tuple[Any, ...], Runtime] = {}
_SHARED_LOCK = threading.Lock()


def model_prompt_format(model_path: str | Path | None, model: str | None, backend: str | Runtime) -> PromptFormat:
    """The prompt layout of the model these settings name: a preset's (Hammer 2.0/1.0 differ), else 2.1."""
    if model_path is not None or not isinstance(backend, str) or backend == "server":
        return "hammer2.1"
    preset = find_preset(model) if model else best_pulled_preset() if backend != "transformers" else None
    return preset.prompt_format if preset else "hammer2.1"  # type: ignore[return-value]


def shared_key(backend_name: str, model_path: str | Path | None, model: str | None,
               options: Mapping[str, Any]) -> tuple[Any, ...]:
    """The key one loaded model is shared under: the backend, the model and every runtime option."""
    return (backend_name, str(model_path or ""), str(model or ""), tuple(sorted((k, repr(v)) for k, v in options.items())))


def shared_backend(key: tuple[Any, ...], create: Callable[[], Runtime]) -> Runtime:
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


def new_backend(backend_name: str, model_path: str | Path | None, model: str | None, opts: Mapping[str, Any]) -> Runtime:
    """A new backend of ``backend_name`` for this model, with the engine's runtime options ``opts``."""
    extra = {k: v for k, v in opts.items() if k not in RUNTIME_OPTIONS}
    if backend_name == "server":
        from hammer_plugins.backends.remote import OpenAICompatibleBackend

        # n_ctx & co. configure in-process runtimes; a server reports its own context window.
        return OpenAICompatibleBackend(model=model, **extra)
    if backend_name == "transformers":
        from hammer_plugins.backends.transformers import TransformersBackend

        return TransformersBackend(model=model, model_path=model_path, device=opts["device"], dtype=opts["dtype"],
                                   n_ctx=opts["n_ctx"], **extra)
    from hammer_plugins.backends.llama_cpp import LlamaCppBackend

    return LlamaCppBackend(model_path, model=model, n_ctx=opts["n_ctx"], n_threads=opts["n_threads"],
                           n_gpu_layers=opts["n_gpu_layers"], prefix_cache=opts["prefix_cache"] or None, **extra)
