"""The value keywords of JSON Schema beyond types: how the grammar enforces them (the check after decoding,
for what it cannot, is :mod:`hammer_plugins.grammar.keyword_check`).

The grammar (:mod:`hammer_plugins.grammar.builder`) enforces ``pattern``, ``format``, ``minLength``/``maxLength``,
integer bounds and ``minItems``/``maxItems`` as far as each notation can (see ``docs/engine.md``,
"Schema keywords"). What it cannot express (``multipleOf``, ``uniqueItems``, the bounds of non-integer
numbers, a ``pattern`` feature the engines lack, a count above the unrolling limit) is checked after
decoding: :func:`~hammer_plugins.grammar.keyword_check.keyword_violation` names the first keyword a call's
arguments break, and the engine turns that call into an invalid call naming it (never a silent pass).
Each limit of the grammar is reported once, as a :class:`SchemaKeywordWarning`, when the grammar of the
tool is built.

Regexes are kept as a small tree (:data:`Rx`) written out in both notations: Lark regex (llguidance) and
GBNF (llama.cpp). A ``pattern`` is read with Python's own regex parser and translated where it uses only
what both engines have: literals, classes (``\\d``, ``\\w``, ``\\s`` in their ASCII/ECMA meaning), groups,
alternation, repetition, and ``^``/``$`` at the ends. Strings whose pattern or format the grammar enforces
are written raw (no JSON escapes), which every value these keywords describe allows.

Example:
    >>> to_lark(int_range_rx(1, 12))
    '[1-9]|1[0-2]'
"""

from __future__ import annotations

import datetime
import ipaddress
import math
import re
import threading
import uuid
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Union

try:  # Python's regex parser (3.11+: re._parser; 3.10: sre_parse)
    from re import _parser as _sre  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre  # type: ignore[no-redef]

from hammer_plugins.support import linear_regex
from hammer_plugins.support.linear_regex import class_ranges, complement, norm_ranges


class SchemaKeywordWarning(UserWarning):
    """A schema keyword the grammar cannot enforce (in one notation or both): calls that break it are
    still caught after decoding and become invalid calls naming the keyword (a response format's answer
    is not checked after decoding; the warning says so). Reported once per tool, path and keyword."""


_WARNED: set[tuple[str, ...]] = set()
_WARNED_LOCK = threading.Lock()
_WARNED_MAX = 4096  # a server binding many distinct tools: the memory of warnings given stays bounded


def warn_once(tool: str, path: str, keyword: str, why: str, *, answer: bool = False) -> None:
    """Warn (once per process for this tool, path, keyword and reason) that the grammar leaves a keyword
    to the check after decoding; for a response format's schema (``answer``) nothing checks it after."""
    key = (tool, path, keyword, why, str(answer))
    with _WARNED_LOCK:
        if key in _WARNED:
            return
        if len(_WARNED) >= _WARNED_MAX:
            _WARNED.clear()
        _WARNED.add(key)
    if answer:
        warnings.warn(f"response format {tool!r}, {path}: {keyword} {why}; an answer may break it (a response "
                      f"format is not checked after decoding: validate the parsed answer)", SchemaKeywordWarning,
                      stacklevel=4)
        return
    warnings.warn(f"tool {tool!r}, {path}: {keyword} {why}; a call that breaks it becomes an invalid call "
                  f"naming {keyword!r} (checked after decoding)", SchemaKeywordWarning, stacklevel=4)


# ------------------------------------------------------------------ regex trees
@dataclass(frozen=True)
class RxCls:
    """One character among ``ranges`` (inclusive code point pairs, sorted, disjoint)."""

    ranges: tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class RxSeq:
    items: tuple[Rx, ...]


@dataclass(frozen=True)
class RxAlt:
    items: tuple[Rx, ...]


@dataclass(frozen=True)
class RxRep:
    item: Rx
    low: int
    high: int | None


Rx = Union[RxCls, RxSeq, RxAlt, RxRep]  # noqa: UP007 - a runtime alias on Python 3.10

# What a JSON string may hold raw: no ``"``, no ``\\``, no control character, no lone surrogate.
RAW = ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0xD7FF), (0xE000, 0x10FFFF))


class Unsupported(Exception):
    """A regex feature the grammar's engines lack (the message names it)."""


def _intersect(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out = [(max(x0, y0), min(x1, y1)) for x0, x1 in a for y0, y1 in b if max(x0, y0) <= min(x1, y1)]
    return norm_ranges(out)


def cls(*ranges: tuple[int, int]) -> RxCls:
    return RxCls(_intersect(norm_ranges(ranges), RAW))


def chars(text: str) -> RxCls:
    return cls(*((ord(c), ord(c)) for c in text))


def lit(text: str) -> Rx:
    out: list[Rx] = []
    for c in text:
        one = chars(c)
        if not one.ranges:
            raise Unsupported(f"the character {c!r}, which a JSON string must escape")
        out.append(one)
    return out[0] if len(out) == 1 else RxSeq(tuple(out))


def seq(*items: Rx) -> Rx:
    flat: list[Rx] = []
    for item in items:
        flat.extend(item.items if isinstance(item, RxSeq) else (item,))
    return flat[0] if len(flat) == 1 else RxSeq(tuple(flat))


def alt(*items: Rx) -> Rx:
    return items[0] if len(items) == 1 else RxAlt(tuple(dict.fromkeys(items)))


ANY_RAW = RxCls(RAW)
DIGIT = cls((0x30, 0x39))
HEX = cls((0x30, 0x39), (0x41, 0x46), (0x61, 0x66))


def _lark_char(code: int) -> str:
    c = chr(code)
    return c if c.isascii() and c.isalnum() else f"\\x{{{code:X}}}"


def to_lark(rx: Rx, nested: bool = False) -> str:
    """The regex in llguidance's syntax (no delimiters)."""
    if isinstance(rx, RxCls):
        if len(rx.ranges) == 1 and rx.ranges[0][0] == rx.ranges[0][1]:
            return _lark_char(rx.ranges[0][0])
        body = "".join(_lark_char(a) if a == b else f"{_lark_char(a)}-{_lark_char(b)}" for a, b in rx.ranges)
        return f"[{body}]"
    if isinstance(rx, RxRep):
        inner = to_lark(rx.item, nested=True)
        if not isinstance(rx.item, RxCls):
            inner = f"(?:{inner})"
        suffix = {(0, 1): "?", (0, None): "*", (1, None): "+"}.get((rx.low, rx.high))
        return inner + (suffix or f"{{{rx.low},{'' if rx.high is None else rx.high}}}")
    if isinstance(rx, RxSeq):
        return "".join(to_lark(i, nested=True) if not isinstance(i, RxAlt) else f"(?:{to_lark(i)})" for i in rx.items)
    text = "|".join(to_lark(i) for i in rx.items)
    return f"(?:{text})" if nested else text


def _gbnf_char(code: int) -> str:
    c = chr(code)
    if c.isascii() and c.isalnum():
        return c
    return f"\\x{code:02X}" if code < 0x80 else f"\\u{code:04X}" if code < 0x10000 else f"\\U{code:08X}"


def to_gbnf(rx: Rx, nested: bool = False) -> str:
    """The regex as a GBNF right side (llama.cpp)."""
    if isinstance(rx, RxCls):
        body = "".join(_gbnf_char(a) if a == b else f"{_gbnf_char(a)}-{_gbnf_char(b)}" for a, b in rx.ranges)
        return f"[{body}]"
    if isinstance(rx, RxRep):
        inner = to_gbnf(rx.item, nested=True)
        if not isinstance(rx.item, RxCls):
            inner = f"( {inner} )"
        suffix = {(0, 1): "?", (0, None): "*", (1, None): "+"}.get((rx.low, rx.high))
        return inner + (suffix or f"{{{rx.low},{'' if rx.high is None else rx.high}}}")
    if isinstance(rx, RxSeq):
        return " ".join(to_gbnf(i, nested=True) for i in rx.items)
    text = " | ".join(to_gbnf(i) for i in rx.items)
    return f"( {text} )" if nested else text


# ------------------------------------------------------------------ patterns
def _class(items: list[tuple[Any, Any]]) -> RxCls:
    try:
        return RxCls(_intersect(class_ranges(items), RAW))
    except linear_regex.UnsupportedPattern as exc:
        raise Unsupported(str(exc)) from None


def _node(items: Any, limit: int) -> Rx:
    parts: list[Rx] = []
    for op, arg in items:
        kind = str(op)
        if kind == "LITERAL":
            parts.append(lit(chr(arg)))
        elif kind == "NOT_LITERAL":
            parts.append(RxCls(_intersect(complement(((arg, arg),)), RAW)))
        elif kind == "ANY":
            parts.append(ANY_RAW)
        elif kind == "IN":
            found = _class(arg)
            if not found.ranges:
                raise Unsupported("a class no raw JSON character matches")
            parts.append(found)
        elif kind in ("MAX_REPEAT", "MIN_REPEAT"):
            low, high, sub = arg
            high = None if high == _sre.MAXREPEAT else high
            if low > limit or (high is not None and high > limit):
                raise Unsupported(f"a repetition count above {limit}")
            if high != 0:  # x{0} matches the empty string: nothing to write
                parts.append(RxRep(_node(sub, limit), low, high))
        elif kind == "SUBPATTERN":
            group, add_flags, del_flags, sub = arg
            if add_flags or del_flags:
                raise Unsupported("inline flags")
            parts.append(_node(sub, limit))
        elif kind == "BRANCH":
            parts.append(alt(*(_node(b, limit) for b in arg[1])))
        else:
            raise Unsupported({"AT": "an anchor inside the pattern", "GROUPREF": "a back-reference",
                               "ASSERT": "a lookaround", "ASSERT_NOT": "a lookaround"}.get(kind, kind))
    return seq(*parts) if parts else RxSeq(())


def _anchored(items: list[tuple[Any, Any]], limit: int) -> Rx:
    """A top-level alternative, searched (unanchored) unless ``^``/``$`` pin its ends."""
    start = bool(items) and str(items[0][0]) == "AT" and str(items[0][1]) in ("AT_BEGINNING", "AT_BEGINNING_STRING")
    end = bool(items) and str(items[-1][0]) == "AT" and str(items[-1][1]) in ("AT_END", "AT_END_STRING")
    body = items[int(start): len(items) - int(end)]
    free = RxRep(ANY_RAW, 0, None)
    return seq(*([] if start else [free]), _node(body, limit), *([] if end else [free]))


def pattern_rx(pattern: str, limit: int) -> Rx:
    """The raw string bodies that contain a match of ``pattern`` (JSON Schema's search semantics).

    Raises :class:`Unsupported` naming the feature when the engines cannot express it.

    Example:
        >>> to_lark(pattern_rx("^[a-z]+$", 100))
        '[a-z]+'
    """
    try:
        parsed = _sre.parse(pattern)
    except re.error as exc:
        raise Unsupported(f"a pattern Python's regex cannot read ({exc})") from None
    items = list(parsed)
    if len(items) == 1 and str(items[0][0]) == "BRANCH":
        return alt(*(_anchored(list(b), limit) for b in items[0][1][1]))
    return _anchored(items, limit)


# ------------------------------------------------------------------ formats
_TIME = (r"([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])")
_DATE = r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
_OCTET = r"(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?"
# The text each format takes (full match). date, time and date-time are RFC 3339's full-date,
# full-time and date-time; the calendar (a 30th of February, a leap second) is checked after decoding.
FORMATS: dict[str, str] = {
    "date": _DATE,
    "time": _TIME,
    "date-time": _DATE + "[Tt]" + _TIME,
    "email": r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@" + _LABEL + r"(\." + _LABEL + ")*",
    "uuid": r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}",
    "ipv4": rf"({_OCTET}\.){{3}}{_OCTET}",
    "uri": r"[A-Za-z][A-Za-z0-9+.-]*:([A-Za-z0-9._~:/?#\[\]@!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*",
}


def format_rx(name: str) -> Rx | None:
    """The raw string bodies of ``format`` ``name``, or None for a format the grammar does not know."""
    text = FORMATS.get(name)
    return None if text is None else pattern_rx(f"^(?:{text})$", 10_000)


def format_ok(name: str, value: str) -> bool:
    """Whether ``value`` is a ``name`` (one of :data:`FORMATS`; others are not checked)."""
    found = FORMATS.get(name)
    if found is None:
        return True
    if not linear_regex.fullmatch(found, value):  # linear in the value (the value is the model's output)
        return False
    try:
        if name in ("date", "date-time"):
            datetime.date.fromisoformat(value[:10])
        if name == "ipv4":
            ipaddress.IPv4Address(value)
        if name == "uuid":
            uuid.UUID(value)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------ integers
def int_range_rx(low: int | None, high: int | None) -> Rx:
    """Integers from ``low`` to ``high`` (either may be open) as JSON writes them (no leading zeros, no ``-0``).

    Example:
        >>> to_lark(int_range_rx(1, 10))
        '[1-9]|10'
    """
    parts: list[Rx] = []
    if high is None or high >= 0:
        parts.extend(_non_negative(max(low or 0, 0) if low is not None else 0, high))
    if low is None or low < 0:
        magnitude_low = 1 if high is None or high >= 0 else -high
        magnitude_high = None if low is None else -low
        parts.extend(seq(lit("-"), p) for p in _non_negative(magnitude_low, magnitude_high))
    if not parts:
        raise ValueError("empty integer range")
    return RxAlt(tuple(parts)) if len(parts) > 1 else parts[0]


def _digits(low: str, high: str) -> list[Rx]:
    """Digit strings of equal length from ``low`` to ``high``."""
    if low == high:
        return [lit(low)]
    if len(low) == 1:
        return [cls((ord(low), ord(high)))]
    if low[0] == high[0]:
        return [seq(lit(low[0]), rest) for rest in _digits(low[1:], high[1:])]
    n = len(low) - 1
    if low[1:] == "0" * n and high[1:] == "9" * n:
        return [seq(cls((ord(low[0]), ord(high[0]))), *([DIGIT] * n))]
    out = [seq(lit(low[0]), rest) for rest in _digits(low[1:], "9" * n)]
    if ord(low[0]) + 1 <= ord(high[0]) - 1:
        out.append(seq(cls((ord(low[0]) + 1, ord(high[0]) - 1)), *([DIGIT] * n)))
    out.extend(seq(lit(high[0]), rest) for rest in _digits("0" * n, high[1:]))
    return out


def _non_negative(low: int, high: int | None) -> list[Rx]:
    if high is not None and low > high:
        return []
    out: list[Rx] = []
    if low == 0:
        out.append(lit("0"))
        low = 1
        if high is not None and high < 1:
            return out
    top = len(str(high)) if high is not None else len(str(low))
    for width in range(len(str(low)), top + 1):
        first = max(low, 10 ** (width - 1))
        last = min(high, 10**width - 1) if high is not None else 10**width - 1
        if first <= last:
            out.extend(_digits(str(first), str(last)))
    if high is None:  # every longer number
        out.append(seq(cls((0x31, 0x39)), RxRep(DIGIT, top, None)))
    return out


def integer_bounds(schema: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The smallest and largest integer ``schema``'s bounds allow (None: open), draft 4's boolean
    ``exclusiveMinimum``/``exclusiveMaximum`` included."""
    low: int | None = None
    high: int | None = None
    for key, exclusive in (("minimum", schema.get("exclusiveMinimum") is True), ("exclusiveMinimum", True)):
        value = schema.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        bound = Fraction(value)
        n = math.floor(bound) + 1 if exclusive else math.ceil(bound)
        low = n if low is None else max(low, n)
    for key, exclusive in (("maximum", schema.get("exclusiveMaximum") is True), ("exclusiveMaximum", True)):
        value = schema.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        bound = Fraction(value)
        n = math.ceil(bound) - 1 if exclusive else math.floor(bound)
        high = n if high is None else min(high, n)
    return low, high


