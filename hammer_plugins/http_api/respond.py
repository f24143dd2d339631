"""The route body every API door shares: a place in the queue, the body read and parsed, the engine's
request run through the worker, the answer framed, the client followed.

- :func:`read_body`: the queue's bound first (429 before a byte is read), then the body decoded and parsed by
  the door (on a thread when it is large); a client that leaves while sending ends the request (499).
- :func:`respond`: the engine request through :class:`~hammer_plugins.http_api.worker.EngineWorker`,
  answered in the door's :class:`~hammer_plugins.http_api.framing.Framing`: streamed (server-sent events
  through sse-starlette, NDJSON through a plain streaming response) or whole.
- :func:`run_off_loop`: work of a door that is not a generation (counting tokens, the playground's helpers),
  on the server's request threads, holding its place and held to the time limit.

Example:
    >>> from hammer_plugins.http_api.errors import APIError
    >>> ClientLeft.status_code
    499
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Protocol, TypeVar

from fastapi import Request
from fastapi.responses import Response, StreamingResponse
from sse_starlette import EventSourceResponse
from sse_starlette.sse import SendTimeoutError
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

from hammer_plugins.engine.request import EngineRequest
from hammer_plugins.http_api.access_log import AccessRecord, record_of
from hammer_plugins.http_api.context import ServerContext, server_of
from hammer_plugins.http_api.errors import APIError, engine_error
from hammer_plugins.http_api.framing import NDJSON, REFUSAL_HEADER, Framing
from hammer_plugins.http_api.json_body import parse_json
from hammer_plugins.http_api.listener import CLOSE
from hammer_plugins.http_api.request_checks import FieldNames
from hammer_plugins.http_api.worker import Place
from hammer_plugins.output.response import HammerResponse

PING_SECONDS = 15
"""A comment line this often on a quiet event stream (as llama-cpp-python's server does); and the door's own
heartbeat event (:meth:`Framing.heartbeat`) when no event went out for this long."""

SEND_TIMEOUT_SECONDS = 30.0
"""Longest one send of a streamed response may wait for the client to read: then the response is given
up (its generation stopped, if the time limit has not stopped it already) and the connection closed."""

DISCONNECT_POLL_SECONDS = 0.2
"""How often a non-streamed request checks that its client is still there."""

PARSE_OFF_LOOP_BYTES = 64 * 1024
"""Bodies larger than this are decoded and validated on a thread, not on the event loop. Why this low: a
250 KiB Responses body (6,600 tools) takes 50-280 ms to read here, and four of them read on the loop at once
held ``/health`` for 1.28 s on a busy 2-core CI machine; at 64 KiB one read is at most about 40 ms, and the
thread hop costs microseconds."""

STREAM_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}

log = logging.getLogger("hammer_plugins.http_api")

_Parsed = TypeVar("_Parsed")


class ClientLeft(Exception):  # noqa: N818 - what happened, not an error of ours
    """The client went away before its request could be answered: nobody to answer (499, logged by uvicorn)."""

    status_code = 499


def _too_large(limit: int, what: str) -> APIError:
    return APIError(413, f"{what} holds at most {limit} bytes.", code="request_too_large", headers=CLOSE)


async def _bounded_body(request: Request, limit: int | None, what: str) -> bytes:
    """The body, refused with 413 once past ``limit`` bytes (None: the listener's limit alone), chunked or not."""
    if limit is None:
        return await request.body()
    chunks, received = [], 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > limit:  # a chunked body announces no length: counted as it comes
            raise _too_large(limit, what)
        chunks.append(chunk)
    return b"".join(chunks)


async def read_body(request: Request, parse: Callable[[Any], _Parsed], *, limit: int | None = None,
                    what: str = "This route's body") -> tuple[Place, _Parsed]:
    """A place in the queue, then the request's JSON decoded and parsed by ``parse`` (on a thread when large).

    ``limit``: a route's own bound on its body, below the listener's (``/api/show``'s 64 KiB): a
    ``Content-Length`` over it is 413 before the queue or a byte of the body, and a chunked body is 413 once
    past it (``what`` names the body in the message). Every route that reads a body reads it here, so none
    reads one outside the queue's bound.
    """
    length = request.headers.get("content-length", "")
    if limit is not None and length.isdigit() and int(length) > limit:
        raise _too_large(limit, what)  # before the queue: refusing it costs nothing
    server = server_of(request)
    place = server.worker.reserve()  # the queue's bound first: a flood of bodies gets 429 before any is read
    try:
        try:
            raw = await _bounded_body(request, limit, what)
        except ClientDisconnect:  # gone, or closed by the listener's body deadline
            raise ClientLeft from None
        if len(raw) > PARSE_OFF_LOOP_BYTES:  # reading a large body takes a while: /health and streams keep going
            loop = asyncio.get_running_loop()
            return place, await loop.run_in_executor(server.request_work, lambda: parse(parse_json(raw)))
        return place, parse(parse_json(raw))
    except BaseException:
        place.release()
        raise


async def respond(request: Request, place: Place, call: EngineRequest, framing: Framing, *, stream: bool,
                  names: FieldNames | None = None) -> Response:
    """Run ``call`` through the worker and answer in ``framing``; an engine error names the API's field
    (``names``)."""
    param = names.param if names is not None else None
    record = record_of(request.scope)  # the access line's: the first output, the answer, the tools given
    if record is not None:
        record.tools_given = len(call.tools)
    events = server_of(request).worker.events(call, place=place)
    try:
        try:
            # Waits in the queue; a client that leaves meanwhile takes its request out of it.
            started = await _enter_unless_disconnected(request, events)
        except Exception as exc:  # noqa: BLE001 - the engine refused the call (or the queue is full): an API error
            raise engine_error(exc, param) from None
    finally:
        place.release()  # a no-op once the call took it over
    if started is None:
        raise ClientLeft
    if stream:
        return _stream_response(framing, events, started, param, record)
    final = await _unless_disconnected(request, _collect(events, started, param, record))
    if final is None:  # nobody to answer; the generation was stopped
        raise ClientLeft
    headers = {REFUSAL_HEADER: "true"} if final.kind == "refusal" else {}
    return Response(json.dumps(framing.body(final), ensure_ascii=False), media_type="application/json",
                    headers=headers)


class ReadRequest(Protocol):
    """What a door's reader gives: its own request type (a stream or not, its field names) and the engine's."""

    stream: Any

    def field_names(self) -> FieldNames: ...


_Door = TypeVar("_Door", bound=ReadRequest)


async def serve_request(request: Request, read: Callable[[Any, list[str]], tuple[_Door, EngineRequest]],
                        framing: Callable[[ServerContext, _Door], Framing]) -> Response:
    """A door's whole route: the body read by ``read`` (the door's reader), then answered in ``framing``."""
    server = server_of(request)
    place, (parsed, call) = await read_body(request, lambda body: read(body, server.served))
    return await respond(request, place, call, framing(server, parsed), stream=parsed.stream is True,
                         names=parsed.field_names())


async def run_off_loop(request: Request, place: Place, work: Callable[[], _Parsed]) -> _Parsed:
    """``work`` on the server's request threads, holding ``place`` until it is done, within the time limit (504)."""
    server = server_of(request)
    limit = server.worker.time_limit
    try:
        future = asyncio.get_running_loop().run_in_executor(server.request_work, work)
        return await asyncio.wait_for(future, limit or None)
    except TimeoutError:
        raise APIError(504, f"The request did not finish within the server's time limit ({limit:g} s).",
                       type="server_error", code="timeout") from None
    except APIError:
        raise
    except Exception as exc:  # noqa: BLE001 - the engine refused the request: the API's own error
        raise engine_error(exc) from None
    finally:
        place.release()


async def _collect(events: Any, stream: AsyncIterator[Any], param: Any, record: AccessRecord | None) -> HammerResponse:
    """The last event of a non-streamed call: its :class:`HammerResponse`."""
    final: HammerResponse | None = None
    try:
        async for event in stream:
            if record is not None:
                record.saw(event)
            if isinstance(event, HammerResponse):
                final = event
    except Exception as exc:  # noqa: BLE001
        if not isinstance(exc, APIError) and engine_error(exc).status >= 500:
            log.exception("the engine failed on a request")
        raise engine_error(exc, param) from None
    finally:
        await events.__aexit__(None, None, None)
    assert final is not None
    return final


def _stream_response(framing: Framing, events: Any, stream: AsyncIterator[Any], param: Any,
                     record: AccessRecord | None) -> Response:
    body = _framed(framing, events, stream, param, record)
    if framing.media_type == NDJSON:
        # A plain streaming response: NDJSON has no comments to ping with (sse-starlette's event stream with
        # pings off busy-looped in some versions, and put ': ping' lines in the body).
        return _LineStream(body, media_type=NDJSON, headers=STREAM_HEADERS)
    # sse-starlette, as llama-cpp-python's server and vLLM use: it stops the generator when the client
    # disconnects, and its comment pings keep proxies from closing a stream that is quiet while a long
    # prompt is evaluated (clients ignore comments).
    return _EventStream(body, ping=PING_SECONDS, sep="\n", media_type=framing.media_type,
                        send_timeout=SEND_TIMEOUT_SECONDS, headers=STREAM_HEADERS)


async def _framed(framing: Framing, events: Any, stream: AsyncIterator[Any], param: Any,
                  record: AccessRecord | None) -> AsyncIterator[bytes]:
    """The stream of one call in ``framing``'s bytes; a client that disconnects cancels this, which stops the
    generation."""
    try:
        for data in framing.start():
            yield data
        async for event in _quiet_marked(stream, PING_SECONDS):
            if event is None:  # quiet for a while (a long prompt evaluation): a sign of life in the API's own terms
                for data in framing.heartbeat():
                    yield data
                continue
            if record is not None:
                record.saw(event)
            for data in framing.event(event):
                yield data
    except Exception as exc:  # noqa: BLE001 - the headers are sent: the error goes in the stream, as each API does
        error = engine_error(exc, param)
        if error.status >= 500:
            log.exception("the engine failed during a streamed request")
        yield framing.error(error)
    finally:
        await events.__aexit__(None, None, None)
    for data in framing.end():
        yield data


async def _quiet_marked(stream: AsyncIterator[Any], seconds: float) -> AsyncIterator[Any]:
    """``stream``'s items, and None each time ``seconds`` pass without one; the item being waited for is not
    cancelled by a None, only when this generator is closed."""
    pending: asyncio.Future[Any] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(stream))
            done, _ = await asyncio.wait({pending}, timeout=seconds)
            if not done:
                yield None
                continue
            finished, pending = pending, None
            try:
                item = finished.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        if pending is not None:  # closed while waiting (the client left): the stream's read ends with it
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending


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


class _SendTimedOut(Exception):  # noqa: N818 - the client stopped reading
    pass


class _LineStream(StreamingResponse):
    """A plain stream whose sends time out as :class:`_EventStream`'s do: a client that stops reading is let go."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def timed(message: Any) -> None:
            try:
                await asyncio.wait_for(send(message), SEND_TIMEOUT_SECONDS)
            except TimeoutError:
                raise _SendTimedOut from None

        try:
            await super().__call__(scope, receive, timed)
        except _SendTimedOut:
            log.warning("a streaming client read nothing for %g s: its response was given up", SEND_TIMEOUT_SECONDS)
