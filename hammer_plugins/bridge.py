"""The one bridge from a blocking generation in a worker thread to asyncio, with cancellation.

A local runtime (llama.cpp, transformers) generates with blocking calls under a lock. Its async half
(:meth:`hammer_plugins.backends.base.Backend.astream`) runs each generation in a worker thread; when
the awaiting task is cancelled or the consumer stops reading, a :class:`threading.Event` is set, the
generation stops at its next token (:class:`~hammer_plugins.errors.GenerationCancelled`), and the
bridge waits for the worker to end, so the model and its lock are free by the time the cancellation reaches the caller.

``asyncio`` is imported inside the functions: a sync process (``hammer call``) skips its import.

Example:
    >>> import asyncio, threading
    >>> async def main():
    ...     return [i async for i in iterate_in_thread(lambda stop: iter("ab"), threading.Event())]
    >>> asyncio.run(main())
    ['a', 'b']
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, TypeVar

from .errors import GenerationCancelled

T = TypeVar("T")


async def iterate_in_thread(make: Callable[[threading.Event], Iterator[T]], cancel: threading.Event) -> AsyncIterator[T]:
    """Iterate ``make(cancel)`` in one worker thread and yield its items on the event loop.

    When the consumer stops (cancelled, closed early), ``cancel`` is set: the worker stops at the next
    token and releases the model, and closing this generator waits for it, so the next call finds
    the model free. An exception in the worker is raised here; :class:`GenerationCancelled` (nobody
    reads any more) is not.
    """
    import asyncio

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def produce() -> None:
        try:
            for item in make(cancel):
                loop.call_soon_threadsafe(queue.put_nowait, ("item", item))
        except GenerationCancelled:
            pass  # nobody reads any more
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
            loop.call_soon_threadsafe(queue.put_nowait, ("error", exc))
        finally:
            loop.call_soon_threadsafe(queue.put_nowait, ("done", None))

    worker = loop.run_in_executor(None, contextvars.copy_context().run, produce)
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
        await asyncio.wait([worker])
