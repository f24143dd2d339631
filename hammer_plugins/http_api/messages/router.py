"""The Messages door (Anthropic's API): ``POST /v1/messages`` (Anthropic's stream events, or one ``message``) and
``POST /v1/messages/count_tokens``; errors in Anthropic's shape (``{"type": "error", "error": {...}}``) on every
path under ``/v1/messages``.

Example:
    >>> from hammer_plugins.http_api.context import ServerSettings
    >>> [route.path for route in messages_door(ServerSettings()).router.routes]
    ['/v1/messages', '/v1/messages/count_tokens']
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from hammer_plugins.engine.request import EngineRequest
from hammer_plugins.http_api.context import ServerContext, ServerSettings, server_of
from hammer_plugins.http_api.door import Door
from hammer_plugins.http_api.framing import TypedEventFraming
from hammer_plugins.http_api.messages.request import read_messages
from hammer_plugins.http_api.messages.writer import MessagesWriter, anthropic_error_body
from hammer_plugins.http_api.respond import read_body, run_off_loop, serve_request
from hammer_plugins.values.errors import ContextWindowExceededError

COUNT_CHARS_PER_TOKEN = 16
"""``count_tokens`` tokenizes a prompt of at most this many characters per token of the context window; a
longer one cannot fit, and is answered at once (Anthropic's "prompt is too long") instead of tokenized: a
7.8 MiB text took 7 s of CPU to count."""


def count_prompt(server: ServerContext, call: EngineRequest) -> int:
    """Tokens of the prompt ``call`` renders, without tokenizing one that cannot fit the context window."""
    prompt = server.engine.render(call)
    window = server.engine.backend.context_window
    if len(prompt) > COUNT_CHARS_PER_TOKEN * window:  # cannot fit: said at once, not tokenized
        raise ContextWindowExceededError(len(prompt) // COUNT_CHARS_PER_TOKEN, 0, window)
    return server.engine.count_tokens(prompt)


def messages_door(settings: ServerSettings) -> Door:
    """The door's routes."""
    router = APIRouter()

    @router.post("/v1/messages")
    async def messages(request: Request) -> Response:
        return await serve_request(request, read_messages,
                                   lambda server, parsed: TypedEventFraming(MessagesWriter(server.model_name)))

    @router.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> Response:
        server = server_of(request)
        place, (_, call) = await read_body(request, lambda body: read_messages(body, server.served, count_only=True))
        # Counting holds its place in the queue (the queue's bound is its bound), runs on the server's own
        # pool, and is held to the time limit like any request.
        server.counting += 1
        try:
            tokens = await run_off_loop(request, place, lambda: count_prompt(server, call))
        finally:
            server.counting -= 1
        return JSONResponse({"input_tokens": tokens})

    return Door("messages", router, prefixes=("/v1/messages",), error_shape=anthropic_error_body)
