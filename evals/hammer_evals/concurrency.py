"""Ask a backend several questions at once: what ``--concurrency`` means in the evaluators.

A server with several slots (llama.cpp's ``llama-server --parallel N``, vLLM) answers concurrent
requests together (continuous batching); a local model answers one at a time.
:func:`run_concurrently` runs ``concurrency`` workers, each over its own contiguous run of the
items, yielding each result as it completes. Contiguous runs matter: the evaluators sort prompts so
that neighbours share long prefixes, and a server slot keeps its previous prompt's KV cache, so a
worker's next prompt re-evaluates only what differs (interleaving neighbours across workers would
make every slot evaluate nearly the whole prompt).

Example:
    >>> sorted(run_concurrently(lambda x: x * x, [1, 2, 3], concurrency=2))
    [(1, 1), (2, 4), (3, 9)]
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from hammer_plugins.engine import HammerEngine

Item = TypeVar("Item")
Result = TypeVar("Result")


def run_concurrently(call: Callable[[Item], Result], items: Iterable[Item],
                     concurrency: int = 1) -> Iterator[tuple[Item, Result]]:
    """``(item, call(item))`` for every item, at most ``concurrency`` calls running at a time.

    With ``concurrency=1`` the calls run one by one in this thread, in order. Otherwise the items
    are split into ``concurrency`` contiguous runs, each worked through in order by one thread, and
    results come in completion order. The first call that raises stops every worker from taking
    another item and is re-raised once those in flight are done; every answer finished before that
    is yielded first, so no finished work is lost.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency={concurrency}: it must be at least 1")
    if concurrency == 1:
        for item in items:
            yield item, call(item)
        return
    todo = list(items)
    size, extra = divmod(len(todo), concurrency)
    bounds = [i * size + min(i, extra) for i in range(concurrency + 1)]
    runs = [todo[bounds[i]:bounds[i + 1]] for i in range(concurrency) if bounds[i] < bounds[i + 1]]
    done: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
    stop = threading.Event()

    def work(run: list[Item]) -> None:
        try:
            for item in run:
                if stop.is_set():
                    break
                try:
                    done.put(("ok", item, call(item)))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, re-raised there
                    stop.set()
                    done.put(("error", item, exc))
                    break
        finally:
            done.put(("finished", None, None))

    workers = [threading.Thread(target=work, args=(run,), name=f"hammer-ask-{i}", daemon=True)
               for i, run in enumerate(runs)]
    for worker in workers:
        worker.start()
    error: BaseException | None = None
    running = len(workers)
    try:
        while running:
            kind, item, value = done.get()
            if kind == "finished":
                running -= 1
            elif kind == "error":
                error = error or value
            else:  # answers finished after an error are kept too
                yield item, value
    finally:
        stop.set()  # also when the caller stops iterating early
    if error is not None:
        raise error


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
