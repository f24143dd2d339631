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

import copy
import inspect
import json
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from .errors import SchemaConversionError

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
            for key in schema.get("required", []) or []:
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
    """Inline ``$ref``, collapse ``Optional``, check every construct can be rendered."""
    if not isinstance(parameters, Mapping):
        raise SchemaConversionError(tool, "parameters", f"expected a JSON Schema object, got {type(parameters).__name__}")
    defs = {**parameters.get("definitions", {}), **parameters.get("$defs", {})}
    schema = _normalize(tool, "parameters", dict(parameters), defs, ())
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


def _normalize(tool: str, path: str, schema: Any, defs: Mapping[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    if schema is True or schema == {}:
        return {}
    if not isinstance(schema, Mapping):
        raise SchemaConversionError(tool, path, f"expected a schema object, got {schema!r}")
    schema = dict(schema)
    if "$ref" in schema:
        ref = schema.pop("$ref")
        name = ref.rsplit("/", 1)[-1]
        if not isinstance(ref, str) or not ref.startswith("#/") or name not in defs:
            raise SchemaConversionError(tool, path, f"cannot resolve $ref {ref!r}", "inline the referenced schema")
        if name in seen:
            raise SchemaConversionError(
                tool, path, f"recursive schema through {name!r} cannot be rendered",
                "flatten the recursive model into a fixed depth or pass it as a JSON string",
            )
        target = _normalize(tool, path, defs[name], defs, (*seen, name))
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
    if "allOf" in schema:
        parts = schema.pop("allOf")
        if len(parts) != 1:
            raise SchemaConversionError(tool, f"{path}.allOf", "allOf with several schemas cannot be rendered",
                                        "merge the schemas into one object")
        schema = {**_normalize(tool, path, parts[0], defs, seen), **schema}
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = [_normalize(tool, f"{path}.{key}[{i}]", s, defs, seen) for i, s in enumerate(schema.pop(key))]
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
            raise SchemaConversionError(tool, f"{path}.type", f"unknown JSON type {t!r}",
                                        f"use one of {sorted(JSON_TYPES)} (or a Python type name: "
                                        f"{sorted(k for k in TYPE_ALIASES if k != 'nonetype')})")
    if "enum" in schema and not isinstance(schema["enum"], list):
        raise SchemaConversionError(tool, f"{path}.enum", "enum must be a list")
    if "properties" in schema:
        if not isinstance(schema["properties"], Mapping):
            raise SchemaConversionError(tool, f"{path}.properties", "properties must be an object")
        schema["properties"] = {
            str(k): _normalize(tool, f"{path}.{k}" if path != "parameters" else str(k), v, defs, seen)
            for k, v in schema["properties"].items()
        }
        schema.setdefault("type", "object")
    if "items" in schema:
        if isinstance(schema["items"], list):
            raise SchemaConversionError(tool, f"{path}.items", "tuple-style 'items' lists cannot be rendered",
                                        "use one item schema")
        schema["items"] = _normalize(tool, f"{path}[]", schema["items"], defs, seen)
    if isinstance(schema.get("additionalProperties"), Mapping):
        schema["additionalProperties"] = _normalize(tool, f"{path}.*", schema["additionalProperties"], defs, seen)
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
    tools = [to_tool(o) for o in (objs or [])]
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise SchemaConversionError(tool.name, "name", "two tools share this name", "give every tool a unique name")
        seen.add(tool.name)
    return tools


def render_tools_block(tools: Iterable[Tool]) -> str:
    """The JSON text placed between ``[BEGIN OF AVAILABLE TOOLS]`` and ``[END OF AVAILABLE TOOLS]``."""
    return json.dumps([t.to_hammer() for t in tools])
