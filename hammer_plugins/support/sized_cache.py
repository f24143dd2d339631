"""Thread-safe LRU caches bounded by entries and by bytes, all of them together held to one total: the tool-set,
ranking, grammar, token-mask and token-count caches (a hostile request cannot grow them without bound).

Each entry counts the bytes its key and value hold (:func:`~hammer_plugins.support.memory_size.deep_size`, or the
caller's figure where that is larger): a cache sized by characters let 60 distinct 9,000-tool sets hold +427 MiB.
Every cache of the process draws on one total, :data:`CACHE_MEMORY_BYTES` (``$HAMMER_CACHE_MEMORY_MB``, default
128): when a new entry takes the caches past it, the least recently used entries of any cache go first.

Example:
    >>> cache = SizedCache(max_entries=2, max_size=10_000)
    >>> cache.put("a", "aaa")
    >>> cache.get("a"), len(cache)
    ('aaa', 1)
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from hammer_plugins.support.memory_size import deep_size

_K = TypeVar("_K")
_V = TypeVar("_V")

DEFAULT_CACHE_MEMORY_MB = 128


def _total_from_env() -> int:
    text = os.environ.get("HAMMER_CACHE_MEMORY_MB", "")
    try:
        mib = float(text) if text.strip() else DEFAULT_CACHE_MEMORY_MB
    except ValueError:
        raise ValueError(f"HAMMER_CACHE_MEMORY_MB must be a number of MiB, got {text!r}") from None
    if not mib > 0:
        raise ValueError(f"HAMMER_CACHE_MEMORY_MB must be above 0, got {text!r}")
    return int(mib * 2**20)


CACHE_MEMORY_BYTES = _total_from_env()
"""Bytes all in-memory caches of the process may hold together (``$HAMMER_CACHE_MEMORY_MB``, default 128 MiB)."""


class _Pool:
    """The bytes every :class:`SizedCache` of the process holds, and the eviction that keeps them under the total.

    Lock order: a cache never takes the pool's lock while it holds its own, so the pool may take a cache's."""

    def __init__(self) -> None:
        self.caches: weakref.WeakSet[SizedCache[object, object]] = weakref.WeakSet()
        self.lock = threading.Lock()
        self.clock = itertools.count()  # when each entry was last used, across caches

    def used(self) -> int:
        return sum(cache.size for cache in list(self.caches))

    def trim(self) -> None:
        """Evict the least recently used entries, whichever cache holds them, until the total holds."""
        with self.lock:
            while self.used() > CACHE_MEMORY_BYTES:
                oldest = min((c for c in list(self.caches) if len(c)), key=lambda c: c.oldest_stamp(),
                             default=None)
                if oldest is None or not oldest.evict_oldest():
                    return


_POOL = _Pool()


def cache_memory() -> tuple[int, int]:
    """The bytes the process's caches hold now, and the total they are held to.

    Example:
        >>> used, total = cache_memory()
        >>> 0 <= used <= total
        True
    """
    return _POOL.used(), CACHE_MEMORY_BYTES


class _Making:
    """A key being made: the lock its callers take in turn, and how many hold or wait for it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.callers = 0


class SizedCache(Generic[_K, _V]):
    """A thread-safe LRU cache bounded by entries AND by bytes (each entry's key and value measured, or the
    ``size`` the caller states where that is larger): the oldest entries go until both fit; an entry larger
    than the bound is not kept. All caches together are also held to :data:`CACHE_MEMORY_BYTES`.

    Example:
        >>> cache = SizedCache(max_entries=10, max_size=100_000)
        >>> cache.put("a", "x" * 60_000); cache.put("b", "y" * 60_000)
        >>> cache.get("a") is None, cache.get("b") is not None, 60_000 < cache.size < 61_000
        (True, True, True)
    """

    def __init__(self, max_entries: int, max_size: int) -> None:
        self.max_entries = max_entries
        self.max_size = max_size  # bytes
        self.size = 0
        self._items: OrderedDict[_K, tuple[_V, int, int]] = OrderedDict()  # value, bytes, last used
        self._lock = threading.Lock()
        self._making: dict[_K, _Making] = {}  # the keys being made
        _POOL.caches.add(self)  # type: ignore[arg-type]

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: _K) -> _V | None:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items[key] = (found[0], found[1], next(_POOL.clock))
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: _K, value: _V, size: int = 0) -> None:
        counted = max(size, deep_size((key, value)))  # measured outside the lock: a large entry takes a while
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.size -= old[1]
            if counted > min(self.max_size, CACHE_MEMORY_BYTES):
                return
            self._items[key] = (value, counted, next(_POOL.clock))
            self.size += counted
            while len(self._items) > self.max_entries or self.size > self.max_size:
                _, (_, dropped, _) = self._items.popitem(last=False)
                self.size -= dropped
        _POOL.trim()

    def get_or_make(self, key: _K, make: Callable[[], _V], size: Callable[[_V], int] | None = None) -> _V:
        """The value kept for ``key``, else ``make()``'s, kept (``size``: the caller's figure for it). Callers
        asking for a key being made wait for that one: four requests arriving at once with a new 6,600-tool set
        index it once, not four times side by side, each slowing the others and the server's event loop.

        Example:
            >>> cache = SizedCache(max_entries=4, max_size=10_000)
            >>> cache.get_or_make("k", lambda: "made"), cache.get_or_make("k", lambda: "again")
            ('made', 'made')
        """
        found = self.get(key)
        if found is not None:
            return found
        with self._lock:
            making = self._making.setdefault(key, _Making())
            making.callers += 1
        try:
            with making.lock:
                found = self.get(key)
                if found is None:  # the first caller, or the one before failed or made what no cache keeps
                    found = make()
                    self.put(key, found, size(found) if size is not None else 0)
                return found
        finally:
            with self._lock:
                making.callers -= 1
                if making.callers == 0:
                    del self._making[key]

    def oldest_stamp(self) -> float:
        with self._lock:
            return next(iter(self._items.values()))[2] if self._items else float("inf")

    def evict_oldest(self) -> bool:
        with self._lock:
            if not self._items:
                return False
            _, (_, dropped, _) = self._items.popitem(last=False)
            self.size -= dropped
            return True

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.size = 0
