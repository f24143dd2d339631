"""The JSON body reader: depth, numbers and strings bounded before any work, for every API.

Example:
    >>> parse_json(b'{"model": "hammer"}')
    {'model': 'hammer'}
"""

from __future__ import annotations

import itertools
import json
import math
import re
from typing import Any

from hammer_plugins.http_api.errors import APIError

MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects a body may have: a tool schema 25 levels deep fits; a body
built to exhaust recursion (``[[[[...``) is refused."""


# A string, or an unclosed one to the end of the body (such a body is not JSON; its decoding fails
# before any bracket after the quote): each attempt succeeds, so the scan is linear. With the closing
# quote required, a body of '"' + '\\"' * n made every quote start a failing scan to the end
# (40 kB took 12.9 s, holding the GIL).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)


_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def json_too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text ``body`` nests arrays/objects more than ``limit`` deep, told before it is decoded.

    Strings are cut out, the brackets left become +1 / -1 steps, and their running sum's maximum
    is the depth: C-speed loops only (8 MiB of brackets in a fraction of a second), no recursion.

    Example:
        >>> json_too_deep(b'{"a": [[1]], "b": "[[[[["}', limit=3), json_too_deep(b"[" * 5 + b"]" * 5, limit=3)
        (False, True)
    """
    steps = _JSON_STRING.sub(b"", body).translate(_STEPS, _NOT_BRACKETS)
    return bool(steps) and max(itertools.accumulate(memoryview(steps).cast("b"))) > limit


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    """A JSON number as a float, refused when it is not finite (``1e999`` overflows to infinity)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for a 64-bit float")
    return value


def _check_strings(value: Any) -> None:
    """Raise ValueError on a string no UTF-8 encoder takes (a lone surrogate sent as ``\\ud800``)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            item.encode("utf-8")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def load_json(data: bytes | str, what: str = "The JSON body of your request", *, param: str | None = None,
              code: str = "invalid_json", fix: str = "send valid JSON, its numbers finite") -> Any:
    """``data`` decoded, or a 400 naming ``what``: too deep, not UTF-8, not JSON, a number that is not
    finite (``NaN``, ``Infinity``, ``1e999``), a lone surrogate (``"\\ud800"``, which no UTF-8 encoder takes
    further on). Every JSON text from outside is read here: the body, and the strings in it that hold
    JSON (an assistant call's ``arguments``), so each gets the same limits.

    Example:
        >>> load_json(b'{"a": 1}')
        {'a': 1}
        >>> for bad in (b"[" * 100_000 + b"]" * 100_000, b'{"t": 1e999}', '{"t": Infinity}'):
        ...     try:
        ...         load_json(bad)
        ...     except APIError as exc:
        ...         print(exc.status, exc.code)
        400 invalid_json
        400 invalid_json
        400 invalid_json
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if json_too_deep(raw):
        raise APIError(400, f"{what} nests arrays or objects more than {MAX_JSON_DEPTH} levels deep. Fix: send "
                            "flatter JSON.", param=param, code=code)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise APIError(400, f"{what} is not valid UTF-8 ({exc.reason} at byte {exc.start}). Fix: {fix}.", param=param,
                       code=code) from None
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
        if _SURROGATE_ESCAPE.search(raw):  # only escapes can make a surrogate: walk the strings then
            _check_strings(value)
    except (ValueError, RecursionError) as exc:
        raise APIError(400, f"We could not parse {what[:1].lower() + what[1:]} as JSON ({exc}). Fix: {fix}.", param=param,
                       code=code) from None
    return value


def parse_json(body: bytes) -> Any:
    """The decoded request body (:func:`load_json`), or its 400.

    Example:
        >>> try:
        ...     parse_json(b"[" * 100_000 + b"]" * 100_000)
        ... except APIError as exc:
        ...     print(exc.status, exc.code)
        400 invalid_json
    """
    return load_json(body)
