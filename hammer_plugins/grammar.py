"""Constrained decoding: a grammar of Hammer's answer, built once from the bound tools, written in two notations.

The grammar pins function names, argument names, types, enums and required fields, and still lets
the model write its natural layout: whitespace and newlines between tokens, and an optional
Markdown fence (```` ``` ```` or ```` ```json ````) around the list. The measurement in the project
GUIDE (section 2) showed that forbidding the newline after ``[`` turns correct answers into ``[]``.

**What the grammar promises.** An answer it accepts is a JSON list of calls to bound tools whose
``arguments`` object has the names, types, enums, consts and required fields of the tool's schema
(the ``jsonschema`` validator is the oracle in ``tests/unit/test_grammar_differential.py``) and
keeps its value keywords as far as each notation expresses them (``tests/unit/test_schema_keywords.py``):
``minLength``/``maxLength`` (code points), ``pattern`` (the subset both engines have: literals,
classes, groups, alternation, repetition, ``^``/``$`` at the ends), ``format`` (``date``, ``time``,
``date-time``, ``email``, ``uuid``, ``ipv4``, ``uri``: the text, not the calendar), integer
``minimum``/``maximum``/``exclusiveMinimum``/``exclusiveMaximum`` exactly, ``minItems``/``maxItems``;
GBNF cannot intersect, so beside a ``pattern`` it drops the lengths and the format. Counts above
``SchemaLimits.max_min_items`` are not unrolled. What the grammar leaves out (``multipleOf``,
``uniqueItems``, bounds of non-integer numbers, the calendar, an unsupported pattern) is checked after
decoding by :func:`hammer_plugins.schema_keywords.keyword_violation`: the engine turns such a call into
an invalid call naming the keyword, and each such limit is reported once as a
:class:`~hammer_plugins.schema_keywords.SchemaKeywordWarning`. A string whose ``pattern`` or ``format``
the grammar enforces is written raw (no escapes). One restriction of layout: the properties of an
object with declared ``properties`` come in declaration order, each at most once, and no others.
Declaration order is the order the prompt shows the model (the reference prompt keeps it), and
pinning it is what keeps the grammar small and every step's choice narrow; optional properties may
be skipped. Objects without ``properties`` (a Python ``dict``), arrays without ``items`` and
parameters without a type take any JSON value of their kind. Strings are JSON strings in any
spelling JSON allows (raw UTF-8 or any escape), enum and const strings included (``"Zürich"``,
``"Z\\u00fcrich"``, ``"\\u00DCber"``, surrogate pairs; :class:`_Str`); tool and argument names
accept escapes for every character but printable ASCII other than ``"``, ``\\`` and ``/`` (so
``json.dumps`` with ``ensure_ascii`` either way is accepted, and an ASCII name stays one literal).
Integers are written without a
fraction or exponent; integers and numbers have no length bound (snowflake ids of 19 digits are
arguments too; a model spinning on digits ends at ``max_tokens``, as it did on a string before the
loop guard). An array type whose enum lists scalar values reads the enum as its items' (BFCL's
``"metrics": {"type": "array", "enum": ["view", ...]}``, gold answer ``["view"]``). Whitespace
runs are bounded (64 characters: a newline and 15 levels of 4-space indentation). Nothing may
follow the answer: once the list (or its closing fence) is written only the end of generation is
allowed, since a model that prefers newlines to its end
token would otherwise pad every answer (SmolLM2-135M wrote 64 newlines after each).

**Two notations, one source.** The rules are built once as a small expression tree and written out:

* ``Grammar.lark`` for llguidance (both local backends, :mod:`hammer_plugins.token_mask`),
  with the lexemes chosen here: only JSON's atoms (strings, numbers, punctuation, literals,
  whitespace) are lexemes, every structure is a parser rule. llguidance's own reading of GBNF
  turns every rule whose right side is regular into ONE lexeme, so a tool whose arguments are all
  typed became a single lexeme ``{ ... }`` while a tool with a ``dict`` parameter stayed a parser
  rule starting with the lexeme ``{``; after ``[`` both are live, llguidance's lexer follows the
  longer one and cannot back out of it when the other tool's name comes, so that tool was
  uncallable whenever another tool was bound.
* ``Grammar.gbnf`` for llama.cpp's grammar notation (llama-server's ``grammar`` field, vLLM's
  ``structured_outputs``), whose engines have no lexer.

Modes (``tool_choice``):

* ``"auto"``: a list of calls, ``[]`` allowed.
* ``"required"``: at least one call.
* a tool name: every call is to that tool, at least one.
* ``"none"``: no grammar; the model answers in plain language without tools.

Example:
    >>> from hammer_plugins import Tool
    >>> from hammer_plugins.grammar import build_grammar
    >>> tool = Tool(name="ping", parameters={"type": "object",
    ...     "properties": {"host": {"type": "string"}}, "required": ["host"]})
    >>> grammar = build_grammar([tool], "required")
    >>> grammar.gbnf.splitlines()[0], grammar.lark.splitlines()[0]
    ('root ::= ws ( fenced | calls )', 'start: ws ( fenced | calls )')
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, Union

from .errors import SchemaConversionError, SchemaLimitError, UnknownToolError
from .schema_keywords import (
    FORMATS,
    Unsupported,
    format_rx,
    int_range_rx,
    integer_bounds,
    pattern_rx,
    to_gbnf,
    to_lark,
    warn_once,
)
from .tools import Tool, current_limits, fresh_budget, json_type

_K = TypeVar("_K")
_V = TypeVar("_V")

# ------------------------------------------------------------------ expressions


@dataclass(frozen=True)
class _Lit:
    text: str


@dataclass(frozen=True)
class _Ref:
    name: str


@dataclass(frozen=True)
class _Seq:
    items: tuple[_Expr, ...]


@dataclass(frozen=True)
class _Alt:
    items: tuple[_Expr, ...]


@dataclass(frozen=True)
class _Rep:
    item: _Expr
    low: int
    high: int | None


@dataclass(frozen=True)
class _Str:
    """One JSON string lexeme: any of ``values``, each in every spelling JSON allows (raw UTF-8, the
    short escapes, ``\\u`` escapes in either case, surrogate pairs), or with ``plain_raw`` the
    printable ASCII characters other than ``"``, ``\\`` and ``/`` only raw (names: see :func:`_string`)."""

    values: tuple[str, ...]
    plain_raw: bool = False


@dataclass(frozen=True)
class _Lex:
    """One JSON value lexeme with its own text in each notation: ``lark`` a terminal's right side
    (regexes, ``&`` intersecting them), ``gbnf`` a rule's right side (a bounded string, a pattern, a
    format, an integer range: :mod:`hammer_plugins.schema_keywords`)."""

    lark: str
    gbnf: str


_Expr = Union[_Lit, _Ref, _Seq, _Alt, _Rep, _Str, _Lex]  # noqa: UP007 - a runtime alias on Python 3.10


def _seq(*items: _Expr) -> _Expr:
    flat: list[_Expr] = []
    for item in items:
        flat.extend(item.items if isinstance(item, _Seq) else (item,))
    return flat[0] if len(flat) == 1 else _Seq(tuple(flat))


def _alt(*items: _Expr) -> _Expr:
    unique = tuple(dict.fromkeys(items))
    return unique[0] if len(unique) == 1 else _Alt(unique)


def _opt(item: _Expr) -> _Expr:
    return _Rep(item, 0, 1)


WS = _Ref("ws")
_STRING, _INTEGER, _NUMBER = _Ref("string"), _Ref("integer"), _Ref("number")
_BOOLEAN, _NULL, _VALUE, _OBJECT = _Ref("boolean"), _Lit("null"), _Ref("value"), _Ref("object")


def _lit(text: str) -> _Lit:
    return _Lit(text)


def _plain(char: str) -> bool:
    """A character every JSON writer leaves as it is (printable ASCII but ``"``, ``\\`` and ``/``)."""
    return " " <= char <= "~" and char not in '"\\/'


def _string(text: str, names: bool = False) -> _Expr:
    """A JSON string holding ``text`` in any spelling JSON allows.

    ``names`` (tool and argument names): printable ASCII other than ``"``, ``\\`` and ``/`` is matched
    raw only, every other character in any spelling (so ``json.dumps`` with ``ensure_ascii`` either
    way is accepted), which keeps an ASCII name one literal: every step's choice stays narrow.
    """
    if names and all(_plain(c) for c in text):
        return _Lit(json.dumps(text))
    return _Str((text,), plain_raw=names)


def _const(value: Any) -> _Expr:
    """A JSON value equal to ``value`` (an enum or const member), in any spelling and layout JSON allows
    for it: strings with any escapes, arrays and objects with whitespace; a float that is a whole
    number also as that integer (JSON Schema compares numbers by value)."""
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return _alt(_Lit(json.dumps(value)), _Lit(str(int(value))))
    if isinstance(value, list):
        if not value:
            return _seq(_lit("["), WS, _lit("]"))
        return _seq(_lit("["), WS, _const(value[0]), *(_comma(_const(v)) for v in value[1:]), WS, _lit("]"))
    if isinstance(value, Mapping):
        members = [_between(_string(str(k)), _lit(":"), _const(v)) for k, v in value.items()]
        if not members:
            return _seq(_lit("{"), WS, _lit("}"))
        return _seq(_lit("{"), WS, members[0], *(_comma(m) for m in members[1:]), WS, _lit("}"))
    return _Lit(json.dumps(value))


def _enum(values: Sequence[Any]) -> _Expr:
    """Any member of an enum: its strings as one lexeme (:class:`_Str`), the others as :func:`_const`."""
    strings = tuple(dict.fromkeys(v for v in values if isinstance(v, str)))
    others = [_const(v) for v in values if not isinstance(v, str)]
    return _alt(*([_Str(strings)] if strings else []), *others)


def _comma(item: _Expr) -> _Expr:
    """``, item`` with optional whitespace around the comma."""
    return _seq(WS, _lit(","), WS, item)


def _between(*parts: _Expr) -> _Expr:
    """``parts`` with optional whitespace between each pair."""
    out: list[_Expr] = []
    for index, part in enumerate(parts):
        if index:
            out.append(WS)
        out.append(part)
    return _seq(*out)


# The atoms: JSON's values, with the bounds the module docstring states. Each notation writes them
# its own way (lexemes in Lark); every other rule comes from the expression tree.
_ATOM_RULES: dict[str, _Expr] = {
    "value": _alt(_OBJECT, _Ref("array"), _STRING, _NUMBER, _BOOLEAN, _NULL),
    "object": _seq(_lit("{"), WS, _opt(_seq(_between(_STRING, _lit(":"), _VALUE),
                                            _Rep(_comma(_between(_STRING, _lit(":"), _VALUE)), 0, None))),
                   WS, _lit("}")),
    "array": _seq(_lit("["), WS, _opt(_seq(_VALUE, _Rep(_comma(_VALUE), 0, None))), WS, _lit("]")),
    "boolean": _alt(_lit("true"), _lit("false")),
}
_GBNF_ATOMS = {
    "ws": "ws ::= [ \\t\\n]{0,64}",
    "string": 'string ::= "\\"" char* "\\""\nchar ::= [^"\\\\\\x00-\\x1F] | "\\\\" ( ["\\\\/bfnrt] | "u" [0-9a-fA-F]{4} )',
    "integer": 'integer ::= "-"? ( "0" | [1-9] [0-9]* )',
    "number": 'number ::= "-"? ( "0" | [1-9] [0-9]* ) ( "." [0-9]+ )? ( [eE] [-+]? [0-9]+ )?',
}
_LARK_ATOMS = {
    "ws": "ws: WS?\nWS: /[ \\t\\n]{1,64}/",
    "string": 'STRING: /"(\\\\(["\\\\\\/bfnrt]|u[0-9a-fA-F]{4})|[^"\\\\\\x00-\\x1F])*"/',
    "integer": "INTEGER: /-?(0|[1-9][0-9]*)/",
    "number": "NUMBER: /-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?/",
}
_LARK_TERMINALS = {"string": "STRING", "integer": "INTEGER", "number": "NUMBER"}
# One character of a JSON string as JSON Schema counts them (a code point: a surrogate pair's two
# escapes are one character; a lone surrogate is not written), for minLength/maxLength.
_LARK_CHAR = ('(?:\\\\(?:["\\\\\\/bfnrt]|u(?:[0-9a-cA-CeEfF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}'
              '|[dD][89abAB][0-9a-fA-F]{2}\\\\u[dD][c-fC-F][0-9a-fA-F]{2}))|[^"\\\\\\x00-\\x1F])')
_GBNF_HEX = "[0-9a-fA-F]"
_GBNF_CHAR = (f'( [^"\\\\\\x00-\\x1F] | "\\\\" ( ["\\\\/bfnrt] | "u" ( [0-9a-cA-CeEfF] {_GBNF_HEX}{{3}} '
              f'| [dD] [0-7] {_GBNF_HEX}{{2}} | [dD] [89abAB] {_GBNF_HEX}{{2}} "\\\\u" [dD] [c-fC-F] {_GBNF_HEX}{{2}} ) ) )')
# Formats that name a meaning, not a text the grammar could check (no warning when they are left free).
_UNCHECKED_FORMATS = frozenset({"password", "binary", "byte", "int32", "int64", "float", "double", "multiline",
                                "textarea", "text"})
# Integer bounds with more digits than this are left to the check after decoding.
_MAX_BOUND_DIGITS = 40


# ------------------------------------------------------------------ notations


def _escape(text: str) -> str:
    """The body of a string literal, escaped the way both notations read it."""
    out: list[str] = []
    for char in text:
        if char in '"\\':
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\r":
            out.append("\\r")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "".join(out)


_SHORT_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}


def _utf16_units(char: str) -> list[str]:
    """The ``\\u`` escape digits of a character: one unit, or a surrogate pair beyond the BMP."""
    code = ord(char)
    if code < 0x10000:
        return [f"{code:04x}"]
    code -= 0x10000
    return [f"{0xD800 + (code >> 10):04x}", f"{0xDC00 + (code & 0x3FF):04x}"]


def _spellings(char: str, plain_raw: bool) -> tuple[str | None, str | None, list[list[str]]]:
    """How JSON may write ``char`` inside a string: raw (or None), the letter of its short escape (or
    None), and its ``\\u`` escape as hex digits per UTF-16 unit (empty when ``plain_raw`` keeps it raw)."""
    if plain_raw and _plain(char):
        return char, None, []
    raw = char if char not in '"\\' and ord(char) >= 0x20 else None
    return raw, _SHORT_ESCAPES.get(char), [list(unit) for unit in _utf16_units(char)]


def _lark_spelling(text: str, plain_raw: bool) -> str:
    """A regex (llguidance's syntax) of every spelling of the string body ``text``."""
    def lit(char: str) -> str:
        return char if char.isascii() and char.isalnum() else f"\\x{{{ord(char):X}}}"

    def hexdigit(digit: str) -> str:
        return f"[{digit}{digit.upper()}]" if digit.isalpha() else digit

    out = []
    for char in text:
        raw, short, units = _spellings(char, plain_raw)
        options = [lit(raw)] if raw is not None else []
        if short is not None:
            options.append("\\\\" + lit(short))
        if units:
            options.append("".join("\\\\u" + "".join(hexdigit(d) for d in unit) for unit in units))
        out.append(options[0] if len(options) == 1 else f"(?:{'|'.join(options)})")
    return "".join(out)


def _gbnf_spelling(text: str, plain_raw: bool) -> str:
    """A GBNF sequence of every spelling of the string body ``text`` (``""`` for the empty string)."""
    def hexdigit(digit: str) -> str:
        return f"[{digit}{digit.upper()}]" if digit.isalpha() else f'"{digit}"'

    out, run = [], ""  # run: characters that can only be written raw, kept as one literal
    for char in text:
        raw, short, units = _spellings(char, plain_raw)
        if raw is not None and short is None and not units:
            run += raw
            continue
        if run:
            out, run = [*out, f'"{_escape(run)}"'], ""
        options = [f'"{_escape(raw)}"'] if raw is not None else []
        if short is not None:
            options.append(f'"{_escape(chr(92) + short)}"')
        options.append(" ".join(f'"\\\\u" {" ".join(hexdigit(d) for d in unit)}' for unit in units))
        out.append(f"( {' | '.join(options)} )")
    return " ".join([*out, f'"{_escape(run)}"'] if run else out)


def _write(expr: _Expr, name_of: Mapping[Any, str], nested: bool = False) -> str:
    if isinstance(expr, _Lit):
        return f'"{_escape(expr.text)}"'
    if isinstance(expr, _Ref):
        return name_of.get(expr.name, expr.name)
    if isinstance(expr, (_Str, _Lex)):
        return name_of[expr]
    if isinstance(expr, _Rep):
        inner = _write(expr.item, name_of, nested=True)
        suffix = {(0, 1): "?", (0, None): "*", (1, None): "+"}.get((expr.low, expr.high))
        if suffix is None:
            suffix = f"{{{expr.low},{'' if expr.high is None else expr.high}}}"
        return inner + suffix
    joiner = " " if isinstance(expr, _Seq) else " | "
    parts = [_write(item, name_of, nested=True) for item in expr.items]
    text = joiner.join(parts)
    return f"( {text} )" if nested and len(parts) > 1 else text


def _references(expr: _Expr) -> set[str]:
    if isinstance(expr, _Ref):
        return {expr.name}
    if isinstance(expr, _Rep):
        return _references(expr.item)
    if isinstance(expr, (_Seq, _Alt)):
        return set().union(*(_references(item) for item in expr.items))
    return set()


def _string_lexemes(expr: _Expr) -> dict[Any, None]:
    """The :class:`_Str` and :class:`_Lex` lexemes in ``expr``, in order of appearance."""
    if isinstance(expr, (_Str, _Lex)):
        return {expr: None}
    if isinstance(expr, _Rep):
        return _string_lexemes(expr.item)
    if isinstance(expr, (_Seq, _Alt)):
        return {s: None for item in expr.items for s in _string_lexemes(item)}
    return {}


@dataclass(frozen=True)
class Grammar:
    """One grammar of an answer, in the two notations constrained decoders read.

    ``lark`` is for llguidance (the local backends), ``gbnf`` for llama.cpp's notation (servers).

    Example:
        >>> grammar = build_json_grammar(None)
        >>> "start: ws object" in grammar.lark, "root ::= ws object" in grammar.gbnf
        (True, True)
    """

    gbnf: str
    lark: str


def _render(rules: Mapping[str, _Expr], tool: str = "<tools>") -> Grammar:
    """Both notations of ``rules`` (``root`` first), with the atoms they reach."""
    needed: set[str] = set()
    frontier = set().union(*(_references(e) for e in rules.values())) - set(rules)
    while frontier:
        name = frontier.pop()
        needed.add(name)
        frontier |= _references(_ATOM_RULES[name]) if name in _ATOM_RULES else set()
        frontier -= needed
    composite = {**rules, **{n: _ATOM_RULES[n] for n in _ATOM_RULES if n in needed}}
    found = list({s: None for expr in composite.values() for s in _string_lexemes(expr)})
    strings = [s for s in found if isinstance(s, _Str)]
    lexes = [s for s in found if isinstance(s, _Lex)]
    size = _Size(tool)
    gbnf_names: dict[Any, str] = {**{s: f"str-{i}" for i, s in enumerate(strings)},
                                  **{x: f"lex-{i}" for i, x in enumerate(lexes)}}
    gbnf = [size(f"{name} ::= {_write(expr, gbnf_names)}") for name, expr in composite.items()]
    gbnf += [size(f'{gbnf_names[s]} ::= "\\"" ( {" | ".join(_gbnf_spelling(v, s.plain_raw) or chr(34) * 2 for v in s.values)} )'
                  ' "\\""') for s in strings]
    gbnf += [size(f"{gbnf_names[x]} ::= {x.gbnf}") for x in lexes]
    gbnf += [_GBNF_ATOMS[n] for n in _GBNF_ATOMS if n in needed]
    lark_names: dict[Any, str] = {**_LARK_TERMINALS, "root": "start", **{s: f"STR_{i}" for i, s in enumerate(strings)},
                                  **{x: f"LEX_{i}" for i, x in enumerate(lexes)}}
    lark = [size(f"{lark_names.get(name, name)}: {_write(expr, lark_names)}") for name, expr in composite.items()]
    lark += [size(f'{lark_names[s]}: /"(?:{"|".join(_lark_spelling(v, s.plain_raw) for v in s.values)})"/')
             for s in strings]
    lark += [size(f"{lark_names[x]}: {x.lark}") for x in lexes]
    lark += [_LARK_ATOMS[n] for n in _LARK_ATOMS if n in needed]
    return Grammar(gbnf="\n".join(gbnf) + "\n", lark="\n".join(lark) + "\n")


class _Size:
    """Counts the grammar's characters as its lines are written, and the time spent: over
    ``max_grammar_bytes`` or ``max_build_seconds`` (:class:`~hammer_plugins.tools.SchemaLimits`), the
    build stops there."""

    def __init__(self, tool: str) -> None:
        self.tool = tool
        self.total = 0
        self.limits = current_limits()

    def __call__(self, line: str) -> str:
        self.total += len(line) + 1
        if self.total > self.limits.max_grammar_bytes:
            raise SchemaLimitError(self.tool, "<grammar>", "max_grammar_bytes", self.total, self.limits.max_grammar_bytes,
                                   "the grammar's size (characters, both notations)",
                                   "bind fewer tools or shorter enums")
        from .tools import _BUDGET

        budget = _BUDGET.get()
        if budget is not None:
            budget.tick(self.tool, "<grammar>")
        return line


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


# ------------------------------------------------------------------ schemas to rules


class _Builder:
    def __init__(self, tool: str, prefix: str) -> None:
        from .tools import _BUDGET

        self.tool = tool
        self.prefix = prefix
        self.budget = _BUDGET.get()
        self.rules: dict[str, _Expr] = {}
        self._counter = 0

    def warn(self, path: str, keyword: str, why: str) -> None:
        """A keyword the grammar leaves unenforced: said once (tool calls are checked after decoding;
        a response format's answer, built with prefix ``j``, is not)."""
        warn_once(self.tool, path, keyword, why, answer=self.prefix == "j")

    def fresh(self, hint: str) -> str:
        self._counter += 1
        clean = re.sub(r"[^a-zA-Z0-9]+", "-", hint).strip("-").lower() or "r"
        return f"{self.prefix}-{clean[:40]}-{self._counter}"

    def add(self, name: str, body: _Expr) -> _Ref:
        self.rules[name] = body
        return _Ref(name)

    def value(self, schema: Mapping[str, Any], path: str) -> _Expr:
        """An expression matching values of ``schema``."""
        if self.budget is not None:
            self.budget.tick(self.tool, path)
        if "const" in schema:
            return _const(schema["const"])
        if "enum" in schema:
            if json_type(str(schema.get("type"))) == "array" and not any(isinstance(v, list) for v in schema["enum"]):
                # An array whose enum lists item values (BFCL's ``metrics``: gold ``["view"]``): the items' enum.
                items = schema.get("items") if isinstance(schema.get("items"), Mapping) else {}
                rest = {k: v for k, v in schema.items() if k != "enum"}
                return self.value({**rest, "items": {**items, "enum": schema["enum"]}}, path)
            return _enum(schema["enum"])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return _alt(*(self.value(s, f"{path}.{key}") for s in schema[key]))
        stype = schema.get("type")
        named = stype if isinstance(stype, list) else [stype] if stype else []
        types = [json_type(t) for t in named]
        if None in types:  # "any" among them
            return _VALUE
        if schema.get("nullable") and "null" not in types and types:
            types = [*types, "null"]
        if not types:
            return _VALUE
        if len(types) > 1:
            return _alt(*(self.value({**schema, "type": t, "nullable": False}, path) for t in types))
        kind = types[0]
        if kind == "string":
            return self.string(schema, path)
        if kind in ("integer", "number"):
            return self.number(kind, schema, path)
        if kind == "boolean":
            return _Ref(kind)
        if kind == "null":
            return _NULL
        if kind == "array":
            items = schema.get("items")
            item = self.value(items, f"{path}[]") if isinstance(items, Mapping) and items else _VALUE
            low = int(schema.get("minItems", 0) or 0)  # checked when the tool was converted
            high = self.count_bound(schema, "maxItems", path)
            self.post_checked(schema, path, "uniqueItems", schema.get("uniqueItems") is True,
                              "is not expressible in a grammar")
            if high is not None and high < low:
                raise SchemaConversionError(self.tool, path, f"minItems {low} is above maxItems {high}",
                                            "fix the bounds")
            more = _comma(item)
            if high == 0:
                body = _seq(_lit("["), WS, _lit("]"))
            else:
                # the items after the first (none at all when maxItems is 1: llguidance refuses {0,0})
                rest = [] if high == 1 else [_Rep(more, max(low - 1, 0), None if high is None else high - 1)]
                first = _seq(item, *rest)
                body = _seq(_lit("["), WS, first if low > 0 else _opt(first), WS, _lit("]"))
            return self.add(self.fresh(f"{path}-arr"), body)
        if kind == "object":
            if not schema.get("properties"):
                return _OBJECT
            return self.object_rule(schema, path)
        raise SchemaConversionError(self.tool, path, f"type {kind!r} has no grammar")

    def post_checked(self, schema: Mapping[str, Any], path: str, keyword: str, present: bool, why: str) -> None:
        """Report once that ``keyword`` is left to the check after decoding (when ``present``)."""
        if present:
            self.warn(path, keyword, why)

    def count_bound(self, schema: Mapping[str, Any], key: str, path: str) -> int | None:
        """An upper count (``maxItems``, ``maxLength``) the grammar unrolls, or None: absent, or above
        ``max_min_items`` (then checked after decoding only)."""
        value = schema.get(key)
        if value is None or isinstance(value, bool):
            return None
        cap = current_limits().max_min_items
        if value > cap:
            self.warn(path, key, f"is above the grammar's unrolling limit ({cap}, SchemaLimits.max_min_items)")
            return None
        return int(value)

    def string(self, schema: Mapping[str, Any], path: str) -> _Expr:
        """A string with its ``minLength``/``maxLength``, ``pattern`` and ``format``: one lexeme, the
        keywords intersected (``&``) in Lark; in GBNF a pattern (else a format, else the length bounds)."""
        cap = current_limits().max_min_items
        low = int(schema.get("minLength", 0) or 0)
        if low > cap:
            self.warn(path, "minLength", f"is above the grammar's unrolling limit ({cap}, "
                      f"SchemaLimits.max_min_items): the grammar asks for {cap} characters at least")
            low = cap
        high = self.count_bound(schema, "maxLength", path)
        if high is not None and high < low:
            raise SchemaConversionError(self.tool, path, f"minLength {low} is above maxLength {high}", "fix the bounds")
        shapes: list[tuple[str, Any]] = []  # (keyword, raw body regex)
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            try:
                shapes.append(("pattern", pattern_rx(pattern, cap)))
            except Unsupported as exc:
                self.warn(path, "pattern", f"uses {exc}, which the grammar's engines lack")
        fmt = schema.get("format")
        if isinstance(fmt, str):
            found = format_rx(fmt)
            if found is None:
                if fmt in _UNCHECKED_FORMATS:
                    pass
                else:
                    self.warn(path, "format", f"{fmt!r} is not one the grammar knows "
                              f"({', '.join(FORMATS)}) and is not checked")
            else:
                shapes.append(("format", found))
        if not shapes and low == 0 and high is None:
            return _STRING
        if high == 0:  # only the empty string (llguidance refuses a {0,0} repetition)
            return _Lit('""')
        length = f"{{{low},{'' if high is None else high}}}"
        lark = [f'/"{to_lark(rx)}"/' for _, rx in shapes]
        if low or high is not None:
            lark.insert(0, f'/"{_LARK_CHAR}{length}"/')
        if shapes:
            gbnf = f'"\\"" {to_gbnf(shapes[0][1], nested=True)} "\\""'
            for keyword, _ in shapes[1:]:
                self.warn(path, keyword, f"is not enforced beside {shapes[0][0]} by GBNF grammars "
                          "(llama-server, vLLM), which cannot intersect")
            if low or high is not None:
                self.warn(path, "minLength/maxLength", f"is not enforced beside {shapes[0][0]} by GBNF "
                          "grammars (llama-server, vLLM), which cannot intersect")
        else:
            gbnf = f'"\\"" {_GBNF_CHAR}{length} "\\""'
        return _Lex(lark=" & ".join(lark), gbnf=gbnf)

    def number(self, kind: str, schema: Mapping[str, Any], path: str) -> _Expr:
        """An integer within its bounds (exactly, in both notations); a number's bounds and any
        ``multipleOf`` are checked after decoding."""
        self.post_checked(schema, path, "multipleOf", "multipleOf" in schema, "is not expressible in a grammar")
        bounded = any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
        if not bounded:
            return _Ref(kind)
        if kind == "number":
            self.warn(path, "minimum/maximum", "of a non-integer number is not expressed in the grammar")
            return _NUMBER
        low, high = integer_bounds(schema)
        if low is not None and high is not None and low > high:
            raise SchemaConversionError(self.tool, path, f"no integer lies within the bounds ({low} > {high})",
                                        "fix minimum and maximum")
        if any(b is not None and len(str(abs(b))) > _MAX_BOUND_DIGITS for b in (low, high)):
            self.warn(path, "minimum/maximum", f"has more than {_MAX_BOUND_DIGITS} digits")
            return _INTEGER
        rx = int_range_rx(low, high)
        return _Lex(lark=f"/{to_lark(rx)}/", gbnf=to_gbnf(rx))

    def object_rule(self, schema: Mapping[str, Any], path: str) -> _Ref:
        """Properties in declaration order; required ones present, optional ones skippable."""
        props = list(schema.get("properties", {}).items())
        required = set(schema["required"]) if isinstance(schema.get("required"), list) else set()
        members = [_between(_string(name, names=True), _lit(":"), self.value(sub, f"{path}.{name}"))
                   for name, sub in props]
        base = self.fresh(f"{path}-obj")

        def rule(i: int, first: bool) -> str:
            """The rule of members ``i..`` (``first``: no comma is owed before the next member)."""
            return f"{base}-s{i}{'f' if first else 'c'}"

        # The rules reachable from members 0.. in depth-first order (an explicit stack: an object may
        # have thousands of properties), reserved in that order, then filled.
        reached: list[tuple[int, bool]] = []
        stack = [(0, True)] if props else []
        while stack:
            i, first = stack.pop()
            if rule(i, first) in self.rules:
                continue
            self.rules[rule(i, first)] = _Seq(())  # reserved; filled below
            reached.append((i, first))
            if i + 1 < len(props):
                if props[i][0] not in required:
                    stack.append((i + 1, first))
                stack.append((i + 1, False))
        for i, first in reached:
            lead = [] if first else [WS, _lit(","), WS]
            rest = [_Ref(rule(i + 1, False))] if i + 1 < len(props) else []
            take = _seq(*lead, members[i], *rest)
            if props[i][0] in required:
                self.rules[rule(i, first)] = take
            else:
                skip = _Ref(rule(i + 1, first)) if i + 1 < len(props) else None
                self.rules[rule(i, first)] = _alt(take, skip) if skip else _opt(take)
        body = _Ref(rule(0, True)) if props else None
        return self.add(base, _seq(_lit("{"), WS, *([body, WS] if body else []), _lit("}")))


def build_grammar(tools: Sequence[Tool], tool_choice: str = "auto", parallel: bool = True) -> Grammar:
    """The grammar of an answer to ``tools`` under ``tool_choice``.

    ``tool_choice`` is ``"auto"``, ``"required"`` or the name of one tool. With ``parallel=False``
    the list holds at most one call.
    """
    if not tools:
        raise ValueError("constrained decoding needs at least one tool")
    names = [t.name for t in tools]
    if tool_choice not in ("auto", "required") and tool_choice not in names:
        raise UnknownToolError(
            f"tool_choice {tool_choice!r} is not among the bound tools {names}. Fix: pass one of "
            "those names, 'auto', 'required' or 'none'."
        )
    with fresh_budget():
        return _build_grammar(tools, tool_choice, parallel)


def _build_grammar(tools: Sequence[Tool], tool_choice: str, parallel: bool) -> Grammar:
    rules: dict[str, _Expr] = {}
    calls: list[_Expr] = []
    for index, tool in enumerate(tools):
        if tool_choice not in ("auto", "required") and tool.name != tool_choice:
            continue
        builder = _Builder(tool.name, f"t{index}")
        args = builder.object_rule(tool.parameters, "args")
        call = builder.add(f"call-{index}", _seq(
            _lit("{"), WS, _between(_lit('"name"'), _lit(":"), _string(tool.name, names=True), _lit(","),
                                    _lit('"arguments"'), _lit(":"), args), WS, _lit("}")))
        calls.append(call)
        rules.update(builder.rules)
    call_any = _Ref("call")
    more = _Rep(_comma(call_any), 0, None) if parallel else None
    listed = _seq(call_any, more) if more is not None else call_any
    body = _opt(listed) if tool_choice == "auto" else listed
    head: dict[str, _Expr] = {
        "root": _seq(WS, _alt(_Ref("fenced"), _Ref("calls"))),
        "fenced": _seq(_lit("```"), _opt(_lit("json")), WS, _Ref("calls"), WS, _lit("```")),
        "calls": _seq(_lit("["), WS, body, WS, _lit("]")),
        "call": _alt(*calls),
    }
    return _render({**head, **rules})


def build_json_grammar(schema: Mapping[str, Any] | None = None, name: str = "response") -> Grammar:
    """The grammar of one JSON value: any object when ``schema`` is None, else values of ``schema``.

    Used for JSON mode and JSON-schema structured output (no tools in the prompt).

    Example:
        >>> build_json_grammar(None).gbnf.splitlines()[0]
        'root ::= ws object'
    """
    from .tools import normalize_parameters, normalize_schema

    if schema is None:
        return _render({"root": _seq(WS, _OBJECT)})
    if not isinstance(schema, Mapping):
        raise SchemaConversionError(name, "schema", f"expected a JSON Schema object, got {type(schema).__name__}")
    with fresh_budget():
        is_object = isinstance(schema.get("type", "object"), str) and json_type(str(schema.get("type", "object"))) == "object"
        normalized = normalize_parameters(name, schema) if is_object else normalize_schema(name, schema)
        builder = _Builder(name, "j")
        root = builder.value(normalized, "root")
        return _render({"root": _seq(WS, root), **builder.rules}, name)
