"""The guard in front of every API: Ollama's cross-origin rules (origins, hosts, JSON bodies only).

Example:
    >>> Guard(app=None).origin_allowed("http://localhost:3000")
    True
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Iterable

from fastapi.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hammer_plugins.http_api.errors import APIError, ErrorShapes
from hammer_plugins.http_api.framing import REFUSAL_HEADER

log = logging.getLogger("hammer_plugins.http_api")


DEFAULT_ORIGINS = tuple(f"{scheme}://{host}{port}" for host in ("localhost", "127.0.0.1", "[::1]", "0.0.0.0")
                        for scheme in ("http", "https") for port in ("", ":*")) + (
    "app://*", "file://*", "tauri://*", "vscode-webview://*", "vscode-file://*")
"""Origins allowed by default, as Ollama's: pages served from this machine (any port) and desktop-app
schemes. Add more with ``--allow-origin`` or ``$HAMMER_ORIGINS`` (``*``: any)."""


LOCAL_TLDS = (".localhost", ".local", ".internal")
"""Host names allowed on a loopback connection besides ``localhost``, this machine's name and IP literals."""


def _pattern(origin: str) -> tuple[str, ...]:
    """An allow-list entry as its literal parts: ``*`` between them matches anything."""
    return tuple(origin.strip().rstrip("/").lower().split("*"))


def _matches(parts: tuple[str, ...], text: str) -> bool:
    """Whether ``text`` (an ``Origin`` header: outside text) matches an entry of :func:`_pattern`, in linear
    time: the first part a prefix, the last a suffix, the others found in order (the leftmost place of each
    is always a right one). A regex with ``.*`` per ``*`` backtracks polynomially on a crafted header."""
    if len(parts) == 1:
        return text == parts[0]
    first, *middle, last = parts
    if len(text) < len(first) + len(last) or not text.startswith(first) or not text.endswith(last):
        return False
    position, end = len(first), len(text) - len(last)
    for part in middle:
        found = text.find(part, position, end)
        if found < 0:
            return False
        position = found + len(part)
    return True


def ip_address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``text`` as the address it stands for, or None when it is not one: a scope id (``::1%lo``) is
    dropped and an IPv4-mapped IPv6 address (``::ffff:127.0.0.1``, what a dual-stack socket reports for
    an IPv4 peer) becomes its IPv4 address, so ``is_loopback`` and the rest mean what they say.

    Example:
        >>> [str(ip_address(a)) for a in ("::ffff:127.0.0.1", "::1%lo", "127.0.0.2", "localhost")]
        ['127.0.0.1', '::1', '127.0.0.2', 'None']
    """
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _split_host(host: str) -> str:
    """The name or address of a ``Host`` header, without its port (``[::1]:8080`` -> ``::1``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def same_origin(origin: str, host: str | None) -> bool:
    """Whether a browser's ``Origin`` is the server's own: its host and port are the request's ``Host`` (the scheme
    is left out, so a TLS proxy in front changes nothing; one port serves one scheme).

    Example:
        >>> same_origin("http://127.0.0.1:8080", "127.0.0.1:8080"), same_origin("http://localhost:5173", "localhost:8080")
        (True, False)
    """
    _, separator, authority = origin.strip().lower().partition("://")
    return bool(separator and host) and authority.rstrip("/") == (host or "").strip().lower()


class Guard:
    """ASGI middleware: Ollama's cross-origin rules in front of the API (see docs/server.md, Security).

    - ``Origin`` (sent by browsers): must match ``origins`` (else 403); an allowed origin gets CORS
      headers, and its preflight (``OPTIONS``) is answered 204.
    - ``Host``, when the connection is to a loopback address: must be ``localhost``, an IP address,
      this machine's name, a ``.localhost`` / ``.local`` / ``.internal`` name or one of ``hosts``
      (else 403), so a DNS-rebinding page (its own name resolving to 127.0.0.1) is refused.
    - ``POST`` bodies must be ``Content-Type: application/json`` (else 415): a page can send
      ``text/plain`` across origins without a preflight, never ``application/json``. Under
      ``lenient_json_prefixes`` (Ollama's ``/api/``, as its door declares), a request without an ``Origin`` (from
      no browser) may send any type, as Ollama takes.
    - Under ``same_origin_prefixes`` (the playground's helpers, which run tools), a browser request must come
      from the server's own origin (the ``Origin``'s host and port are the ``Host``): a page on another
      localhost port is refused 403, its preflight too, and gets no CORS headers, so it cannot read an answer.
    """

    def __init__(self, app: ASGIApp, origins: Iterable[str] = (), hosts: Iterable[str] = (), *,
                 shapes: ErrorShapes | None = None, lenient_json_prefixes: Iterable[str] = (),
                 same_origin_prefixes: Iterable[str] = ()) -> None:
        self.app = app
        self.shapes = shapes or ErrorShapes()
        self.lenient_json_prefixes = tuple(lenient_json_prefixes)
        self.same_origin_prefixes = tuple(same_origin_prefixes)
        extra = [o for o in origins if o.strip()]
        self.any_origin = any(o.strip() == "*" for o in extra)
        self.origins = [_pattern(o) for o in (*DEFAULT_ORIGINS, *extra)]
        self.hosts = {_split_host(h) for h in hosts if h.strip()}
        self.any_host = "*" in self.hosts
        self.hostname = socket.gethostname().lower()

    def origin_allowed(self, origin: str) -> bool:
        origin = origin.strip().lower()
        return self.any_origin or any(_matches(p, origin) for p in self.origins)

    def host_allowed(self, scope: Scope, host: str | None) -> bool:
        server = scope.get("server")
        # Not an address: a Unix socket or a test client, no DNS rebinding to guard against.
        local = ip_address(str(server[0])) if server else None
        if local is None or not local.is_loopback or not host or self.any_host:
            return True
        name = _split_host(host)
        address = ip_address(name)
        if address is None:
            return (name in ("localhost", self.hostname) or name.endswith(LOCAL_TLDS) or name in self.hosts)
        return address.is_loopback or address.is_private or address.is_unspecified or address.is_link_local

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal: APIError | None = None
        origin = headers.get("origin")
        if not self.host_allowed(scope, headers.get("host")):
            refusal = APIError(403, f"The Host {headers.get('host')!r} is not allowed on this loopback server (a page "
                                    "whose name resolves to 127.0.0.1 is refused). Fix: connect as localhost or "
                                    "127.0.0.1, or start the server with --allow-host NAME.", code="host_not_allowed")
        elif origin is not None and not self.origin_allowed(origin):
            refusal = APIError(403, f"Requests from the web origin {origin!r} are not allowed. Fix: start the server "
                                    "with --allow-origin ORIGIN (or $HAMMER_ORIGINS) to let that page use it.",
                               code="origin_not_allowed")
        elif (origin is not None and scope["path"].startswith(self.same_origin_prefixes)
              and not same_origin(origin, headers.get("host"))):
            # The allow-list lets any local page use the API; these paths run tools, so only the page this
            # server served (its own origin) may call them, and no other page gets a CORS grant to read them.
            refusal = APIError(403, f"Requests from the web origin {origin!r} may not use {scope['path'][:40]!r}: only "
                                    "the page this server serves may (open it at this server's own address).",
                               code="origin_not_allowed")
        if refusal is not None:
            log.warning("refused %r %r: %s", scope["method"], scope["path"], refusal.code)  # %r: quoted, one line
            await self.shapes.response(refusal, scope["path"])(scope, receive, send)
            return
        cors = self._cors(origin, headers)
        if scope["method"] == "OPTIONS":  # a preflight (allowed origin), or a plain OPTIONS
            await Response(status_code=204, headers={**cors, "allow": "GET, POST, OPTIONS"})(scope, receive, send)
            return
        if scope["method"] == "POST":
            media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            # Ollama's API reads any body as JSON (its docs' `curl -d` sends a form type): so does its door
            # when no Origin came, that is from no browser (a browser's POST always carries one).
            lenient = origin is None and scope["path"].startswith(self.lenient_json_prefixes)
            if media != "application/json" and not lenient:
                refusal = APIError(415, f"The request body must be JSON sent as 'Content-Type: application/json' (got "
                                        f"{media or 'no Content-Type'!r}). Fix: add that header (curl: -H "
                                        "'Content-Type: application/json').", code="unsupported_media_type")
                await self.shapes.response(refusal, scope["path"], cors)(scope, receive, send)
                return
        if not cors:
            await self.app(scope, receive, send)
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  *((k.encode(), v.encode()) for k, v in cors.items())]}
            await send(message)

        await self.app(scope, receive, send_with_cors)

    @staticmethod
    def _cors(origin: str | None, headers: dict[str, str]) -> dict[str, str]:
        if origin is None:
            return {}
        cors = {"access-control-allow-origin": origin, "vary": "Origin",
                "access-control-expose-headers": f"{REFUSAL_HEADER}, retry-after"}
        if "access-control-request-method" in headers:
            cors["access-control-allow-methods"] = "GET, POST, OPTIONS"
            cors["access-control-allow-headers"] = headers.get("access-control-request-headers",
                                                               "authorization, content-type")
            cors["access-control-max-age"] = "600"
        return cors
