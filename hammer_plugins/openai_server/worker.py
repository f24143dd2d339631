"""What runs the server's engine calls: one at a time on a worker thread, or all at once on the event loop.

An in-process model (llama.cpp, transformers) decodes one sequence at a time, so the server does
not pretend otherwise: every request is a job on a single-thread executor (its queue is the
request queue), and its events come back to the event loop through an ``asyncio.Queue``. Each job
has a cancel event that the engine checks between tokens and while the prompt is evaluated in
batches; it is set when the client goes away (a queued job is then skipped, a running one stops),
when the request's time limit passes, and at shutdown.

A backend that serves concurrent calls itself (``native_async``: the server backend in front of
llama-server's slots or vLLM) gets every request at once, on the event loop through
``HammerEngine.astream``: its continuous batching is what decides the order. A client that goes
away closes the stream, which closes the HTTP request, which frees the slot.

Bounds, both paths: at most ``slots * queue_per_slot`` requests wait (beyond them a request is
refused at once with 429 and ``Retry-After``); a request gets ``time_limit`` seconds from its
arrival, queueing included (then 504, and its generation is stopped); after :meth:`EngineWorker.shut_down`
new and queued requests get 503 and running ones are stopped after a grace period.

Example:
    >>> import asyncio
    >>> from hammer_plugins import HammerEngine, HammerResponse, Message, ScriptedBackend
    >>> worker = EngineWorker(HammerEngine(backend=ScriptedBackend(["Hello!"])))
    >>> async def ask():
    ...     async with worker.events([Message.user("hi")], [], "none", {}) as events:
    ...         return [e async for e in events][-1].text
    >>> asyncio.run(ask())
    'Hello!'
    >>> worker.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..backends.base import GenerationCancelled
from ..engine import HammerEngine, StreamEvent
from ..messages import Message
from .protocol import APIError

DEFAULT_QUEUE_PER_SLOT = 16
"""Requests allowed to wait per slot (an in-process model has one slot); past them: 429 at once."""

DEFAULT_TIME_LIMIT = 600.0
"""Seconds a request may take from its arrival, queueing included; then 504 and its generation stops."""

DEFAULT_SHUTDOWN_GRACE = 5.0
"""Seconds running requests get to finish once shutdown begins, before they are stopped."""

STUCK_GRACE = 30.0
"""A call still running this long past its time limit (its model ignores the stop) makes /health 503."""

_STARTED = "started"
_EVENT = "event"
_ERROR = "error"
_DONE = "done"


class _Job:
    """One request's place in the worker: its state, its deadline and the event that stops its generation."""

    def __init__(self, loop: asyncio.AbstractEventLoop, time_limit: float | None) -> None:
        self.loop = loop
        self.cancel = threading.Event()  # the engine checks it between tokens and prompt batches
        self.stopped: asyncio.Future[None] = loop.create_future()  # the request's side of the same signal
        self.reason: str | None = None  # "client", "timeout", "shutdown"
        self.state = "queued"  # then "running", "finished" (or "dropped": stopped while queued)
        self.arrived = time.monotonic()
        self.deadline = self.arrived + time_limit if time_limit else None
        self.started: float | None = None

    def stop(self, reason: str) -> None:
        """Stop the job (from any thread): skipped if queued, stopped at the next token if running."""
        if self.reason is None:
            self.reason = reason
        self.cancel.set()
        with contextlib.suppress(RuntimeError):  # the loop closed (server stopped)
            self.loop.call_soon_threadsafe(self._signal)

    def _signal(self) -> None:
        if not self.stopped.done():
            self.stopped.set_result(None)


def _engine_stream(engine: HammerEngine, messages: Sequence[Message], tools: Sequence[Any], tool_choice: str,
                   options: dict[str, Any], cancel: threading.Event) -> Any:
    """``engine.stream`` with ``cancel`` wired to the backend: a stop ends even a long prompt evaluation
    (llama.cpp checks it between batches), not only the decoding."""
    if "cancel" in inspect.signature(engine.stream).parameters:
        return engine.stream(messages, tools, tool_choice, cancel=cancel, **options)
    return engine._drive(engine._prepare(messages, tools, tool_choice, **options), cancel)  # noqa: SLF001


class Place:
    """A place in the queue held by a request whose body is still being read and parsed (:meth:`EngineWorker.reserve`)."""

    def __init__(self, worker: EngineWorker) -> None:
        self.worker = worker
        self.held = True

    def release(self) -> None:
        """Give the place back (a no-op once :meth:`EngineWorker.events` took it over)."""
        with self.worker._lock:  # noqa: SLF001 - the worker's own bookkeeping
            if self.held:
                self.held = False
                self.worker.reading -= 1


class EngineWorker:
    """Runs engine calls (one at a time, or concurrently on a native-async backend), within bounds;
    counts what waits and what was cut short."""

    def __init__(self, engine: HammerEngine, *, slots: int = 1, queue_per_slot: int = DEFAULT_QUEUE_PER_SLOT,
                 time_limit: float | None = DEFAULT_TIME_LIMIT, shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE) -> None:
        if slots < 1 or queue_per_slot < 0:
            raise ValueError(f"slots must be >= 1 and queue_per_slot >= 0 (got {slots}, {queue_per_slot})")
        self.engine = engine
        self.concurrent = engine.backend.native_async
        self.slots = slots if self.concurrent else 1
        self.max_waiting = self.slots * queue_per_slot
        self.time_limit = time_limit or None
        self.shutdown_grace = shutdown_grace
        self.stuck_grace = STUCK_GRACE
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hammer-engine")
        self._lock = threading.Lock()
        self._jobs: set[_Job] = set()
        self._durations: deque[float] = deque(maxlen=20)
        self.closing = False
        self.reading = 0  # requests holding a place while their body is read and parsed
        self.waiting = 0
        self.running = 0
        self.peak_running = 0  # the most calls that ever ran at once: 1 in process, up to the slots on a server
        self.completed = 0
        self.cancelled = 0
        self.refused = 0  # 429: the queue was full
        self.timed_out = 0

    # ------------------------------------------------------------------ bounds
    def retry_after(self) -> int:
        """Seconds until a place is likely free: the recent mean duration of a request over the slots (1 to 60)."""
        mean = sum(self._durations) / len(self._durations) if self._durations else 1.0
        return max(1, min(60, math.ceil(mean / self.slots)))

    def _check_room(self) -> None:
        """503 while shutting down, 429 when every slot is busy and the queue is full (called under the lock)."""
        if self.closing:
            raise APIError(503, "The server is shutting down and takes no new requests.", type="server_error",
                           code="server_shutting_down")
        if self.reading + self.waiting + self.running >= self.slots + self.max_waiting:  # every slot busy, the queue full
            self.refused += 1
            seconds = self.retry_after()
            raise APIError(429, f"The server is busy: {self.reading + self.waiting} requests are already waiting for "
                                f"the model (the limit is {self.max_waiting}). Retry after {seconds} s.", type="requests",
                           code="rate_limit_exceeded", headers={"retry-after": str(seconds)})

    def reserve(self) -> Place:
        """A place in the queue for a request whose body is yet to be read and parsed: the bound (429) and a
        shutdown (503) are consulted before that work. :meth:`events` with ``place=`` takes it over;
        :meth:`Place.release` gives it back otherwise."""
        with self._lock:
            self._check_room()
            self.reading += 1
        return Place(self)

    def _admit(self, place: Place | None = None) -> _Job:
        loop = asyncio.get_running_loop()
        with self._lock:
            if place is not None and place.held:  # its room was counted when its body began to be read
                place.held = False
                self.reading -= 1
                if self.closing:
                    self._check_room()
            else:
                self._check_room()
            job = _Job(loop, self.time_limit)
            self._jobs.add(job)
            self.waiting += 1
        return job

    def _start(self, job: _Job) -> bool:
        """Mark ``job`` running (False: it was stopped while queued and is skipped)."""
        with self._lock:
            if job.state != "queued":
                return False
            job.state = "running"
            job.started = time.monotonic()
            self.waiting -= 1
            self.running += 1
            self.peak_running = max(self.peak_running, self.running)
            return True

    def _drop(self, job: _Job, reason: str) -> None:
        """Stop ``job``; one still queued leaves the queue now (its place is free at once)."""
        with self._lock:
            if job.state == "queued":
                job.state = "dropped"
                self.waiting -= 1
                self.cancelled += 1
                self._jobs.discard(job)
        job.stop(reason)

    def _finish(self, job: _Job, stopped: bool) -> None:
        with self._lock:
            if job.state != "running":
                return
            job.state = "finished"
            self.running -= 1
            self.completed += 1
            self.cancelled += stopped
            self._jobs.discard(job)
            if not stopped and job.started is not None:
                self._durations.append(time.monotonic() - job.started)

    def _stopped_error(self, job: _Job) -> BaseException:
        if job.reason == "timeout":
            return APIError(504, f"The request did not finish within the server's time limit ({self.time_limit:g} s, "
                                 "queueing included) and was stopped. Fix: ask for fewer tokens (max_tokens), retry "
                                 "when the server is less busy, or start it with a larger --time-limit.",
                            type="server_error", code="timeout")
        if job.reason == "shutdown":
            return APIError(503, "The server is shutting down; this request was stopped before it finished. Retry "
                                 "once the server is back.", type="server_error", code="server_shutting_down")
        return asyncio.CancelledError()

    async def _next(self, job: _Job, step: Awaitable[Any]) -> Any:
        """``step``'s result, unless the job is stopped or its deadline passes first (then the error it gets)."""
        task = asyncio.ensure_future(step)
        remaining = None if job.deadline is None else max(0.0, job.deadline - time.monotonic())
        try:
            done, _ = await asyncio.wait({task, job.stopped}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:  # this request was cancelled (its client left): the step goes with it
            task.cancel()
            # Wait until it has ended: the stream's aclose() after this raises while a step still runs
            # ("asynchronous generator is already running"), which left the slot decoding and the
            # counters of the queue bound never decremented.
            while not task.done():
                with contextlib.suppress(BaseException):
                    await asyncio.wait({task})
            raise
        if task in done:
            return task.result()
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        if not done:  # the time limit
            with self._lock:
                self.timed_out += 1
            self._drop(job, "timeout")
        raise self._stopped_error(job)

    # ------------------------------------------------------------------ health and shutdown
    def stuck(self) -> str | None:
        """Why the worker cannot serve (a call running well past its time limit), or None."""
        if self.time_limit is None:
            return None
        now = time.monotonic()
        with self._lock:
            late = [job for job in self._jobs if job.state == "running" and job.deadline is not None
                    and now > job.deadline + self.stuck_grace]
        if late:
            over = now - min(job.deadline for job in late if job.deadline is not None)
            return (f"a call has run {over:.0f} s past its time limit ({self.time_limit:g} s) and did not stop: the "
                    "model is not answering")
        return None

    def shut_down(self, grace: float | None = None) -> None:
        """Begin shutdown (from any thread): no new requests, queued ones answered 503 now, running ones
        stopped after ``grace`` seconds (default ``shutdown_grace``)."""
        grace = self.shutdown_grace if grace is None else grace
        with self._lock:
            self.closing = True
            jobs = list(self._jobs)
        for job in jobs:
            if job.state == "queued":
                self._drop(job, "shutdown")

        def stop_running() -> None:
            with self._lock:
                running = [job for job in self._jobs if job.state == "running"]
            for job in running:
                job.stop("shutdown")

        if grace <= 0:
            stop_running()
        else:
            timer = threading.Timer(grace, stop_running)
            timer.daemon = True
            timer.start()

    def idle(self) -> bool:
        with self._lock:
            return not any(job.state == "running" for job in self._jobs)

    def close(self) -> None:
        with self._lock:
            self.closing = True
            jobs = list(self._jobs)
        for job in jobs:
            self._drop(job, "shutdown")
        self._executor.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ calls
    def events(self, messages: Sequence[Message], tools: Sequence[Any], tool_choice: str, options: dict[str, Any],
               place: Place | None = None) -> contextlib.AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        """Start one call; the context's value iterates its events (the last is the ``HammerResponse``).

        Entering waits until the call has started on the engine, so that an error the engine raises
        at the call (a prompt over the context window, an unknown tool), a full queue (429), a
        shutdown (503) or the time limit (504) raises here, before a streaming response has sent its
        headers. Leaving early (a client that disconnected) skips a queued call and stops a running
        one at its next token. ``place``: the one :meth:`reserve` gave this request, taken over here.
        """
        if self.concurrent:
            return self._on_loop(messages, tools, tool_choice, options, place)
        return self._on_thread(messages, tools, tool_choice, options, place)

    @contextlib.asynccontextmanager
    async def _on_loop(self, messages: Sequence[Message], tools: Sequence[Any], tool_choice: str,
                       options: dict[str, Any], place: Place | None) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        job = self._admit(place)
        stream = self.engine.astream(messages, tools, tool_choice, **options)
        outcome = "stopped"  # until the last event is read, or an error ends it
        try:
            try:
                # The first event comes once the prompt is planned, fitted and evaluated: errors at the call raise here.
                first = await self._next(job, anext(stream))
            except Exception:
                outcome = "failed"
                raise
            finally:
                self._start(job)

            async def iterate() -> AsyncIterator[StreamEvent]:
                nonlocal outcome
                yield first
                try:
                    while True:
                        try:
                            event = await self._next(job, anext(stream))
                        except StopAsyncIteration:
                            break
                        yield event
                except Exception:
                    outcome = "failed"
                    raise
                outcome = "done"

            yield iterate()
        finally:
            job.stop("client")  # a no-op once done; the reason of an earlier stop stays
            try:
                await stream.aclose()  # type: ignore[attr-defined]  # closes the backend's HTTP stream: the slot is freed
            finally:  # the queue bound's counts, whatever closing did
                self._start(job)  # (stopped while queued: counted running for the bookkeeping below)
                self._finish(job, outcome == "stopped")

    @contextlib.asynccontextmanager
    async def _on_thread(self, messages: Sequence[Message], tools: Sequence[Any], tool_choice: str,
                         options: dict[str, Any], place: Place | None) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        job = self._admit(place)
        loop = job.loop
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        def put(kind: str, payload: Any = None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed (server shutting down)
                loop.call_soon_threadsafe(queue.put_nowait, (kind, payload))

        def work() -> None:
            if not self._start(job):  # its client left, its time ran out or the server is stopping: skipped
                return
            stopped = False
            try:
                stream = _engine_stream(self.engine, messages, tools, tool_choice, options, job.cancel)
                put(_STARTED)
                try:
                    for event in stream:
                        put(_EVENT, event)
                        if job.cancel.is_set():
                            stopped = True
                            break
                finally:
                    # Ends the backend's generation too (the engine closes its chunk iterator).
                    stream.close()
            except GenerationCancelled:
                stopped = True
            except BaseException as exc:  # noqa: BLE001 - handed to the request, which answers with it
                put(_ERROR, exc)
            finally:
                self._finish(job, stopped or job.cancel.is_set())
                put(_DONE)

        self._executor.submit(work)
        try:
            kind, payload = await self._next(job, queue.get())
            if kind == _ERROR:
                raise payload
            if kind == _DONE:  # stopped before it produced anything
                raise self._stopped_error(job)

            async def iterate() -> AsyncIterator[StreamEvent]:
                while True:
                    kind, payload = await self._next(job, queue.get())
                    if kind == _DONE:
                        if job.reason is not None:
                            raise self._stopped_error(job)
                        return
                    if kind == _ERROR:
                        raise payload
                    yield payload

            yield iterate()
        finally:
            self._drop(job, "client")  # a no-op once done; a queued job leaves the queue, a running one stops
