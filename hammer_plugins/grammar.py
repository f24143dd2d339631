"""Constrained decoding: a GBNF grammar of Hammer's answer, built from the bound tools.

The grammar pins function names, argument names, types, enums and required fields, and still
lets the model write its natural layout: whitespace and newlines between tokens, and an optional
Markdown fence (```` ``` ```` or ```` ```json ````) around the list. The measurement in the
project GUIDE (section 2) showed that forbidding the newline after ``[`` turns correct answers
into ``[]``.

One grammar text serves both backends through llguidance (``backends.token_mask``), which reads
GBNF; the text is also valid for llama.cpp's own ``LlamaGrammar`` (tested).

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
    >>> print(build_grammar([tool], "required").splitlines()[0])
    root ::= ws ( fenced | calls ) ws
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from .errors import SchemaConversionError, UnknownToolError
from .tools import Tool

# Bounded, so a model cannot spin on whitespace forever.
_WS = 'ws ::= [ \\t\\n]{0,24}'
_PRIMITIVES = r"""
string ::= "\"" char* "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" ( ["\\/bfnrt] | "u" [0-9a-fA-F]{4} )
integer ::= "-"? ( "0" | [1-9] [0-9]{0,17} )
number ::= integer ( "." [0-9]{1,17} )? ( [eE] [-+]? [0-9]{1,4} )?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ws ( string ws ":" ws value ( ws "," ws string ws ":" ws value )* )? ws "}"
array ::= "[" ws ( value ( ws "," ws value )* )? ws "]"
""".strip()


def _literal(text: str) -> str:
    """A GBNF string literal matching ``text`` exactly."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return f'"{escaped}"'


def _json_literal(value: Any) -> str:
    return _literal(json.dumps(value, ensure_ascii=False))


class _Builder:
    def __init__(self, tool: str, prefix: str) -> None:
        self.tool = tool
        self.prefix = prefix
        self.rules: dict[str, str] = {}
        self._counter = 0

    def fresh(self, hint: str) -> str:
        self._counter += 1
        clean = re.sub(r"[^a-zA-Z0-9]+", "-", hint).strip("-").lower() or "r"
        return f"{self.prefix}-{clean[:40]}-{self._counter}"

    def add(self, name: str, body: str) -> str:
        self.rules[name] = body
        return name

    def value(self, schema: dict[str, Any], path: str) -> str:
        """A rule reference (or inline expression) matching values of ``schema``."""
        if "const" in schema:
            return _json_literal(schema["const"])
        if "enum" in schema:
            return "( " + " | ".join(_json_literal(v) for v in schema["enum"]) + " )"
        for key in ("anyOf", "oneOf"):
            if key in schema:
                options = [self.value(s, f"{path}.{key}") for s in schema[key]]
                return "( " + " | ".join(options) + " )"
        stype = schema.get("type")
        types = stype if isinstance(stype, list) else [stype] if stype else []
        if schema.get("nullable") and "null" not in types and types:
            types = [*types, "null"]
        if not types:
            return "value"
        if len(types) > 1:
            return "( " + " | ".join(self.value({**schema, "type": t, "nullable": False}, path) for t in types) + " )"
        kind = types[0]
        if kind == "string":
            return "string"
        if kind in ("integer", "boolean", "null"):
            return kind
        if kind == "number":
            return "number"
        if kind == "array":
            items = schema.get("items")
            item = self.value(items, f"{path}[]") if isinstance(items, dict) and items else "value"
            low = int(schema.get("minItems", 0))
            if low > 0:
                body = f'"[" ws {item} ( ws "," ws {item} ){{{low - 1},}} ws "]"'
            else:
                body = f'"[" ws ( {item} ( ws "," ws {item} )* )? ws "]"'
            return self.add(self.fresh(f"{path}-arr"), body)
        if kind == "object":
            if not schema.get("properties"):
                return "object"
            return self.object_rule(schema, path)
        raise SchemaConversionError(self.tool, path, f"type {kind!r} has no grammar")

    def object_rule(self, schema: dict[str, Any], path: str) -> str:
        """Properties in declaration order; required ones present, optional ones skippable."""
        props = list(schema.get("properties", {}).items())
        required = set(schema.get("required", []))
        kv = [f'{_literal(json.dumps(name, ensure_ascii=False))} ws ":" ws {self.value(sub, f"{path}.{name}")}'
              for name, sub in props]
        base = self.fresh(f"{path}-obj")
        # suffix(i, first): members i.. ; `first` means no comma is owed before the next member.
        def suffix(i: int, first: bool) -> str:
            if i == len(props):
                return ""
            name = f"{base}-s{i}{'f' if first else 'c'}"
            if name in self.rules:
                return name
            self.rules[name] = ""  # reserve (no recursion occurs, but keeps names unique)
            lead = "" if first else 'ws "," ws '
            rest = suffix(i + 1, False)
            take = f"{lead}{kv[i]}" + (f" {rest}" if rest else "")
            if props[i][0] in required:
                self.rules[name] = take
            else:
                skip = suffix(i + 1, first)
                self.rules[name] = f"( {take} ) | {skip}" if skip else f"( {take} )?"
            return name

        body = suffix(0, True)
        inner = f" ws {body}" if body else ""
        return self.add(base, f'"{{"{inner} ws "}}"')


def build_grammar(tools: Sequence[Tool], tool_choice: str = "auto", parallel: bool = True) -> str:
    """The GBNF grammar text for an answer to ``tools`` under ``tool_choice``.

    ``tool_choice`` is ``"auto"``, ``"required"`` or the name of one tool. With ``parallel=False``
    the list holds at most one call.
    """
    if not tools:
        raise ValueError("constrained decoding needs at least one tool")
    names = [t.name for t in tools]
    if tool_choice in ("auto", "required"):
        chosen = list(tools)
    elif tool_choice in names:
        chosen = [t for t in tools if t.name == tool_choice]
    else:
        raise UnknownToolError(
            f"tool_choice {tool_choice!r} is not among the bound tools {names}. Fix: pass one of "
            "those names, 'auto', 'required' or 'none'."
        )
    rules: dict[str, str] = {}
    call_rules: list[str] = []
    for index, tool in enumerate(tools):
        builder = _Builder(tool.name, f"t{index}")
        args = builder.object_rule(tool.parameters, "args")
        rules.update(builder.rules)
        call = f"call-{index}"
        rules[call] = (
            f'"{{" ws "\\"name\\"" ws ":" ws {_literal(json.dumps(tool.name, ensure_ascii=False))} ws "," ws '
            f'"\\"arguments\\"" ws ":" ws {args} ws "}}"'
        )
        if tool in chosen:
            call_rules.append(call)
    repeat = '( ws "," ws call )*' if parallel else ""
    if tool_choice == "auto":
        calls = f'"[" ws ( call {repeat} )? ws "]"'
    else:
        calls = f'"[" ws call {repeat} ws "]"'
    head = [
        "root ::= ws ( fenced | calls ) ws",
        'fenced ::= "```" "json"? ws calls ws "```"',
        f"calls ::= {calls}",
        "call ::= " + " | ".join(call_rules),
        _WS,
    ]
    body = [f"{name} ::= {expr}" for name, expr in rules.items()]
    return "\n".join(head + body) + "\n" + _PRIMITIVES + "\n"


def build_json_grammar(schema: dict[str, Any] | None = None, name: str = "response") -> str:
    """A GBNF grammar for one JSON value: any object when ``schema`` is None, else values of ``schema``.

    Used for JSON mode and JSON-schema structured output (no tools in the prompt).

    Example:
        >>> print(build_json_grammar(None).splitlines()[0])
        root ::= ws object ws
    """
    from .tools import normalize_parameters

    if schema is None:
        root = "object"
        rules: dict[str, str] = {}
    else:
        normalized = normalize_parameters(name, schema) if schema.get("type", "object") == "object" else schema
        builder = _Builder(name, "j")
        root = builder.value(normalized, "root")
        rules = builder.rules
    lines = [f"root ::= ws {root} ws", _WS, *(f"{k} ::= {v}" for k, v in rules.items())]
    return "\n".join(lines) + "\n" + _PRIMITIVES + "\n"
