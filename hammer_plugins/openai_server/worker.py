"""What runs the server's engine calls: one at a time on a worker thread, or all at once on the event loop.

An in-process model (llama.cpp, transformers) decodes one sequence at a time, so the server does
not pretend otherwise: every request is a job on a single-thread executor (its queue is the
request queue), and its events come back to the event loop through an ``asyncio.Queue``. A job
whose client went away is skipped if it has not started, and stopped at the next token if it has:
the worker closes the engine's stream generator, which closes the backend's (see
:meth:`EngineWorker.events`).

A backend that serves concurrent calls itself (``native_async``: the server backend in front of
llama-server's slots or vLLM) gets every request at once, on the event loop through
``HammerEngine.astream``: its continuous batching is what decides the order. A client that goes
away closes the stream, which closes the HTTP request, which frees the slot.

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
import threading
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..engine import HammerEngine, StreamEvent
from ..messages import Message

_STARTED = "started"
_EVENT = "event"
_ERROR = "error"
_DONE = "done"


class EngineWorker:
    """Runs engine calls (one at a time, or concurrently on a native-async backend); counts what waits and what was cut short."""

    def __init__(self, engine: HammerEngine) -> None:
        self.engine = engine
        self.concurrent = engine.backend.native_async
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hammer-engine")
        self._lock = threading.Lock()
        self.waiting = 0
        self.running = 0
        self.peak_running = 0  # the most calls that ever ran at once: 1 in process, up to the slots on a server
        self.completed = 0
        self.cancelled = 0

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    def events(self, messages: Sequence[Message], tools: Sequence[Any], tool_choice: str,
               options: dict[str, Any]) -> contextlib.AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        """Start one call; the context's value iterates its events (the last is the ``HammerResponse``).

        Entering waits until the call has started on the engine, so that an error the engine raises
        at the call (a prompt over the context window, an unknown tool) raises here, before a
        streaming response has sent its headers. Leaving early (a client that disconnected) stops the
        generation at its next token.
        """
        if self.concurrent:
            return self._on_loop(messages, tools, tool_choice, options)
        return self._on_thread(messages, tools, tool_choice, options)

    @contextlib.asynccontextmanager
    async def _on_loop(self, messages: Sequence[Message], tools: Sequence[Any], tool_choice: str,
                       options: dict[str, Any]) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        stream = self.engine.astream(messages, tools, tool_choice, **options)
        with self._lock:
            self.waiting += 1
        outcome = "stopped"  # until the last event is read, or an error ends it
        try:
            try:
                # The first event comes once the prompt is planned, fitted and evaluated: errors at the call raise here.
                first = await anext(stream)
            except Exception:
                outcome = "failed"
                raise
            finally:
                with self._lock:
                    self.waiting -= 1
                    self.running += 1
                    self.peak_running = max(self.peak_running, self.running)

            async def iterate() -> AsyncIterator[StreamEvent]:
                nonlocal outcome
                yield first
                try:
                    async for event in stream:
                        yield event
                except Exception:
                    outcome = "failed"
                    raise
                outcome = "done"

            yield iterate()
        finally:
            await stream.aclose()  # type: ignore[attr-defined]  # closes the backend's HTTP stream: the slot is freed
            with self._lock:
                self.running -= 1
                self.completed += 1
                self.cancelled += outcome == "stopped"

    @contextlib.asynccontextmanager
    async def _on_thread(self, messages: Sequence[Message], tools: Sequence[Any], tool_choice: str,
                         options: dict[str, Any]) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        cancel = threading.Event()

        def put(kind: str, payload: Any = None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed (server shutting down)
                loop.call_soon_threadsafe(queue.put_nowait, (kind, payload))

        def work() -> None:
            with self._lock:
                self.waiting -= 1
                if cancel.is_set():
                    self.cancelled += 1
                    put(_DONE)
                    return
                self.running += 1
                self.peak_running = max(self.peak_running, self.running)
            stopped = False
            try:
                stream = self.engine.stream(messages, tools, tool_choice, **options)
                put(_STARTED)
                try:
                    for event in stream:
                        put(_EVENT, event)
                        if cancel.is_set():
                            stopped = True
                            break
                finally:
                    # Ends the backend's generation too (the engine closes its chunk iterator).
                    stream.close()  # type: ignore[attr-defined]
            except BaseException as exc:  # noqa: BLE001 - handed to the request, which answers with it
                put(_ERROR, exc)
            finally:
                with self._lock:
                    self.running -= 1
                    self.completed += 1
                    self.cancelled += stopped
                put(_DONE)

        with self._lock:
            self.waiting += 1
        self._executor.submit(work)
        try:
            kind, payload = await queue.get()
            if kind == _ERROR:
                raise payload
            if kind == _DONE:  # skipped: cancelled before it started
                raise asyncio.CancelledError

            async def iterate() -> AsyncIterator[StreamEvent]:
                while True:
                    kind, payload = await queue.get()
                    if kind == _DONE:
                        return
                    if kind == _ERROR:
                        raise payload
                    yield payload

            yield iterate()
        finally:
            cancel.set()
