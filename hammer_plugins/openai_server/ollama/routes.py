"""Ollama's routes on the server's app: the chat and generate doors go through the app's one route body.

``/api/chat`` and ``/api/generate`` are read by :mod:`.request` and answered by the app's ``answer`` (the
queue, the engine call, the client followed) in :class:`~hammer_plugins.openai_server.framing.NdjsonFraming`;
the model routes answer from :class:`.models.ModelCard`. Errors are Ollama's ``{"error": "..."}``
(:data:`~hammer_plugins.openai_server.errors.OLLAMA_PATH`).

Example:
    >>> from fastapi import FastAPI
    >>> OLLAMA_ROUTES
    ('/api/chat', '/api/generate', '/api/tags', '/api/show', '/api/ps', '/api/version')
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from hammer_plugins.engine import HammerEngine
from hammer_plugins.openai_server.errors import APIError
from hammer_plugins.openai_server.framing import NdjsonFraming
from hammer_plugins.openai_server.json_body import parse_json
from hammer_plugins.openai_server.ollama.models import OLLAMA_API_VERSION, ModelCard
from hammer_plugins.openai_server.ollama.request import check_model, parse_ollama_chat, parse_ollama_generate
from hammer_plugins.openai_server.ollama.writer import OllamaWriter

OLLAMA_ROUTES = ("/api/chat", "/api/generate", "/api/tags", "/api/show", "/api/ps", "/api/version")

SHOW_BODY_BYTES = 64 * 1024
"""Largest ``/api/show`` body read: it holds a model name."""


def add_ollama_routes(app: FastAPI, engine: HammerEngine, model_name: str, *, started: float,
                      read_call: Callable[[Request, Callable[[Any], Any]], Awaitable[tuple[Any, Any]]],
                      answer: Callable[..., Awaitable[Response]], request_work: Executor,
                      time_limit: float | None) -> None:
    """Add Ollama's routes to ``app``, serving ``engine`` as ``model_name`` (``read_call`` and ``answer``: the
    app's own queue-and-parse step and route body)."""
    card = ModelCard(engine, model_name, started=started)

    async def context_window() -> int:
        """The context window, off the event loop (it loads an in-process model the first time)."""
        work = asyncio.get_running_loop().run_in_executor(request_work, lambda: engine.backend.context_window)
        try:
            return await asyncio.wait_for(work, time_limit or None)
        except TimeoutError:
            raise APIError(504, "The model did not load within the server's time limit.", type="server_error",
                           code="timeout") from None

    async def door(request: Request, parse: Callable[[Any, str], Any], generate: bool) -> Response:
        place, parsed = await read_call(request, lambda body: parse(body, model_name))
        if place is None:
            return parsed
        call, model = parsed
        writer = OllamaWriter(model, generate=generate)
        if call is None:  # nothing to generate: Ollama's answer that the model is loaded
            place.release()
            return JSONResponse(writer.loaded())
        return await answer(request, place, call, NdjsonFraming(writer))

    @app.post("/api/chat")
    async def chat(request: Request) -> Response:
        return await door(request, parse_ollama_chat, generate=False)

    @app.post("/api/generate")
    async def generate(request: Request) -> Response:
        return await door(request, parse_ollama_generate, generate=True)

    @app.get("/api/tags")
    async def tags() -> dict[str, Any]:
        return {"models": [card.entry()]}

    @app.post("/api/show")
    async def show(request: Request) -> dict[str, Any]:
        raw = await request.body()
        if len(raw) > SHOW_BODY_BYTES:
            raise APIError(413, f"An /api/show body holds a model name: at most {SHOW_BODY_BYTES} bytes.",
                           code="request_too_large")
        body = parse_json(raw)
        name = body.get("model", body.get("name")) if isinstance(body, dict) else None
        check_model(name, model_name)
        return card.show(await context_window())

    @app.get("/api/ps")
    async def running() -> dict[str, Any]:
        if not engine.is_loaded:
            return {"models": []}
        return {"models": [card.running(await context_window())]}

    @app.get("/api/version")
    async def version() -> dict[str, str]:
        return {"version": OLLAMA_API_VERSION}
