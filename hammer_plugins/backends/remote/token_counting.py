"""Token counts from the server's own tokenizer (or an estimate), asked once per text.

Example:
    >>> from hammer_plugins.backends.remote import OpenAICompatibleBackend
    >>> backend = OpenAICompatibleBackend("http://127.0.0.1:8080", model="hammer", token_counting="estimate")
    >>> backend.token_counter.cached("Hello") is None   # nothing counted yet
    True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hammer_plugins.backends.remote.connection import ServerConnection
from hammer_plugins.backends.remote.facts import ServerFacts
from hammer_plugins.backends.remote.sansio import _Core, _Setup
from hammer_plugins.backends.remote.settings import ServerBackendSettings
from hammer_plugins.backends.remote.wire import estimate_tokens, wire_text
from hammer_plugins.support.sized_cache import SizedCache


class ServerTokenCounter:
    """The token-counting job of :class:`~hammer_plugins.backends.remote.OpenAICompatibleBackend` (its
    ``token_counter``): asks the server's tokenize endpoint (the path discovery found, in the backend's
    :class:`~.facts.ServerFacts`) once per text and keeps the counts of recent texts; estimates where the
    server has no such endpoint or ``token_counting="estimate"``. ``load`` runs discovery, if still due.

    Example:
        >>> from hammer_plugins.backends.remote import OpenAICompatibleBackend
        >>> backend = OpenAICompatibleBackend("http://127.0.0.1:8080", model="m", server_kind="vllm",
        ...                                   token_counting="estimate")
        >>> backend.facts.loaded = True                  # as if discovery had run: nothing is contacted
        >>> backend.token_counter.count_tokens("Hello, world") > 0
        True
    """

    def __init__(self, settings: ServerBackendSettings, facts: ServerFacts, connection: ServerConnection,
                 load: Callable[[], None]) -> None:
        self.settings = settings
        self.facts = facts
        self.connection = connection
        self.load = load
        # Token counts of recent texts (whole prompts): bounded by entries and by bytes.
        self.cache: SizedCache[str, int] = SizedCache(256, 16 * 2**20)

    def cached(self, text: str) -> int | None:
        """The count of ``text`` (as sent) if it was counted recently, else ``None``."""
        return self.cache.get(text)

    def _remember(self, text: str, n: int) -> int:
        self.cache.put(text, n)
        return n

    def _route(self) -> tuple[str, dict[str, Any]] | None:
        if self.settings.token_counting == "estimate" or self.facts.tokenize_path is None:
            return None
        return self.facts.tokenize_path, self.facts.dialect.tokenize_extra(self.facts.model)

    def _read_count(self, status: int, payload: Any, text: str) -> int:
        if status != 200 or not isinstance(payload, dict):
            self.facts.tokenize_path = None  # no such endpoint after all: estimate from now on
            return estimate_tokens(text)
        if isinstance(payload.get("count"), int):
            return self._remember(text, payload["count"])
        if isinstance(payload.get("tokens"), list):
            return self._remember(text, len(payload["tokens"]))
        self.facts.tokenize_path = None
        return estimate_tokens(text)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` from the server's tokenizer (cached), or an estimate where it has none."""
        return self.connection.call(self.count(text))

    async def acount_tokens(self, text: str) -> int:
        """Async :meth:`count_tokens`, on the event loop."""
        return await self.connection.acall(self.count(text))

    def count(self, text: str) -> _Core[int]:
        """The core of :meth:`count_tokens` and :meth:`acount_tokens`."""
        text = wire_text(text)  # as it will be sent: text that looks like a special token is counted as text
        cached = self.cached(text)
        if cached is not None:
            return cached
        if not self.facts.loaded:
            yield _Setup(self.load)
        route = self._route()
        if route is None:
            return estimate_tokens(text)
        path, extra = route
        body = {**extra, self.facts.dialect.tokenize_text_key: text}
        status, payload = yield from self.connection.json("POST", path, body, allow=(404, 405, 422))
        return self._read_count(status, payload, text)
