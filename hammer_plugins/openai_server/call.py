"""What every API's request becomes, and the checks every API makes in its own words.

Each API reads its body into its own request type (``chat_completions/request.py``,
``responses/request.py``, ``messages/request.py``) and names its own fields in its errors; the checks
that are the same for all of them (the model served, the tools converted, ``tool_choice``, the bounds
on stop lists, a tool result answering a call) live here once, told the name the API gives the field.

Example:
    >>> EngineCall(messages=[], tools=[], tool_choice="none").stream
    False
    >>> try:
    ...     checked_stop(["x"] * 100, "stop_sequences")
    ... except APIError as exc:
    ...     print(exc.param, exc.code)
    stop_sequences invalid_value
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from hammer_plugins.openai_server.errors import APIError, validation_error
from hammer_plugins.tools.choice import normalize_tool_choice
from hammer_plugins.tools.definition import to_tools
from hammer_plugins.values.errors import SchemaConversionError, UnknownToolError
from hammer_plugins.values.messages import Message

MAX_STOP_SEQUENCES = 16
"""Stop strings one request may send (OpenAI allows 4, Anthropic more): each is looked for after every token."""

MAX_STOP_CHARACTERS = 4096
"""Characters of all the stop strings of one request together."""


@dataclass
class EngineCall:
    """One validated request, ready for ``engine.stream(messages, tools, tool_choice, **options)``."""

    messages: list[Message]
    tools: list[dict[str, Any]]
    tool_choice: str
    options: dict[str, Any] = field(default_factory=dict)
    stream: bool = False
    include_usage: bool = False


_Request = TypeVar("_Request", bound=BaseModel)


def read_request(body: Any, request_type: type[_Request], served_model: str | list[str] | None) -> _Request:
    """``body`` read into the API's own request type (a 400 naming the API's field), for a model served here
    (``served_model`` None: the API checks the name in its own way)."""
    if not isinstance(body, Mapping):
        raise APIError(400, "The request body must be a JSON object.", code="invalid_json")
    try:
        request = request_type.model_validate(body)
    except ValidationError as exc:
        raise validation_error(exc) from None
    if served_model is not None:
        check_served(getattr(request, "model", None), served_model)
    return request


def check_served(model: Any, served_model: str | list[str]) -> None:
    """A 404 unless ``model`` is a name this server serves."""
    served = [served_model] if isinstance(served_model, str) else list(served_model)
    if model not in served:
        raise APIError(404, f"The model '{model}' does not exist. This server serves {served}.",
                       param="model", code="model_not_found")


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


def checked_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``tools`` (OpenAI function tools) converted once here, so a schema the engine cannot use is a 400 now
    (the engine finds the converted set in its cache)."""
    try:
        to_tools(tools)
    except SchemaConversionError as exc:
        raise APIError(400, f"Invalid tool schema: {exc}", param="tools", code="invalid_tool_schema") from None
    except (ValueError, TypeError) as exc:
        raise APIError(400, f"Invalid tools: {exc}", param="tools", code="invalid_value") from None
    return tools


def checked_tool_choice(choice: str | Mapping[str, Any] | None, tools: list[dict[str, Any]]) -> str:
    """OpenAI's ``tool_choice`` normalized against ``tools`` (``"none"`` when there are none)."""
    if not tools:
        if choice in (None, "auto", "none") or (isinstance(choice, Mapping) and choice.get("type") in ("auto", "none")):
            return "none"
        raise APIError(400, f"tool_choice {choice!r} needs tools, and the request has none.", param="tool_choice",
                       code="invalid_value")
    try:
        return normalize_tool_choice(choice, [t.get("function", t)["name"] for t in tools])
    except UnknownToolError as exc:
        raise APIError(400, str(exc), param="tool_choice", code="invalid_tool_choice") from None


def unanswered_result(messages: Sequence[Message]) -> int | None:
    """The index of the first tool result that answers no call an earlier assistant turn made, or ``None``.

    A lone result is refused by every API (the model would answer a question nobody asked). Linear in the
    messages: the calls made so far are kept in a set.
    """
    called: set[str] = set()
    for index, message in enumerate(messages):
        if message.role == "assistant":
            called.update(call.id for call in message.tool_calls)
        elif message.role == "tool" and message.tool_call_id not in called:
            return index
    return None


def engine_call(messages: list[Message], tools: list[dict[str, Any]], tool_choice: str, options: dict[str, Any], *,
                stream: bool, origin: Callable[[int], tuple[str, str]], include_usage: bool = False) -> EngineCall:
    """The call, once a tool result that answers no call is refused in the API's words: ``origin(i)``
    gives the place of message ``i`` in the request and the sentence that says what went wrong."""
    lone = unanswered_result(messages)
    if lone is not None:
        param, message = origin(lone)
        raise APIError(400, message, param=param, code="invalid_value")
    return EngineCall(messages=messages, tools=tools, tool_choice=tool_choice, options=options, stream=stream,
                      include_usage=include_usage)
