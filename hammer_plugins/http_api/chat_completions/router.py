"""The Chat Completions door: ``POST /v1/chat/completions``, framed as ``chat.completion.chunk`` events then
``data: [DONE]``, or one ``chat.completion``; errors in OpenAI's shape (the server's default).

Example:
    >>> from hammer_plugins.http_api.context import ServerSettings
    >>> [route.path for route in chat_completions_door(ServerSettings()).router.routes]
    ['/v1/chat/completions']
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from hammer_plugins.engine import StreamEvent
from hammer_plugins.http_api.chat_completions.request import read_chat
from hammer_plugins.http_api.chat_completions.writer import DONE, ChunkWriter, completion, sse
from hammer_plugins.http_api.context import ServerSettings
from hammer_plugins.http_api.door import Door
from hammer_plugins.http_api.errors import APIError
from hammer_plugins.http_api.framing import Framing
from hammer_plugins.http_api.respond import serve_request
from hammer_plugins.output.response import HammerResponse


class ChatFraming(Framing):
    """Chat Completions: ``chat.completion.chunk`` objects, then ``data: [DONE]``.

    Example:
        >>> framing = ChatFraming("hammer", "Sorry.", include_usage=False)
        >>> b"".join(framing.start() + framing.event(HammerResponse(kind="text", text="Hi")) + framing.end()).count(b"data:")
        4
    """

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


def chat_completions_door(settings: ServerSettings) -> Door:
    """The door's routes."""
    router = APIRouter()

    @router.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await serve_request(request, read_chat, lambda server, chat: ChatFraming(
            server.model_name, server.engine.refusal_text, chat.include_usage))

    return Door("chat_completions", router)
