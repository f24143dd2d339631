"""Constrained decoding: a grammar of Hammer's answer, built once from the bound tools, written in two notations.

The grammar pins function names, argument names, types, enums and required fields, and still lets
the model write its natural layout: whitespace and newlines between tokens, and an optional
Markdown fence (```` ``` ```` or ```` ```json ````) around the list. Measured on the stand-in default
model: forbidding the newline after ``[`` turns correct answers into ``[]``.

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
decoding by :func:`hammer_plugins.grammar.keyword_check.keyword_violation`: the engine turns such a call into
an invalid call naming the keyword, and each such limit is reported once as a
:class:`~hammer_plugins.grammar.keywords.SchemaKeywordWarning`. A string whose ``pattern`` or ``format``
the grammar enforces is written raw (no escapes). One restriction of layout: the properties of an
object with declared ``properties`` come in declaration order, each at most once, and no others.
Declaration order is the order the prompt shows the model (the reference prompt keeps it), and
pinning it is what keeps the grammar small and every step's choice narrow; optional properties may
be skipped. Objects without ``properties`` (a Python ``dict``), arrays without ``items`` and
parameters without a type take any JSON value of their kind. Strings are JSON strings in any
spelling JSON allows (raw UTF-8 or any escape), enum and const strings included (``"Zürich"``,
``"Z\\u00fcrich"``, ``"\\u00DCber"``, surrogate pairs; :class:`Str`); tool and argument names
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

* ``Grammar.lark`` for llguidance (both local backends, :mod:`hammer_plugins.grammar.token_mask`),
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
    >>> from hammer_plugins.grammar.builder import build_grammar
    >>> tool = Tool(name="ping", parameters={"type": "object",
    ...     "properties": {"host": {"type": "string"}}, "required": ["host"]})
    >>> grammar = build_grammar([tool], "required")
    >>> grammar.gbnf.splitlines()[0], grammar.lark.splitlines()[0]
    ('root ::= ws ( fenced | calls )', 'start: ws ( fenced | calls )')
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from hammer_plugins.grammar.keywords import (
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
from hammer_plugins.grammar.notation import (
    GBNF_CHAR,
    INTEGER,
    LARK_CHAR,
    MAX_BOUND_DIGITS,
    NULL,
    NUMBER,
    OBJECT,
    STRING,
    UNCHECKED_FORMATS,
    VALUE,
    WS,
    Expr,
    Grammar,
    Lex,
    Lit,
    Ref,
    Rep,
    Seq,
    alt,
    between,
    comma,
    const,
    enum,
    lit,
    opt,
    render_rules,
    seq,
    string,
)
from hammer_plugins.tools.definition import Tool
from hammer_plugins.tools.json_schema import json_type, normalize_parameters, normalize_schema
from hammer_plugins.tools.limits import active_budget, current_limits, fresh_budget
from hammer_plugins.values.errors import SchemaConversionError, UnknownToolError

# ------------------------------------------------------------------ schemas to rules


class _Builder:
    def __init__(self, tool: str, prefix: str) -> None:
        self.tool = tool
        self.prefix = prefix
        self.budget = active_budget()
        self.rules: dict[str, Expr] = {}
        self._counter = 0

    def warn(self, path: str, keyword: str, why: str) -> None:
        """A keyword the grammar leaves unenforced: said once (tool calls are checked after decoding;
        a response format's answer, built with prefix ``j``, is not)."""
        warn_once(self.tool, path, keyword, why, answer=self.prefix == "j")

    def fresh(self, hint: str) -> str:
        self._counter += 1
        clean = re.sub(r"[^a-zA-Z0-9]+", "-", hint).strip("-").lower() or "r"
        return f"{self.prefix}-{clean[:40]}-{self._counter}"

    def add(self, name: str, body: Expr) -> Ref:
        self.rules[name] = body
        return Ref(name)

    def value(self, schema: Mapping[str, Any], path: str) -> Expr:
        """An expression matching values of ``schema``."""
        if self.budget is not None:
            self.budget.tick(self.tool, path)
        if "const" in schema:
            return const(schema["const"])
        if "enum" in schema:
            if json_type(str(schema.get("type"))) == "array" and not any(isinstance(v, list) for v in schema["enum"]):
                # An array whose enum lists item values (BFCL's ``metrics``: gold ``["view"]``): the items' enum.
                items = schema.get("items") if isinstance(schema.get("items"), Mapping) else {}
                rest = {k: v for k, v in schema.items() if k != "enum"}
                return self.value({**rest, "items": {**items, "enum": schema["enum"]}}, path)
            return enum(schema["enum"])
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return alt(*(self.value(s, f"{path}.{key}") for s in schema[key]))
        stype = schema.get("type")
        named = stype if isinstance(stype, list) else [stype] if stype else []
        types = [json_type(t) for t in named]
        if None in types:  # "any" among them
            return VALUE
        if schema.get("nullable") and "null" not in types and types:
            types = [*types, "null"]
        if not types:
            return VALUE
        if len(types) > 1:
            return alt(*(self.value({**schema, "type": t, "nullable": False}, path) for t in types))
        kind = types[0]
        if kind == "string":
            return self.string(schema, path)
        if kind in ("integer", "number"):
            return self.number(kind, schema, path)
        if kind == "boolean":
            return Ref(kind)
        if kind == "null":
            return NULL
        if kind == "array":
            items = schema.get("items")
            item = self.value(items, f"{path}[]") if isinstance(items, Mapping) and items else VALUE
            low = int(schema.get("minItems", 0) or 0)  # checked when the tool was converted
            high = self.count_bound(schema, "maxItems", path)
            self.post_checked(schema, path, "uniqueItems", schema.get("uniqueItems") is True,
                              "is not expressible in a grammar")
            if high is not None and high < low:
                raise SchemaConversionError(self.tool, path, f"minItems {low} is above maxItems {high}",
                                            "fix the bounds")
            more = comma(item)
            if high == 0:
                body = seq(lit("["), WS, lit("]"))
            else:
                # the items after the first (none at all when maxItems is 1: llguidance refuses {0,0})
                rest = [] if high == 1 else [Rep(more, max(low - 1, 0), None if high is None else high - 1)]
                first = seq(item, *rest)
                body = seq(lit("["), WS, first if low > 0 else opt(first), WS, lit("]"))
            return self.add(self.fresh(f"{path}-arr"), body)
        if kind == "object":
            if not schema.get("properties"):
                return OBJECT
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

    def string(self, schema: Mapping[str, Any], path: str) -> Expr:
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
                if fmt in UNCHECKED_FORMATS:
                    pass
                else:
                    self.warn(path, "format", f"{fmt!r} is not one the grammar knows "
                              f"({', '.join(FORMATS)}) and is not checked")
            else:
                shapes.append(("format", found))
        if not shapes and low == 0 and high is None:
            return STRING
        if high == 0:  # only the empty string (llguidance refuses a {0,0} repetition)
            return Lit('""')
        length = f"{{{low},{'' if high is None else high}}}"
        lark = [f'/"{to_lark(rx)}"/' for _, rx in shapes]
        if low or high is not None:
            lark.insert(0, f'/"{LARK_CHAR}{length}"/')
        if shapes:
            gbnf = f'"\\"" {to_gbnf(shapes[0][1], nested=True)} "\\""'
            for keyword, _ in shapes[1:]:
                self.warn(path, keyword, f"is not enforced beside {shapes[0][0]} by GBNF grammars "
                          "(llama-server, vLLM), which cannot intersect")
            if low or high is not None:
                self.warn(path, "minLength/maxLength", f"is not enforced beside {shapes[0][0]} by GBNF "
                          "grammars (llama-server, vLLM), which cannot intersect")
        else:
            gbnf = f'"\\"" {GBNF_CHAR}{length} "\\""'
        return Lex(lark=" & ".join(lark), gbnf=gbnf)

    def number(self, kind: str, schema: Mapping[str, Any], path: str) -> Expr:
        """An integer within its bounds (exactly, in both notations); a number's bounds and any
        ``multipleOf`` are checked after decoding."""
        self.post_checked(schema, path, "multipleOf", "multipleOf" in schema, "is not expressible in a grammar")
        bounded = any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"))
        if not bounded:
            return Ref(kind)
        if kind == "number":
            self.warn(path, "minimum/maximum", "of a non-integer number is not expressed in the grammar")
            return NUMBER
        low, high = integer_bounds(schema)
        if low is not None and high is not None and low > high:
            raise SchemaConversionError(self.tool, path, f"no integer lies within the bounds ({low} > {high})",
                                        "fix minimum and maximum")
        if any(b is not None and len(str(abs(b))) > MAX_BOUND_DIGITS for b in (low, high)):
            self.warn(path, "minimum/maximum", f"has more than {MAX_BOUND_DIGITS} digits")
            return INTEGER
        rx = int_range_rx(low, high)
        return Lex(lark=f"/{to_lark(rx)}/", gbnf=to_gbnf(rx))

    def object_rule(self, schema: Mapping[str, Any], path: str) -> Ref:
        """Properties in declaration order; required ones present, optional ones skippable."""
        props = list(schema.get("properties", {}).items())
        required = set(schema["required"]) if isinstance(schema.get("required"), list) else set()
        members = [between(string(name, names=True), lit(":"), self.value(sub, f"{path}.{name}"))
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
            self.rules[rule(i, first)] = Seq(())  # reserved; filled below
            reached.append((i, first))
            if i + 1 < len(props):
                if props[i][0] not in required:
                    stack.append((i + 1, first))
                stack.append((i + 1, False))
        for i, first in reached:
            lead = [] if first else [WS, lit(","), WS]
            rest = [Ref(rule(i + 1, False))] if i + 1 < len(props) else []
            take = seq(*lead, members[i], *rest)
            if props[i][0] in required:
                self.rules[rule(i, first)] = take
            else:
                skip = Ref(rule(i + 1, first)) if i + 1 < len(props) else None
                self.rules[rule(i, first)] = alt(take, skip) if skip else opt(take)
        body = Ref(rule(0, True)) if props else None
        return self.add(base, seq(lit("{"), WS, *([body, WS] if body else []), lit("}")))


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
    rules: dict[str, Expr] = {}
    calls: list[Expr] = []
    for index, tool in enumerate(tools):
        if tool_choice not in ("auto", "required") and tool.name != tool_choice:
            continue
        builder = _Builder(tool.name, f"t{index}")
        args = builder.object_rule(tool.parameters, "args")
        call = builder.add(f"call-{index}", seq(
            lit("{"), WS, between(lit('"name"'), lit(":"), string(tool.name, names=True), lit(","),
                                    lit('"arguments"'), lit(":"), args), WS, lit("}")))
        calls.append(call)
        rules.update(builder.rules)
    call_any = Ref("call")
    more = Rep(comma(call_any), 0, None) if parallel else None
    listed = seq(call_any, more) if more is not None else call_any
    body = opt(listed) if tool_choice == "auto" else listed
    head: dict[str, Expr] = {
        "root": seq(WS, alt(Ref("fenced"), Ref("calls"))),
        "fenced": seq(lit("```"), opt(lit("json")), WS, Ref("calls"), WS, lit("```")),
        "calls": seq(lit("["), WS, body, WS, lit("]")),
        "call": alt(*calls),
    }
    return render_rules({**head, **rules})


def build_json_grammar(schema: Mapping[str, Any] | None = None, name: str = "response") -> Grammar:
    """The grammar of one JSON value: any object when ``schema`` is None, else values of ``schema``.

    Used for JSON mode and JSON-schema structured output (no tools in the prompt).

    Example:
        >>> build_json_grammar(None).gbnf.splitlines()[0]
        'root ::= ws object'
    """
    if schema is None:
        return render_rules({"root": seq(WS, OBJECT)})
    if not isinstance(schema, Mapping):
        raise SchemaConversionError(name, "schema", f"expected a JSON Schema object, got {type(schema).__name__}")
    with fresh_budget():
        is_object = isinstance(schema.get("type", "object"), str) and json_type(str(schema.get("type", "object"))) == "object"
        normalized = normalize_parameters(name, schema) if is_object else normalize_schema(name, schema)
        builder = _Builder(name, "j")
        root = builder.value(normalized, "root")
        return render_rules({"root": seq(WS, root), **builder.rules}, name)
