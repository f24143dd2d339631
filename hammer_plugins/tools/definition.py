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
    >>> tool.parameters["properties"]["city"]
    {'description': 'City name, e.g. Paris.', 'type': 'string'}
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, create_model

from hammer_plugins.support.sized_cache import SizedCache
from hammer_plugins.tools.docstrings import parse_docstring
from hammer_plugins.tools.json_schema import normalize_parameters, to_json_schema
from hammer_plugins.tools.limits import budget, current_limits
from hammer_plugins.tools.names import check_names_apart
from hammer_plugins.values.errors import SchemaConversionError


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


class ConvertedTools(NamedTuple):
    """A tool set converted, with each tool's :meth:`Tool.fingerprint` (the key of every cache built on it)."""

    tools: tuple[Tool, ...]
    prints: tuple[str, ...]


# Tool sets converted recently, keyed by their raw JSON text and the limits in force: a client that sends
# the same tools with every request (an agent does) pays the conversion (normalizing, budgets, name checks)
# once; a hit costs the JSON text of the raw tools. Bounded by entries and by bytes (12 MiB for a 9,000-tool set).
_CONVERTED: SizedCache[tuple[Any, ...], ConvertedTools] = SizedCache(64, 64 * 2**20)


def _raw_key(obj: Any) -> str | None:
    if isinstance(obj, Tool):
        return "tool:" + obj.fingerprint()
    if isinstance(obj, dict):  # key order counts, as in a fingerprint
        try:
            return "raw:" + json.dumps(obj, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError, RecursionError):  # not JSON, or nested past Python's stack: converted each
            # time (the conversion's budgets answer a schema that deep)
            return None
    return None  # a function or a pydantic class: converted each time


def convert_tools(objs: Iterable[Any] | None) -> ConvertedTools:
    """:func:`to_tools` with the fingerprints, converting a tool set seen recently only once.

    Example:
        >>> spec = {"name": "ping", "parameters": {"type": "object", "properties": {}}}
        >>> convert_tools([spec]) is convert_tools([dict(spec)])
        True
    """
    items = list(objs or [])
    keys = [_raw_key(o) for o in items]
    key = None if None in keys else (tuple(keys), current_limits())
    if key is not None and (found := _CONVERTED.get(key)) is not None:
        return found
    with budget():
        tools = tuple(to_tool(o) for o in items)
    check_names_apart([tool.name for tool in tools])
    converted = ConvertedTools(tools, tuple(t.fingerprint() for t in tools))
    if key is not None:
        _CONVERTED.put(key, converted)
    return converted


def to_tools(objs: Iterable[Any] | None) -> list[Tool]:
    """Convert a sequence of tool descriptions; names must be unique."""
    return list(convert_tools(objs).tools)
