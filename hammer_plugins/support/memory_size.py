"""The bytes a Python structure holds: ``sys.getsizeof`` summed over every object reachable from it.

The in-memory caches count their entries with it (:mod:`hammer_plugins.support.sized_cache`), so that a bound
stated in bytes holds whatever the entry is: a converted tool set, a BM25 index, a grammar, a vector matrix.
An object reached twice counts once; classes, modules and functions are shared by the process and not counted;
a numpy array counts its buffer, and a view the part it views (a cache keeping the rows of one
batch as views counts each row once, not the batch per row: whoever keeps views should keep copies, since a view
keeps its whole base alive).

Example:
    >>> deep_size("x" * 1000) >= 1000
    True
    >>> shared = "y" * 1000
    >>> deep_size([shared, shared]) < 2000
    True
"""

from __future__ import annotations

import sys
import types
from typing import Any

_NOT_COUNTED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                types.CodeType)
_LEAVES = frozenset({str, bytes, int, float, bool, complex, type(None), bytearray})
_SEQUENCES = frozenset({list, tuple, set, frozenset})


def _slot_names(kind: type) -> tuple[str, ...]:
    names: list[str] = []
    for cls in kind.__mro__:
        slots = cls.__dict__.get("__slots__", ())
        names.extend((slots,) if isinstance(slots, str) else slots)
    return tuple(n for n in names if n not in ("__dict__", "__weakref__"))


_SLOTS: dict[type, tuple[str, ...]] = {}


def deep_size(obj: Any) -> int:
    """Bytes of ``obj`` and of everything it reaches (each object once).

    Example:
        >>> deep_size({"a": [1, 2, 3]}) > deep_size({})
        True
    """
    numpy = sys.modules.get("numpy")
    ndarray = numpy.ndarray if numpy is not None else ()
    seen: set[int] = set()
    total = 0
    stack = [obj]
    getsizeof = sys.getsizeof
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        kind = type(item)
        if kind in _LEAVES:
            total += getsizeof(item)
            continue
        if kind in _SEQUENCES:
            total += getsizeof(item)
            stack.extend(item)
            continue
        if kind is dict:
            total += getsizeof(item)
            stack.extend(item.keys())
            stack.extend(item.values())
            continue
        if isinstance(item, _NOT_COUNTED):
            continue
        if ndarray and isinstance(item, ndarray):
            total += getsizeof(item) + (0 if item.flags.owndata else item.nbytes)  # a view: the part it views
            if item.dtype.hasobject:
                stack.extend(item.ravel().tolist())
            continue
        total += getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        state = getattr(item, "__dict__", None)
        if isinstance(state, dict):
            stack.append(state)
        slots = _SLOTS.get(kind)
        if slots is None:
            slots = _SLOTS[kind] = _slot_names(kind)
        for name in slots:
            value = getattr(item, name, None)
            if value is not None:
                stack.append(value)
    return total
