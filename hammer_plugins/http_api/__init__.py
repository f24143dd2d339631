"""Hammer for OpenAI, Anthropic and Ollama clients: the API server over :class:`~hammer_plugins.HammerEngine`.

``hammer serve --openai`` serves four APIs over one engine, each in its own folder: OpenAI Chat
Completions (``POST /v1/chat/completions``: tools, ``tool_choice``, streaming, usage, ``response_format``),
OpenAI Responses (``POST /v1/responses``), Anthropic Messages (``POST /v1/messages`` and
``/v1/messages/count_tokens``) and Ollama's API (``/api/chat``, ``/api/generate`` and its model routes);
besides them ``GET /v1/models``, ``GET /health`` and the playground page at ``/``. The model runs in
process or behind the server backend (llama-server, vLLM): Hammer's own prompt, constrained decoding
and refusal handling, whatever the client. See docs/server.md.

Importing this package is free; FastAPI, uvicorn and the ``openai`` types load with the names below
(the ``openai-server`` extra).

Example:
    >>> import hammer_plugins.http_api as server
    >>> callable(server.create_app)
    True

Layer 4: a door.
"""

from __future__ import annotations

from typing import Any

_NAMES = {
    "create_app": "app", "ServerSettings": "context", "DEFAULT_MAX_BODY_BYTES": "app", "REFUSAL_HEADER": "framing",
    "BackgroundServer": "runner", "serve_openai": "runner",
    "APIError": "errors", "parse_request": "chat_completions.request", "completion": "chat_completions.writer",
    "ChunkWriter": "chat_completions.writer",
    "EngineWorker": "worker",
}


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'hammer_plugins.http_api' has no attribute {name!r}")
    import importlib

    try:
        loaded = importlib.import_module(f"{__name__}.{module}")
    except ImportError as exc:
        from hammer_plugins.values.errors import BackendNotInstalledError

        raise BackendNotInstalledError(
            f"the OpenAI-compatible server needs {exc.name!r}. Fix: pip install 'hammer-plugins[openai-server]'"
        ) from exc
    return getattr(loaded, name)


__all__ = sorted(_NAMES)
