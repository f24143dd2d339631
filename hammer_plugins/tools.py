"""The canonical tool model and converters from every schema users bring.

One :class:`Tool` holds a name, a description and a JSON Schema object for the parameters, with
``$ref`` inlined and ``Optional[X]`` collapsed to ``X``, so every later step (rendering, grammar,
masking, argument checks) reads one simple shape.

Example:
    >>> from hammer_plugins import Tool
    >>> def get_weather(city: str, unit: str = "celsius") -> str:
    ...     '''Get the current weather.
    ...
    ...     Args:
    ...         city: City name, e.g. Paris.
    ...         unit: celsius or fahrenheit.
    ...     '''
    ...     return "sunny"
    >>> tool = Tool.from_function(get_weather)
    >>> tool.to_hammer()["parameters"]["city"]
    {'description': 'City name, e.g. Paris.', 'type': 'string', 'required': True}
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import inspect
import json
import math
import re
import time
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from . import linear_regex
from .display import check_names_apart
from .errors import SchemaConversionError, SchemaLimitError

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
# ---------------------------------------------------------------- budgets
@dataclass(frozen=True)
class SchemaLimits:
    """The budgets every tool set and ``response_format`` schema is held to, checked while the work is
    done (never after it): a schema over one is refused with :class:`~hammer_plugins.errors.SchemaLimitError`
    (a :class:`~hammer_plugins.errors.SchemaConversionError`: ``400 invalid_tool_schema`` on the server)
    naming the limit, how far the request went and the fix.

    The defaults leave real tools far inside (the largest BFCL v4 tool set is given in
    ``docs/engine.md``) while a hostile request is refused in well under a second. Change them per
    engine (``engine.schema_limits = SchemaLimits(max_schema_nodes=100_000)``), or for a block of
    code with :func:`schema_limits`. The process default reads ``HAMMER_LIMIT_<FIELD>`` environment
    variables (``HAMMER_LIMIT_MAX_SCHEMA_NODES=50000``), so ``hammer serve`` and the CLI take them too;
    :func:`set_default_limits` changes it in code.

    Attributes:
        max_schema_nodes: schema objects in one tool set (or response schema) counted as ``$ref`` is
            inlined: a ``$ref`` used twice counts its target twice, so a schema whose definitions each
            refer twice to the next one is refused after this many, not after 2**depth.
        max_schema_bytes: characters of text (descriptions, names, enum members, defaults, ...) in one
            tool set once ``$ref`` is inlined: what the prompt's tools block grows to.
        max_depth: nesting of JSON objects and arrays inside one schema, after ``$ref`` inlining.
        max_enum_values: members of one ``enum``.
        max_enum_bytes: characters of all enum and const members of one tool set together (each
            member character becomes about 25 characters of grammar).
        max_count: the largest ``minItems``, ``maxLength``, ... a schema may state.
        max_min_items: the largest ``minItems`` the grammar enforces (a grammar engine unrolls it).
        max_grammar_bytes: characters of one grammar (both notations together).
        max_build_seconds: CPU time (of the converting thread) for converting one tool set, or for
            building one grammar: the work itself, whatever else the machine is doing.

    Example:
        >>> from hammer_plugins import HammerEngine, SchemaLimitError, SchemaLimits, ScriptedBackend
        >>> engine = HammerEngine(backend=ScriptedBackend([]))
        >>> engine.schema_limits = SchemaLimits(max_enum_values=3)
        >>> tool = {"name": "pick", "parameters": {"type": "object", "properties": {
        ...     "x": {"type": "string", "enum": ["a", "b", "c", "d"]}}}}
        >>> try:
        ...     engine.bind([tool])
        ... except SchemaLimitError as exc:
        ...     print(exc.limit)
        max_enum_values
    """

    max_schema_nodes: int = 10_000
    max_schema_bytes: int = 2_000_000
    max_depth: int = 64
    max_enum_values: int = 10_000
    max_enum_bytes: int = 100_000
    max_count: int = 2**31 - 1
    max_min_items: int = 1_000
    max_grammar_bytes: int = 16_000_000
    max_build_seconds: float = 5.0

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"SchemaLimits.{item.name} must be a positive number, got {value!r}")


def limits_from_env(environ: Mapping[str, str] | None = None) -> SchemaLimits:
    """The defaults, with any ``HAMMER_LIMIT_<FIELD>`` environment variable applied.

    Example:
        >>> limits_from_env({"HAMMER_LIMIT_MAX_DEPTH": "32"}).max_depth
        32
    """
    import os

    env = os.environ if environ is None else environ
    changes: dict[str, Any] = {}
    for item in fields(SchemaLimits):
        raw = env.get(f"HAMMER_LIMIT_{item.name.upper()}")
        if raw is None or not raw.strip():
            continue
        try:
            changes[item.name] = float(raw) if item.type in (float, "float") else int(raw.replace("_", ""))
        except ValueError:
            raise ValueError(f"HAMMER_LIMIT_{item.name.upper()}={raw!r} is not a number. Fix: set a positive "
                             "number, or unset it for the default") from None
    return SchemaLimits(**changes)


DEFAULT_LIMITS = SchemaLimits()
_default_limits = limits_from_env()
_LIMITS: contextvars.ContextVar[SchemaLimits | None] = contextvars.ContextVar("hammer_schema_limits", default=None)
_BUDGET: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar("hammer_schema_budget", default=None)


def current_limits() -> SchemaLimits:
    """The :class:`SchemaLimits` in force here: those of :func:`schema_limits`, else the process default."""
    return _LIMITS.get() or _default_limits


def set_default_limits(limits: SchemaLimits | None) -> SchemaLimits:
    """Set the process default (``None``: the built-in defaults with ``HAMMER_LIMIT_*`` applied); returns it."""
    global _default_limits
    if limits is not None and not isinstance(limits, SchemaLimits):
        raise TypeError(f"expected SchemaLimits, got {type(limits).__name__}")
    _default_limits = limits if limits is not None else limits_from_env()
    return _default_limits


@contextlib.contextmanager
def schema_limits(limits: SchemaLimits | None) -> Iterator[SchemaLimits]:
    """Hold the tool conversions and grammars built inside the block to ``limits`` (None: leave as is).

    Example:
        >>> with schema_limits(SchemaLimits(max_depth=4)):
        ...     try:
        ...         Tool(name="f", parameters={"type": "object", "properties": {"a": {"type": "object",
        ...             "properties": {"b": {"type": "object", "properties": {"c": {}}}}}}})
        ...     except SchemaLimitError as exc:
        ...         print(exc.limit)
        max_depth
    """
    if limits is None:
        yield current_limits()
        return
    token = _LIMITS.set(limits)
    try:
        yield limits
    finally:
        _LIMITS.reset(token)


class _Budget:
    """What one conversion (a tool set, a response schema) or one grammar build has spent so far."""

    def __init__(self, limits: SchemaLimits) -> None:
        self.limits = limits
        self.nodes = 0
        self.bytes = 0
        self.enum_bytes = 0
        self.started = time.thread_time()  # CPU time of this thread: the work done, not the machine's load
        self._ticks = 0
        self._sizes: dict[int, tuple[Any, int]] = {}

    def tick(self, tool: str, path: str) -> None:
        """Check the clock now and then (every 64 steps)."""
        self._ticks += 1
        if self._ticks & 63 == 0:
            elapsed = time.thread_time() - self.started
            if elapsed > self.limits.max_build_seconds:
                raise SchemaLimitError(tool, path, "max_build_seconds", elapsed, self.limits.max_build_seconds,
                                       "the time spent converting the tools or building their grammar")

    def node(self, tool: str, path: str, depth: int, text: int) -> None:
        """One schema object more (after ``$ref`` inlining), at ``depth``, holding ``text`` characters."""
        limits = self.limits
        self.nodes += 1
        self.bytes += text
        if depth > limits.max_depth:
            raise SchemaLimitError(tool, path, "max_depth", depth, limits.max_depth, "the schema's nesting depth",
                                   "flatten the schema, or pass deep structures as a JSON string")
        if self.nodes > limits.max_schema_nodes:
            raise SchemaLimitError(tool, path, "max_schema_nodes", self.nodes, limits.max_schema_nodes,
                                   "the number of schema objects once $ref is inlined",
                                   "use fewer or smaller tools, or reference shared definitions fewer times")
        if self.bytes > limits.max_schema_bytes:
            raise SchemaLimitError(tool, path, "max_schema_bytes", self.bytes, limits.max_schema_bytes,
                                   "the text in the schemas once $ref is inlined",
                                   "shorten descriptions and enums")
        self.tick(tool, path)

    def enum(self, tool: str, path: str, values: list[Any]) -> None:
        limits = self.limits
        if len(values) > limits.max_enum_values:
            raise SchemaLimitError(tool, path, "max_enum_values", len(values), limits.max_enum_values,
                                   "the number of enum members",
                                   "take the value as a string and describe the choices")
        size = sum(self.size(tool, path, v) for v in values)
        self.enum_bytes += size
        self.node(tool, path, 0, size)  # the members are text of the schema too
        if self.enum_bytes > limits.max_enum_bytes:
            raise SchemaLimitError(tool, path, "max_enum_bytes", self.enum_bytes, limits.max_enum_bytes,
                                   "the characters of all enum and const members",
                                   "take the value as a string and describe the choices")

    def size(self, tool: str, path: str, value: Any) -> int:
        """Characters ``value`` takes as JSON (roughly), memoized per object; nesting bounded by ``max_depth``."""
        if isinstance(value, str):
            return len(value) + 2
        if not isinstance(value, (dict, list, tuple)):
            return 8
        known = self._sizes.get(id(value))
        if known is not None and known[0] is value:
            return known[1]
        total = 0
        stack: list[tuple[Any, int]] = [(value, 1)]
        while stack:
            item, depth = stack.pop()
            if depth > self.limits.max_depth:
                raise SchemaLimitError(tool, path, "max_depth", depth, self.limits.max_depth,
                                       "the nesting depth of a value in the schema",
                                       "flatten the value, or pass deep structures as a JSON string")
            if isinstance(item, Mapping):
                total += 2
                for key, sub in item.items():
                    total += len(str(key)) + 4
                    stack.append((sub, depth + 1))
            elif isinstance(item, (list, tuple)):
                total += 2 + len(item)
                stack.extend((sub, depth + 1) for sub in item)
            elif isinstance(item, str):
                total += len(item) + 2
            else:
                total += 8
            if total > self.limits.max_schema_bytes:
                raise SchemaLimitError(tool, path, "max_schema_bytes", total, self.limits.max_schema_bytes,
                                       "the text of a value in the schema")
            self.tick(tool, path)
        self._sizes[id(value)] = (value, total)
        return total


@contextlib.contextmanager
def _budget() -> Iterator[_Budget]:
    """The budget of the conversion under way, or a new one for the limits in force."""
    active = _BUDGET.get()
    if active is not None:
        yield active
        return
    budget = _Budget(current_limits())
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


@contextlib.contextmanager
def fresh_budget() -> Iterator[_Budget]:
    """A new budget for the limits in force (a grammar build: its own clock, whatever ran before)."""
    budget = _Budget(current_limits())
    token = _BUDGET.set(budget)
    try:
        yield budget
    finally:
        _BUDGET.reset(token)


_UNSUPPORTED_KEYS = ("not", "patternProperties", "if", "then", "else", "dependentSchemas")


class Tool(BaseModel):
    """A function the model may call: name, description, JSON Schema of its parameters.

    Build one with :meth:`from_openai`, :meth:`from_json_schema`, :meth:`from_pydantic`,
    :meth:`from_function`, or :func:`to_tool` (which picks the right one).

    Example:
        >>> Tool.from_openai({"type": "function", "function": {"name": "ping",
        ...     "description": "Ping a host", "parameters": {"type": "object",
        ...     "properties": {"host": {"type": "string"}}, "required": ["host"]}}}).name
        'ping'
    """

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}, "required": []}
    )

    def __init__(self, **data: Any) -> None:
        # Checked here rather than in a validator so the error reaches the caller unwrapped.
        name = data.get("name")
        if not name or not isinstance(name, str):
            raise SchemaConversionError("<unknown>", "name", "a tool needs a non-empty string name")
        if "parameters" in data and data["parameters"] is not None:
            data["parameters"] = normalize_parameters(name, data["parameters"])
        else:
            data.pop("parameters", None)
        super().__init__(**data)

    # ------------------------------------------------------------------ views
    @property
    def properties(self) -> dict[str, dict[str, Any]]:
        """The parameter schemas by name, in declaration order."""
        return self.parameters.get("properties", {})

    @property
    def required(self) -> list[str]:
        """Names of the required parameters."""
        return list(self.parameters.get("required", []))

    def fingerprint(self) -> str:
        """A stable text identity of this tool (used for caching and deterministic masks).

        Key order counts: the prompt shows keys in the order given and the grammar pins properties
        in declaration order, so two schemas that differ only in order are different tools here.
        """
        return json.dumps(self.model_dump(), ensure_ascii=False)

    # ------------------------------------------------------------ converters
    @classmethod
    def from_openai(cls, spec: Mapping[str, Any]) -> Tool:
        """From ``{"type": "function", "function": {...}}`` or a bare ``{name, description, parameters}``."""
        if spec.get("type") == "function" and isinstance(spec.get("function"), Mapping):
            spec = spec["function"]
        if "name" not in spec:
            raise SchemaConversionError(
                "<unknown>", "name", "an OpenAI-style tool needs a 'name'",
                "pass {'type': 'function', 'function': {'name': ..., 'parameters': {...}}}",
            )
        params = spec.get("parameters") or spec.get("input_schema") or {}
        if not isinstance(params, Mapping):
            raise SchemaConversionError(str(spec["name"]), "parameters",
                                        f"expected a JSON Schema object, got {type(params).__name__}",
                                        "pass parameters as {'type': 'object', 'properties': {...}}")
        return cls(
            name=str(spec["name"]),
            description=str(spec.get("description") or ""),
            parameters=dict(params),
        )

    @classmethod
    def from_json_schema(
        cls, schema: Mapping[str, Any], name: str | None = None, description: str | None = None
    ) -> Tool:
        """From a JSON Schema object; the name defaults to its ``title``."""
        tool_name = name or schema.get("title")
        if not tool_name:
            raise SchemaConversionError(
                "<unknown>", "title", "a JSON Schema tool needs a 'title' or an explicit name",
                "add a 'title' to the schema or pass name=...",
            )
        body = {k: v for k, v in schema.items() if k not in ("title", "description")}
        body.setdefault("type", "object")
        return cls(
            name=str(tool_name),
            description=str(description if description is not None else schema.get("description", "")),
            parameters=body,
        )

    @classmethod
    def from_pydantic(cls, model: type[BaseModel]) -> Tool:
        """From a pydantic v2 model class: its name, docstring and fields."""
        schema = model.model_json_schema()
        doc = inspect.getdoc(model) or ""
        if doc == inspect.getdoc(BaseModel):
            doc = ""
        return cls.from_json_schema(schema, name=model.__name__, description=schema.get("description", doc))

    @classmethod
    def from_function(cls, func: Callable[..., Any], name: str | None = None) -> Tool:
        """From a typed Python callable; parameter descriptions come from its docstring."""
        summary, arg_docs = parse_docstring(inspect.getdoc(func) or "")
        tool_name = name or getattr(func, "__name__", None) or type(func).__name__
        try:
            hints = typing.get_type_hints(func, include_extras=True)
        except Exception as exc:  # unresolvable forward references
            raise SchemaConversionError(
                tool_name, "<annotations>", f"type hints could not be resolved ({exc})",
                "use importable types in the annotations",
            ) from exc
        fields: dict[str, Any] = {}
        for pname, param in inspect.signature(func).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or pname in ("self", "cls"):
                continue
            annotation = hints.get(pname, Any)
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (annotation, Field(default, description=arg_docs.get(pname)))
        try:
            model = create_model(f"{tool_name}_args", **fields)  # type: ignore[call-overload]
            schema = model.model_json_schema()
        except Exception as exc:
            raise SchemaConversionError(
                tool_name, "<annotations>", f"the annotations are not JSON-schema types ({exc})",
                "annotate parameters with str, int, float, bool, list, dict, Literal, Enum or pydantic models",
            ) from exc
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        return cls(name=tool_name, description=summary, parameters=schema)

    # -------------------------------------------------------------- renderers
    def to_openai(self) -> dict[str, Any]:
        """The OpenAI ``{"type": "function", "function": {...}}`` form."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": to_json_schema(self.parameters)},
        }

    def to_hammer(self) -> dict[str, Any]:
        """The entry of Hammer's tools block, as Hammer's reference prompt renders it.

        Properties are flattened (no ``properties``/``required`` wrapper), required parameters
        carry ``"required": true``, and a default is kept and appended to the description
        (exact rules: :func:`_hammer_properties`).
        """
        return {
            "name": self.name,
            "description": self.description,
            "parameters": _hammer_properties(self.properties, self.required),
        }


def _hammer_properties(properties: Mapping[str, Any], required: Iterable[str]) -> dict[str, Any]:
    """Hammer's reference tool rendering: bfcl-eval's ``HammerHandler`` (the code behind Hammer's
    published BFCL scores), rule for rule.

    Each parameter keeps its keys in the order given. A parameter that has ``properties`` is
    replaced by that dict, its own required names marked ``"required": true``. Each top-level
    required name is marked ``"required": true``. A ``default`` stays as a key and
    ``default is '<value>'`` is appended to the description with no separator (``str(value)``).
    Where the reference would fail (a default without a description, a required name that is not a
    property) the parameter is rendered as far as the rule goes instead.
    """
    params: dict[str, Any] = {name: copy.deepcopy(dict(schema)) for name, schema in properties.items()}
    for name, schema in params.items():
        nested = schema.get("properties")
        if isinstance(nested, Mapping):
            inner = dict(nested)
            for key in schema["required"] if isinstance(schema.get("required"), list) else []:
                if isinstance(inner.get(key), dict):
                    inner[key]["required"] = True
            params[name] = inner
    for key in required:
        if key in params:
            params[key]["required"] = True
    for entry in params.values():
        if "default" in entry and isinstance(entry.get("description", ""), str):
            entry["description"] = f"{entry.get('description', '')}default is '{entry['default']}'"
    return params


def relaxed_tool(tool: Tool) -> Tool:
    """The same tool with no required parameters: a snapshot may omit slots the user has not given.

    Used for the grammar only; the prompt still marks the required parameters.

    Example:
        >>> t = Tool(name="f", parameters={"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
        >>> relaxed_tool(t).required
        []
    """
    if not tool.required:
        return tool
    return Tool(name=tool.name, description=tool.description, parameters={**tool.parameters, "required": []})



# ---------------------------------------------------------------- normalizing
def normalize_parameters(tool: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Inline ``$ref``, collapse ``Optional``, check every construct can be rendered.

    Held to the :class:`SchemaLimits` in force (:func:`schema_limits`): the size is counted while
    ``$ref`` is inlined, and the conversion stops as soon as a limit is passed.
    """
    if not isinstance(parameters, Mapping):
        raise SchemaConversionError(tool, "parameters", f"expected a JSON Schema object, got {type(parameters).__name__}")
    with _budget() as budget:
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
    with _budget() as budget:
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
    backtracking engine whose time a crafted pattern can make exponential (issue 37)."""
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
               budget: _Budget, depth: int) -> dict[str, Any]:
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
        parts = _schema_list(tool, f"{path}.allOf", schema.pop("allOf"))
        if len(parts) != 1:
            raise SchemaConversionError(tool, f"{path}.allOf", "allOf with several schemas cannot be rendered",
                                        "merge the schemas into one object")
        part = _normalize(tool, path, parts[0], defs, seen, budget, depth)
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
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Notes?)\s*:?\s*$")
_GOOGLE_ARG = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_REST_ARG = re.compile(r"^:param\s+(?:[\w\[\], ]+\s+)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-, NumPy- or reST-style docstring into (summary, {param: description})."""
    lines = doc.splitlines()
    summary_lines: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    i = 0
    while i < len(lines):
        raw = lines[i]
        line = raw.strip()
        i += 1
        rest = _REST_ARG.match(line)
        if rest:
            current, section = rest.group(1), "args"
            args[current] = rest.group(2).strip()
            continue
        if line.startswith(":"):
            current, section = None, "other"
            continue
        header = _SECTION.match(line)
        if header:
            section = "args" if header.group(1).lower().startswith(("arg", "param")) else "other"
            current = None
            if i < len(lines) and set(lines[i].strip()) == {"-"}:  # NumPy underline
                i += 1
            continue
        if section is None:
            summary_lines.append(line)
        elif section == "args" and line:
            indent = len(raw) - len(raw.lstrip())
            match = _GOOGLE_ARG.match(line)
            if match and (current is None or indent <= _arg_indent(lines, current)):
                current = match.group(1).lstrip("*")
                args[current] = match.group(3).strip()
            elif current is not None:
                args[current] = f"{args[current]} {line}".strip()
            elif ":" not in line:
                current = line.split()[0]
                args[current] = ""
    summary = " ".join(part for part in "\n".join(summary_lines).strip().split("\n\n")[0].split())
    if not summary:
        summary = " ".join("\n".join(summary_lines).split())
    return summary, args


def _arg_indent(lines: list[str], name: str) -> int:
    for raw in lines:
        if raw.strip().startswith(name):
            return len(raw) - len(raw.lstrip())
    return 0


# ---------------------------------------------------------------- dispatch
def to_tool(obj: Any) -> Tool:
    """Convert any supported tool description to a :class:`Tool`.

    Accepts a :class:`Tool`, an OpenAI-style dict (wrapped or bare), a JSON Schema dict with a
    ``title``, a pydantic model class, or a typed callable.
    """
    if isinstance(obj, Tool):
        return obj
    if isinstance(obj, type) and issubclass(obj, BaseModel):
        return Tool.from_pydantic(obj)
    if isinstance(obj, Mapping):
        if obj.get("type") == "function" or "parameters" in obj or "input_schema" in obj or (
            "name" in obj and "properties" not in obj
        ):
            return Tool.from_openai(obj)
        return Tool.from_json_schema(obj)
    if callable(obj):
        return Tool.from_function(obj)
    raise SchemaConversionError(
        "<unknown>", "<tool>", f"cannot turn a {type(obj).__name__} into a tool",
        "pass an OpenAI tool dict, a JSON Schema, a pydantic model class or a typed function",
    )


def to_tools(objs: Iterable[Any] | None) -> list[Tool]:
    """Convert a sequence of tool descriptions; names must be unique."""
    with _budget():
        tools = [to_tool(o) for o in (objs or [])]
    check_names_apart([tool.name for tool in tools])
    return tools


def render_tools_block(tools: Iterable[Tool]) -> str:
    """The JSON text placed between ``[BEGIN OF AVAILABLE TOOLS]`` and ``[END OF AVAILABLE TOOLS]``."""
    return json.dumps([t.to_hammer() for t in tools])
