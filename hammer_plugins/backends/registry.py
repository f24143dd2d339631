"""The backends a name selects: ``backend="llama_cpp"`` and the others, each with its description, the
engine settings it reads and its factory. The settings (:class:`~hammer_plugins.engine.fields.EngineFields`),
the ``hammer`` command's ``--backend`` and :class:`~hammer_plugins.HammerEngine` all read this table, so a
new backend is one entry here.

Nothing heavy is imported here: a factory imports its backend (llama-cpp-python, torch) when it is called.

Example:
    >>> backend_names()
    ('llama_cpp', 'transformers', 'server')
    >>> find_backend("llama.cpp").name, "base_url" in find_backend("server").options
    ('llama_cpp', True)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hammer_plugins.backends.base import BackendInterface

LOCAL_OPTIONS = ("n_ctx", "n_threads", "n_gpu_layers", "device", "dtype", "prefix_cache", "cache_ram")
"""The in-process backends' settings that :class:`~hammer_plugins.HammerEngine` names as its own keywords; its
other keyword arguments reach the backend's constructor as they are."""

SERVER_OPTIONS = ("base_url", "api_key", "timeout", "max_retries")
"""The settings that only an inference server (``backend="server"``) reads."""

BackendFactory = Callable[[str | Path | None, str | None, Mapping[str, Any]], "BackendInterface"]
"""``(model_path, model, options)`` -> a new backend; ``options``: the engine's :data:`LOCAL_OPTIONS` and
anything else it was given for the backend."""


@dataclass(frozen=True)
class BackendEntry:
    """One backend a name selects.

    Example:
        >>> find_backend("transformers").description
        'a Hugging Face checkpoint, in this process'
    """

    name: str
    description: str
    """One line for ``--help`` and error messages."""
    create: BackendFactory
    options: tuple[str, ...]
    """The engine settings it reads (besides ``model_path`` and ``model``)."""
    aliases: tuple[str, ...] = ()
    """Other spellings the engine accepts for it."""


def _extra(options: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k not in LOCAL_OPTIONS}


def _llama_cpp(model_path: str | Path | None, model: str | None, options: Mapping[str, Any]) -> BackendInterface:
    from hammer_plugins.backends.llama_cpp import LlamaCppBackend

    return LlamaCppBackend(model_path, model=model, n_ctx=options["n_ctx"], n_threads=options["n_threads"],
                           n_gpu_layers=options["n_gpu_layers"], prefix_cache=options["prefix_cache"] or None,
                           cache_ram=options["cache_ram"],
                           **_extra(options))


def _transformers(model_path: str | Path | None, model: str | None, options: Mapping[str, Any]) -> BackendInterface:
    from hammer_plugins.backends.transformers import TransformersBackend

    return TransformersBackend(model=model, model_path=model_path, device=options["device"], dtype=options["dtype"],
                               n_ctx=options["n_ctx"], **_extra(options))


def _server(model_path: str | Path | None, model: str | None, options: Mapping[str, Any]) -> BackendInterface:
    from hammer_plugins.backends.remote import OpenAICompatibleBackend

    # n_ctx & co. configure in-process backends; a server reports its own context window.
    return OpenAICompatibleBackend(model=model, **_extra(options))


BACKENDS: Mapping[str, BackendEntry] = MappingProxyType({entry.name: entry for entry in (
    BackendEntry("llama_cpp", "a GGUF model on llama.cpp, in this process (the default)", _llama_cpp,
                 ("n_ctx", "n_threads", "n_gpu_layers", "prefix_cache", "cache_ram"), aliases=("llama.cpp",)),
    BackendEntry("transformers", "a Hugging Face checkpoint, in this process", _transformers,
                 ("n_ctx", "device", "dtype")),
    BackendEntry("server", "an OpenAI-compatible inference server over HTTP (llama-server, vLLM; docs/server.md)",
                 _server, SERVER_OPTIONS),
)})
"""Every backend a name selects, by name, the default first."""

BACKEND_NAMES: tuple[str, ...] = tuple(BACKENDS)
"""The names :class:`~hammer_plugins.engine.fields.EngineFields` and ``--backend`` accept (the engine takes
the aliases too)."""


def backend_names() -> tuple[str, ...]:
    """The backends' names, the default first."""
    return BACKEND_NAMES


def find_backend(name: str) -> BackendEntry:
    """The entry of ``name`` (or of one of its aliases); ``ValueError`` naming every backend for another name.

    Example:
        >>> find_backend("vllm")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: unknown backend 'vllm'. Fix: use one of 'llama_cpp', 'transformers', 'server', or pass a ...
    """
    entry = BACKENDS.get(name) or next((e for e in BACKENDS.values() if name in e.aliases), None)
    if entry is None:
        names = ", ".join(repr(n) for n in BACKEND_NAMES)
        raise ValueError(f"unknown backend {name!r}. Fix: use one of {names}, or pass a backend object "
                         "(a hammer_plugins.Backend instance)")
    return entry


def describe_backends() -> str:
    """Every backend's name and description on one line, for ``--help``.

    Example:
        >>> describe_backends().split("; ")[1]
        'transformers: a Hugging Face checkpoint, in this process'
    """
    return "; ".join(f"{entry.name}: {entry.description}" for entry in BACKENDS.values())


def create_backend(name: str, model_path: str | Path | None, model: str | None,
                   options: Mapping[str, Any]) -> BackendInterface:
    """A new backend of ``name`` for this model, with the engine's backend options."""
    return find_backend(name).create(model_path, model, options)
