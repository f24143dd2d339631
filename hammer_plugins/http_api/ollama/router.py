"""The Ollama door: ``/api/chat`` and ``/api/generate`` through the server's one route body, framed as NDJSON
lines (:class:`~hammer_plugins.http_api.framing.NdjsonFraming`), and the model routes answered from
:class:`.models.ModelCard`. Errors are Ollama's ``{"error": "..."}`` on every path under ``/api/``, and a body
from no browser is read as JSON whatever its content type, as Ollama reads it.

Example:
    >>> from hammer_plugins.http_api.context import ServerSettings
    >>> [route.path for route in ollama_door(ServerSettings()).router.routes]
    ['/api/chat', '/api/generate', '/api/tags', '/api/show', '/api/ps', '/api/version']
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from hammer_plugins.http_api.context import ServerContext, ServerSettings, server_of
from hammer_plugins.http_api.door import Door
from hammer_plugins.http_api.errors import APIError
from hammer_plugins.http_api.framing import NdjsonFraming
from hammer_plugins.http_api.ollama.models import OLLAMA_API_VERSION, ModelCard
from hammer_plugins.http_api.ollama.request import (
    OllamaChatRequest,
    OllamaGenerateRequest,
    OllamaRequest,
    read_ollama,
    served_names,
)
from hammer_plugins.http_api.ollama.writer import OllamaWriter
from hammer_plugins.http_api.request_checks import check_model
from hammer_plugins.http_api.respond import read_body, respond

OLLAMA_PREFIX = "/api/"

SHOW_BODY_BYTES = 64 * 1024
"""Largest ``/api/show`` body read: it holds a model name."""


async def context_window(server: ServerContext) -> int:
    """The context window, off the event loop (it loads an in-process model the first time)."""
    work = asyncio.get_running_loop().run_in_executor(server.request_work, lambda: server.engine.backend.context_window)
    try:
        return await asyncio.wait_for(work, server.worker.time_limit or None)
    except TimeoutError:
        raise APIError(504, "The model did not load within the server's time limit.", type="server_error",
                       code="timeout") from None


async def _generation(request: Request, kind: type[OllamaRequest], generate: bool) -> Response:
    server = server_of(request)
    place, (parsed, call) = await read_body(request, lambda body: read_ollama(body, server.model_name, kind))
    writer = OllamaWriter(parsed.model, generate=generate)
    if call is None:  # nothing to generate: Ollama's answer that the model is loaded
        place.release()
        return JSONResponse(writer.loaded())
    return await respond(request, place, call, NdjsonFraming(writer), stream=parsed.stream, names=parsed.field_names())


def _card(server: ServerContext) -> ModelCard:
    return ModelCard(server.engine, server.model_name, started=server.started)


def _show_name(body: Any) -> Any:
    return body.get("model", body.get("name")) if isinstance(body, dict) else None


def ollama_door(settings: ServerSettings) -> Door:
    """The door's routes."""
    router = APIRouter()

    @router.post("/api/chat")
    async def chat(request: Request) -> Response:
        return await _generation(request, OllamaChatRequest, generate=False)

    @router.post("/api/generate")
    async def generate(request: Request) -> Response:
        return await _generation(request, OllamaGenerateRequest, generate=True)

    @router.get("/api/tags")
    async def tags(request: Request) -> dict[str, Any]:
        return {"models": [_card(server_of(request)).entry()]}

    @router.post("/api/show")
    async def show(request: Request) -> dict[str, Any]:
        server = server_of(request)
        # A model name: its own bound, announced or chunked, checked before the queue and as the body comes
        place, name = await read_body(request, _show_name, limit=SHOW_BODY_BYTES, what="An /api/show body (a model name)")
        place.release()
        check_model(name, served_names(server.model_name))
        return _card(server).show(await context_window(server))

    @router.get("/api/ps")
    async def running(request: Request) -> dict[str, Any]:
        server = server_of(request)
        if not server.engine.is_loaded:
            return {"models": []}
        return {"models": [_card(server).running(await context_window(server))]}

    @router.get("/api/version")
    async def version() -> dict[str, str]:
        return {"version": OLLAMA_API_VERSION}

    return Door("ollama", router, prefixes=(OLLAMA_PREFIX,), error_shape=OllamaWriter.error,
                lenient_json_prefixes=(OLLAMA_PREFIX,))
