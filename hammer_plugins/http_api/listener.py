"""The listener's cheap checks: what a connection may cost before the API does any work for it.

uvicorn bounds the size of a request's headers (h11: 16 KiB, then 400), idle keep-alive connections
(``timeout_keep_alive``) and concurrency (``limit_concurrency``: 503 past it), but has no deadline for
a request's headers or body (uvicorn's GitHub issue #157): a client that sends half its headers, or stalls its
body, holds its connection for ever. :class:`DeadlineProtocol` adds both deadlines to uvicorn's h11
protocol, and :class:`Admission` checks the API key and the announced size from the headers, before
a byte of the body is read, then lets the body through only up to the size limit.

Defaults (each a flag of ``hammer serve --openai``, see docs/server.md):

=================  ========  =============================================================
header timeout     10 s      from the connection (or the previous response) to the end of the headers
body timeout       30 s      from the end of the headers to the end of the body
idle timeout       5 s       a kept-alive connection with no new request (uvicorn's default)
max connections    128       open connections (and requests) at once; past it uvicorn answers 503
=================  ========  =============================================================

Example:
    >>> config = listener_config(lambda scope, receive, send: None, "127.0.0.1", 8080)
    >>> config.http.header_timeout, config.http.body_timeout, config.limit_concurrency, config.timeout_keep_alive
    (10.0, 30.0, 128, 5)
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import socket
from collections.abc import Iterable
from typing import Any

import h11
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from hammer_plugins.http_api.defaults import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
)
from hammer_plugins.http_api.errors import APIError, ErrorShapes

log = logging.getLogger("hammer_plugins.http_api")

CLOSE = {"connection": "close"}
"""On a 413: the body the client announced is over the limit, so the connection is closed rather than read."""


def _timeout_response(what: str, seconds: float) -> bytes:
    """A raw 408 (the connection is closed right after it, outside h11's bookkeeping)."""
    body = json.dumps(APIError(408, f"The request's {what} did not arrive within {seconds:g} s; the connection is "
                                    "closed. Fix: send the whole request at once, or start the server with a larger "
                                    f"--{what}-timeout.", code="request_timeout").body()).encode()
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body))


class DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's headers and one for its body.

    The phase is read from h11's state of the client's side: ``IDLE`` (no complete headers yet) starts
    the header deadline, ``SEND_BODY`` (headers in, body not) the body deadline; each is timed from the
    moment the phase began, so trickling bytes does not extend it. On expiry the client gets a 408
    (when no response has started) and the connection is closed; a handler reading that body sees a
    disconnect. Subclassed by :func:`listener_config` with the configured timeouts.
    """

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT

    _phase: str | None = None
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._track()

    def handle_events(self) -> None:
        super().handle_events()
        self._track()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _track(self) -> None:
        """Start the deadline of the phase the client's side is in, when it has just entered it."""
        state = self.conn.their_state
        phase = "header" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
        if phase == self._phase:
            return
        self._cancel()
        self._phase = phase
        if phase is not None and not self.transport.is_closing():
            seconds = self.header_timeout if phase == "header" else self.body_timeout
            self._deadline = self.loop.call_later(seconds, self._expired, phase, seconds)

    def _expired(self, phase: str, seconds: float) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        client = "%s:%d" % self.client if self.client else "a client"  # noqa: UP031 - uvicorn's own form
        log.warning("closed the connection of %s: its request's %s took over %g s", client, phase, seconds)
        cycle = self.cycle if self.cycle is not None and not self.cycle.response_complete else None
        if (cycle is None or not cycle.response_started) and self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            self.transport.write(_timeout_response(phase, seconds))
        if cycle is not None:  # the handler's next receive() says "disconnected"; its sends are dropped
            cycle.disconnected = True
            cycle.message_event.set()
        self.transport.close()


def listener_config(app: Any, host: str, port: int, *, log_level: str = "info",
                    header_timeout: float = DEFAULT_HEADER_TIMEOUT, body_timeout: float = DEFAULT_BODY_TIMEOUT,
                    idle_timeout: int = DEFAULT_IDLE_TIMEOUT, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                    **options: Any) -> uvicorn.Config:
    """uvicorn's configuration for the API: :class:`DeadlineProtocol` with these timeouts, the idle
    timeout and the connection cap, no WebSocket upgrades (the API has none), no access log."""
    protocol = type("DeadlineProtocol", (DeadlineProtocol,), {"header_timeout": float(header_timeout),
                                                              "body_timeout": float(body_timeout)})
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False, http=protocol, ws="none",
                          timeout_keep_alive=idle_timeout, limit_concurrency=max_connections, **options)


def dual_stack_socket(host: str, port: int) -> socket.socket | None:
    """For ``--host ::``, a socket listening on IPv6 and IPv4 alike, else None (uvicorn binds as usual).

    uvicorn's single process binds ``::`` through asyncio, which sets ``IPV6_V6ONLY``: IPv4 clients
    (the ``http://127.0.0.1:PORT`` the banner prints) were refused, while its multi-worker mode and
    systemd sockets are dual-stack. Here ``::`` means every address of both families, whatever the
    kernel's ``bindv6only``; an IPv4 client then shows up as ``::ffff:a.b.c.d`` (``app.ip_address``
    reads that as its IPv4 address).
    """
    if host.strip("[]") != "::":
        return None
    sock = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    sock.bind(("::", port))
    sock.set_inheritable(True)
    return sock


class Admission:
    """ASGI middleware: the body size and the API key, checked from the headers before any body is read.

    - ``Content-Length`` over ``limit``: 413 at once, and the connection is closed.
    - ``Authorization: Bearer <key>`` (or ``x-api-key: <key>``, Anthropic's header) when ``api_key``
      is set (``hmac.compare_digest``), on every path but ``public_paths`` and those under ``public_prefixes``
      (``/health``, and what the doors declare): else 401 at once. The body (at most ``limit`` bytes, or what arrives within the
      body timeout) is then read and dropped as it comes, never kept, so the client gets to read the
      401 instead of a reset (nginx's "lingering close").
    - A body without a length (chunked) reaches the app only up to ``limit`` bytes: the next chunk
      raises a 413 in the handler that reads it.
    """

    def __init__(self, app: ASGIApp, limit: int, api_key: str | None = None, *, shapes: ErrorShapes | None = None,
                 public_paths: Iterable[str] = (), public_prefixes: Iterable[str] = ()) -> None:
        self.app = app
        self.limit = limit
        self.api_key = api_key.encode() if api_key else None
        self.shapes = shapes or ErrorShapes()
        self.public_paths = frozenset(public_paths)
        self.public_prefixes = tuple(public_prefixes)

    def _too_large(self) -> APIError:
        return APIError(413, f"The request body is larger than this server accepts ({self.limit} bytes). Fix: send a "
                             "shorter conversation or fewer tools, or start the server with a larger --max-body-mb.",
                        code="request_too_large", headers=CLOSE)

    def _key_error(self, headers: dict[bytes, bytes]) -> APIError | None:
        if self.api_key is None:
            return None
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        if scheme.lower() != b"bearer" or not token.strip():
            token = headers.get(b"x-api-key", b"")  # Anthropic's header (the anthropic SDK, Claude Code)
        if not token.strip():
            return APIError(401, "Missing API key: send it as 'Authorization: Bearer <key>' (the openai SDK's api_key) "
                                 "or 'x-api-key: <key>' (the anthropic SDK's).",
                            type="authentication_error", code="missing_api_key")
        if not hmac.compare_digest(token.strip(), self.api_key):
            return APIError(401, "Incorrect API key provided.", type="authentication_error", code="invalid_api_key")
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        length = headers.get(b"content-length", b"").strip()
        refusal = self._too_large() if length.isdigit() and int(length) > self.limit else None
        if (refusal is None and scope["path"] not in self.public_paths
                and not scope["path"].startswith(self.public_prefixes)):
            refusal = self._key_error(headers)
        if refusal is not None:
            await self.shapes.response(refusal, scope["path"])(scope, receive, send)
            return
        received = 0

        async def capped() -> Message:  # the body as it arrives, never more than the limit
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise self._too_large()
            return message

        await self.app(scope, capped, send)
