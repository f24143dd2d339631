"""One worker thread in front of the engine: requests run one at a time, in arrival order.

An in-process model (llama.cpp, transformers) decodes one sequence at a time, so the server does
not pretend otherwise: every request is a job on a single-thread executor (its queue is the
request queue), and its events come back to the event loop through an ``asyncio.Queue``. A job
whose client went away is skipped if it has not started, and stopped at the next token if it has:
the worker closes the engine's stream generator, which closes the backend's (see
:meth:`EngineWorker.events`).

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
    """Runs engine calls on one thread, one at a time; counts what waits and what was cut short."""

    def __init__(self, engine: HammerEngine) -> None:
        self.engine = engine
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hammer-engine")
        self._lock = threading.Lock()
        self.waiting = 0
        self.running = 0
        self.completed = 0
        self.cancelled = 0

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    @contextlib.asynccontextmanager
    async def events(self, messages: Sequence[Message], tools: Sequence[Any], tool_choice: str,
                     options: dict[str, Any]) -> AsyncIterator[AsyncIterator[StreamEvent]]:
        """Queue one call; the context's value iterates its events (the last is the ``HammerResponse``).

        Entering waits until the call has started on the engine, so that an error the engine raises
        at the call (a prompt over the context window, an unknown tool) raises here, before a
        streaming response has sent its headers. Leaving early (a client that disconnected) stops the
        generation at its next token.
        """
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
