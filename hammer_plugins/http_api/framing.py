"""How an answer goes on the wire: :class:`Framing`, the bytes of a stream and the body of a whole answer.

Every API door runs the same route body (:mod:`~hammer_plugins.http_api.respond`); what differs is how the
engine's events are framed: a door's :class:`Framing` wraps its writer (a
:class:`~hammer_plugins.output.encoder.StreamEncoder`, which keeps the "already sent" state once). The framings
here know no API: server-sent events of typed events (:class:`TypedEventFraming`) and NDJSON lines
(:class:`NdjsonFraming`), for any writer of the :class:`Writer` shape.

Example:
    >>> from hammer_plugins import HammerResponse
    >>> typed_sse({"type": "message_stop"})
    b'event: message_stop\\ndata: {"type": "message_stop"}\\n\\n'
    >>> ndjson({"done": True})
    b'{"done":true}\\n'
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from hammer_plugins.engine import StreamEvent
from hammer_plugins.http_api.errors import APIError
from hammer_plugins.output.response import HammerResponse

REFUSAL_HEADER = "x-hammer-refusal"
"""Response header set to ``true`` on a non-streamed refusal (Hammer answered ``[]``)."""

SSE = "text/event-stream"
NDJSON = "application/x-ndjson"


class Framing:
    """How one API frames an answer. ``start``/``event``/``end`` give a stream's bytes; ``body`` the whole answer."""

    media_type = SSE
    """The stream's content type: server-sent events, or NDJSON."""

    pings = True
    """Whether a quiet stream gets comment pings (SSE has comments; an NDJSON line must be an object)."""

    def start(self) -> list[bytes]:
        return []

    def event(self, event: StreamEvent) -> list[bytes]:
        raise NotImplementedError

    def error(self, error: APIError) -> bytes:
        """What a stream sends when the engine fails after the headers went out."""
        raise NotImplementedError

    def heartbeat(self) -> list[bytes]:
        """What a stream sends when it has been quiet a while (a long prompt evaluation), for clients that time out
        between events, not bytes: Codex gives up after 300 s without an event and SSE comments are not events to
        it. None by default (comment pings keep proxies open)."""
        return []

    def end(self) -> list[bytes]:
        return []

    def body(self, final: HammerResponse) -> dict[str, Any]:
        raise NotImplementedError


class Writer(Protocol):
    """A writer as :class:`WriterFraming` reads it: pieces (dicts) per event, an error piece, the whole answer."""

    def start(self) -> list[dict[str, Any]]: ...

    def feed(self, event: StreamEvent) -> list[dict[str, Any]]: ...

    def error(self, error: APIError) -> dict[str, Any]: ...

    def heartbeat(self) -> list[dict[str, Any]]: ...

    @property
    def whole(self) -> dict[str, Any]: ...


def typed_sse(event: dict[str, Any]) -> bytes:
    """One typed stream event (the Responses and Messages APIs) in its framing: ``event:`` and ``data:`` lines."""
    return f"event: {event['type']}\ndata: ".encode() + json.dumps(event, ensure_ascii=False).encode() + b"\n\n"


def ndjson(piece: dict[str, Any]) -> bytes:
    """One object of an NDJSON stream (Ollama's): compact JSON, then a newline."""
    return json.dumps(piece, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class WriterFraming(Framing):
    """A writer's pieces, each encoded by :meth:`encode`; for a non-streamed request the writer's whole answer
    once it has been fed the final event."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer

    @staticmethod
    def encode(piece: dict[str, Any]) -> bytes:
        raise NotImplementedError

    def start(self) -> list[bytes]:
        return [self.encode(e) for e in self.writer.start()]

    def event(self, event: StreamEvent) -> list[bytes]:
        return [self.encode(e) for e in self.writer.feed(event)]

    def error(self, error: APIError) -> bytes:
        return self.encode(self.writer.error(error))

    def heartbeat(self) -> list[bytes]:
        return [self.encode(e) for e in self.writer.heartbeat()]

    def body(self, final: HammerResponse) -> dict[str, Any]:
        self.writer.feed(final)
        return self.writer.whole


class TypedEventFraming(WriterFraming):
    """Typed events as server-sent events (the Responses and Messages APIs)."""

    encode = staticmethod(typed_sse)


class NdjsonFraming(WriterFraming):
    """Objects as NDJSON lines (``application/x-ndjson``, no pings: Ollama's API)."""

    media_type = NDJSON
    pings = False
    encode = staticmethod(ndjson)
