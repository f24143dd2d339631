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
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from .display import check_names_apart
from .docstrings import parse_docstring
from .errors import SchemaConversionError
from .json_schema import normalize_parameters, to_json_schema
from .schema_limits import budget


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
    with budget():
        tools = [to_tool(o) for o in (objs or [])]
    check_names_apart([tool.name for tool in tools])
    return tools


def render_tools_block(tools: Iterable[Tool]) -> str:
    """The JSON text placed between ``[BEGIN OF AVAILABLE TOOLS]`` and ``[END OF AVAILABLE TOOLS]``."""
    return json.dumps([t.to_hammer() for t in tools])
