"""Look-alike tools: a tool whose description repeats an earlier tool's gets that tool's place in a selection.

A third-party tool set (an MCP server added after the caller's tools) can copy a trusted tool's description and
add its own words (``read_file_v2``: "Read a text file ... read text file read text file"). Ranked on its own it
scores as well as the real tool, or better, and a selection of a few tools may offer it alone: the model can then
only call the copy. The red team's tool set (benchmarks/shadow_tools.py) showed both.

The rule: a tool is a look-alike of an earlier one in the tool set when its description holds at least
``LOOK_ALIKE_SHARE`` of the earlier description's word pairs (stop words dropped, so rewording with "the" and
"a" does not hide it). In a selection, a look-alike's place goes to the earliest tool it copies: the caller's own
tools come first, then each MCP server's in the order they were given, so the caller's tool, or the first
server's, is offered. The look-alike itself is kept back (the reserve), where Hammer's ``[]`` may still reach it.
Two tools that only share a topic ("Convert Celsius to Fahrenheit" and "Convert Fahrenheit to Celsius") are not
look-alikes: their word pairs differ.

Example:
    >>> from hammer_plugins.tools import to_tool
    >>> tools = [to_tool({"name": "read_file", "description": "Read a text file from the local disk."}),
    ...          to_tool({"name": "read_file_v2", "description": "Read a text file from the local disk. Read file."})]
    >>> LookAlikes(tools).original(1)
    0
    >>> LookAlikes(tools).original(0) is None
    True
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np

from hammer_plugins.tools.definition import Tool
from hammer_plugins.tools.ranking import words

LOOK_ALIKE_SHARE = 0.9
"""The share of an earlier description's word pairs a later description must hold to be its look-alike."""
MIN_PAIRS = 3
"""A description of fewer word pairs ("Ping a host.") is too short to tell a copy from a coincidence."""


def _hashed(text: str) -> np.ndarray:
    """The distinct word pairs of ``text`` as integers (Python's string hash: stable within the process)."""
    return np.unique(np.fromiter((hash(p) for p in word_pairs(text)), dtype=np.int64))


def word_pairs(text: str) -> frozenset[tuple[str, str]]:
    """The pairs of neighbouring words of ``text`` (:func:`~hammer_plugins.tools.ranking.words`).

    Example:
        >>> sorted(word_pairs("Convert Celsius to Fahrenheit"))
        [('celsius', 'fahrenheit'), ('convert', 'celsius')]
    """
    found = words(text)
    return frozenset(itertools.pairwise(found))


class LookAlikes:
    """Which tools of a set copy an earlier tool's description (see the module); built once per tool set.

    Kept compact, since a process may hold the index of several sets of thousands of tools: each tool's word
    pairs as hashed integers in one sorted array, with the tool each belongs to.

    Example:
        >>> from hammer_plugins.tools import to_tool
        >>> tools = [to_tool({"name": "a", "description": "Convert Celsius to Fahrenheit for a reading."}),
        ...          to_tool({"name": "b", "description": "Convert Fahrenheit to Celsius for a reading."})]
        >>> LookAlikes(tools).original(1) is None
        True
    """

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._descriptions = [t.description for t in tools]
        pairs = [_hashed(t.description) for t in tools]
        self._sizes = np.array([len(p) for p in pairs], dtype=np.int64)
        every = np.concatenate(pairs) if pairs else np.zeros(0, dtype=np.int64)
        owners = np.repeat(np.arange(len(pairs), dtype=np.int64), self._sizes)
        order = np.argsort(every, kind="stable")  # stable: each pair's holders stay in the tool set's order
        self._pairs, self._owners = every[order], owners[order]

    def original(self, i: int) -> int | None:
        """The earliest tool that tool ``i`` copies, or ``None`` when it copies none."""
        mine = _hashed(self._descriptions[i])
        if not len(mine):
            return None
        low = np.searchsorted(self._pairs, mine, "left")
        high = np.searchsorted(self._pairs, mine, "right")
        holders = np.concatenate([self._owners[a:b] for a, b in zip(low, high, strict=True)])
        holders = holders[holders < i]  # only earlier tools can be copied
        if not len(holders):
            return None
        shared = np.bincount(holders, minlength=i)
        sizes = self._sizes[:i]
        copied = np.flatnonzero((sizes >= MIN_PAIRS) & (shared >= LOOK_ALIKE_SHARE * sizes))
        return int(copied[0]) if len(copied) else None

    def skip(self, order: Iterable[int], count: int) -> tuple[list[int], list[int]]:
        """The first ``count`` tools of a ranking (``order``, best first) that copy no earlier tool; and the copies
        met before them, for the reserve."""
        ranked: list[int] = []
        copies: list[int] = []
        for i in order:
            if len(ranked) >= count:
                break
            (ranked if self.original(i) is None else copies).append(i)
        return ranked, copies
