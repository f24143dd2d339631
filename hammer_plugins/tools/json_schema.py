"""JSON Schema as tools bring it, made into the one simple shape every later step reads.

:func:`normalize_parameters` inlines ``$ref``, collapses ``Optional[X]`` to ``X`` and refuses what cannot
be rendered or enforced, under the :mod:`~hammer_plugins.tools.limits` budgets; :func:`json_type` and
:func:`to_json_schema` read the type names people write (Python's, BFCL's) as JSON Schema's.

Example:
    >>> normalize_parameters("f", {"type": "object", "properties": {"x": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}})
    {'type': 'object', 'properties': {'x': {'type': 'integer', 'nullable': True}}, 'required': []}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from hammer_plugins.support import linear_regex
from hammer_plugins.tools.all_of import merge_all_of
from hammer_plugins.tools.limits import Budget, SchemaLimits
from hammer_plugins.tools.limits import budget as conversion_budget
from hammer_plugins.values.errors import SchemaConversionError, SchemaLimitError

JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "array", "object", "null"})
# Type names people write in tool specs besides JSON Schema's: Python's (Hammer's training data)
# and BFCL's. They are kept as written, so the prompt shows the model what the spec says (as the
# reference prompt does), and read as their JSON Schema type wherever a type is checked.
TYPE_ALIASES: dict[str, str | None] = {
    "dict": "object", "float": "number", "tuple": "array", "list": "array", "int": "integer", "str": "string",
    "bool": "boolean", "any": None, "none": "null", "nonetype": "null",
}


def json_type(name: str) -> str | None:
    """The JSON Schema type of a type name as written (``None`` for "any value").

    Example:
        >>> json_type("dict"), json_type("String"), json_type("any")
        ('object', 'string', None)
    """
    lowered = name.lower()
    return lowered if lowered in JSON_TYPES else TYPE_ALIASES.get(lowered, name)


def to_json_schema(schema: Any) -> Any:
    """``schema`` with every type alias replaced by its JSON Schema type (a copy), for validators and
    for exporting to frameworks that expect standard JSON Schema.

    Example:
        >>> to_json_schema({"type": "dict", "properties": {"x": {"type": "float"}, "y": {"type": "any"}}})
        {'type': 'object', 'properties': {'x': {'type': 'number'}, 'y': {}}}
    """
    if isinstance(schema, list):
        return [to_json_schema(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            names = value if isinstance(value, list) else [value]
            mapped = [json_type(n) if isinstance(n, str) else n for n in names]
            if None in mapped:
                continue  # "any" among the types: no constraint
            out["type"] = mapped if isinstance(value, list) else mapped[0]
        elif key in ("properties", "$defs", "definitions"):
            out[key] = {k: to_json_schema(v) for k, v in value.items()} if isinstance(value, Mapping) else value
        elif key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf"):
            out[key] = to_json_schema(value)
        else:
            out[key] = value
    return out
_UNSUPPORTED_KEYS = ("not", "patternProperties", "if", "then", "else", "dependentSchemas")


def normalize_parameters(tool: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Inline ``$ref``, collapse ``Optional``, check every construct can be rendered.

    Held to the :class:`SchemaLimits` in force (:func:`schema_limits`): the size is counted while
    ``$ref`` is inlined, and the conversion stops as soon as a limit is passed.
    """
    if not isinstance(parameters, Mapping):
        raise SchemaConversionError(tool, "parameters", f"expected a JSON Schema object, got {type(parameters).__name__}")
    with conversion_budget() as budget:
        schema = _normalize(tool, "parameters", dict(parameters), _definitions(tool, "parameters", parameters), (),
                            budget, 1)
    if schema.get("type") is not None and json_type(str(schema.get("type"))) != "object":
        raise SchemaConversionError(
            tool, "parameters.type", f"the parameters must be an object, got {schema.get('type')!r}",
            "wrap the value in an object with one property",
        )
    schema["type"] = "object"
    schema.setdefault("properties", {})
    props = schema["properties"]
    required = [r for r in schema.get("required", []) if r in props]
    missing = [r for r in schema.get("required", []) if r not in props]
    if missing:
        raise SchemaConversionError(
            tool, "parameters.required", f"required names {missing} are not among the properties",
            "declare each required parameter under 'properties'",
        )
    schema["required"] = required
    return schema


def normalize_schema(name: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """Any value's schema (a ``response_format`` that is not an object) normalized like parameters are,
    under the same budgets."""
    if not isinstance(schema, Mapping):
        raise SchemaConversionError(name, "schema", f"expected a JSON Schema object, got {type(schema).__name__}")
    with conversion_budget() as budget:
        return _normalize(name, "schema", dict(schema), _definitions(name, "schema", schema), (), budget, 1)


def _definitions(name: str, path: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The named schemas a ``$ref`` may point at (``definitions`` and ``$defs`` together)."""
    defs: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        found = schema.get(key, {})
        if not isinstance(found, Mapping):
            raise SchemaConversionError(name, f"{path}.{key}", f"{key} must be an object of named schemas",
                                        f'write {key} as {{"Name": {{...schema...}}}}')
        defs.update(found)
    return defs


# Keywords whose value is a count (a non-negative integer), and those whose value is any finite number.
_COUNT_KEYS = ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties",
               "minContains", "maxContains")
_NUMBER_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
# Keywords whose value is a schema (or a list of schemas): walked by _normalize, not sized as text.
_SCHEMA_KEYS = frozenset({"properties", "items", "additionalProperties", "anyOf", "oneOf", "allOf", "$defs",
                          "definitions", "$ref", "enum", "const"})


def _check_numbers(tool: str, path: str, schema: Mapping[str, Any], limits: SchemaLimits) -> None:
    """Counts are non-negative integers no larger than ``max_count``; bounds are finite numbers."""
    for key in _COUNT_KEYS:
        if key not in schema:
            continue
        value = schema[key]
        ok = not isinstance(value, bool) and (isinstance(value, int) or (
            isinstance(value, float) and math.isfinite(value) and value.is_integer())) and value >= 0
        if not ok:
            raise SchemaConversionError(tool, f"{path}.{key}", f"{key} must be a non-negative integer, got {value!r}",
                                        f"write {key} as a whole number such as 1")
        if value > limits.max_count:
            raise SchemaLimitError(tool, f"{path}.{key}", "max_count", value, limits.max_count, key,
                                   f"drop {key} or give a realistic bound")
        if key == "minItems" and value > limits.max_min_items:
            raise SchemaLimitError(tool, f"{path}.{key}", "max_min_items", value, limits.max_min_items,
                                   "minItems (the grammar writes out each required item)",
                                   "lower minItems and state the minimum in the description")
    for key in _NUMBER_KEYS:
        if key not in schema:
            continue
        value = schema[key]
        if isinstance(value, bool) and key.startswith("exclusive"):
            continue  # draft 4's boolean form
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and not math.isfinite(value)):
            raise SchemaConversionError(tool, f"{path}.{key}", f"{key} must be a finite number, got {value!r}",
                                        f"write {key} as a number such as 0")
        if key == "multipleOf" and value <= 0:
            raise SchemaConversionError(tool, f"{path}.{key}", f"multipleOf must be greater than 0, got {value!r}",
                                        "write a positive step such as 0.5, or drop multipleOf")


def _check_pattern(tool: str, path: str, schema: Mapping[str, Any]) -> None:
    """A ``pattern`` must run on the linear-time engine (RE2) that checks it after decoding: one it cannot
    run (a back-reference, a lookaround) is refused here, when the tool is bound, rather than matched with a
    backtracking engine whose time a crafted pattern can make exponential."""
    pattern = schema.get("pattern")
    if not isinstance(pattern, str):
        return
    try:
        linear_regex.compile_pattern(pattern)
    except linear_regex.UnsupportedPattern as exc:
        raise SchemaConversionError(tool, f"{path}.pattern", f"the pattern {pattern[:200]!r} uses {exc}",
                                    "rewrite it as a plain ECMA-262 regex without back-references, lookaround, "
                                    "named groups or inline flags (for a rule it cannot state, drop the pattern "
                                    "and state the rule in the description)") from None


def _schema_list(tool: str, path: str, value: Any) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise SchemaConversionError(tool, path, f"expected a non-empty list of schemas, got {value!r}"[:200],
                                    "write it as [{...}, {...}]")
    return value


def _normalize(tool: str, path: str, schema: Any, defs: Mapping[str, Any], seen: tuple[str, ...],
               budget: Budget, depth: int) -> dict[str, Any]:
    """``schema`` normalized; ``depth`` is its nesting in the inlined JSON (each schema spends its budget)."""
    if schema is True or (isinstance(schema, Mapping) and not schema):
        budget.node(tool, path, depth, 2)
        return {}
    if not isinstance(schema, Mapping):
        raise SchemaConversionError(tool, path, f"expected a schema object, got {schema!r}"[:200],
                                    'write each schema as a JSON object, such as {"type": "string"}')
    schema = dict(schema)
    done: set[str] = set()  # keys whose value comes from an inlined schema, normalized already
    text = sum(len(str(k)) + 4 + (budget.size(tool, path, v) if k not in _SCHEMA_KEYS else 0) for k, v in schema.items())
    budget.node(tool, path, depth, text)
    if "$ref" in schema:
        ref = schema.pop("$ref")
        if not isinstance(ref, str):
            raise SchemaConversionError(tool, f"{path}.$ref", f"$ref must be a string, got {ref!r}"[:200],
                                        "write it as '#/$defs/Name' and define Name under $defs")
        name = ref.rsplit("/", 1)[-1]
        if not ref.startswith("#/") or name not in defs:
            raise SchemaConversionError(tool, path, f"cannot resolve $ref {ref!r}", "inline the referenced schema")
        if name in seen:
            raise SchemaConversionError(
                tool, path, f"recursive schema through {name!r} cannot be rendered",
                "flatten the recursive model into a fixed depth or pass it as a JSON string",
            )
        target = _normalize(tool, path, defs[name], defs, (*seen, name), budget, depth)
        done.update(k for k in target if k not in schema)  # normalized already: not walked (nor counted) again
        schema = {**target, **schema}
    for key in _UNSUPPORTED_KEYS:
        if key in schema:
            raise SchemaConversionError(tool, f"{path}.{key}", f"JSON Schema keyword {key!r} cannot be rendered",
                                        "describe the constraint in the description instead")
    schema.pop("$defs", None)
    schema.pop("definitions", None)
    schema.pop("$schema", None)
    if "title" in schema and path != "parameters":
        schema.pop("title")
    _check_numbers(tool, path, schema, budget.limits)
    _check_pattern(tool, path, schema)
    if "allOf" in schema:
        parts = [_normalize(tool, path, p, defs, seen, budget, depth)
                 for p in _schema_list(tool, f"{path}.allOf", schema.pop("allOf"))]
        part = parts[0] if len(parts) == 1 else merge_all_of(tool, path, parts)
        done.update(k for k in part if k not in schema)
        schema = {**part, **schema}
    for key in ("anyOf", "oneOf"):
        if key in schema and key not in done:
            options = [_normalize(tool, f"{path}.{key}[{i}]", s, defs, seen, budget, depth + 2)
                       for i, s in enumerate(_schema_list(tool, f"{path}.{key}", schema.pop(key)))]
            non_null = [o for o in options if not (isinstance(o.get("type"), str) and json_type(o["type"]) == "null")]
            if len(non_null) == 1:
                merged = {**non_null[0], **schema}
                if len(options) > 1:
                    merged["nullable"] = True
                schema = merged
            elif all(set(o) <= {"type"} and isinstance(o.get("type"), str) for o in options):
                schema["type"] = [o["type"] for o in options]
            else:
                schema[key] = options
    stype = schema.get("type")
    types = stype if isinstance(stype, list) else [stype] if stype else []
    for t in types:
        if not isinstance(t, str) or (t.lower() not in JSON_TYPES and t.lower() not in TYPE_ALIASES):
            raise SchemaConversionError(tool, f"{path}.type", f"unknown JSON type {t!r}"[:200],
                                        f"use one of {sorted(JSON_TYPES)} (or a Python type name: "
                                        f"{sorted(k for k in TYPE_ALIASES if k != 'nonetype')})")
    if "enum" in schema and "enum" not in done:
        if not isinstance(schema["enum"], list) or not schema["enum"]:
            raise SchemaConversionError(tool, f"{path}.enum", "enum must be a non-empty list",
                                        "list the allowed values, or drop enum")
        budget.enum(tool, f"{path}.enum", schema["enum"])
    if "const" in schema and "const" not in done:
        budget.enum(tool, f"{path}.const", [schema["const"]])
    required = schema.get("required")
    if required is not None and not isinstance(required, bool) and (
            not isinstance(required, list) or not all(isinstance(r, str) for r in required)):
        # (a bool is the per-parameter flag of Hammer's own tool format: {"type": "string", "required": true})
        raise SchemaConversionError(tool, f"{path}.required", "required must be a list of property names",
                                    'write it as ["name", ...]')
    if "properties" in schema and "properties" not in done:
        if not isinstance(schema["properties"], Mapping):
            raise SchemaConversionError(tool, f"{path}.properties", "properties must be an object",
                                        'write it as {"name": {...schema...}}')
        schema["properties"] = {
            str(k): _normalize(tool, f"{path}.{k}" if path != "parameters" else str(k), v, defs, seen, budget, depth + 2)
            for k, v in schema["properties"].items()
        }
        schema.setdefault("type", "object")
    if "items" in schema and "items" not in done:
        if isinstance(schema["items"], list):
            raise SchemaConversionError(tool, f"{path}.items", "tuple-style 'items' lists cannot be rendered",
                                        "use one item schema")
        schema["items"] = _normalize(tool, f"{path}[]", schema["items"], defs, seen, budget, depth + 1)
    if isinstance(schema.get("additionalProperties"), Mapping) and "additionalProperties" not in done:
        schema["additionalProperties"] = _normalize(tool, f"{path}.*", schema["additionalProperties"], defs, seen,
                                                    budget, depth + 1)
    return schema


# ---------------------------------------------------------------- docstrings
