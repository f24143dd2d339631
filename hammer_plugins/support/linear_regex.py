"""Regexes from outside, matched in time linear in the text: a schema's ``pattern`` and the ``format`` checks.

A tool's ``pattern`` comes from whoever sends the tools (an OpenAI request, an MCP server), and the text it
is matched against comes from the model. Python's ``re`` backtracks: ``(a+)+b`` against ``"a" * 27 + "c ab"``
takes tens of seconds while holding the GIL, which freezes every thread of the process. Here a
pattern runs on RE2 (``google-re2``, Google's automaton engine: time linear in the text, memory bounded
by ``max_mem``), chosen over llguidance's matcher because llguidance is an optional extra (the check after
decoding runs on every backend, the server backends included) and has no Python call that matches a
string against a regex without a tokenizer.

JSON Schema's ``pattern`` is an ECMA-262 regex, searched (unanchored). It is read with Python's regex
parser (the one the grammar's translation uses, so both agree on what a pattern means) and written out
in RE2 syntax with ECMA meanings: ``\\d``, ``\\w``, ``\\b`` are ASCII, ``\\s`` is ECMA's whitespace, ``.`` is any
character but a line terminator, ``$`` is the end of the text only. What an automaton cannot run
(back-references, lookaround, atomic groups, conditionals) and what ECMA-262 does not have (inline flags)
is refused with :class:`UnsupportedPattern` naming the feature; :mod:`hammer_plugins.tools.definition` turns that
into a :class:`~hammer_plugins.values.errors.SchemaConversionError` when the tool is bound (``400
invalid_tool_schema`` on the server), so no such pattern is ever matched.

Example:
    >>> search("^[a-z]+$", "hello"), search("(a+)+b", "a" * 40 + "c")
    (True, False)
    >>> try:
    ...     compile_pattern("(a)\\\\1")
    ... except UnsupportedPattern as exc:
    ...     print(exc)
    a back-reference, which a linear-time regex engine cannot run
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import re2

from hammer_plugins.support.sized_cache import SizedCache

try:  # Python's regex parser (3.11+: re._parser; 3.10: sre_parse)
    from re import _parser as _sre  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre  # type: ignore[no-redef]

# Real patterns are short; the parser and the translation are recursive, so nesting is bounded too.
MAX_PATTERN_CHARS = 10_000
MAX_NESTING = 200
# RE2's memory for one compiled pattern (its program and its DFA cache): past it, compiling fails
# (the pattern is refused) or the DFA falls back to RE2's NFA, still linear in the text.
MAX_MEM = 4 << 20

# ECMA-262's classes (\d, \w: ASCII; \s: WhiteSpace and LineTerminator) and what its `.` leaves out.
ECMA_CLASSES: dict[str, tuple[tuple[int, int], ...]] = {
    "CATEGORY_DIGIT": ((0x30, 0x39),),
    "CATEGORY_WORD": ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)),
    "CATEGORY_SPACE": ((0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680), (0x2000, 0x200A),
                       (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)),
}
_LINE_TERMINATORS = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
_SURROGATES = (0xD800, 0xDFFF)  # not characters in UTF-8, which RE2 matches: a value's lone ones become U+FFFD
_MAX_CODE = 0x10FFFF
_ANCHORS = {"AT_BEGINNING": "^", "AT_BEGINNING_STRING": r"\A", "AT_END": "$", "AT_END_STRING": r"\z",
            "AT_BOUNDARY": r"\b", "AT_NON_BOUNDARY": r"\B"}
_REFUSED = {"GROUPREF": "a back-reference", "GROUPREF_EXISTS": "a conditional group", "ASSERT": "a lookaround",
            "ASSERT_NOT": "a lookaround", "ATOMIC_GROUP": "an atomic group", "POSSESSIVE_REPEAT": "a possessive repeat"}

Ranges = tuple[tuple[int, int], ...]


class UnsupportedPattern(ValueError):
    """A pattern the linear-time engine cannot run, or cannot read (the message names the feature)."""


def norm_ranges(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Inclusive code point ranges sorted, overlaps and neighbours merged."""
    out: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if out and low <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], high))
        else:
            out.append((low, high))
    return tuple(out)


def complement(ranges: Iterable[tuple[int, int]]) -> Ranges:
    """Every code point not in ``ranges``."""
    out, start = [], 0
    for low, high in norm_ranges(ranges):
        if low > start:
            out.append((start, low - 1))
        start = high + 1
    if start <= _MAX_CODE:
        out.append((start, _MAX_CODE))
    return tuple(out)


def category(name: str) -> Ranges:
    """The code points of a class escape as Python's parser names it (``CATEGORY_NOT_DIGIT`` is ``\\D``),
    with ECMA-262's meaning."""
    if name.startswith("CATEGORY_NOT_"):
        return complement(category("CATEGORY_" + name[len("CATEGORY_NOT_"):]))
    if name not in ECMA_CLASSES:
        raise UnsupportedPattern(f"the class {name}, which ECMA-262 does not have")
    return ECMA_CLASSES[name]


def _class_text(ranges: Iterable[tuple[int, int]]) -> str:
    """An RE2 class of exactly these code points (surrogates left out: RE2 matches UTF-8)."""
    low_s, high_s = _SURROGATES
    kept: list[tuple[int, int]] = []
    for low, high in norm_ranges(ranges):
        if low < low_s:
            kept.append((low, min(high, low_s - 1)))
        if high > high_s:
            kept.append((max(low, high_s + 1), high))
    if not kept:
        return r"[^\x{0}-\x{10FFFF}]"  # matches nothing, as an empty ECMA class does
    body = "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in kept)
    return f"[{body}]"


def class_ranges(items: list[tuple[Any, Any]]) -> Ranges:
    """The code points of a character class as Python's parser gives it (``[^a-z\\d]``), ECMA's meanings."""
    ranges: list[tuple[int, int]] = []
    negate = False
    for op, arg in items:
        kind = str(op)
        if kind == "NEGATE":
            negate = True
        elif kind == "LITERAL":
            ranges.append((arg, arg))
        elif kind == "RANGE":
            ranges.append(arg)
        elif kind == "CATEGORY":
            ranges.extend(category(str(arg)))
        else:
            raise UnsupportedPattern(f"{kind} in a character class")
    return complement(ranges) if negate else norm_ranges(ranges)


def _translate(items: Any, depth: int) -> str:
    if depth > MAX_NESTING:
        raise UnsupportedPattern(f"groups nested more than {MAX_NESTING} deep")
    out: list[str] = []
    for op, arg in items:
        kind = str(op)
        if kind == "LITERAL":
            out.append(_class_text([(arg, arg)]) if _SURROGATES[0] <= arg <= _SURROGATES[1] else f"\\x{{{arg:X}}}")
        elif kind == "NOT_LITERAL":
            out.append(_class_text(complement([(arg, arg)])))
        elif kind == "ANY":
            out.append(_class_text(complement(_LINE_TERMINATORS)))
        elif kind == "IN":
            out.append(_class_text(class_ranges(arg)))
        elif kind in ("MAX_REPEAT", "MIN_REPEAT"):  # greedy or lazy: the same for whether a match exists
            low, high, sub = arg
            bound = "" if high == _sre.MAXREPEAT else str(high)
            out.append(f"(?:{_translate(sub, depth + 1)}){{{low},{bound}}}")
        elif kind == "SUBPATTERN":
            _group, add_flags, del_flags, sub = arg
            if add_flags or del_flags:
                raise UnsupportedPattern("inline flags, which ECMA-262 does not have")
            out.append(f"(?:{_translate(sub, depth + 1)})")
        elif kind == "BRANCH":
            out.append("(?:" + "|".join(_translate(b, depth + 1) for b in arg[1]) + ")")
        elif kind == "AT" and str(arg) in _ANCHORS:
            out.append(_ANCHORS[str(arg)])
        else:
            raise UnsupportedPattern(f"{_REFUSED.get(kind, kind)}, which a linear-time regex engine cannot run")
    return "".join(out)


def to_re2(pattern: str) -> str:
    """``pattern`` (ECMA-262, as JSON Schema reads it) in RE2 syntax with the same meaning.

    Raises :class:`UnsupportedPattern` naming what cannot be run in linear time or read at all.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise UnsupportedPattern(f"a pattern of {len(pattern)} characters, over the {MAX_PATTERN_CHARS} allowed")
    try:
        parsed = _sre.parse(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        raise UnsupportedPattern(f"a pattern the regex parser cannot read ({exc})") from None
    if parsed.state.flags & ~(re.UNICODE | re.DEBUG):
        raise UnsupportedPattern("inline flags, which ECMA-262 does not have")
    return _translate(list(parsed), 0)


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = MAX_MEM
    options.log_errors = False  # the refusal says why; RE2 need not print it too
    options.never_capture = True
    return options


# Compiled programs of recent patterns. Each counts as MAX_MEM: RE2 grows a program's DFA as it searches, up
# to that budget, and its memory is invisible to Python (512 entries held up to 2 GiB before).
_PROGRAMS: SizedCache[str, Any] = SizedCache(512, 64 * 2**20)


def compile_pattern(pattern: str) -> Any:
    """The compiled RE2 program of ``pattern`` (cached: the same tools come with every request)."""
    found = _PROGRAMS.get(pattern)
    if found is not None:
        return found
    translated = to_re2(pattern)
    try:
        found = re2.compile(translated, _options())
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise UnsupportedPattern(f"a pattern the linear-time engine refuses ({why}); RE2 allows repetition "
                                 f"counts up to 1000 and about {MAX_MEM >> 20} MiB of program") from None
    _PROGRAMS.put(pattern, found, MAX_MEM + len(pattern))
    return found


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (JSON allows "\ud800"): U+FFFD stands in for it
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


def search(pattern: str, text: str) -> bool:
    """Whether ``text`` contains a match of ``pattern`` (JSON Schema's ``pattern``), in time linear in ``text``."""
    return compile_pattern(pattern).search(_utf8(text)) is not None


def fullmatch(pattern: str, text: str) -> bool:
    """Whether all of ``text`` matches ``pattern``, in time linear in ``text``."""
    return compile_pattern(pattern).fullmatch(_utf8(text)) is not None
