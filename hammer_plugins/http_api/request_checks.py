"""What every API door does with a body before the engine sees it: read it into the door's own request type,
check the model it names, and convert it into the engine's :class:`~hammer_plugins.engine.request.EngineRequest`
held to the engine's rules, their errors renamed into the API's field names.

The rules themselves (results answering calls, the tools, ``tool_choice``) are the engine's
(:mod:`hammer_plugins.engine.rules`), written once; a door only says how its API names the places of an engine
request (:class:`FieldNames`).

Example:
    >>> names = FieldNames(messages=["instructions", "input[0]", "input[2]"], message_id="call_id",
    ...                    tools=["tools[0]"], tool_schema="parameters", tool_name="name", response_format="text.format")
    >>> names.param(("messages", 2, "tool_call_id")), names.param(("tools", 0)), names.param(("pinned_tools", 1))
    ('input[2].call_id', 'tools[0]', 'pinned_tools[1]')
    >>> try:
    ...     checked_stop(["x"] * 100, "stop_sequences")
    ... except APIError as exc:
    ...     print(exc.param, exc.code)
    stop_sequences invalid_value
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from hammer_plugins.engine.request import EngineRequest
from hammer_plugins.engine.rules import check_request
from hammer_plugins.http_api.errors import APIError, request_error, validation_error
from hammer_plugins.values.errors import RequestError, SchemaConversionError

MAX_STOP_SEQUENCES = 16
"""Stop strings one request may send (OpenAI allows 4, Anthropic more): each is looked for after every token."""

MAX_STOP_CHARACTERS = 4096
"""Characters of all the stop strings of one request together."""


@dataclass(frozen=True)
class FieldNames:
    """How an API names the places of an engine request, for its errors.

    ``messages[i]`` is where engine message ``i`` came from (``"messages[2]"``, ``"input[5]"``,
    ``"messages[1].content[0]"``); ``message_id`` the field of a result that names its call; ``tools[i]``
    where engine tool ``i`` came from; ``tool_schema`` and ``tool_name`` a tool's schema and name fields.
    """

    messages: Sequence[str]
    message_id: str
    tools: Sequence[str]
    tool_schema: str
    tool_name: str
    response_format: str = "response_format"
    conversation: str = "messages"
    pinned_tools: str = "pinned_tools"  # Ollama's may come in options

    def param(self, loc: tuple[str | int, ...], field: str = "") -> str | None:
        """The API's name for the engine place ``loc`` (``field``: a tool's field the error names)."""
        head = loc[0] if loc else None
        if head == "messages":
            if len(loc) < 2 or not isinstance(loc[1], int) or loc[1] >= len(self.messages):
                return self.conversation
            return f"{self.messages[loc[1]]}.{self.message_id}" if len(loc) > 2 else self.messages[loc[1]]
        if head == "tools":
            if len(loc) < 2 or not isinstance(loc[1], int) or loc[1] >= len(self.tools):
                return "tools"
            if not field:
                return self.tools[loc[1]]
            return f"{self.tools[loc[1]]}.{self.tool_name if field.startswith('name') else self.tool_schema}"
        if head == "response_format":
            return self.response_format
        if head == "pinned_tools" and len(loc) > 1:
            return f"{self.pinned_tools}[{loc[1]}]"
        return ".".join(str(part) for part in loc) or None


class DoorRequest(Protocol):
    """An API's request type: it converts itself, and names the places of what it converted to."""

    def to_engine_request(self) -> EngineRequest: ...

    def field_names(self) -> FieldNames: ...

    def api_error(self, exc: RequestError, request: EngineRequest) -> APIError: ...


def located(exc: RequestError, names: FieldNames, message: str | None = None, *, in_message: bool = False) -> APIError:
    """``exc`` as a 400 naming the API's field (``message``: the API's own words for it). ``in_message``: the field
    also opens the message, for an API whose error shape has no field of its own (Anthropic's, Ollama's)."""
    field = exc.field if isinstance(exc, SchemaConversionError) else ""
    param = names.param(exc.loc, field)
    error = request_error(exc, param, message)
    if in_message and param and not error.message.startswith(param):
        error.message = f"{param}: {error.message}"
    return error


def engine_request(request: DoorRequest) -> EngineRequest:
    """``request`` converted and held to the engine's rules, now, while its body is read: a broken rule is a 400
    in the API's field names before the request waits for the model."""
    converted = request.to_engine_request()
    try:
        check_request(converted)
    except RequestError as exc:
        raise request.api_error(exc, converted) from None
    return converted


_Request = TypeVar("_Request", bound=BaseModel)


def read_request(body: Any, request_type: type[_Request], served: Sequence[str] | None) -> _Request:
    """``body`` read into the API's own request type (a 400 naming the API's field), for a model served here
    (``served`` None: the door checks the name itself)."""
    if not isinstance(body, Mapping):
        raise APIError(400, "The request body must be a JSON object.", code="invalid_json")
    try:
        request = request_type.model_validate(body)
    except ValidationError as exc:
        raise validation_error(exc) from None
    if served is not None:
        check_model(getattr(request, "model", None), served)
    return request


def check_model(model: Any, served: Sequence[str]) -> None:
    """A 404 unless ``model`` is one of the ``served`` names (the first is the model's; Ollama adds its tag)."""
    if model not in served:
        raise APIError(404, f"The model {str(model)[:100]!r} does not exist. This server serves {list(served)}. Fix: "
                            f"pass model={served[0]!r}.", param="model", code="model_not_found")


def checked_stop(stop: str | Sequence[str] | None, param: str) -> list[str] | None:
    """The stop strings as a list, bounded by :data:`MAX_STOP_SEQUENCES` and :data:`MAX_STOP_CHARACTERS`."""
    if stop is None:
        return None
    stops = [stop] if isinstance(stop, str) else list(stop)
    if len(stops) > MAX_STOP_SEQUENCES or sum(len(s) for s in stops) > MAX_STOP_CHARACTERS:
        raise APIError(400, f"{param} holds {len(stops)} strings of {sum(len(s) for s in stops)} characters; this "
                            f"server takes at most {MAX_STOP_SEQUENCES} strings of {MAX_STOP_CHARACTERS} characters in "
                            "all (each is looked for after every token). Fix: send fewer stop strings.",
                       param=param, code="invalid_value")
    return stops


def function_tools(raw: list[Any]) -> list[dict[str, Any]]:
    """``tools`` as Chat Completions and Ollama send them (``{"type": "function", "function": {...}}``), each
    checked for its shape: a 400 naming ``tools[i]`` otherwise."""
    for i, tool in enumerate(raw):
        if not isinstance(tool, Mapping):
            raise APIError(400, f"tools[{i}] must be an object.", param=f"tools[{i}]", code="invalid_value")
        if tool.get("type", "function") != "function" or not isinstance(tool.get("function", tool), Mapping):
            raise APIError(400, f"tools[{i}]: only tools of type 'function' are supported.", param=f"tools[{i}].type",
                           code="unsupported_value")
        function = tool.get("function", tool)
        if not isinstance(function.get("name"), str):
            raise APIError(400, f"tools[{i}] needs function.name.", param=f"tools[{i}].function.name",
                           code="invalid_value")
        if function.get("description") is not None and not isinstance(function["description"], str):
            raise APIError(400, f"tools[{i}].function.description must be a string.",
                           param=f"tools[{i}].function.description", code="invalid_value")
        if function.get("parameters") is not None and not isinstance(function["parameters"], Mapping):
            raise APIError(400, f"tools[{i}].function.parameters must be a JSON schema object.",
                           param=f"tools[{i}].function.parameters", code="invalid_value")
    return raw


def function_tool_names(count: int) -> list[str]:
    """Where each tool of a Chat Completions (or Ollama) ``tools`` list is: ``tools[i].function``."""
    return [f"tools[{i}].function" for i in range(count)]
