"""The FastAPI application: the API doors over one engine, with ``/health`` and ``/v1/models``.

Each API is a door (:mod:`~hammer_plugins.http_api.door`) in a folder of its own: OpenAI's Chat
Completions (``/v1/chat/completions``) and Responses (``/v1/responses``), Anthropic's Messages
(``/v1/messages``, ``/count_tokens``), Ollama's API (``/api/*``) and the playground page (``/``);
:mod:`~hammer_plugins.http_api.doors` lists them. They share one route body
(:mod:`~hammer_plugins.http_api.respond`: a place in the queue, the body, the engine request, the client
followed) and differ in their request types, writers, framing and error shape. Every error is the API's own
error JSON, never a traceback: the exception is logged on the server.

In front of the routes, :class:`~.guard.Guard` refuses what a web page could send: an ``Origin`` not on the
allow-list (403; CORS for the ones on it), a ``Host`` that is not local on a loopback connection (403: DNS
rebinding), a POST body that is not ``application/json`` (415). Then :class:`~.listener.Admission` checks the key
(``Authorization: Bearer`` or ``x-api-key``) and the announced size from the headers (401 / 413 before a byte of
the body is read); the queue's bound is consulted before the body is read or parsed (429), and calls run through
:class:`~.worker.EngineWorker` within its bounds (504 past the time limit, 503 while shutting down).

Example:
    >>> from hammer_plugins import HammerEngine, ScriptedBackend
    >>> app = create_app(HammerEngine(backend=ScriptedBackend([])), model_name="hammer")
    >>> sorted(r.path for r in app.routes if r.path.startswith("/v1") and "{" not in r.path)
    ['/v1/chat/completions', '/v1/messages', '/v1/messages/count_tokens', '/v1/models', '/v1/responses']
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from hammer_plugins.engine import HammerEngine
from hammer_plugins.http_api.access_log import AccessLog, DoorNames
from hammer_plugins.http_api.context import ServerContext, ServerSettings
from hammer_plugins.http_api.defaults import DEFAULT_MAX_BODY_BYTES
from hammer_plugins.http_api.door import Door, error_shapes
from hammer_plugins.http_api.doors import DOORS
from hammer_plugins.http_api.errors import APIError, ErrorShapes, engine_error
from hammer_plugins.http_api.guard import Guard
from hammer_plugins.http_api.listener import Admission
from hammer_plugins.http_api.respond import ClientLeft
from hammer_plugins.http_api.status import PUBLIC_PATHS, status_router

__all__ = ["DEFAULT_MAX_BODY_BYTES", "ServerSettings", "create_app"]

log = logging.getLogger("hammer_plugins.http_api")

RENAMED = {"slots": "parallel", "queue_per_slot": "queue_depth"}
"""``create_app``'s keywords under their old names, still taken."""


def create_app(engine: HammerEngine, settings: ServerSettings | None = None, **options: Any) -> FastAPI:
    """The app serving ``engine``: every door of :data:`~hammer_plugins.http_api.doors.DOORS`.

    ``settings``, or its fields as keywords (``model_name="hammer"``, ``api_key=...``, ``parallel=2``, ...): see
    :class:`~hammer_plugins.http_api.context.ServerSettings` (``slots=`` and ``queue_per_slot=``, the old
    names of ``parallel=`` and ``queue_depth=``, are still taken).
    """
    renamed = {RENAMED.get(name, name): value for name, value in options.items()}
    settings = ServerSettings(**renamed) if settings is None else settings
    server = ServerContext.start(engine, settings)
    doors = [make(settings) for make in DOORS]
    shapes = error_shapes(doors)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        server.close()

    app = FastAPI(title="Hammer API server", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.server = server
    app.state.worker = server.worker
    app.state.model_name = settings.model_name
    app.add_middleware(Admission, limit=settings.max_body_bytes, api_key=settings.api_key, shapes=shapes,
                       public_paths=PUBLIC_PATHS + _all(doors, "public_paths"),
                       public_prefixes=_all(doors, "public_prefixes"))
    app.add_middleware(Guard, origins=settings.allowed_origins, hosts=settings.allowed_hosts, shapes=shapes,
                       lenient_json_prefixes=_all(doors, "lenient_json_prefixes"),
                       same_origin_prefixes=_all(doors, "same_origin_prefixes"))
    # Added last, so it runs first: its line also covers what the guard and the key refuse.
    app.add_middleware(AccessLog, door_of=_door_names(doors))
    _add_error_handlers(app, shapes)
    # The routes themselves, not included routers: app.routes lists every path (as a test or a reader expects).
    for router in (status_router(), *(door.router for door in doors)):
        app.router.routes.extend(router.routes)
    return app


def _door_names(doors: list[Door]) -> DoorNames:
    """The access log's door of a path: the door whose route takes it (``server`` for /health and /v1/models)."""
    routes = [*((door.name, route) for door in doors for route in door.router.routes),
              *(("server", route) for route in status_router().routes)]
    prefixes = [(prefix, door.name) for door in doors for prefix in (*door.prefixes, *door.public_prefixes)]
    return DoorNames(routes, prefixes)


def _all(doors: list[Door], field: str) -> tuple[str, ...]:
    return tuple(path for door in doors for path in getattr(door, field))


def _add_error_handlers(app: FastAPI, shapes: ErrorShapes) -> None:
    """Every error in the shape of the API its path belongs to; a client that left gets no answer (499)."""

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return shapes.response(exc, request.url.path)

    @app.exception_handler(ClientLeft)
    async def _client_left(request: Request, exc: ClientLeft) -> Response:
        return Response(status_code=ClientLeft.status_code)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return shapes.response(APIError(exc.status_code, message, type=kind, code=str(exc.status_code)),
                               request.url.path)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %r", request.url.path)
        return shapes.response(engine_error(exc), request.url.path)
