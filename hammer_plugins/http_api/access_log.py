"""The server's access log: one line per request, at info on ``hammer_plugins.http_api.access_log``.

uvicorn's own access log (off: :func:`~hammer_plugins.http_api.listener.listener_config`) says a path and a
status. Someone running an agent against the server needs more of each request: which API door took it, how
long it took and how soon the first output came, the tokens it cost and how many of them a cache served, what
the model answered (calls, text, a refusal), and, when a large tool set was narrowed, how many tools were
offered. :class:`AccessLog` (ASGI middleware, the outermost: it also sees the guard's and the key's refusals)
measures the request and writes the line; :func:`respond` (the one route body every door shares) notes the
engine's answer in the request's :class:`AccessRecord`.

Example:
    >>> from hammer_plugins.output.response import HammerResponse, Usage
    >>> record = AccessRecord(started=0.0, tools_given=40)
    >>> record.saw(HammerResponse(kind="tool_calls", offered_tools=["get_weather", "get_time"],
    ...                           usage=Usage(prompt_tokens=812, cached_prompt_tokens=640, completion_tokens=17)),
    ...            at=0.4)
    >>> line = access_line("POST", "/v1/chat/completions", "chat_completions", 200, 1.25, record)
    >>> print(line.replace(" prompt=", "\\n prompt="))  # one line; cut in two here to fit the page
    POST /v1/chat/completions door=chat_completions status=200 time=1.250s ttft=0.400s
     prompt=812 cached=640 completion=17 answer=tool_calls offered=2/40
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hammer_plugins.output.events import TextDelta, ToolCallDelta
from hammer_plugins.output.response import HammerResponse
from hammer_plugins.tools.names import printable

log = logging.getLogger(__name__)  # hammer_plugins.http_api.access_log: the module is the logger

SCOPE_KEY = "hammer_plugins.access"
"""Where a request's :class:`AccessRecord` lives in its ASGI scope (the route reads it from ``request.scope``)."""

MAX_PATH = 200
"""Longest path a line quotes: the path is the client's text, and a line stays one readable line."""


@dataclass
class AccessRecord:
    """What the route learns of one request for its access line: when its first output and its answer came."""

    started: float
    first_output: float | None = None
    response: HammerResponse | None = None
    tools_given: int = 0

    def saw(self, event: Any, at: float | None = None) -> None:
        """Note an event of the engine's stream: the first text or call is the first output, the last the answer."""
        now = time.perf_counter() if at is None else at
        if self.first_output is None and isinstance(event, (TextDelta, ToolCallDelta, HammerResponse)):
            self.first_output = now
        if isinstance(event, HammerResponse):
            self.response = event


def record_of(scope: MutableMapping[str, Any]) -> AccessRecord | None:
    """The request's record (None when the app runs without :class:`AccessLog`, as a bare router in a test)."""
    record = scope.get(SCOPE_KEY)
    return record if isinstance(record, AccessRecord) else None


def access_line(method: str, path: str, door: str, status: int, seconds: float, record: AccessRecord) -> str:
    """The line: ``key=value`` fields (each only when known) after the method and path, easy to read and to grep."""
    shown = printable(path if len(path) <= MAX_PATH else path[:MAX_PATH] + "...")
    fields = [f"{printable(method)} {shown}", f"door={door}", f"status={status}", f"time={seconds:.3f}s"]
    if record.first_output is not None:
        fields.append(f"ttft={record.first_output - record.started:.3f}s")
    response = record.response
    if response is not None:
        usage = response.usage
        fields += [f"prompt={usage.prompt_tokens}", f"cached={usage.cached_prompt_tokens}",
                   f"completion={usage.completion_tokens}", f"answer={response.kind}"]
        if response.decoding.relevance_gated:  # the model never ran: say so, or 0 prompt tokens reads as a bug
            fields.append("gated")
        if response.finish_reason == "length":
            fields.append("cut=max_tokens")
        if response.offered_tools is not None:  # a selection was made: how many of the tools given it offered
            fields.append(f"offered={len(response.offered_tools)}/{record.tools_given}")
    return " ".join(fields)


class DoorNames:
    """Which door a path belongs to, from the doors' routes (and their prefixes, for paths no route takes)."""

    def __init__(self, routes: Iterable[tuple[str, Any]], prefixes: Iterable[tuple[str, str]]) -> None:
        self._routes = [(name, route.path_regex) for name, route in routes if hasattr(route, "path_regex")]
        self._prefixes = list(prefixes)

    def __call__(self, path: str) -> str:
        for name, pattern in self._routes:
            if isinstance(pattern, re.Pattern) and pattern.match(path):
                return name
        return next((name for prefix, name in self._prefixes if path.startswith(prefix)), "-")


class AccessLog:
    """ASGI middleware: one :func:`access_line` per HTTP request once its response is over (a stream: its end).

    Nothing is measured or written when the logger is not enabled for info: a server embedded in a program that
    configures no logging pays nothing for it.
    """

    def __init__(self, app: ASGIApp, door_of: DoorNames) -> None:
        self.app = app
        self.door_of = door_of

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not log.isEnabledFor(logging.INFO):
            await self.app(scope, receive, send)
            return
        record = AccessRecord(started=time.perf_counter())
        scope[SCOPE_KEY] = record
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        failed = False
        try:
            await self.app(scope, receive, sending)
        except Exception:
            failed = True
            raise
        finally:
            # Also when the app raised or the client left (cancelled): a request that ends badly is the one a
            # person most needs to see. No status sent: 500 when it raised (the error middleware outside this
            # one answers that), else the client left first (499, as nginx counts it).
            seconds = time.perf_counter() - record.started
            path = scope.get("path", "")
            code = status or (500 if failed else 499)
            log.info("%s", access_line(scope.get("method", "-"), path, self.door_of(path), code, seconds, record))
