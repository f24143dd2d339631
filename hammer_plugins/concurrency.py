"""Ask a backend several questions at once: what ``--concurrency`` means in the evaluators.

A server with several slots (llama.cpp's ``llama-server --parallel N``, vLLM) answers concurrent
requests together (continuous batching); a local model answers one at a time. :func:`run_concurrently`
keeps ``concurrency`` calls in flight, submitting the items in the order given (so a prefix-sorted
schedule still reaches the server in prefix order) and yielding each result as it completes.

Example:
    >>> sorted(run_concurrently(lambda x: x * x, [1, 2, 3], concurrency=2))
    [(1, 1), (2, 4), (3, 9)]
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import TypeVar

from .engine import HammerEngine

Item = TypeVar("Item")
Result = TypeVar("Result")


def run_concurrently(call: Callable[[Item], Result], items: Iterable[Item],
                     concurrency: int = 1) -> Iterator[tuple[Item, Result]]:
    """``(item, call(item))`` for every item, at most ``concurrency`` calls running at a time.

    With ``concurrency=1`` the calls run one by one in this thread, in order. Otherwise results come
    in completion order. The first call that raises stops the submission of more, waits for those
    in flight, and re-raises; results finished before it were already yielded, so nothing is lost.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency}: it must be at least 1")
    if concurrency == 1:
        for item in items:
            yield item, call(item)
        return
    pending = iter(items)
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="hammer-ask") as pool:
        running: dict[Future[Result], Item] = {}
        for item in pending:
            running[pool.submit(call, item)] = item
            if len(running) == concurrency:
                break
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                item = running.pop(future)
                yield item, future.result()
                nxt = next(pending, _DONE)
                if nxt is not _DONE:
                    running[pool.submit(call, nxt)] = nxt  # type: ignore[arg-type]


_DONE = object()


def effective_concurrency(engine: HammerEngine | None, concurrency: int) -> int:
    """``concurrency``, or 1 (with a note on stderr) when the engine's backend answers one call at a time."""
    if concurrency < 1:
        raise ValueError(f"--concurrency {concurrency}: it must be at least 1")
    if concurrency > 1 and engine is not None and not engine.backend.native_async:
        print(f"note: --concurrency {concurrency} ignored: the {engine.backend.name} backend answers one call at a "
              "time; use --backend server with a server started with several slots (hammer serve --parallel N)",
              file=sys.stderr)
        return 1
    return concurrency
