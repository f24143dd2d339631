"""The grammar's expressions and the two notations they are written in: Lark (llguidance, the in-process
backends) and GBNF (llama.cpp's servers, vLLM), with every string spelled the way JSON may write it.
:mod:`hammer_plugins.grammar.builder` builds the expressions from tools; :class:`Grammar` holds the result.

Example:
    >>> grammar = render_rules({"root": seq(WS, lit("[]"))})
    >>> grammar.gbnf.splitlines()[0]
    'root ::= ws "[]"'
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from hammer_plugins.tools.limits import active_budget, current_limits
from hammer_plugins.values.errors import SchemaLimitError

# ------------------------------------------------------------------ expressions


@dataclass(frozen=True)
class Lit:
    text: str


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Seq:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Alt:
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Rep:
    item: Expr
    low: int
    high: int | None


@dataclass(frozen=True)
class Str:
    """One JSON string lexeme: any of ``values``, each in every spelling JSON allows (raw UTF-8, the
    short escapes, ``\\u`` escapes in either case, surrogate pairs), or with ``plain_raw`` the
    printable ASCII characters other than ``"``, ``\\`` and ``/`` only raw (names: see :func:`string`)."""

    values: tuple[str, ...]
    plain_raw: bool = False


@dataclass(frozen=True)
class Lex:
    """One JSON value lexeme with its own text in each notation: ``lark`` a terminal's right side
    (regexes, ``&`` intersecting them), ``gbnf`` a rule's right side (a bounded string, a pattern, a
    format, an integer range: :mod:`hammer_plugins.grammar.keywords`)."""

    lark: str
    gbnf: str


Expr = Union[Lit, Ref, Seq, Alt, Rep, Str, Lex]  # noqa: UP007 - a runtime alias on Python 3.10


def seq(*items: Expr) -> Expr:
    flat: list[Expr] = []
    for item in items:
        flat.extend(item.items if isinstance(item, Seq) else (item,))
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def alt(*items: Expr) -> Expr:
    unique = tuple(dict.fromkeys(items))
    return unique[0] if len(unique) == 1 else Alt(unique)


def opt(item: Expr) -> Expr:
    return Rep(item, 0, 1)


WS = Ref("ws")
STRING, INTEGER, NUMBER = Ref("string"), Ref("integer"), Ref("number")
_BOOLEAN, NULL, VALUE, OBJECT = Ref("boolean"), Lit("null"), Ref("value"), Ref("object")


def lit(text: str) -> Lit:
    return Lit(text)


def _plain(char: str) -> bool:
    """A character every JSON writer leaves as it is (printable ASCII but ``"``, ``\\`` and ``/``)."""
    return " " <= char <= "~" and char not in '"\\/'


def string(text: str, names: bool = False) -> Expr:
    """A JSON string holding ``text`` in any spelling JSON allows.

    ``names`` (tool and argument names): printable ASCII other than ``"``, ``\\`` and ``/`` is matched
    raw only, every other character in any spelling (so ``json.dumps`` with ``ensure_ascii`` either
    way is accepted), which keeps an ASCII name one literal: every step's choice stays narrow.
    """
    if names and all(_plain(c) for c in text):
        return Lit(json.dumps(text))
    return Str((text,), plain_raw=names)


def const(value: Any) -> Expr:
    """A JSON value equal to ``value`` (an enum or const member), in any spelling and layout JSON allows
    for it: strings with any escapes, arrays and objects with whitespace; a float that is a whole
    number also as that integer (JSON Schema compares numbers by value)."""
    if isinstance(value, str):
        return string(value)
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return alt(Lit(json.dumps(value)), Lit(str(int(value))))
    if isinstance(value, list):
        if not value:
            return seq(lit("["), WS, lit("]"))
        return seq(lit("["), WS, const(value[0]), *(comma(const(v)) for v in value[1:]), WS, lit("]"))
    if isinstance(value, Mapping):
        members = [between(string(str(k)), lit(":"), const(v)) for k, v in value.items()]
        if not members:
            return seq(lit("{"), WS, lit("}"))
        return seq(lit("{"), WS, members[0], *(comma(m) for m in members[1:]), WS, lit("}"))
    return Lit(json.dumps(value))


def enum(values: Sequence[Any]) -> Expr:
    """Any member of an enum: its strings as one lexeme (:class:`Str`), the others as :func:`const`."""
    strings = tuple(dict.fromkeys(v for v in values if isinstance(v, str)))
    others = [const(v) for v in values if not isinstance(v, str)]
    return alt(*([Str(strings)] if strings else []), *others)


def comma(item: Expr) -> Expr:
    """``, item`` with optional whitespace around the comma."""
    return seq(WS, lit(","), WS, item)


def between(*parts: Expr) -> Expr:
    """``parts`` with optional whitespace between each pair."""
    out: list[Expr] = []
    for index, part in enumerate(parts):
        if index:
            out.append(WS)
        out.append(part)
    return seq(*out)


# The atoms: JSON's values, with the bounds the module docstring states. Each notation writes them
# its own way (lexemes in Lark); every other rule comes from the expression tree.
_ATOM_RULES: dict[str, Expr] = {
    "value": alt(OBJECT, Ref("array"), STRING, NUMBER, _BOOLEAN, NULL),
    "object": seq(lit("{"), WS, opt(seq(between(STRING, lit(":"), VALUE),
                                            Rep(comma(between(STRING, lit(":"), VALUE)), 0, None))),
                   WS, lit("}")),
    "array": seq(lit("["), WS, opt(seq(VALUE, Rep(comma(VALUE), 0, None))), WS, lit("]")),
    "boolean": alt(lit("true"), lit("false")),
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
LARK_CHAR = ('(?:\\\\(?:["\\\\\\/bfnrt]|u(?:[0-9a-cA-CeEfF][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}'
              '|[dD][89abAB][0-9a-fA-F]{2}\\\\u[dD][c-fC-F][0-9a-fA-F]{2}))|[^"\\\\\\x00-\\x1F])')
_GBNF_HEX = "[0-9a-fA-F]"
GBNF_CHAR = (f'( [^"\\\\\\x00-\\x1F] | "\\\\" ( ["\\\\/bfnrt] | "u" ( [0-9a-cA-CeEfF] {_GBNF_HEX}{{3}} '
              f'| [dD] [0-7] {_GBNF_HEX}{{2}} | [dD] [89abAB] {_GBNF_HEX}{{2}} "\\\\u" [dD] [c-fC-F] {_GBNF_HEX}{{2}} ) ) )')
# Formats that name a meaning, not a text the grammar could check (no warning when they are left free).
UNCHECKED_FORMATS = frozenset({"password", "binary", "byte", "int32", "int64", "float", "double", "multiline",
                                "textarea", "text"})
# Integer bounds with more digits than this are left to the check after decoding.
MAX_BOUND_DIGITS = 40


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


def _write(expr: Expr, name_of: Mapping[Any, str], nested: bool = False) -> str:
    if isinstance(expr, Lit):
        return f'"{_escape(expr.text)}"'
    if isinstance(expr, Ref):
        return name_of.get(expr.name, expr.name)
    if isinstance(expr, (Str, Lex)):
        return name_of[expr]
    if isinstance(expr, Rep):
        inner = _write(expr.item, name_of, nested=True)
        suffix = {(0, 1): "?", (0, None): "*", (1, None): "+"}.get((expr.low, expr.high))
        if suffix is None:
            suffix = f"{{{expr.low},{'' if expr.high is None else expr.high}}}"
        return inner + suffix
    joiner = " " if isinstance(expr, Seq) else " | "
    parts = [_write(item, name_of, nested=True) for item in expr.items]
    text = joiner.join(parts)
    return f"( {text} )" if nested and len(parts) > 1 else text


def _references(expr: Expr) -> set[str]:
    if isinstance(expr, Ref):
        return {expr.name}
    if isinstance(expr, Rep):
        return _references(expr.item)
    if isinstance(expr, (Seq, Alt)):
        return set().union(*(_references(item) for item in expr.items))
    return set()


def _string_lexemes(expr: Expr) -> dict[Any, None]:
    """The :class:`Str` and :class:`Lex` lexemes in ``expr``, in order of appearance."""
    if isinstance(expr, (Str, Lex)):
        return {expr: None}
    if isinstance(expr, Rep):
        return _string_lexemes(expr.item)
    if isinstance(expr, (Seq, Alt)):
        return {s: None for item in expr.items for s in _string_lexemes(item)}
    return {}


@dataclass(frozen=True)
class Grammar:
    """One grammar of an answer, in the two notations constrained decoders read.

    ``lark`` is for llguidance (the local backends), ``gbnf`` for llama.cpp's notation (servers).

    Example:
        >>> from hammer_plugins.grammar.builder import build_json_grammar
        >>> grammar = build_json_grammar(None)
        >>> "start: ws object" in grammar.lark, "root ::= ws object" in grammar.gbnf
        (True, True)
    """

    gbnf: str
    lark: str


def render_rules(rules: Mapping[str, Expr], tool: str = "<tools>") -> Grammar:
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
    strings = [s for s in found if isinstance(s, Str)]
    lexes = [s for s in found if isinstance(s, Lex)]
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
    ``max_grammar_bytes`` or ``max_build_seconds`` (:class:`~hammer_plugins.tools.limits.SchemaLimits`), the
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
        budget = active_budget()
        if budget is not None:
            budget.tick(self.tool, "<grammar>")
        return line
