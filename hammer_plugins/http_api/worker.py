"""What runs the server's engine calls: one at a time on a worker thread, or all at once on the event loop.

An in-process model (llama.cpp, transformers) decodes one sequence at a time, so the server does
not pretend otherwise: every request is a job on a single-thread executor (its queue is the
request queue), and its events come back to the event loop through the one thread bridge
(:func:`hammer_plugins.backends.bridge.iterate_in_thread`), which skips a job stopped while queued. Each job
has a cancel event that the engine checks between tokens and while the prompt is evaluated in
batches; it is set when the client goes away (a queued job is then skipped, a running one stops),
when the request's time limit passes, and at shutdown.

A backend that serves concurrent calls itself (``native_async``: the server backend in front of
llama-server's slots or vLLM) gets every request at once, on the event loop through
``HammerEngine.astream``, pulled by a task of its own into the same kind of queue: its continuous
batching is what decides the order. A stop cancels that task, which closes the backend's HTTP
stream, which frees the slot.

The time limit is a watchdog (a timer on the event loop per request), not a check made when the
client asks for the next event: a streaming client that stops reading is stopped at its deadline
all the same, and its slot freed, while its response waits on a send that never completes.

Bounds, both paths: at most ``parallel * queue_depth`` requests wait (beyond them a request is
refused at once with 429 and ``Retry-After``); a request gets ``time_limit`` seconds from its
arrival, queueing included (then 504, and its generation is stopped); after :meth:`EngineWorker.shut_down`
new and queued requests get 503 and running ones are stopped after a grace period.

Example:
    >>> import asyncio
    >>> from hammer_plugins import HammerEngine, HammerResponse, Message, ScriptedBackend
    >>> from hammer_plugins.engine.request import EngineRequest
    >>> worker = EngineWorker(HammerEngine(backend=ScriptedBackend(["Hello!"])))
    >>> async def ask():
    ...     async with worker.events(EngineRequest.of([Message.user("hi")])) as events:
    ...         return [e async for e in events][-1].text
    >>> asyncio.run(ask())
    'Hello!'
    >>> worker.close()
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hammer_plugins.backends.bridge import iterate_in_thread
from hammer_plugins.engine import HammerEngine, StreamEvent
from hammer_plugins.engine.request import EngineRequest
from hammer_plugins.http_api.defaults import DEFAULT_QUEUE_DEPTH, DEFAULT_SHUTDOWN_GRACE, DEFAULT_TIME_LIMIT
from hammer_plugins.http_api.errors import APIError

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
        self.time_limit = time_limit
        self.cancel = threading.Event()  # the engine checks it between tokens and prompt batches
        self.stopped: asyncio.Future[None] = loop.create_future()  # the request's side of the same signal
        self.reason: str | None = None  # "client", "timeout", "shutdown"
        self.state = "queued"  # then "running", "finished" (or "dropped": stopped while queued)
        self.arrived = time.monotonic()
        self.deadline = self.arrived + time_limit if time_limit else None
        self.started: float | None = None
        self.watchdog: asyncio.TimerHandle | None = None  # stops the job at its deadline, whoever reads
        self.producer: asyncio.Task[None] | None = None  # on the loop: the task that pulls the backend's stream

    def stop(self, reason: str) -> None:
        """Stop the job (from any thread): skipped if queued, stopped at the next token if running (on
        the loop: the task pulling the backend's stream is cancelled)."""
        if self.reason is None:
            self.reason = reason
        self.cancel.set()
        if _running_loop() is self.loop:  # on the loop (the watchdog, a request): at once, so the next step sees it
            self._signal()
            return
        with contextlib.suppress(RuntimeError):  # the loop closed (server stopped)
            self.loop.call_soon_threadsafe(self._signal)

    def _signal(self) -> None:
        if self.stopped.done():
            # Signalled once already. A second cancel (the request leaving after the watchdog fired) would
            # interrupt the producer's own clean-up, the close of the backend's HTTP stream, and llama-server
            # would go on generating for nobody.
            return
        self.stopped.set_result(None)
        if self.producer is not None:  # whether or not the request still reads: the backend's stream is closed
            self.producer.cancel()

    def stopped_error(self) -> BaseException:
        """What the request gets for the stop: 504 past its time limit, 503 at shutdown, else a cancellation."""
        if self.reason == "timeout":
            return APIError(504, f"The request did not finish within the server's time limit ({self.time_limit:g} s, "
                                 "queueing included) and was stopped. Fix: ask for fewer tokens (max_tokens), retry "
                                 "when the server is less busy, or start it with a larger --time-limit.",
                            type="server_error", code="timeout")
        if self.reason == "shutdown":
            return APIError(503, "The server is shutting down; this request was stopped before it finished. Retry "
                                 "once the server is back.", type="server_error", code="server_shutting_down")
        return asyncio.CancelledError()

    async def next(self, queue: asyncio.Queue[tuple[str, Any]]) -> tuple[str, Any]:
        """The job's next item, unless it is stopped first (then the error it gets). The deadline is the
        watchdog's (:meth:`EngineWorker._expire`): a stopped job raises here at once, even with items still queued."""
        if self.stopped.done():
            raise self.stopped_error()
        task = asyncio.ensure_future(queue.get())
        try:
            done, _ = await asyncio.wait({task, self.stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            task.cancel()  # a no-op once done; otherwise nothing is taken from the queue
        if task in done:
            return task.result()
        raise self.stopped_error()

    async def first(self, queue: asyncio.Queue[tuple[str, Any]]) -> AsyncIterator[StreamEvent]:
        """Wait until the call has started (raising what stopped it or what it raised at the call); then
        the iterator of its events, which raises the error of a stop or of the call at its place."""
        kind, payload = await self.next(queue)
        if kind == _ERROR:
            raise payload
        if kind == _DONE:  # stopped before it produced anything
            raise self.stopped_error()

        async def iterate() -> AsyncIterator[StreamEvent]:
            while True:
                kind, payload = await self.next(queue)
                if kind == _DONE:
                    if self.reason is not None:
                        raise self.stopped_error()
                    return
                if kind == _ERROR:
                    raise payload
                if kind == _EVENT:
                    yield payload

        return iterate()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # a thread with no loop: the engine's, a timer's
        return None


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

    def __init__(self, engine: HammerEngine, *, parallel: int = 1, queue_depth: int = DEFAULT_QUEUE_DEPTH,
                 time_limit: float | None = DEFAULT_TIME_LIMIT, shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE) -> None:
        if parallel < 1 or queue_depth < 0:
            raise ValueError(f"parallel must be >= 1 and queue_depth >= 0 (got {parallel}, {queue_depth})")
        self.engine = engine
        self.concurrent = engine.backend.native_async
        self.parallel = parallel if self.concurrent else 1
        self.max_waiting = self.parallel * queue_depth
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
        self.peak_running = 0  # the most calls that ever ran at once: 1 in process, up to ``parallel`` on a server
        self.completed = 0
        self.cancelled = 0
        self.refused = 0  # 429: the queue was full
        self.timed_out = 0

    # ------------------------------------------------------------------ bounds
    def retry_after(self) -> int:
        """Seconds until a place is likely free: the recent mean duration of a request over ``parallel`` (1 to 60)."""
        mean = sum(self._durations) / len(self._durations) if self._durations else 1.0
        return max(1, min(60, math.ceil(mean / self.parallel)))

    def _check_room(self) -> None:
        """503 while shutting down, 429 when every parallel decode is busy and the queue is full (called under the lock)."""
        if self.closing:
            raise APIError(503, "The server is shutting down and takes no new requests.", type="server_error",
                           code="server_shutting_down")
        if self.reading + self.waiting + self.running >= self.parallel + self.max_waiting:  # all busy, the queue full
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
        if self.time_limit is not None:
            job.watchdog = loop.call_later(self.time_limit, self._expire, job)
        return job

    @staticmethod
    def _disarm(job: _Job) -> None:
        """The request has ended: its watchdog (and what it holds) goes now, not at the deadline."""
        if job.watchdog is not None:
            job.watchdog.cancel()
            job.watchdog = None

    def _expire(self, job: _Job) -> None:
        """The watchdog (on the loop, at the deadline): stop ``job`` whether or not its client reads.

        The engine thread stops at its next token, the task pulling a backend's stream is cancelled
        (which closes its HTTP request: llama-server frees the slot); a client that still reads gets
        the 504 at once."""
        with self._lock:
            if job.state not in ("queued", "running"):  # it ended in time (its client may still be reading)
                return
            self.timed_out += 1
        self._drop(job, "timeout")

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
            job.state = "finished"  # the watchdog, if it fires later, finds nothing to stop
            self.running -= 1
            self.completed += 1
            self.cancelled += stopped
            self._jobs.discard(job)
            if not stopped and job.started is not None:
                self._durations.append(time.monotonic() - job.started)

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
    def events(self, request: EngineRequest,
               place: Place | None = None) -> contextlib.AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        """Start one call; the context's value iterates its events (the last is the ``HammerResponse``).

        Entering waits until the call has started on the engine, so that an error the engine raises
        at the call (a prompt over the context window, an unknown tool), a full queue (429), a
        shutdown (503) or the time limit (504) raises here, before a streaming response has sent its
        headers. Leaving early (a client that disconnected) skips a queued call and stops a running
        one at its next token. ``place``: the one :meth:`reserve` gave this request, taken over here.
        """
        return self._run(request, place)

    def _source(self, job: _Job, request: EngineRequest) -> AsyncIterator[Any]:
        """The call's items: ``_STARTED`` once it has started on the engine (the prompt planned), then its events.

        In process, the call is a job of the single-thread executor (its queue is the request queue),
        brought to the loop by the one thread bridge; on a native-async backend, the engine's ``astream``."""
        if not self.concurrent:
            def on_thread(cancel: threading.Event) -> Iterator[Any]:
                if not self._start(job):  # its client left, its time ran out or the server is stopping: skipped
                    return
                try:
                    # cancel reaches the backend: a stop ends even a long prompt evaluation (llama.cpp checks it between batches)
                    stream = self.engine.stream(request, cancel=cancel)
                    yield _STARTED
                    try:
                        for event in stream:
                            yield event
                            if cancel.is_set():
                                return
                    finally:
                        stream.close()  # ends the backend's generation too (the engine closes its chunk iterator)
                finally:  # here, not on the loop: the executor's next job starts as this one returns
                    self._finish(job, cancel.is_set())

            return iterate_in_thread(on_thread, job.cancel, self._executor)

        async def on_loop() -> AsyncIterator[Any]:
            stream = self.engine.astream(request)
            try:
                async for event in stream:
                    # The first event comes once the prompt is planned, fitted and evaluated: until then
                    # the job counts as waiting, and errors at the call reach the request before its headers.
                    if self._start(job):
                        yield _STARTED
                    yield event
            finally:
                await stream.aclose()  # type: ignore[attr-defined]  # closes the backend's HTTP stream: the slot is freed

        return on_loop()

    @contextlib.asynccontextmanager
    async def _run(self, request: EngineRequest, place: Place | None) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        job = self._admit(place)
        source = self._source(job, request)
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

        async def produce() -> None:
            # A task of its own, not the client's pace: the watchdog can stop it while the response
            # waits on a send. The queue is unbounded (max_tokens bounds it).
            stopped = False
            try:
                async for item in source:
                    queue.put_nowait((_STARTED, None) if item is _STARTED else (_EVENT, item))
            except asyncio.CancelledError:  # stopped: its client left, its time ran out, or shutdown
                stopped = True
            except Exception as exc:  # noqa: BLE001 - handed to the request, which answers with it
                queue.put_nowait((_ERROR, exc))
            finally:
                with contextlib.suppress(BaseException):
                    await source.aclose()  # type: ignore[attr-defined]  # the generation ends (or its thread is skipped)
                self._start(job)  # (stopped while waiting: counted running for the bookkeeping below)
                self._finish(job, stopped or job.cancel.is_set())
                queue.put_nowait((_DONE, None))

        job.producer = asyncio.ensure_future(produce())
        if job.stopped.done():  # stopped before its producer existed (e.g. the watchdog of a long planning)
            job.producer.cancel()
        try:
            yield await job.first(queue)
        finally:
            self._drop(job, "client")  # cancels the producer (a no-op once done); the reason of an earlier stop stays
            self._disarm(job)
            # On a server, wait until it has ended, so the backend's stream is closed (the slot freed) and
            # the counts of the queue bound are down when this request is. In process the thread stops at
            # its next token; a model that ignores the stop must not hold the answer (/health reports it).
            while self.concurrent and not job.producer.done():
                with contextlib.suppress(BaseException):
                    await asyncio.wait({job.producer})
