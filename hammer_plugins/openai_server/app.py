"""The FastAPI application: four APIs over one engine, ``/v1/models`` and ``/health``.

``/v1/chat/completions`` (OpenAI Chat Completions), ``/v1/responses`` (OpenAI Responses),
``/v1/messages`` (+ ``/count_tokens``, Anthropic Messages) and Ollama's ``/api/chat`` and ``/api/generate``
(with its model routes, :mod:`.ollama.routes`) share one route body, ``answer``: a place in the queue, the
body, the engine call, the client followed; only the parser and the :class:`~.framing.Framing` differ.
Every error is the API's own error JSON (OpenAI's ``{"error": {"message", "type", "param", "code"}}``,
Anthropic's ``{"type": "error", "error": {"type", "message"}}`` under ``/v1/messages``, Ollama's
``{"error": "..."}`` under ``/api/``), never a traceback: the exception is logged on the server.
In front of the routes, :class:`Guard` refuses
what a web page could send: an ``Origin`` not on the allow-list (403; CORS for the ones on it), a
``Host`` that is not local on a loopback connection (403: DNS rebinding), a POST body that is not
``application/json`` (415: no "simple" cross-origin request gets through). Then
:class:`~.listener.Admission` checks the key (``Authorization: Bearer`` or ``x-api-key``) and the
announced size from the headers (401 / 413 before a byte of the body is read), the queue's bound is
consulted before the body is read or parsed (429), and calls run through :class:`~.worker.EngineWorker`
within its bounds (504 past the time limit, 503 while shutting down).

Example:
    >>> from hammer_plugins import HammerEngine, ScriptedBackend
    >>> app = create_app(HammerEngine(backend=ScriptedBackend([])), model_name="hammer")
    >>> sorted(r.path for r in app.routes if r.path.startswith("/v1") and "{" not in r.path)
    ['/v1/chat/completions', '/v1/messages', '/v1/messages/count_tokens', '/v1/models', '/v1/responses']
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from openai.types import Model
from sse_starlette import EventSourceResponse
from sse_starlette.sse import SendTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from hammer_plugins.engine import HammerEngine
from hammer_plugins.openai_server.call import EngineCall
from hammer_plugins.openai_server.chat_completions.request import parse_request
from hammer_plugins.openai_server.defaults import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_QUEUE_PER_SLOT,
    DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_TIME_LIMIT,
)
from hammer_plugins.openai_server.errors import APIError, engine_error, error_response
from hammer_plugins.openai_server.framing import REFUSAL_HEADER, ChatFraming, Framing, TypedEventFraming
from hammer_plugins.openai_server.guard import Guard
from hammer_plugins.openai_server.json_body import parse_json
from hammer_plugins.openai_server.listener import Admission
from hammer_plugins.openai_server.messages.request import parse_messages_request
from hammer_plugins.openai_server.messages.writer import MessagesWriter
from hammer_plugins.openai_server.ollama.routes import add_ollama_routes
from hammer_plugins.openai_server.playground.routes import add_playground_routes
from hammer_plugins.openai_server.responses.request import parse_responses_request
from hammer_plugins.openai_server.responses.writer import ResponsesWriter
from hammer_plugins.openai_server.worker import EngineWorker
from hammer_plugins.output.response import HammerResponse
from hammer_plugins.values.errors import ContextWindowExceededError

PING_SECONDS = 15
"""A comment line this often on a quiet event stream (as llama-cpp-python's server does)."""

SEND_TIMEOUT_SECONDS = 30.0
"""Longest one send of a streamed response may wait for the client to read: then the response is given
up (its generation stopped, if the time limit has not stopped it already) and the connection closed."""

DISCONNECT_POLL_SECONDS = 0.2
"""How often a non-streamed request checks that its client is still there."""


log = logging.getLogger("hammer_plugins.openai_server")


PARSE_OFF_LOOP_BYTES = 256 * 1024
"""Bodies larger than this are decoded and validated on a thread, not on the event loop."""

HEALTH_CHECK_SECONDS = 0.5
"""Longest a health check may take before /health calls it failed (/health itself answers within a second)."""

REQUEST_WORK_THREADS = 2
"""Threads of the server's own pool for request work off the event loop (parsing large bodies, counting
tokens): not asyncio's default executor, which other libraries share; every such request also holds a place
in the queue while it works, so the queue's bound is its bound."""

HEALTH_CHECK_THREADS = 2
"""Threads for /health's checks alone: they never wait behind request work."""

COUNT_CHARS_PER_TOKEN = 16
"""``count_tokens`` tokenizes a prompt of at most this many characters per token of the context window; a
longer one cannot fit, and is answered at once (Anthropic's "prompt is too long") instead of tokenized: a
7.8 MiB text took 7 s of CPU to count."""
















def create_app(engine: HammerEngine, *, model_name: str = "hammer", api_key: str | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, allowed_origins: Sequence[str] = (),
               allowed_hosts: Sequence[str] = (), slots: int = 1, queue_per_slot: int = DEFAULT_QUEUE_PER_SLOT,
               time_limit: float | None = DEFAULT_TIME_LIMIT, shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
               health_checks: Sequence[Callable[[], str | None]] = (),
               playground_tools: Sequence[dict[str, Any]] = (),
               playground_runners: dict[str, Callable[..., Any]] | None = None,
               playground_errors: Sequence[str] = ()) -> FastAPI:
    """The OpenAI-compatible app serving ``engine`` as ``model_name``.

    ``allowed_origins`` / ``allowed_hosts``: web origins (``*`` wildcards; ``"*"`` alone: any) and host
    names allowed besides the local defaults (:class:`Guard`). ``slots``: requests the backend decodes
    together (1 in process; llama-server's ``--parallel``); ``queue_per_slot`` more may wait per slot,
    then 429. ``time_limit``: seconds a request may take from arrival (None: no limit), then 504.
    ``shutdown_grace``: seconds running requests get once shutdown begins. ``health_checks``: each
    returns None when fine or the reason it is not; /health answers 503 with the first reason (or
    when a call is stuck well past its time limit). ``playground_tools``: OpenAI function tools the
    playground page at ``/`` offers besides the demo tools; ``playground_runners``: the callables (MCP
    servers' tools) the page may run, by tool name, once the person approves a call; ``playground_errors``:
    what the page says went wrong before it opened (an MCP server that did not start).
    """
    worker = EngineWorker(engine, slots=slots, queue_per_slot=queue_per_slot, time_limit=time_limit,
                          shutdown_grace=shutdown_grace)
    started = int(time.time())
    request_work = ThreadPoolExecutor(REQUEST_WORK_THREADS, thread_name_prefix="hammer-request")
    health_work = ThreadPoolExecutor(HEALTH_CHECK_THREADS, thread_name_prefix="hammer-health")
    counting = [0]  # count_tokens requests in flight (shown by /health)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        worker.close()
        request_work.shutdown(wait=False, cancel_futures=True)
        health_work.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="Hammer OpenAI-compatible server", docs_url=None, redoc_url=None, openapi_url=None,
                  lifespan=lifespan)
    app.state.worker = worker
    app.state.model_name = model_name
    app.add_middleware(Admission, limit=max_body_bytes, api_key=api_key)
    app.add_middleware(Guard, origins=allowed_origins, hosts=allowed_hosts)  # added last: runs first

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return error_response(exc, path=request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found" if exc.status_code == 404 else "invalid_request_error"
        message = f"{request.method} {request.url.path}: {exc.detail}"
        return error_response(APIError(exc.status_code, message, type=kind, code=str(exc.status_code)),
                              path=request.url.path)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %r", request.url.path)
        return error_response(engine_error(exc), path=request.url.path)

    async def unhealthy() -> str | None:
        reason = worker.stuck()
        for check in health_checks:
            if reason is not None:
                break
            try:
                reason = await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(health_work, check),
                                                HEALTH_CHECK_SECONDS)
            except TimeoutError:
                reason = f"the health check {getattr(check, '__name__', check)!r} did not answer in {HEALTH_CHECK_SECONDS} s"
            except Exception as exc:  # noqa: BLE001 - a failing check is an unhealthy server, not a 500
                reason = f"the health check {getattr(check, '__name__', check)!r} failed: {exc}"
        return reason

    @app.get("/health")
    async def health() -> JSONResponse:
        reason = await unhealthy()
        body = {"status": "ok" if reason is None else "unavailable", "model": model_name, "loaded": engine.is_loaded,
                "reading": worker.reading, "waiting": worker.waiting, "running": worker.running,
                "peak_running": worker.peak_running, "completed": worker.completed, "cancelled": worker.cancelled,
                "refused": worker.refused, "timed_out": worker.timed_out, "counting": counting[0]}
        if reason is not None:
            body["reason"] = reason
        elif worker.closing:
            body.update(status="unavailable", reason="the server is shutting down")
        return JSONResponse(body, status_code=200 if body["status"] == "ok" else 503)

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        model = Model(id=model_name, created=started, object="model", owned_by="hammer-plugins")
        return {"object": "list", "data": [model.model_dump()]}

    @app.get("/v1/models/{name:path}")
    async def one_model(name: str, request: Request) -> dict[str, Any]:
        if name != model_name:
            raise APIError(404, f"The model '{name}' does not exist. This server serves ['{model_name}'].",
                           param="model", code="model_not_found")
        return Model(id=model_name, created=started, object="model", owned_by="hammer-plugins").model_dump()

    async def read_call(request: Request, parse: Callable[[Any], Any]) -> tuple[Any, Any]:
        """A place in the queue, then the request's JSON decoded and validated by ``parse`` (on a thread when it
        is large): ``(place, parsed)``, or ``(None, 499 response)`` when the client left while sending."""
        place = worker.reserve()  # the queue's bound first: a flood of bodies gets 429 before any is read or parsed
        try:
            try:
                raw = await request.body()
            except ClientDisconnect:  # gone, or closed by the listener's body deadline
                place.release()
                return None, Response(status_code=499)
            if len(raw) > PARSE_OFF_LOOP_BYTES:  # decoding megabytes takes a while: /health and streams keep going
                loop = asyncio.get_running_loop()
                return place, await loop.run_in_executor(request_work, lambda: parse(parse_json(raw)))
            return place, parse(parse_json(raw))
        except BaseException:
            place.release()
            raise

    async def answer(request: Request, place: Any, call: EngineCall, framing: Framing) -> Response:
        """Run ``call`` through the worker and answer in ``framing``'s wire format: every API's one route body."""
        try:
            events = worker.events(call.messages, call.tools, call.tool_choice, call.options, place=place)
            try:
                # Waits in the queue; a client that leaves meanwhile takes its request out of it.
                stream = await _enter_unless_disconnected(request, events)
            except Exception as exc:  # noqa: BLE001 - the engine refused the call (or the queue is full): an API error
                raise engine_error(exc) from None
        finally:
            place.release()  # a no-op once the call took it over
        if stream is None:
            return Response(status_code=499)
        if call.stream:
            # sse-starlette, as llama-cpp-python's server and vLLM use: it stops the generator when the
            # client disconnects, and its comment pings keep proxies from closing a stream that is quiet
            # while a long prompt is evaluated (clients ignore comments).
            return _EventStream(_framed(framing, events, stream), ping=PING_SECONDS if framing.pings else 0, sep="\n",
                                media_type=framing.media_type, send_timeout=SEND_TIMEOUT_SECONDS,
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
        headers = {REFUSAL_HEADER: "true"} if final.kind == "refusal" else {}
        return Response(json.dumps(framing.body(final), ensure_ascii=False), media_type="application/json",
                        headers=headers)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        place, call = await read_call(request, lambda body: parse_request(body, model_name))
        if place is None:
            return call
        return await answer(request, place, call, ChatFraming(model_name, engine.refusal_text, call.include_usage))

    @app.post("/v1/responses")
    async def responses(request: Request) -> Response:
        place, parsed = await read_call(request, lambda body: parse_responses_request(body, model_name))
        if place is None:
            return parsed
        call, meta = parsed
        return await answer(request, place, call, TypedEventFraming(ResponsesWriter(meta)))

    @app.get("/v1/responses/{response_id}")
    async def stored_response(response_id: str) -> Response:
        raise APIError(404, f"No response with id {response_id!r}: this server is stateless and stores no responses.",
                       param="response_id", code="not_found")

    @app.post("/v1/messages")
    async def messages(request: Request) -> Response:
        place, call = await read_call(request, lambda body: parse_messages_request(body, model_name))
        if place is None:
            return call
        return await answer(request, place, call, TypedEventFraming(MessagesWriter(model_name)))

    @app.post("/v1/messages/count_tokens")
    async def count_tokens(request: Request) -> Response:
        place, call = await read_call(request,
                                      lambda body: parse_messages_request(body, model_name, count_only=True))
        if place is None:
            return call

        def count() -> int:
            prompt = engine.render(call.messages, call.tools, call.tool_choice,
                                   response_format=call.options.get("response_format"))
            window = engine.backend.context_window
            if len(prompt) > COUNT_CHARS_PER_TOKEN * window:  # cannot fit: said at once, not tokenized
                raise ContextWindowExceededError(len(prompt) // COUNT_CHARS_PER_TOKEN, 0, window)
            return engine.count_tokens(prompt)

        # Counting holds its place in the queue (the queue's bound is its bound), runs on the server's own
        # pool, and is held to the time limit like any request.
        counting[0] += 1
        try:
            work = asyncio.get_running_loop().run_in_executor(request_work, count)
            tokens = await asyncio.wait_for(work, worker.time_limit or None)
        except TimeoutError:
            raise APIError(504, f"Counting did not finish within the server's time limit ({worker.time_limit:g} s).",
                           type="server_error", code="timeout") from None
        except Exception as exc:  # noqa: BLE001 - an unrenderable request is the client's error, in Anthropic's shape
            raise engine_error(exc) from None
        finally:
            counting[0] -= 1
            place.release()
        return JSONResponse({"input_tokens": tokens})

    add_ollama_routes(app, engine, model_name, started=started, read_call=read_call, answer=answer,
                      request_work=request_work, time_limit=worker.time_limit)
    add_playground_routes(app, engine, model_name, read_call=read_call, answer=answer, request_work=request_work,
                          time_limit=worker.time_limit, tools=playground_tools, runners=playground_runners,
                          errors=playground_errors)
    return app


async def _done_before_disconnect(request: Request, task: asyncio.Future[Any]) -> bool:
    """Wait for ``task``: True once it is done, False as soon as the client has disconnected."""
    while True:
        done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_SECONDS)
        if done:
            return True
        if await request.is_disconnected():
            return False


async def _enter_unless_disconnected(request: Request, events: Any) -> Any:
    """``events`` entered (the call started), or None when the client disconnects first: then the
    request leaves the queue (or its just-started call is stopped)."""
    task = asyncio.ensure_future(events.__aenter__())
    try:
        if await _done_before_disconnect(request, task):
            return task.result()
    except BaseException:
        task.cancel()
        raise
    log.info("the client of a queued request disconnected: it left the queue")
    task.cancel()
    try:
        await task
    except BaseException:  # noqa: BLE001 - cancelled (or failed) while queued: nothing to close
        return None
    await events.__aexit__(None, None, None)  # it had started just then: stop it
    return None


async def _unless_disconnected(request: Request, work: Coroutine[Any, Any, HammerResponse]) -> HammerResponse | None:
    """``work``'s result, or None when the client disconnects first: then ``work`` is cancelled, which
    stops its generation (uvicorn does not cancel a handler whose client left; a streamed response
    notices by itself)."""
    task = asyncio.ensure_future(work)
    try:
        if await _done_before_disconnect(request, task):
            return task.result()
        log.info("the client of a non-streamed request disconnected: generation stopped")
        return None
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


class _EventStream(EventSourceResponse):
    """An event stream whose sends time out (``send_timeout``): a client that stops reading is let go
    with one log line, not a traceback; uvicorn then closes the connection."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except SendTimeoutError:
            log.warning("a streaming client read nothing for %g s: its response was given up", self.send_timeout)


async def _framed(framing: Framing, events: Any, stream: AsyncIterator[Any]) -> AsyncIterator[bytes]:
    """The stream of one call in ``framing``'s bytes (SSE, or Ollama's NDJSON); a client that disconnects
    cancels this, which stops the generation."""
    try:
        for data in framing.start():
            yield data
        async for event in stream:
            for data in framing.event(event):
                yield data
    except Exception as exc:  # noqa: BLE001 - the headers are sent: the error goes in the stream, as each API does
        error = engine_error(exc)
        if error.status >= 500:
            log.exception("the engine failed during a streamed request")
        yield framing.error(error)
    finally:
        await events.__aexit__(None, None, None)
    for data in framing.end():
        yield data
