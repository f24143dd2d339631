"""The FastAPI application: three APIs over one engine, ``/v1/models`` and ``/health``.

``/v1/chat/completions`` (OpenAI Chat Completions), ``/v1/responses`` (OpenAI Responses) and
``/v1/messages`` (+ ``/count_tokens``, Anthropic Messages) share one route body, ``answer``: a place in
the queue, the body, the engine call, the client followed; only the parser and the
:class:`~.framing.Framing` differ. Every error is the API's own error JSON (OpenAI's
``{"error": {"message", "type", "param", "code"}}``, Anthropic's ``{"type": "error", "error": {"type",
"message"}}`` under ``/v1/messages``), never a traceback: the exception is logged on the server.
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
import ipaddress
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from openai.types import Model
from sse_starlette import EventSourceResponse
from sse_starlette.sse import SendTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hammer_plugins.engine import HammerEngine
from hammer_plugins.openai_server.framing import ChatFraming, Framing, TypedEventFraming
from hammer_plugins.openai_server.listener import Admission
from hammer_plugins.openai_server.messages_api import MessagesWriter, parse_messages_request
from hammer_plugins.openai_server.protocol import APIError, EngineCall, engine_error, parse_json, parse_request
from hammer_plugins.openai_server.responses_api import ResponsesWriter, parse_responses_request
from hammer_plugins.openai_server.worker import DEFAULT_QUEUE_PER_SLOT, DEFAULT_SHUTDOWN_GRACE, DEFAULT_TIME_LIMIT, EngineWorker
from hammer_plugins.output.response import HammerResponse

DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
"""Largest request body accepted (8 MiB): a long conversation with many tools is far below it."""

PING_SECONDS = 15
"""A comment line this often on a quiet event stream (as llama-cpp-python's server does)."""

SEND_TIMEOUT_SECONDS = 30.0
"""Longest one send of a streamed response may wait for the client to read: then the response is given
up (its generation stopped, if the time limit has not stopped it already) and the connection closed."""

DISCONNECT_POLL_SECONDS = 0.2
"""How often a non-streamed request checks that its client is still there."""

REFUSAL_HEADER = "x-hammer-refusal"
"""Response header set to ``true`` on a non-streamed refusal (Hammer answered ``[]``)."""

log = logging.getLogger("hammer_plugins.openai_server")


PARSE_OFF_LOOP_BYTES = 256 * 1024
"""Bodies larger than this are decoded and validated on a thread, not on the event loop."""

HEALTH_CHECK_SECONDS = 0.5
"""Longest a health check may take before /health calls it failed (/health itself answers within a second)."""

DEFAULT_ORIGINS = tuple(f"{scheme}://{host}{port}" for host in ("localhost", "127.0.0.1", "[::1]", "0.0.0.0")
                        for scheme in ("http", "https") for port in ("", ":*")) + (
    "app://*", "file://*", "tauri://*", "vscode-webview://*", "vscode-file://*")
"""Origins allowed by default, as Ollama's: pages served from this machine (any port) and desktop-app
schemes. Add more with ``--allow-origin`` or ``$HAMMER_ORIGINS`` (``*``: any)."""

LOCAL_TLDS = (".localhost", ".local", ".internal")
"""Host names allowed on a loopback connection besides ``localhost``, this machine's name and IP literals."""


def error_response(error: APIError, headers: dict[str, str] | None = None, path: str = "") -> JSONResponse:
    """``error`` as JSON in the shape of the API ``path`` belongs to (OpenAI's, or Anthropic's under /v1/messages)."""
    return JSONResponse(error.body(path), status_code=error.status, headers={**(error.headers or {}), **(headers or {})})


def _pattern(origin: str) -> tuple[str, ...]:
    """An allow-list entry as its literal parts: ``*`` between them matches anything."""
    return tuple(origin.strip().rstrip("/").lower().split("*"))


def _matches(parts: tuple[str, ...], text: str) -> bool:
    """Whether ``text`` (an ``Origin`` header: outside text) matches an entry of :func:`_pattern`, in linear
    time: the first part a prefix, the last a suffix, the others found in order (the leftmost place of each
    is always a right one). A regex with ``.*`` per ``*`` backtracks polynomially on a crafted header."""
    if len(parts) == 1:
        return text == parts[0]
    first, *middle, last = parts
    if len(text) < len(first) + len(last) or not text.startswith(first) or not text.endswith(last):
        return False
    position, end = len(first), len(text) - len(last)
    for part in middle:
        found = text.find(part, position, end)
        if found < 0:
            return False
        position = found + len(part)
    return True


def ip_address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``text`` as the address it stands for, or None when it is not one: a scope id (``::1%lo``) is
    dropped and an IPv4-mapped IPv6 address (``::ffff:127.0.0.1``, what a dual-stack socket reports for
    an IPv4 peer) becomes its IPv4 address, so ``is_loopback`` and the rest mean what they say.

    Example:
        >>> [str(ip_address(a)) for a in ("::ffff:127.0.0.1", "::1%lo", "127.0.0.2", "localhost")]
        ['127.0.0.1', '::1', '127.0.0.2', 'None']
    """
    try:
        address = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _split_host(host: str) -> str:
    """The name or address of a ``Host`` header, without its port (``[::1]:8080`` -> ``::1``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Guard:
    """ASGI middleware: Ollama's cross-origin rules in front of the API (see docs/server.md, Security).

    - ``Origin`` (sent by browsers): must match ``origins`` (else 403); an allowed origin gets CORS
      headers, and its preflight (``OPTIONS``) is answered 204.
    - ``Host``, when the connection is to a loopback address: must be ``localhost``, an IP address,
      this machine's name, a ``.localhost`` / ``.local`` / ``.internal`` name or one of ``hosts``
      (else 403), so a DNS-rebinding page (its own name resolving to 127.0.0.1) is refused.
    - ``POST`` bodies must be ``Content-Type: application/json`` (else 415): a page can send
      ``text/plain`` across origins without a preflight, never ``application/json``.
    """

    def __init__(self, app: ASGIApp, origins: Iterable[str] = (), hosts: Iterable[str] = ()) -> None:
        self.app = app
        extra = [o for o in origins if o.strip()]
        self.any_origin = any(o.strip() == "*" for o in extra)
        self.origins = [_pattern(o) for o in (*DEFAULT_ORIGINS, *extra)]
        self.hosts = {_split_host(h) for h in hosts if h.strip()}
        self.any_host = "*" in self.hosts
        self.hostname = socket.gethostname().lower()

    def origin_allowed(self, origin: str) -> bool:
        origin = origin.strip().lower()
        return self.any_origin or any(_matches(p, origin) for p in self.origins)

    def host_allowed(self, scope: Scope, host: str | None) -> bool:
        server = scope.get("server")
        # Not an address: a Unix socket or a test client, no DNS rebinding to guard against.
        local = ip_address(str(server[0])) if server else None
        if local is None or not local.is_loopback or not host or self.any_host:
            return True
        name = _split_host(host)
        address = ip_address(name)
        if address is None:
            return (name in ("localhost", self.hostname) or name.endswith(LOCAL_TLDS) or name in self.hosts)
        return address.is_loopback or address.is_private or address.is_unspecified or address.is_link_local

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refusal: APIError | None = None
        origin = headers.get("origin")
        if not self.host_allowed(scope, headers.get("host")):
            refusal = APIError(403, f"The Host {headers.get('host')!r} is not allowed on this loopback server (a page "
                                    "whose name resolves to 127.0.0.1 is refused). Fix: connect as localhost or "
                                    "127.0.0.1, or start the server with --allow-host NAME.", code="host_not_allowed")
        elif origin is not None and not self.origin_allowed(origin):
            refusal = APIError(403, f"Requests from the web origin {origin!r} are not allowed. Fix: start the server "
                                    "with --allow-origin ORIGIN (or $HAMMER_ORIGINS) to let that page use it.",
                               code="origin_not_allowed")
        if refusal is not None:
            log.warning("refused %r %r: %s", scope["method"], scope["path"], refusal.code)  # %r: quoted, one line
            await error_response(refusal, path=scope["path"])(scope, receive, send)
            return
        cors = self._cors(origin, headers)
        if scope["method"] == "OPTIONS":  # a preflight (allowed origin), or a plain OPTIONS
            await Response(status_code=204, headers={**cors, "allow": "GET, POST, OPTIONS"})(scope, receive, send)
            return
        if scope["method"] == "POST":
            media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if media != "application/json":
                refusal = APIError(415, f"The request body must be JSON sent as 'Content-Type: application/json' (got "
                                        f"{media or 'no Content-Type'!r}). Fix: add that header (curl: -H "
                                        "'Content-Type: application/json').", code="unsupported_media_type")
                await error_response(refusal, cors, path=scope["path"])(scope, receive, send)
                return
        if not cors:
            await self.app(scope, receive, send)
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  *((k.encode(), v.encode()) for k, v in cors.items())]}
            await send(message)

        await self.app(scope, receive, send_with_cors)

    @staticmethod
    def _cors(origin: str | None, headers: dict[str, str]) -> dict[str, str]:
        if origin is None:
            return {}
        cors = {"access-control-allow-origin": origin, "vary": "Origin",
                "access-control-expose-headers": f"{REFUSAL_HEADER}, retry-after"}
        if "access-control-request-method" in headers:
            cors["access-control-allow-methods"] = "GET, POST, OPTIONS"
            cors["access-control-allow-headers"] = headers.get("access-control-request-headers",
                                                               "authorization, content-type")
            cors["access-control-max-age"] = "600"
        return cors


def create_app(engine: HammerEngine, *, model_name: str = "hammer", api_key: str | None = None,
               max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, allowed_origins: Sequence[str] = (),
               allowed_hosts: Sequence[str] = (), slots: int = 1, queue_per_slot: int = DEFAULT_QUEUE_PER_SLOT,
               time_limit: float | None = DEFAULT_TIME_LIMIT, shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE,
               health_checks: Sequence[Callable[[], str | None]] = ()) -> FastAPI:
    """The OpenAI-compatible app serving ``engine`` as ``model_name``.

    ``allowed_origins`` / ``allowed_hosts``: web origins (``*`` wildcards; ``"*"`` alone: any) and host
    names allowed besides the local defaults (:class:`Guard`). ``slots``: requests the backend decodes
    together (1 in process; llama-server's ``--parallel``); ``queue_per_slot`` more may wait per slot,
    then 429. ``time_limit``: seconds a request may take from arrival (None: no limit), then 504.
    ``shutdown_grace``: seconds running requests get once shutdown begins. ``health_checks``: each
    returns None when fine or the reason it is not; /health answers 503 with the first reason (or
    when a call is stuck well past its time limit).
    """
    worker = EngineWorker(engine, slots=slots, queue_per_slot=queue_per_slot, time_limit=time_limit,
                          shutdown_grace=shutdown_grace)
    started = int(time.time())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        worker.close()

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
                reason = await asyncio.wait_for(asyncio.to_thread(check), HEALTH_CHECK_SECONDS)
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
                "refused": worker.refused, "timed_out": worker.timed_out}
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
                return place, await asyncio.to_thread(lambda: parse(parse_json(raw)))
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
            return _EventStream(_sse(framing, events, stream), ping=PING_SECONDS, sep="\n",
                                send_timeout=SEND_TIMEOUT_SECONDS,
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
        place.release()  # counting is no generation: it takes no place in the queue

        def count() -> int:
            prompt = engine.render(call.messages, call.tools, call.tool_choice,
                                   response_format=call.options.get("response_format"))
            return engine.count_tokens(prompt)

        try:
            return JSONResponse({"input_tokens": await asyncio.to_thread(count)})
        except Exception as exc:  # noqa: BLE001 - an unrenderable request is the client's error, in Anthropic's shape
            raise engine_error(exc) from None

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


async def _sse(framing: Framing, events: Any, stream: AsyncIterator[Any]) -> AsyncIterator[bytes]:
    """The event stream of one call; a client that disconnects cancels this, which stops the generation."""
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
