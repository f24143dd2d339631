"""Chat Completions requests (``POST /v1/chat/completions``): a decoded body validated into an
:class:`~hammer_plugins.openai_server.call.EngineCall`, or an :class:`~hammer_plugins.openai_server.errors.APIError`
with OpenAI's error fields.

Example:
    >>> call = parse_request({"model": "hammer", "messages": [{"role": "user", "content": "hi"}]}, "hammer")
    >>> call.tool_choice, call.options["temperature"] is None, call.stream
    ('none', True, False)
    >>> try:
    ...     parse_request({"model": "gpt-4o", "messages": []}, "hammer")
    ... except APIError as exc:
    ...     print(exc.status, exc.code)
    404 model_not_found
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, TypeAdapter, ValidationError

from hammer_plugins.openai_server.call import (
    EngineCall,
    checked_stop,
    checked_tool_choice,
    checked_tools,
    function_tools,
    read_request,
)
from hammer_plugins.openai_server.errors import APIError, api_errors_only
from hammer_plugins.openai_server.json_body import load_json
from hammer_plugins.values.messages import Message, to_message

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool",
         "function": "tool"}
"""OpenAI message roles and the engine role each becomes (``developer`` is the newer ``system``)."""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = Field(False, strict=True)


class ChatRequest(BaseModel):
    """The fields of ``POST /v1/chat/completions`` this server reads (others are ignored), plus Hammer's own."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)  # also for bodies that are not JSON text

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = Field(None, strict=True)  # strict: "yes" is not true
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = Field(False, strict=True)
    stream_options: StreamOptions | None = None
    n: int | None = 1
    response_format: dict[str, Any] | None = None
    logprobs: bool | None = Field(None, strict=True)
    # Hammer's own options (send them with the SDK's extra_body=...).
    mask_names: bool | None = Field(None, strict=True)
    on_refusal: Literal["message", "answer"] | None = None
    constrained: bool | None = Field(None, strict=True)
    max_tool_rounds: int | None = Field(None, ge=1)
    top_k: int | None = Field(None, ge=0)
    repeat_penalty: float | None = Field(None, gt=0)


@api_errors_only
def parse_request(body: Any, served_model: str | list[str]) -> EngineCall:
    """Validate a decoded request body and map it to an engine call (raises :class:`APIError`).

    Whatever the body holds, the answer is a call or an :class:`APIError` (400 for anything that
    cannot be read), never another exception.
    """
    request = read_request(body, ChatRequest, served_model)
    if request.n not in (None, 1):
        raise APIError(400, f"n={request.n} is not supported: this server returns one choice. Fix: leave n out or "
                            "send n=1.", param="n", code="unsupported_value")
    legacy = [name for name in ("functions", "function_call") if (request.model_extra or {}).get(name) is not None]
    if legacy:
        raise APIError(400, f"The legacy field '{legacy[0]}' is not supported. Fix: send 'tools' and 'tool_choice'.",
                       param=legacy[0], code="unsupported_value")
    if request.logprobs:
        raise APIError(400, "logprobs are not supported by this server.", param="logprobs", code="unsupported_value")
    if not request.messages:
        raise APIError(400, "messages must hold at least one message.", param="messages", code="invalid_value")
    messages = [_message(m, i) for i, m in enumerate(request.messages)]
    _check_order(request.messages)
    tools = checked_tools(function_tools(request.tools or []))
    tool_choice = checked_tool_choice(request.tool_choice, tools)
    stop = checked_stop(request.stop, "stop")
    options: dict[str, Any] = {
        "max_tokens": request.max_completion_tokens or request.max_tokens,
        "temperature": request.temperature, "top_p": request.top_p, "seed": request.seed, "stop": stop,
        "top_k": request.top_k, "repeat_penalty": request.repeat_penalty,
        "parallel_tool_calls": request.parallel_tool_calls, "mask_names": request.mask_names,
        "on_refusal": request.on_refusal, "constrained": request.constrained,
        "response_format": _response_format(request.response_format),
    }
    if request.max_tool_rounds is not None:
        options["max_tool_rounds"] = request.max_tool_rounds
    include_usage = bool(request.stream and request.stream_options and request.stream_options.include_usage)
    return EngineCall(messages=messages, tools=tools, tool_choice=tool_choice, options=options,
                      stream=request.stream, include_usage=include_usage)


def _call_ids(raw: dict[str, Any]) -> list[str]:
    """The ids of an assistant message's calls, as :func:`_message` gives them (``call_<j>`` when left out)."""
    return [call.get("id") or f"call_{j}" for j, call in enumerate(raw.get("tool_calls") or [])]


def _check_order(raw_messages: list[dict[str, Any]]) -> None:
    """A ``tool`` message must answer a call an earlier assistant message made (OpenAI's rule: a lone
    tool result is a 400 there, and the model would answer a question nobody asked)."""
    called: set[str] = set()
    for index, raw in enumerate(raw_messages):
        if raw.get("role") == "assistant":
            called.update(_call_ids(raw))
        elif raw.get("role") in ("tool", "function"):
            answered = raw.get("tool_call_id")
            if not called or (raw.get("role") == "tool" and answered not in called):
                what = f"tool_call_id {answered!r}" if answered is not None else "a call"
                raise APIError(400, f"Invalid parameter: messages with role '{raw.get('role')}' must be a response to a "
                                    f"preceding message with 'tool_calls'; messages[{index}] answers {what}, which no "
                                    "earlier assistant message called. Fix: send the assistant message with its "
                                    "tool_calls before the results.",
                               param=f"messages[{index}].tool_call_id", code="invalid_value")


def _text(value: Any, param: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise APIError(400, f"{param} must be a string, got {type(value).__name__}.", param=param, code="invalid_value")
    return value


class TextPart(BaseModel):
    """A text content part, as OpenAI's contract has it: ``{"type": "text", "text": "..."}`` (``input_text``:
    the Responses API's name for it)."""

    type: Literal["text", "input_text"]
    text: StrictStr


class RefusalPart(BaseModel):
    """An assistant's refusal written back into the history: ``{"type": "refusal", "refusal": "..."}``."""

    type: Literal["refusal"]
    refusal: StrictStr


_JSON_TYPES = {type(None): "null", dict: "an object", list: "an array", bool: "a boolean", int: "a number",
               float: "a number"}


_CONTENT_PART: TypeAdapter[TextPart | RefusalPart] = TypeAdapter(Annotated[TextPart | RefusalPart,
                                                                           Field(discriminator="type")])


def _part_text(part: Any, param: str) -> str:
    """The text of one content part, validated by its type (a text part's ``text`` is a string, never
    ``null`` or an object); any part that is not text (an image, audio, a file) is a 400 naming it."""
    if not isinstance(part, Mapping):
        raise APIError(400, f"{param} must be a content part object such as {{\"type\": \"text\", \"text\": \"...\"}}, "
                            f"got {type(part).__name__}.", param=param, code="invalid_value")
    kind = part.get("type")
    if kind not in ("text", "input_text", "refusal"):
        raise APIError(400, f"{param} is a content part of type {str(kind)[:40]!r}, which this server does not take: its "
                            "models read text only. Fix: send text parts ({\"type\": \"text\", \"text\": \"...\"}) or a "
                            "string.", param=f"{param}.type", code="unsupported_value")
    try:
        checked = _CONTENT_PART.validate_python(part)
    except ValidationError as exc:
        name = str(exc.errors()[0]["loc"][-1])  # the part's own field: "text" or "refusal"
        value = part.get(name)
        got = "nothing" if name not in part else _JSON_TYPES.get(type(value), type(value).__name__)
        raise APIError(400, f'{param}.{name} must be a string: a {kind} part is {{"type": "{kind}", "{name}": "..."}}; '
                            f"got {got}.", param=f"{param}.{name}", code="invalid_value") from None
    return checked.refusal if isinstance(checked, RefusalPart) else checked.text


def _message(raw: dict[str, Any], index: int) -> Message:
    param = f"messages[{index}]"
    role = ROLES.get(str(raw.get("role")))
    if role is None:
        raise APIError(400, f"Invalid role {raw.get('role')!r} in {param}; use one of {sorted(ROLES)}.",
                       param=f"{param}.role", code="invalid_value")
    content = raw.get("content")
    if isinstance(content, list):
        content = "".join(_part_text(part, f"{param}.content[{k}]") for k, part in enumerate(content))
    elif content is not None and not isinstance(content, str):
        raise APIError(400, f"{param}.content must be a string or a list of text parts.", param=f"{param}.content",
                       code="invalid_value")
    raw_calls = raw.get("tool_calls") or [] if role == "assistant" else []
    if not isinstance(raw_calls, list):
        raise APIError(400, f"{param}.tool_calls must be a list.", param=f"{param}.tool_calls", code="invalid_value")
    calls = []  # checked here, where a bad one can be named with its place; converted by to_message
    for j, call in enumerate(raw_calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(call, Mapping):
            _text(call.get("id"), f"{param}.tool_calls[{j}].id")
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise APIError(400, f"{param}.tool_calls[{j}] needs function.name.", param=f"{param}.tool_calls[{j}]",
                           code="invalid_value")
        arguments = function.get("arguments") or "{}"
        where = f"{param}.tool_calls[{j}].function.arguments"
        if isinstance(arguments, str):
            parsed = load_json(arguments, where, param=where, code="invalid_value",
                               fix="arguments must be a JSON object in a string, as the model's own calls are")
        else:
            parsed = arguments
        if not isinstance(parsed, dict):
            raise APIError(400, f"{param}.tool_calls[{j}].function.arguments must be a JSON object in a string, got "
                                f"{arguments!r}.", param=where,
                           code="invalid_value")
        calls.append({"id": call.get("id") or f"call_{j}", "function": {"name": function["name"], "arguments": parsed}})
    tool_call_id = _text(raw.get("tool_call_id"), f"{param}.tool_call_id")
    _text(raw.get("name"), f"{param}.name")
    if role == "tool" and raw.get("role") == "tool" and not tool_call_id:
        raise APIError(400, f"{param} (role 'tool') needs tool_call_id.", param=f"{param}.tool_call_id",
                       code="invalid_value")
    return to_message({"role": role, "content": content or "", "tool_calls": calls, "tool_call_id": tool_call_id,
                       "name": raw.get("name") if role != "user" else None})


def _response_format(spec: dict[str, Any] | None) -> dict[str, Any] | None:
    if spec is None or spec.get("type") == "text":
        return None
    if spec.get("type") == "json_object":
        return {"type": "json_object"}
    if spec.get("type") == "json_schema":
        inner = spec.get("json_schema")
        if not isinstance(inner, Mapping) or not isinstance(inner.get("schema"), Mapping):
            raise APIError(400, "response_format json_schema needs json_schema.schema (an object).",
                           param="response_format.json_schema.schema", code="invalid_value")
        return {"type": "json_schema", "json_schema": dict(inner)}
    raise APIError(400, f"response_format type {spec.get('type')!r} is not supported; use 'text', 'json_object' or "
                        "'json_schema'.", param="response_format.type", code="unsupported_value")
