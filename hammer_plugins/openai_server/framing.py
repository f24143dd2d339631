"""One framing per wire format: the bytes a streamed answer is sent as, and the non-streamed body.

The route of every API does the same work (parse, queue, run the engine, follow the client) in
:func:`~.app.create_app`'s one ``answer`` function; what differs is only how the engine's events are
framed, which is this module's :class:`Framing`: Chat Completions chunks, the typed events of the
Responses and Messages APIs, or Ollama's NDJSON lines, each a thin shell around its writer (a
:class:`~hammer_plugins.output.encoder.StreamEncoder`, which keeps the "already sent" state once).

Example:
    >>> from hammer_plugins import HammerResponse
    >>> framing = ChatFraming("hammer", "Sorry.", include_usage=False)
    >>> b"".join(framing.start() + framing.event(HammerResponse(kind="text", text="Hi")) + framing.end()).count(b"data:")
    4
"""

from __future__ import annotations

import json
from typing import Any

from hammer_plugins.engine import StreamEvent
from hammer_plugins.openai_server.chat_completions.writer import DONE, ChunkWriter, completion, sse
from hammer_plugins.openai_server.errors import APIError
from hammer_plugins.openai_server.messages.writer import MessagesWriter
from hammer_plugins.openai_server.ollama.writer import OllamaWriter
from hammer_plugins.openai_server.responses.writer import ResponsesWriter
from hammer_plugins.output.response import HammerResponse

REFUSAL_HEADER = "x-hammer-refusal"
"""Response header set to ``true`` on a non-streamed refusal (Hammer answered ``[]``)."""

class Framing:
    """How one API frames an answer. ``start``/``event``/``end`` give a stream's bytes; ``body`` the whole answer."""

    media_type = "text/event-stream"
    """The stream's content type: server-sent events, or NDJSON for Ollama's API."""

    pings = True
    """Whether a quiet stream gets comment pings (SSE has comments; an NDJSON line must be an object)."""

    def start(self) -> list[bytes]:
        return []

    def event(self, event: StreamEvent) -> list[bytes]:
        raise NotImplementedError

    def error(self, error: APIError) -> bytes:
        """What a stream sends when the engine fails after the headers went out."""
        raise NotImplementedError

    def end(self) -> list[bytes]:
        return []

    def body(self, final: HammerResponse) -> dict[str, Any]:
        raise NotImplementedError


class ChatFraming(Framing):
    """Chat Completions: ``chat.completion.chunk`` objects, then ``data: [DONE]``."""

    def __init__(self, model: str, refusal_text: str, include_usage: bool) -> None:
        self.model = model
        self.refusal_text = refusal_text
        self.writer = ChunkWriter(model, refusal_text, include_usage=include_usage)

    def start(self) -> list[bytes]:
        return [sse(c) for c in self.writer.start()]

    def event(self, event: StreamEvent) -> list[bytes]:
        return [sse(c) for c in self.writer.feed(event)]

    def error(self, error: APIError) -> bytes:
        return b"data: " + json.dumps(error.body()).encode() + b"\n\n"

    def end(self) -> list[bytes]:
        return [DONE]

    def body(self, final: HammerResponse) -> dict[str, Any]:
        return completion(final, self.model, self.refusal_text).model_dump(mode="json", exclude_unset=True)


def typed_sse(event: dict[str, Any]) -> bytes:
    """One typed stream event (the Responses and Messages APIs) in its framing: ``event:`` and ``data:`` lines."""
    return f"event: {event['type']}\ndata: ".encode() + json.dumps(event, ensure_ascii=False).encode() + b"\n\n"


class WriterFraming(Framing):
    """A writer's pieces, each encoded by :meth:`encode`; for a non-streamed request the writer's object
    (``response``, ``message``, Ollama's answer) once it has been fed the final answer."""

    def __init__(self, writer: ResponsesWriter | MessagesWriter | OllamaWriter) -> None:
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

    def body(self, final: HammerResponse) -> dict[str, Any]:
        self.writer.feed(final)
        return self.writer.answer


class TypedEventFraming(WriterFraming):
    """The Responses and Messages APIs: their writer's typed events as SSE."""

    encode = staticmethod(typed_sse)


def ndjson(piece: dict[str, Any]) -> bytes:
    """One object of an NDJSON stream (Ollama's): compact JSON, then a newline."""
    return json.dumps(piece, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


class NdjsonFraming(WriterFraming):
    """Ollama's API: its writer's objects as NDJSON lines (``application/x-ndjson``, no pings)."""

    media_type = "application/x-ndjson"
    pings = False
    encode = staticmethod(ndjson)
