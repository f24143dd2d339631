"""The HTTP side of the server backend: connection pools, retries, and the drivers that carry out the
requests a sans-I/O core yields (:mod:`.sansio`), blocking or on the event loop.

One :class:`ServerConnection` per backend: a pooled ``httpx.Client`` shared by threads, an
``httpx.AsyncClient`` per event loop, and the retry policy the backend's docstring states.

Example:
    >>> from hammer_plugins.backends.remote.settings import ServerBackendSettings, ServerStats
    >>> connection = ServerConnection(ServerBackendSettings(base_url="http://127.0.0.1:8080"), ServerStats())
    >>> connection.base_url, connection.stats.requests
    ('http://127.0.0.1:8080', 0)
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any

from hammer_plugins.backends.base import GenerationCancelled, GenerationChunk
from hammer_plugins.backends.remote.sansio import _DONE, _T, _advance, _Core, _keep_result, _Lines, _Read, _Send, _Setup, _Sleep
from hammer_plugins.backends.remote.settings import ServerBackendSettings, ServerStats
from hammer_plugins.backends.remote.wire import _http_error, _retry_after
from hammer_plugins.support.http_client import import_httpx
from hammer_plugins.values.errors import HammerError, ServerTimeoutError, ServerUnavailableError

if TYPE_CHECKING:
    import httpx

_RETRY_STATUSES = frozenset({429, 502, 503, 504})


class ServerConnection:
    """The pools, the retry policy and the drivers of one server backend (see the module's docstring).

    ``fail(status, body, path, max_tokens)`` turns an HTTP error the policy gives up on into the
    :class:`~hammer_plugins.values.errors.HammerError` to raise (the backend's: it knows the context window).
    """

    def __init__(self, settings: ServerBackendSettings, stats: ServerStats,
                 fail: Callable[[int, str, str, int], HammerError] | None = None) -> None:
        self.settings = settings
        self.base_url = settings.base_url
        self.stats = stats
        self.fail = fail or (lambda status, body, path, max_tokens: _http_error(status, body, self.base_url, path, None))
        # An httpx transport to use instead of the network (tests: httpx.MockTransport answers both clients).
        self.transport: Any = None
        self._stats_lock = threading.Lock()
        self._state_lock = threading.Lock()  # quick bookkeeping only: the event loop may take it
        self._client: httpx.Client | None = None
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary())

    def client_options(self) -> dict[str, Any]:
        httpx = import_httpx()
        headers = {"User-Agent": "hammer-plugins", **self.settings.headers}
        if self.settings.api_key is not None:
            headers["Authorization"] = f"Bearer {self.settings.api_key.get_secret_value()}"
        n = self.settings.max_connections
        return {
            "headers": headers, "trust_env": self.settings.trust_env,
            "timeout": httpx.Timeout(self.settings.timeout, connect=self.settings.connect_timeout),
            "limits": httpx.Limits(max_connections=n, max_keepalive_connections=n),
            **({"transport": self.transport} if self.transport is not None else {}),
        }

    def _sync_client(self) -> httpx.Client:
        client = self._client
        if client is None or client.is_closed:
            with self._state_lock:
                if self._client is None or self._client.is_closed:
                    self._client = import_httpx().Client(**self.client_options())
                client = self._client
        return client

    def _async_client(self) -> httpx.AsyncClient:
        # An AsyncClient's pooled connections belong to the loop that opened them: one client per loop.
        loop = asyncio.get_running_loop()
        with self._state_lock:
            client = self._async_clients.get(loop)
            if client is None or client.is_closed:
                client = import_httpx().AsyncClient(**self.client_options())
                self._async_clients[loop] = client
        return client

    def close(self) -> None:
        """Close the sync connection pool (the backend reopens one if used again)."""
        with self._state_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    async def aclose(self) -> None:
        """Close this event loop's async connection pool, and the sync one."""
        with self._state_lock:
            client = self._async_clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()
        self.close()

    def count(self, field: str, n: int = 1) -> None:
        with self._stats_lock:
            setattr(self.stats, field, getattr(self.stats, field) + n)
            if field == "in_flight":
                self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.stats.in_flight)

    # ---------------------------------------------------------------------------------- drivers
    def drive(self, core: _Core[Any], cancel: threading.Event | None = None) -> Iterator[GenerationChunk]:
        """Run a core on the sync client, in the calling thread; pass its chunks on until ``cancel`` is set."""
        opened: list[httpx.Response] = []
        reply: Any = None
        failure: Exception | None = None
        try:
            while (item := _advance(core, reply, failure)) is not _DONE:
                reply, failure = None, None
                if cancel is not None and cancel.is_set():
                    raise GenerationCancelled("the call was cancelled")
                if isinstance(item, GenerationChunk):
                    yield item
                    continue
                try:
                    reply = self._execute(item, opened)
                except Exception as exc:  # thrown into the core: its except clauses map or retry it
                    failure = exc
        finally:
            core.close()
            for response in opened:
                response.close()  # a caller that stopped reading drops the connection: the server cancels

    async def adrive(self, core: _Core[Any]) -> AsyncIterator[GenerationChunk]:
        """Run a core on the event loop's async client, with no worker thread; pass its chunks on."""
        opened: list[httpx.Response] = []
        reply: Any = None
        failure: Exception | None = None
        try:
            while (item := _advance(core, reply, failure)) is not _DONE:
                reply, failure = None, None
                if isinstance(item, GenerationChunk):
                    yield item
                    continue
                try:
                    reply = await self._aexecute(item, opened)
                except Exception as exc:  # thrown into the core: its except clauses map or retry it
                    failure = exc
        finally:
            # Also when the awaiting task is cancelled (asyncio.CancelledError passes the except above).
            core.close()
            for response in opened:
                await response.aclose()  # a caller that stopped reading drops the connection: the server cancels

    def _execute(self, item: object, opened: list[httpx.Response]) -> Any:
        """Carry out one request of a core, blocking."""
        match item:
            case _Send(method, path, body):
                client = self._sync_client()
                response = client.send(client.build_request(method, self.base_url + path, json=body), stream=True)
                opened.append(response)
                return response
            case _Read(response):
                try:
                    return response.read()
                finally:
                    response.close()
            case _Lines() as lines:
                lines.iterator = lines.iterator or lines.response.iter_lines()
                if (line := next(lines.iterator, None)) is None:
                    lines.response.close()
                return line
            case _Sleep(seconds):
                time.sleep(seconds)
            case _Setup(step):
                return step()
            case _:
                raise TypeError(f"not a request: {item!r}")
        return None

    async def _aexecute(self, item: object, opened: list[httpx.Response]) -> Any:
        """Carry out one request of a core, on the event loop."""
        match item:
            case _Send(method, path, body):
                client = self._async_client()
                response = await client.send(client.build_request(method, self.base_url + path, json=body), stream=True)
                opened.append(response)
                return response
            case _Read(response):
                try:
                    return await response.aread()
                finally:
                    await response.aclose()
            case _Lines() as lines:
                lines.iterator = lines.iterator or lines.response.aiter_lines()
                if (line := await anext(lines.iterator, None)) is None:
                    await lines.response.aclose()
                return line
            case _Sleep(seconds):
                await asyncio.sleep(seconds)
            case _Setup(step):
                return await asyncio.to_thread(step)
            case _:
                raise TypeError(f"not a request: {item!r}")
        return None

    def call(self, core: _Core[_T]) -> _T:
        """Run a core that streams nothing (a JSON request, a token count); return its result."""
        result: list[_T] = []
        for _ in self.drive(_keep_result(core, result)):
            pass
        return result[0]

    async def acall(self, core: _Core[_T]) -> _T:
        """Async :meth:`call`, on the event loop."""
        result: list[_T] = []
        async for _ in self.adrive(_keep_result(core, result)):
            pass
        return result[0]

    # ---------------------------------------------------------------------- sending, retries
    def backoff(self, attempt: int, retry_after: str | None) -> float:
        told = _retry_after(retry_after)
        base = self.settings.retry_backoff * (2 ** attempt) * (1 + 0.25 * random.random())
        return min(self.settings.max_backoff, max(base, told or 0.0))

    def unreachable(self, path: str, exc: Exception, attempts: int) -> ServerUnavailableError:
        return ServerUnavailableError(
            f"could not connect to the inference server at {self.base_url} ({path}: {type(exc).__name__}: "
            f"{exc or 'connection failed'}) after {attempts} attempt(s). Fix: start the server (see docs/server.md) "
            "or correct base_url.", url=self.base_url)

    def timed_out(self, path: str, exc: Exception, partial: str = "") -> ServerTimeoutError:
        return ServerTimeoutError(
            f"the server at {self.base_url} sent nothing for {self.settings.timeout:g} s ({path}: "
            f"{type(exc).__name__}); not retried, as it may still be working on the request. Fix: raise timeout= "
            "(it covers queueing and time to first token), or lower the load on the server.",
            url=self.base_url, partial_text=partial)

    def broken(self, path: str, exc: Exception, attempts: int = 1) -> ServerUnavailableError:
        return ServerUnavailableError(
            f"the server at {self.base_url} closed the connection before answering ({path}: {type(exc).__name__}: "
            f"{exc}) after {attempts} attempt(s). Fix: check the server's log.", url=self.base_url)

    def send(self, method: str, path: str, body: Any = None, *, allow: tuple[int, ...] = (),
              max_tokens: int = 0) -> _Core[httpx.Response]:
        """Send with the retry policy; return the response (2xx or ``allow``ed), its body still to read."""
        httpx = import_httpx()
        attempt = 0
        while True:
            self.count("requests")
            retry_after: str | None = None
            try:
                response = yield _Send(method, path, body)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if attempt >= self.settings.max_retries:
                    raise self.unreachable(path, exc, attempt + 1) from exc
            except httpx.TimeoutException as exc:
                raise self.timed_out(path, exc) from exc
            except httpx.TransportError as exc:
                # Closed before one byte of answer: most often a pooled keep-alive connection the server
                # had already dropped. Completions have no side effects, so sending again is safe.
                if attempt >= self.settings.max_retries:
                    raise self.broken(path, exc, attempt + 1) from exc
            else:
                if response.status_code < 400 or response.status_code in allow:
                    return response
                try:
                    text = (yield _Read(response)).decode("utf-8", errors="replace")
                except httpx.HTTPError:
                    text = ""
                if response.status_code not in _RETRY_STATUSES or attempt >= self.settings.max_retries:
                    raise self.fail(response.status_code, text, path, max_tokens)
                retry_after = response.headers.get("retry-after")
            # Here only when a retry is due (every other way raised or returned above).
            self.count("retries")
            yield _Sleep(self.backoff(attempt, retry_after))
            attempt += 1

    def json(self, method: str, path: str, body: Any = None, *, allow: tuple[int, ...] = ()) -> _Core[tuple[int, Any]]:
        """Send and read the whole answer: its status and JSON (None if it has none)."""
        httpx = import_httpx()
        response = yield from self.send(method, path, body, allow=allow)
        try:
            content = yield _Read(response)
        except httpx.TimeoutException as exc:
            raise self.timed_out(path, exc) from exc
        except httpx.TransportError as exc:
            raise self.broken(path, exc) from exc
        try:
            return response.status_code, json.loads(content) if content else None
        except ValueError:
            return response.status_code, None


