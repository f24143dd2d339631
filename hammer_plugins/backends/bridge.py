"""The one bridge from a blocking generation in a worker thread to asyncio, with cancellation.

An in-process backend (llama.cpp, transformers) generates with blocking calls under a lock. Its async half
(:meth:`hammer_plugins.backends.base.Backend.astream`) and the OpenAI server's queue of in-process
calls (:class:`hammer_plugins.http_api.worker.EngineWorker`) both run a generation through
:func:`iterate_in_thread`: its items come back on the event loop, and when the awaiting task is
cancelled or the consumer stops reading, a :class:`threading.Event` is set and the generation stops
at its next token (:class:`~hammer_plugins.values.errors.GenerationCancelled`).

A generation still waiting for its thread (the server's single-thread executor is its queue) is
skipped when stopped, and closing does not wait for it; one that has begun is waited for, so the
model and its lock are free by the time the cancellation reaches the caller.

``asyncio`` is imported inside the function: a sync process (``hammer call``) skips its import.

Example:
    >>> import asyncio, threading
    >>> async def main():
    ...     return [i async for i in iterate_in_thread(lambda stop: iter("ab"), threading.Event())]
    >>> asyncio.run(main())
    ['a', 'b']
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Executor
from typing import Any, TypeVar

from hammer_plugins.values.errors import GenerationCancelled

T = TypeVar("T")


async def iterate_in_thread(make: Callable[[threading.Event], Iterator[T]], cancel: threading.Event,
                            executor: Executor | None = None) -> AsyncIterator[T]:
    """Iterate ``make(cancel)`` in a thread of ``executor`` (default: the loop's) and yield its items here.

    When the consumer stops (cancelled, closed early), ``cancel`` is set. A generation that has begun
    stops at its next token and releases the model, and closing this generator waits for it, so the
    next call finds the model free; one still queued in ``executor`` is skipped, and closing returns
    at once. An exception in the thread is raised here; :class:`GenerationCancelled` (nobody reads
    any more) is not.
    """
    import asyncio

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    guard = threading.Lock()  # orders "the thread begins" against "the consumer stops"
    began = False

    def put(kind: str, payload: Any = None) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed (a server shutting down)
            loop.call_soon_threadsafe(queue.put_nowait, (kind, payload))

    def produce() -> None:
        nonlocal began
        with guard:
            if cancel.is_set():  # stopped while it waited for a thread: skipped
                return
            began = True
        try:
            for item in make(cancel):
                put("item", item)
        except GenerationCancelled:
            pass  # nobody reads any more
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
            put("error", exc)

    worker = loop.run_in_executor(executor, contextvars.copy_context().run, produce)
    # Done (after every item, which the loop queued before it) also when the executor dropped it unrun.
    worker.add_done_callback(lambda _: queue.put_nowait(("done", None)))
    try:
        while True:
            kind, payload = await queue.get()
            if kind == "done":
                break
            if kind == "error":
                raise payload
            yield payload
    finally:
        cancel.set()
        with guard:
            running = began
        if running:
            await asyncio.wait([worker])
