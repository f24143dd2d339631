"""KV states of many prompts kept in memory, so a request restores the one sharing its longest prefix.

A model's context holds one prompt at a time. An agent's requests interleave several: a session's turns,
the answer pass after a tool result, a new session that repeats the first request of the one before, a
side request with other instructions. Each request that would overwrite a context worth keeping first
copies its KV state here; a later request restores the state that shares the most leading tokens with
its prompt, whichever request left it, and evaluates only the rest.

- **bounded**: the states' bytes stay within ``max_bytes``; the least recently used (stored or restored)
  go first, and a state larger than the whole budget is not kept;
- **no twins**: a state whose tokens begin another state's serves every prompt the shorter one would,
  so the shorter goes when the longer comes, and a state already covered by a longer one is not stored;
- **runtime-free**: a state is whatever the backend gives (bytes, a ``ctypes`` array): only its tokens
  and size are read here. The llama.cpp backend keeps ``llama_state_seq_get_data``'s bytes
  (:mod:`hammer_plugins.backends.llama_cpp.prefix`).

Example:
    >>> cache = PromptStates(max_bytes=100)
    >>> cache.add([1, 2, 3, 4], b"a" * 40); cache.add([1, 2, 9], b"b" * 40)
    True
    True
    >>> state, shared = cache.longest([1, 2, 3, 7, 7])
    >>> shared, state.tokens
    (3, (1, 2, 3, 4))
    >>> cache.touch(state)   # restored: now the most recently used
    >>> cache.add([5, 6], b"c" * 40)   # over the budget: the least recently used, [1, 2, 9], goes
    True
    >>> [s.tokens for s in cache.entries()]
    [(1, 2, 3, 4), (5, 6)]
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MIB = 1 << 20


@dataclass(frozen=True)
class PromptState:
    """One kept state: the tokens it holds the KV of, the backend's bytes, and their size."""

    tokens: tuple[int, ...]
    state: Any
    size: int


def shared_prefix(a: Sequence[int] | np.ndarray, b: Sequence[int] | np.ndarray) -> int:
    """How many leading tokens ``a`` and ``b`` share (numpy: 50 states of 6,000 tokens compare in a millisecond).

    Example:
        >>> shared_prefix([1, 2, 3], [1, 2, 4, 5]), shared_prefix([], [1])
        (2, 0)
    """
    n = min(len(a), len(b))
    if n == 0:
        return 0
    differ = np.flatnonzero(np.asarray(a[:n], dtype=np.int64) != np.asarray(b[:n], dtype=np.int64))
    return int(differ[0]) if differ.size else n


class PromptStates:
    """A memory-bounded, least-recently-used store of prompt KV states, looked up by longest shared prefix.

    It also counts what the requests it served got (:meth:`record`), for ``/health``.

    Args:
        max_bytes: the budget; states beyond it are evicted, least recently used first.

    Example:
        >>> cache = PromptStates(max_bytes=10 * MIB)
        >>> cache.add(range(100), b"x" * 1000)
        True
        >>> cache.add(range(50), b"y" * 500)   # covered by the state of range(100): not kept twice
        False
        >>> cache.record(prompt_tokens=120, cached_tokens=100, restored=True)
        >>> stats = cache.stats(); stats["states"], stats["bytes"], stats["hit_rate"]
        (1, 1000, 1.0)
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._states: OrderedDict[tuple[int, ...], PromptState] = OrderedDict()
        self._arrays: dict[tuple[int, ...], np.ndarray] = {}  # the tokens as an array, for shared_prefix
        self._bytes = 0
        self._lock = threading.Lock()  # /health reads the counts from another thread
        self._counts = {"requests": 0, "restored": 0, "prompt_tokens": 0, "cached_tokens": 0, "stored": 0,
                        "evicted": 0}

    def __len__(self) -> int:
        return len(self._states)

    @property
    def size(self) -> int:
        """Bytes held by the kept states."""
        return self._bytes

    def entries(self) -> list[PromptState]:
        """The kept states, least recently used first."""
        with self._lock:
            return list(self._states.values())

    def longest(self, tokens: Sequence[int]) -> tuple[PromptState | None, int]:
        """The state sharing the most leading tokens with ``tokens`` and how many (``(None, 0)``: none shares any)."""
        prompt = np.asarray(tokens, dtype=np.int64)
        best: PromptState | None = None
        best_n = 0
        with self._lock:
            for key, state in self._states.items():
                n = shared_prefix(self._arrays[key], prompt)
                if n > best_n:
                    best, best_n = state, n
        return best, best_n

    def covers(self, tokens: Sequence[int]) -> bool:
        """Whether a kept state holds ``tokens`` already (its tokens begin with them)."""
        _, n = self.longest(tokens)
        return n == len(tokens) and n > 0

    def touch(self, state: PromptState) -> None:
        """Mark ``state`` recently used (a request restored it): it is evicted last."""
        with self._lock:
            if state.tokens in self._states:
                self._states.move_to_end(state.tokens)

    def add(self, tokens: Sequence[int], state: Any, size: int | None = None) -> bool:
        """Keep ``state`` (of ``size`` bytes, ``len(state)`` if not given) for ``tokens``; False if not kept
        (larger than the budget, or covered by a kept state). States its tokens begin go: it serves their prompts."""
        key = tuple(int(t) for t in tokens)
        size = len(state) if size is None else size
        if not key or size > self.max_bytes or self.covers(key):
            return False
        array = np.asarray(key, dtype=np.int64)
        with self._lock:
            for old in [k for k in self._states if len(k) < len(key) and shared_prefix(self._arrays[k], array) == len(k)]:
                self._drop(old)
            self._states[key] = PromptState(key, state, size)
            self._arrays[key] = array
            self._bytes += size
            self._counts["stored"] += 1
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._states)))
                self._counts["evicted"] += 1
        return True

    def clear(self) -> None:
        """Forget every state (the counts stay)."""
        with self._lock:
            self._states.clear()
            self._arrays.clear()
            self._bytes = 0

    def record(self, prompt_tokens: int, cached_tokens: int, restored: bool) -> None:
        """Count one request: its prompt's tokens, those not evaluated, and whether a kept state was restored."""
        with self._lock:
            self._counts["requests"] += 1
            self._counts["restored"] += int(restored)
            self._counts["prompt_tokens"] += prompt_tokens
            self._counts["cached_tokens"] += cached_tokens

    def stats(self) -> dict[str, Any]:
        """What ``/health`` shows: states, bytes and budget, requests, restores and both hit rates.

        ``hit_rate``: the share of requests that restored a kept state; ``token_hit_rate``: the share of
        prompt tokens not evaluated (served by the context, a kept state or the disk prefix cache).
        """
        with self._lock:
            counts = dict(self._counts)
            states, size = len(self._states), self._bytes
        requests, prompt = counts["requests"], counts["prompt_tokens"]
        return {"states": states, "bytes": size, "max_bytes": self.max_bytes, **counts,
                "hit_rate": round(counts["restored"] / requests, 4) if requests else 0.0,
                "token_hit_rate": round(counts["cached_tokens"] / prompt, 4) if prompt else 0.0}

    def _drop(self, key: tuple[int, ...]) -> None:
        state = self._states.pop(key)
        del self._arrays[key]
        self._bytes -= state.size
