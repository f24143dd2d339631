"""Token counts from the server's own tokenizer (or an estimate), asked once per text.

Example:
    >>> from hammer_plugins.backends.remote import OpenAICompatibleBackend
    >>> issubclass(OpenAICompatibleBackend, ServerTokenCounting)
    True
"""

from __future__ import annotations

from typing import Any

from hammer_plugins.backends.remote.sansio import _Core, _Setup
from hammer_plugins.backends.remote.state import ServerState
from hammer_plugins.backends.remote.wire import (
    estimate_tokens,
    wire_text,
)


class ServerTokenCounting(ServerState):
    """Token counts from the server's own tokenizer (or an estimate), asked once per text.
    Part of :class:`~hammer_plugins.backends.remote.OpenAICompatibleBackend`
    (a mixin over :class:`~.state.ServerState`, under the backend's setup lock).

    Example:
        >>> ServerTokenCounting.__name__
        'ServerTokenCounting'
    """

    def _cached_count(self, text: str) -> int | None:
        return self._token_cache.get(text)

    def _remember_count(self, text: str, n: int) -> int:
        self._token_cache.put(text, n, len(text))
        return n

    def _tokenize_request(self) -> tuple[str, dict[str, Any]] | None:
        if self.settings.token_counting == "estimate" or self._tokenize_path is None:
            return None
        return self._tokenize_path, self._dialect.tokenize_extra(self._model)

    def _read_count(self, status: int, payload: Any, text: str) -> int:
        if status != 200 or not isinstance(payload, dict):
            self._tokenize_path = None  # no such endpoint after all: estimate from now on
            return estimate_tokens(text)
        if isinstance(payload.get("count"), int):
            return self._remember_count(text, payload["count"])
        if isinstance(payload.get("tokens"), list):
            return self._remember_count(text, len(payload["tokens"]))
        self._tokenize_path = None
        return estimate_tokens(text)

    def _tokenize_body(self, extra: dict[str, Any], text: str) -> dict[str, Any]:
        return {**extra, self._dialect.tokenize_text_key: text}

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` from the server's tokenizer (cached), or an estimate where it has none."""
        return self._connection.call(self._count_tokens(text))

    async def acount_tokens(self, text: str) -> int:
        """Async :meth:`count_tokens`, on the event loop."""
        return await self._connection.acall(self._count_tokens(text))

    def _count_tokens(self, text: str) -> _Core[int]:
        """The core of :meth:`count_tokens` and :meth:`acount_tokens`."""
        text = wire_text(text)  # as it will be sent: text that looks like a special token is counted as text
        cached = self._cached_count(text)
        if cached is not None:
            return cached
        if not self._loaded:
            yield _Setup(self.load)
        route = self._tokenize_request()
        if route is None:
            return estimate_tokens(text)
        path, extra = route
        status, payload = yield from self._connection.json("POST", path, self._tokenize_body(extra, text), allow=(404, 405, 422))
        return self._read_count(status, payload, text)
