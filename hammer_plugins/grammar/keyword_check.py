"""The check after decoding: the keywords a grammar does not enforce (pattern and format on RE2,
bounds, multipleOf, uniqueItems, ...) checked on a call's arguments; the engine turns a call that
breaks one into a refusal naming it.

Example:
    >>> schema = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 5}}}
    >>> keyword_violation(schema, {"n": 12})
    ('n', 'multipleOf', '12 is not a multiple of 5')
    >>> keyword_violation(schema, {"n": 15}) is None
    True
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from hammer_plugins.grammar.keywords import format_ok
from hammer_plugins.support import linear_regex
from hammer_plugins.tools.json_schema import json_type


def _types(schema: Mapping[str, Any]) -> list[str | None]:
    stype = schema.get("type")
    named = stype if isinstance(stype, list) else [stype] if stype else []
    types = [json_type(str(t)) for t in named]
    if schema.get("nullable") and types and "null" not in types:
        types.append("null")
    return types


def _is(kind: str | None, value: Any) -> bool:
    if kind is None:
        return True
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True


def _canonical(value: Any) -> str:
    """A key equal for JSON-equal values (``1`` and ``1.0`` alike, ``true`` and ``1`` not)."""
    def norm(v: Any) -> Any:
        if isinstance(v, bool) or v is None or isinstance(v, str):
            return v
        if isinstance(v, (int, float)):
            return ["n", str(Fraction(v)) if math.isfinite(v) else repr(v)]
        if isinstance(v, list):
            return [norm(i) for i in v]
        if isinstance(v, dict):
            return {k: norm(i) for k, i in v.items()}
        return repr(v)
    return json.dumps(norm(value), sort_keys=True)


def _number_violation(schema: Mapping[str, Any], value: Any) -> tuple[str, str] | None:
    exact = Fraction(value) if not isinstance(value, float) else Fraction(repr(value)) if math.isfinite(value) else None
    if exact is None:
        return None
    checks = (
        ("minimum", lambda b: exact >= b, ">="),
        ("maximum", lambda b: exact <= b, "<="),
        ("exclusiveMinimum", lambda b: exact > b, ">"),
        ("exclusiveMaximum", lambda b: exact < b, "<"),
    )
    for key, ok, sign in checks:
        bound = schema.get(key)
        if isinstance(bound, bool) or not isinstance(bound, (int, float)):
            continue
        if key in ("minimum", "maximum") and schema.get("exclusive" + key[0].upper() + key[1:]) is True:
            ok = (lambda b: exact > b) if key == "minimum" else (lambda b: exact < b)  # noqa: E731 - draft 4
            sign = sign.rstrip("=")
        if not ok(Fraction(repr(bound)) if isinstance(bound, float) else Fraction(bound)):
            return key, f"{value!r} is not {sign} {bound!r}"
    step = schema.get("multipleOf")
    if isinstance(step, (int, float)) and not isinstance(step, bool) and step > 0:
        quotient = exact / (Fraction(repr(step)) if isinstance(step, float) else Fraction(step))
        if quotient.denominator != 1:
            return "multipleOf", f"{value!r} is not a multiple of {step!r}"
    return None


def _own_violation(schema: Mapping[str, Any], value: Any) -> tuple[str, str] | None:
    if isinstance(value, str):
        length = len(value)
        if isinstance(schema.get("minLength"), int) and length < schema["minLength"]:
            return "minLength", f"{length} characters, fewer than {schema['minLength']}"
        if isinstance(schema.get("maxLength"), int) and length > schema["maxLength"]:
            return "maxLength", f"{length} characters, more than {schema['maxLength']}"
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            # RE2, linear in the value, never Python's backtracking re (see hammer_plugins.support.linear_regex). Binding
            # a tool refuses a pattern RE2 cannot run; a schema that skipped binding fails closed here.
            try:
                matched = linear_regex.search(pattern, value)
            except linear_regex.UnsupportedPattern as exc:
                return "pattern", f"{pattern!r} cannot be checked: it uses {exc}"
            if not matched:
                return "pattern", f"{value!r} does not match {pattern!r}"
        fmt = schema.get("format")
        if isinstance(fmt, str) and not format_ok(fmt, value):
            return "format", f"{value!r} is not a {fmt}"
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number_violation(schema, value)
    elif isinstance(value, list):
        if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
            return "minItems", f"{len(value)} items, fewer than {schema['minItems']}"
        if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
            return "maxItems", f"{len(value)} items, more than {schema['maxItems']}"
        if schema.get("uniqueItems") is True:
            keys = [_canonical(v) for v in value]
            if len(set(keys)) != len(keys):
                return "uniqueItems", "an item is repeated"
    return None


def keyword_violation(schema: Any, value: Any, path: str = "") -> tuple[str, str, str] | None:
    """The first value keyword ``value`` breaks in ``schema`` (a normalized tool schema): ``(path,
    keyword, detail)``, or None. Types, names, enums and required fields are the grammar's and are not
    checked here; the keywords the module docstring lists are."""
    if not isinstance(schema, Mapping):
        return None
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            branches = [s for s in schema[key] if isinstance(s, Mapping) and all(_is(t, value) for t in _types(s)[:1])]
            found = [keyword_violation(s, value, path) for s in branches or schema[key]]
            if found and all(f is not None for f in found):
                return found[0]
    types = _types(schema)
    if types and not any(_is(t, value) for t in types):
        return None  # the grammar's business (only a value of another type of a type list reaches here)
    own = _own_violation(schema, value)
    if own is not None:
        return (path or "arguments", *own)
    if isinstance(value, dict) and isinstance(schema.get("properties"), Mapping):
        for name, sub in schema["properties"].items():
            if name in value:
                found = keyword_violation(sub, value[name], f"{path}.{name}" if path else name)
                if found is not None:
                    return found
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            found = keyword_violation(schema["items"], item, f"{path or 'arguments'}[{index}]")
            if found is not None:
                return found
    return None
