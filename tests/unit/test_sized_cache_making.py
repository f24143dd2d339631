"""SizedCache.get_or_make: concurrent callers of one new key make it once (single flight)."""

from __future__ import annotations

import threading
import time

import pytest

from hammer_plugins.support.sized_cache import SizedCache


def test_callers_asking_for_a_key_being_made_wait_for_it_instead_of_making_it_again() -> None:
    """Eight threads ask at once for one new key: ``make`` runs once and all get its value; a ``make`` that fails
    lets the next caller make it; nothing of the bookkeeping stays behind."""
    cache: SizedCache[str, object] = SizedCache(max_entries=4, max_size=1_000_000)
    made: list[int] = []
    started = threading.Barrier(8)

    def make() -> object:
        made.append(1)
        time.sleep(0.2)  # long enough that every thread asks while it is being made
        return object()

    got: list[object] = []

    def ask() -> None:
        started.wait()
        got.append(cache.get_or_make("tools", make))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(made) == 1 and len(got) == 8 and all(value is got[0] for value in got)

    def fail() -> object:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        cache.get_or_make("other", fail)
    assert cache.get_or_make("other", lambda: "second try") == "second try"
    assert not cache._making
