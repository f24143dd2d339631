"""Run Hammer on a model served elsewhere, over HTTP: an OpenAI-compatible inference server such as vLLM,
llama.cpp's ``llama-server``, or llama-cpp-python's ``python -m llama_cpp.server`` (``backend="server"``).
Starting such a server as a child process is :mod:`hammer_plugins.launch`'s job.

One module per job:

* ``backend``: :class:`OpenAICompatibleBackend` and its completions;
* ``facts``: what was learned about the server (model, kind, context window, grammar protocol), owned by
  the backend and shared with the components it holds:
* ``discovery``: the one-off check of the server (model, kind, window);
* ``token_counting``: token counts from the server's tokenizer, cached;
* ``grammar_probe``: which field the server reads a grammar from, checked once;
* ``connection``: pools, retries, the sync and async drivers;
* ``dialects``: what differs between kinds of server, one class each;
* ``sansio``: the requests an operation yields to its driver;
* ``wire``: event streams, error bodies and completion chunks as they come back;
* ``loop_cut``: the loop guard on a streamed answer (the server decodes the grammar itself);
* ``settings``: :class:`ServerBackendSettings`, :class:`ServerStats`.

Example:
    >>> from hammer_plugins.backends.remote import OpenAICompatibleBackend
    >>> backend = OpenAICompatibleBackend("http://127.0.0.1:8080/v1", model="hammer")  # nothing contacted yet
    >>> backend.base_url, backend.server_kind
    ('http://127.0.0.1:8080', 'auto')
"""

from hammer_plugins.backends.remote.backend import OpenAICompatibleBackend
from hammer_plugins.backends.remote.dialects import ServerDialect, dialect_for
from hammer_plugins.backends.remote.settings import (
    ASSUMED_CONTEXT_WINDOW,
    DEFAULT_STOP,
    GrammarProtocol,
    ServerBackendSettings,
    ServerKind,
    ServerStats,
    TokenCounting,
)
from hammer_plugins.backends.remote.wire import estimate_tokens

__all__ = [
    "ASSUMED_CONTEXT_WINDOW", "DEFAULT_STOP", "GrammarProtocol", "OpenAICompatibleBackend",
    "ServerBackendSettings", "ServerDialect", "ServerKind", "ServerStats", "TokenCounting", "dialect_for",
    "estimate_tokens",
]
