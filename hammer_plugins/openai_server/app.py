"""The FastAPI application: ``/v1/chat/completions``, ``/v1/models`` and ``/health`` over one engine.

Every error is OpenAI's error JSON (``{"error": {"message", "type", "param", "code"}}``), never a
traceback: the exception is logged on the server. Requests are authenticated with a bearer key
when one is set (``hmac.compare_digest``), bodies above ``max_body_bytes`` are refused with 413
before they are read, and calls run one at a time through :class:`~.worker.EngineWorker`.

Example:
    >>> from hammer_plugins import HammerEngine, ScriptedBackend
    >>> app = create_app(HammerEngine(backend=ScriptedBackend([])), model_name="hammer")
    >>> sorted(r.path for r in app.routes if r.path.startswith("/v1"))
    ['/v1/chat/completions', '/v1/models', '/v1/models/{name:path}']
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import time
from collections.abc import AsyncIterator, Coroutine
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from openai.types import Model
from sse_starlette import EventSourceResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..engine import HammerEngine
from ..response import HammerResponse
from .protocol import DONE, APIError, ChunkWriter, completion, engine_error, parse_json, parse_request, sse
from .worker import EngineWorker

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
"""Largest request body accepted (8 MiB): a long conversation with many tools is far below it."""

PING_SECONDS = 15
"""A comment line this often on a quiet event stream (as llama-cpp-python's server does)."""

DISCONNECT_POLL_SECONDS = 0.2
"""How often a non-streamed request checks that its client is still there."""

REFUSAL_HEADER = "x-hammer-refusal"
"""Response header set to ``true`` on a non-streamed refusal (Hammer answered ``[]``)."""

log = logging.getLogger("hammer_plugins.openai_server")


def error_response(error: APIError, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


class BodyLimit:
    """ASGI middleware: 413 for a body over ``limit`` bytes, told by Content-Length or counted as it arrives."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    def _too_large(self) -> JSONResponse:
        return error_response(APIError(413, f"The request body is larger than this server accepts ({self.limit} "
                                            "bytes). Fix: send a shorter conversation or fewer tools, or start the "
                                            "server with a larger --max-body-mb.", code="request_too_large"))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            await self._too_large()(scope, receive, send)
            return
        received = 0
        messages: list[Message] = []
        while True:  # read the body here (bounded), then replay it to the app
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            received += len(message.get("body", b""))
            if received > self.limit:
                await self._too_large()(scope, receive, send)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)


def create_app(engine: HammerEngine, *, model_name: str = "hammer", api_key: str | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> FastAPI:
    """The OpenAI-compatible app serving ``engine`` as ``model_name``."""
    worker = EngineWorker(engine)
    started = int(time.time())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        worker.close()

    app = FastAPI(title="Hammer OpenAI-compatible server", docs_url=None, redoc_url=None, openapi_url=None,
                  lifespan=lifespan)
    app.state.worker = worker
    app.state.model_name = model_name
    app.add_middleware(BodyLimit, limit=max_body_bytes)

    def check_key(request: Request) -> None:
        if not api_key:
            return
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise APIError(401, "Missing API key: send it as 'Authorization: Bearer <key>' (the openai SDK's api_key).",
                           type="authentication_error", code="missing_api_key")
        if not hmac.compare_digest(token.strip().encode(), api_key.encode()):
            raise APIError(401, "Incorrect API key provided.", type="authentication_error", code="invalid_api_key")

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return error_response(APIError(exc.status_code, message, type=kind, code=str(exc.status_code)))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s", request.url.path)
        return error_response(engine_error(exc))

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": model_name, "loaded": engine.is_loaded, "waiting": worker.waiting,
                "running": worker.running, "peak_running": worker.peak_running, "completed": worker.completed,
                "cancelled": worker.cancelled}

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        check_key(request)
        model = Model(id=model_name, created=started, object="model", owned_by="hammer-plugins")
        return {"object": "list", "data": [model.model_dump()]}

    @app.get("/v1/models/{name:path}")
    async def one_model(name: str, request: Request) -> dict[str, Any]:
        check_key(request)
        if name != model_name:
            raise APIError(404, f"The model '{name}' does not exist. This server serves ['{model_name}'].",
                           param="model", code="model_not_found")
        return Model(id=model_name, created=started, object="model", owned_by="hammer-plugins").model_dump()

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        check_key(request)
        call = parse_request(parse_json(await request.body()), model_name)
        events = worker.events(call.messages, call.tools, call.tool_choice, call.options)
        try:
            stream = await events.__aenter__()
        except Exception as exc:  # noqa: BLE001 - the engine refused the call: an OpenAI error
            raise engine_error(exc) from None
        if call.stream:
            writer = ChunkWriter(model_name, engine.refusal_text, include_usage=call.include_usage)
            # sse-starlette, as llama-cpp-python's server and vLLM use: it stops the generator when the
            # client disconnects, and its comment pings keep proxies from closing a stream that is quiet
            # while a long prompt is evaluated (clients ignore comments).
            return EventSourceResponse(_sse(writer, events, stream), ping=PING_SECONDS, sep="\n",
                                       headers={"cache-control": "no-cache", "x-accel-buffering": "no"})

        async def collect() -> HammerResponse:
            final: HammerResponse | None = None
            try:
                async for event in stream:
                    if isinstance(event, HammerResponse):
                        final = event
            except Exception as exc:  # noqa: BLE001
                if not isinstance(exc, APIError) and engine_error(exc).status >= 500:
                    log.exception("the engine failed on a request")
                raise engine_error(exc) from None
            finally:
                await events.__aexit__(None, None, None)
            assert final is not None
            return final

        final = await _unless_disconnected(request, collect())
        if final is None:  # nobody to answer; the generation was stopped
            return Response(status_code=499)
        body = completion(final, model_name, engine.refusal_text)
        headers = {REFUSAL_HEADER: "true"} if final.kind == "refusal" else {}
        return Response(body.model_dump_json(exclude_unset=True), media_type="application/json", headers=headers)

    return app


async def _unless_disconnected(request: Request, work: Coroutine[Any, Any, HammerResponse]) -> HammerResponse | None:
    """``work``'s result, or None when the client disconnects first: then ``work`` is cancelled, which
    stops its generation (uvicorn does not cancel a handler whose client left; a streamed response
    notices by itself)."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_SECONDS)
            if done:
                return task.result()
            if await request.is_disconnected():
                log.info("the client of a non-streamed request disconnected: generation stopped")
                return None
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def _sse(writer: ChunkWriter, events: Any, stream: AsyncIterator[Any]) -> AsyncIterator[bytes]:
    """The event stream of one call; a client that disconnects cancels this, which stops the generation."""
    try:
        for chunk in writer.start():
            yield sse(chunk)
        async for event in stream:
            for chunk in writer.event(event):
                yield sse(chunk)
    except Exception as exc:  # noqa: BLE001 - the headers are sent: the error goes in the stream, as OpenAI does
        error = engine_error(exc)
        if error.status >= 500:
            log.exception("the engine failed during a streamed request")
        yield b"data: " + JSONResponse(error.body()).body + b"\n\n"
    finally:
        await events.__aexit__(None, None, None)
    yield DONE
