"""What the server is: the model it serves, its kind and context window, learned once.

Example:
    >>> from hammer_plugins.backends.remote import OpenAICompatibleBackend
    >>> backend = OpenAICompatibleBackend("http://127.0.0.1:8080", model="hammer")
    >>> backend.discovery.facts is backend.facts
    True
"""

from __future__ import annotations

import asyncio
from typing import Any

from hammer_plugins.backends.remote.connection import ServerConnection
from hammer_plugins.backends.remote.dialects import dialect_for
from hammer_plugins.backends.remote.facts import ServerFacts
from hammer_plugins.backends.remote.sansio import _Core
from hammer_plugins.backends.remote.settings import ServerBackendSettings, ServerKind
from hammer_plugins.values.errors import ServerModelNotFoundError


class ServerDiscovery:
    """The discovery job of :class:`~hammer_plugins.backends.remote.OpenAICompatibleBackend` (its ``discovery``):
    checks the model name against ``/v1/models`` and learns the server's kind, context window and tokenize path
    into the backend's :class:`~.facts.ServerFacts`, once, under their lock.

    Example:
        >>> from hammer_plugins.backends.remote import OpenAICompatibleBackend
        >>> backend = OpenAICompatibleBackend("http://127.0.0.1:8080", model="hammer")
        >>> backend.discovery.facts.loaded       # nothing contacted yet
        False
    """

    def __init__(self, settings: ServerBackendSettings, facts: ServerFacts, connection: ServerConnection) -> None:
        self.settings = settings
        self.facts = facts
        self.connection = connection

    def load(self) -> None:
        """Check the server once: the model it serves, its kind and context window."""
        if self.facts.loaded:
            return
        with self.facts.lock:
            if not self.facts.loaded:
                self.connection.call(self._discover())
                self.facts.loaded = True

    async def aload(self) -> None:
        """Async :meth:`load` (a one-off handful of small requests, run in a worker thread)."""
        if not self.facts.loaded:
            await asyncio.to_thread(self.load)

    def _discover(self) -> _Core[None]:
        """The core of :meth:`load`."""
        facts, url = self.facts, self.settings.base_url
        status, payload = yield from self.connection.json("GET", "/v1/models", allow=(404, 405))
        entries = [e for e in payload.get("data", []) if isinstance(e, dict)] if isinstance(payload, dict) else []
        ids = [str(e.get("id")) for e in entries]
        wanted = self.settings.model
        if status != 200 or not entries:
            if wanted is None:
                raise ServerModelNotFoundError(
                    f"the server at {url} lists no models at /v1/models. Fix: pass model=<name>.",
                    url=url)
        elif wanted is None:
            if len(ids) != 1:
                raise ServerModelNotFoundError(
                    f"the server at {url} serves several models {ids}. Fix: pass model=<one of them>.",
                    url=url, available=ids)
            facts.model = ids[0]
        elif wanted not in ids:
            # llama-cpp-python silently answers an unknown name with its default model: check here.
            raise ServerModelNotFoundError(
                f"the server at {url} does not serve model {wanted!r}; it serves {ids}. Fix: pass "
                f"model={ids[0]!r}, or start the server under that name (vLLM: --served-model-name; "
                "llama-cpp-python: --model_alias; llama-server: --alias).",
                url=url, model=wanted, available=ids)
        entry = next((e for e in entries if e.get("id") == facts.model), {})
        props: dict[str, Any] | None = None
        if facts.dialect.kind == "auto":
            owner = entry.get("owned_by")
            if owner == "vllm":
                kind: ServerKind = "vllm"
            elif owner == "llamacpp":
                kind = "llama_server"
            else:
                props = yield from self._props()
                if props is not None:
                    kind = "llama_server"
                else:
                    count_status, _ = yield from self.connection.json(
                        "POST", "/extras/tokenize/count", {"input": "x"}, allow=(404, 405, 422))
                    kind = "llama_cpp_python" if count_status == 200 else "openai"
            facts.dialect = dialect_for(kind)
        if facts.window is None:
            if facts.dialect.needs_props and props is None:
                props = yield from self._props()
            window = facts.dialect.context_window(entry, props)
            if window is not None:
                facts.window, facts.window_source = window, "server"
        facts.tokenize_path = facts.dialect.tokenize_path

    def _props(self) -> _Core[dict[str, Any] | None]:
        status, payload = yield from self.connection.json("GET", "/props", allow=(404, 405))
        return payload if status == 200 and isinstance(payload, dict) else None
