"""What the server is: the model it serves, its kind and context window, learned once.

Example:
    >>> from hammer_plugins.backends.remote import OpenAICompatibleBackend
    >>> issubclass(OpenAICompatibleBackend, ServerDiscovery)
    True
"""

from __future__ import annotations

import asyncio
from typing import Any

from hammer_plugins.backends.remote.dialects import dialect_for
from hammer_plugins.backends.remote.sansio import _Core
from hammer_plugins.backends.remote.settings import ServerKind
from hammer_plugins.backends.remote.state import ServerState
from hammer_plugins.values.errors import (
    ServerModelNotFoundError,
)


class ServerDiscovery(ServerState):
    """What the server is: the model it serves, its kind and context window, learned once.
    Part of :class:`~hammer_plugins.backends.remote.OpenAICompatibleBackend`
    (a mixin over :class:`~.state.ServerState`, under the backend's setup lock).

    Example:
        >>> ServerDiscovery.__name__
        'ServerDiscovery'
    """

    def load(self) -> None:
        """Check the server once: the model it serves, its kind and context window."""
        if self._loaded:
            return
        with self._setup_lock:
            if not self._loaded:
                self._connection.call(self._discover())
                self._loaded = True

    async def aload(self) -> None:
        """Async :meth:`load` (a one-off handful of small requests, run in a worker thread)."""
        if not self._loaded:
            await asyncio.to_thread(self.load)

    def _discover(self) -> _Core[None]:
        """The core of :meth:`load`."""
        status, payload = yield from self._connection.json("GET", "/v1/models", allow=(404, 405))
        entries = [e for e in payload.get("data", []) if isinstance(e, dict)] if isinstance(payload, dict) else []
        ids = [str(e.get("id")) for e in entries]
        wanted = self.settings.model
        if status != 200 or not entries:
            if wanted is None:
                raise ServerModelNotFoundError(
                    f"the server at {self.base_url} lists no models at /v1/models. Fix: pass model=<name>.",
                    url=self.base_url)
        elif wanted is None:
            if len(ids) != 1:
                raise ServerModelNotFoundError(
                    f"the server at {self.base_url} serves several models {ids}. Fix: pass model=<one of them>.",
                    url=self.base_url, available=ids)
            self._model = ids[0]
        elif wanted not in ids:
            # llama-cpp-python silently answers an unknown name with its default model: check here.
            raise ServerModelNotFoundError(
                f"the server at {self.base_url} does not serve model {wanted!r}; it serves {ids}. Fix: pass "
                f"model={ids[0]!r}, or start the server under that name (vLLM: --served-model-name; "
                "llama-cpp-python: --model_alias; llama-server: --alias).",
                url=self.base_url, model=wanted, available=ids)
        entry = next((e for e in entries if e.get("id") == self._model), {})
        props: dict[str, Any] | None = None
        if self._dialect.kind == "auto":
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
                    count_status, _ = yield from self._connection.json("POST", "/extras/tokenize/count", {"input": "x"},
                                                            allow=(404, 405, 422))
                    kind = "llama_cpp_python" if count_status == 200 else "openai"
            self._dialect = dialect_for(kind)
        if self._window is None:
            if self._dialect.needs_props and props is None:
                props = yield from self._props()
            window = self._dialect.context_window(entry, props)
            if window is not None:
                self._window, self._window_source = window, "server"
        self._tokenize_path = self._dialect.tokenize_path

    def _props(self) -> _Core[dict[str, Any] | None]:
        status, payload = yield from self._connection.json("GET", "/props", allow=(404, 405))
        return payload if status == 200 and isinstance(payload, dict) else None

    def _learn_window(self, window: int) -> None:
        if window > 0 and self._window_source != "setting":
            self._window, self._window_source = window, "learned"
