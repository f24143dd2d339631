"""The drivers: they answer the turn rules' requests from a backend's sync API or its async half.

:func:`~hammer_plugins.engine.turn.run` is free of I/O; :func:`drive` runs it on a backend's sync
API (the sync calls, and the OpenAI server's worker thread) and :func:`adrive` on its async half
(``astream``, ``acount_tokens``, ``aload``: every async call), which the server backend serves on the
event loop and an in-process backend in a worker thread under its lock (:class:`~hammer_plugins.backends.base.Backend`).

Example:
    >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend, TextDelta
    >>> from hammer_plugins.engine.planning import make_plan
    >>> from hammer_plugins.engine.request import EngineRequest
    >>> from hammer_plugins.engine.turn import run
    >>> engine = HammerEngine(backend=ScriptedBackend(["Hello!"]))
    >>> plan = make_plan(engine, EngineRequest.of([Message.user("hi")]))
    >>> [e.text for e in drive(engine, run(engine, plan, None)) if isinstance(e, TextDelta)]
    ['Hello!']
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Generator, Iterator
from typing import Any

from hammer_plugins.backends.base import GenerationCancelled, GenerationChunk
from hammer_plugins.engine.core import EngineCore
from hammer_plugins.engine.planning import afit_tokens, fit_tokens
from hammer_plugins.engine.turn import END, NEXT, Fit, Generate
from hammer_plugins.output.events import StreamEvent


def drive(engine: EngineCore, core: Generator[Any, Any, None],
          cancel: threading.Event | None = None) -> Iterator[StreamEvent]:
    """Run a core on the backend's sync API; ``cancel`` (set from another thread) stops the generation at
    the next token with :class:`~hammer_plugins.backends.base.GenerationCancelled`."""
    chunks: Iterator[GenerationChunk] | None = None
    reply: Any = None
    try:
        while True:
            try:
                item = core.send(reply)
            except StopIteration:
                return
            reply = None
            if isinstance(item, Fit):
                reply = fit_tokens(engine, item.prompt, item.max_tokens)
            elif isinstance(item, Generate):
                if cancel is not None and cancel.is_set():  # e.g. between the two passes of an answer
                    raise GenerationCancelled("the call was cancelled")
                chunks = iter(engine.backend.stream(item.prompt, item.settings, item.grammar, cancel=cancel))
                reply = next(chunks, END)
            elif item is NEXT:
                reply = next(chunks, END)  # type: ignore[arg-type]
            else:
                yield item
    finally:
        core.close()
        close = getattr(chunks, "close", None)
        if close is not None:
            close()  # a caller that stopped early ends the generation (a server drops the request)


async def adrive(engine: EngineCore, core: Generator[Any, Any, None]) -> AsyncIterator[StreamEvent]:
    """Run a core on the backend's async half (``astream``, ``acount_tokens``, ``aload``): on the event loop
    for the server backend, so concurrent calls really run concurrently; each generation in a worker
    thread, under the model's lock, for an in-process backend."""
    backend = engine.backend
    chunks: Any = None
    reply: Any = None
    try:
        while True:
            try:
                item = core.send(reply)
            except StopIteration:
                return
            reply = None
            if isinstance(item, Fit):
                reply = await afit_tokens(engine, item.prompt, item.max_tokens)
            elif isinstance(item, Generate):
                chunks = backend.astream(item.prompt, item.settings, item.grammar)
                reply = await anext(chunks, END)
            elif item is NEXT:
                reply = await anext(chunks, END)
            else:
                yield item
    finally:
        core.close()
        if chunks is not None:
            await chunks.aclose()
