"""A thread-safe LRU cache bounded by entries and by a size stated for each entry: the grammar, token-mask
and token-count caches (a hostile request cannot grow them without bound).

Example:
    >>> cache = SizedCache(max_entries=2, max_size=10)
    >>> cache.put("a", "aaa", 3)
    >>> cache.get("a"), len(cache)
    ('aaa', 1)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Generic, TypeVar

_K = TypeVar("_K")
_V = TypeVar("_V")


class SizedCache(Generic[_K, _V]):
    """A thread-safe LRU cache bounded by entries AND by a size the caller states for each entry (in
    characters or bytes): the oldest entries go until both fit; an entry larger than the whole bound
    is not kept.

    Example:
        >>> cache = SizedCache(max_entries=10, max_size=100)
        >>> cache.put("a", "x" * 60, 60); cache.put("b", "y" * 60, 60)
        >>> cache.get("a") is None, cache.get("b") is not None, cache.size
        (True, True, 60)
    """

    def __init__(self, max_entries: int, max_size: int) -> None:
        self.max_entries = max_entries
        self.max_size = max_size
        self.size = 0
        self._items: OrderedDict[_K, tuple[_V, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: _K) -> _V | None:
        with self._lock:
            found = self._items.get(key)
            if found is None:
                return None
            self._items.move_to_end(key)
            return found[0]

    def put(self, key: _K, value: _V, size: int) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.size -= old[1]
            if size > self.max_size:
                return
            self._items[key] = (value, size)
            self.size += size
            while len(self._items) > self.max_entries or self.size > self.max_size:
                _, (_, dropped) = self._items.popitem(last=False)
                self.size -= dropped

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.size = 0
