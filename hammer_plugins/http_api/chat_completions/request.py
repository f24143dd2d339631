"""Chat Completions requests (``POST /v1/chat/completions``): a decoded body read into :class:`ChatRequest`, which
converts itself into the engine's :class:`~hammer_plugins.engine.request.EngineRequest`, or an
:class:`~hammer_plugins.http_api.errors.APIError` with OpenAI's error fields.

Example:
    >>> chat, call = read_chat({"model": "hammer", "messages": [{"role": "user", "content": "hi"}]}, ["hammer"])
    >>> call.tool_choice, call.temperature is None, chat.stream
    ('auto', True, False)
    >>> try:
    ...     read_chat({"model": "gpt-4o", "messages": []}, ["hammer"])
    ... except APIError as exc:
    ...     print(exc.status, exc.code)
    404 model_not_found
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictStr, TypeAdapter, ValidationError

from hammer_plugins.engine.request import COUNT_MAX, SEED_MAX, TOP_K_MAX, EngineRequest
from hammer_plugins.engine.rules import shown_id
from hammer_plugins.http_api.errors import APIError, api_errors_only
from hammer_plugins.http_api.hammer_fields import HammerFields
from hammer_plugins.http_api.json_body import load_json
from hammer_plugins.http_api.request_checks import (
    FieldNames,
    checked_stop,
    engine_request,
    function_tool_names,
    function_tools,
    located,
    read_request,
)
from hammer_plugins.values.calls import PENDING_CALLS_KEY, call_id_for
from hammer_plugins.values.errors import RequestError
from hammer_plugins.values.messages import Message, to_message

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool",
         "function": "tool"}
"""OpenAI message roles and the engine role each becomes (``developer`` is the newer ``system``)."""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = Field(False, strict=True)


class ChatRequest(HammerFields):
    """The fields of ``POST /v1/chat/completions`` this server reads (others are ignored), plus Hammer's own."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)  # also for bodies that are not JSON text

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = Field(None, strict=True)  # strict: "yes" is not true
    max_tokens: int | None = Field(None, ge=1, le=COUNT_MAX)
    max_completion_tokens: int | None = Field(None, ge=1, le=COUNT_MAX)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = Field(None, ge=0, le=SEED_MAX)  # outside it, C wrapped 2**64 + 5 to seed 5
    stop: str | list[str] | None = None
    stream: bool = Field(False, strict=True)
    stream_options: StreamOptions | None = None
    n: int | None = 1
    response_format: dict[str, Any] | None = None
    logprobs: bool | None = Field(None, strict=True)
    # Hammer's own options (send them with the SDK's extra_body=...), besides HammerFields'.
    max_tool_rounds: int | None = Field(None, ge=1)
    top_k: int | None = Field(None, ge=0, le=TOP_K_MAX)
    repeat_penalty: float | None = Field(None, gt=0)


    _names: FieldNames | None = PrivateAttr(None)

    @property
    def include_usage(self) -> bool:
        """Whether a streamed answer ends with a usage chunk (``stream_options.include_usage``)."""
        return bool(self.stream and self.stream_options and self.stream_options.include_usage)

    def to_engine_request(self) -> EngineRequest:
        """The engine's request: the messages converted (each checked where it can be named), the options mapped."""
        if self.n not in (None, 1):
            raise APIError(400, f"n={self.n} is not supported: this server returns one choice. Fix: leave n out or "
                                "send n=1.", param="n", code="unsupported_value")
        legacy = [name for name in ("functions", "function_call") if (self.model_extra or {}).get(name) is not None]
        if legacy:
            raise APIError(400, f"The legacy field '{legacy[0]}' is not supported. Fix: send 'tools' and "
                                "'tool_choice'.", param=legacy[0], code="unsupported_value")
        if self.logprobs:
            raise APIError(400, "logprobs are not supported by this server.", param="logprobs", code="unsupported_value")
        if not self.messages:
            raise APIError(400, "messages must hold at least one message.", param="messages", code="invalid_value")
        tools = function_tools(self.tools or [])
        self._names = FieldNames(messages=[f"messages[{i}]" for i in range(len(self.messages))],
                                 message_id="tool_call_id", tools=function_tool_names(len(tools)),
                                 tool_schema="parameters", tool_name="name")
        return EngineRequest(
            messages=[_message(m, i) for i, m in enumerate(self.messages)], tools=tools,
            tool_choice=self.tool_choice, max_tokens=self.max_completion_tokens or self.max_tokens,
            temperature=self.temperature, top_p=self.top_p, seed=self.seed, stop=checked_stop(self.stop, "stop"),
            top_k=self.top_k, repeat_penalty=self.repeat_penalty, parallel_tool_calls=self.parallel_tool_calls,
            response_format=_response_format(self.response_format),
            max_tool_rounds="default" if self.max_tool_rounds is None else self.max_tool_rounds,
            **self.hammer_options())

    def field_names(self) -> FieldNames:
        assert self._names is not None, "to_engine_request() names the fields"
        return self._names

    def api_error(self, exc: RequestError, request: EngineRequest) -> APIError:
        """``exc`` in OpenAI's field names, a lone result in OpenAI's own words."""
        if exc.rule == "unanswered_result" and len(exc.loc) > 1 and isinstance(exc.loc[1], int):
            index = exc.loc[1]
            role, answered = self.messages[index].get("role"), request.messages[index].tool_call_id
            what = f"tool_call_id {shown_id(answered)}" if answered is not None else "a call"
            return located(exc, self.field_names(), f"Invalid parameter: messages with role '{role}' must be a response "
                                                    f"to a preceding message with 'tool_calls'; messages[{index}] answers "
                                                    f"{what}, which no earlier assistant message called. Fix: send the "
                                                    "assistant message with its tool_calls before the results.")
        return located(exc, self.field_names())


@api_errors_only
def read_chat(body: Any, served: list[str]) -> tuple[ChatRequest, EngineRequest]:
    """A decoded body as the door's request and the engine's (raises :class:`APIError` only: whatever the body
    holds, a 400 for anything that cannot be read, never another exception)."""
    chat = read_request(body, ChatRequest, served)
    return chat, engine_request(chat)


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
        calls.append({"id": call.get("id") or call_id_for(index, j),
                      "function": {"name": function["name"], "arguments": parsed}})
    tool_call_id = _text(raw.get("tool_call_id"), f"{param}.tool_call_id")
    _text(raw.get("name"), f"{param}.name")
    if role == "tool" and raw.get("role") == "tool" and not tool_call_id:
        raise APIError(400, f"{param} (role 'tool') needs tool_call_id.", param=f"{param}.tool_call_id",
                       code="invalid_value")
    # An ask's held-back calls, sent back on the assistant message (hammer_pending_calls): this turn completes them.
    pending = {PENDING_CALLS_KEY: raw.get(PENDING_CALLS_KEY)} if role == "assistant" else {}
    return to_message({"role": role, "content": content or "", "tool_calls": calls, "tool_call_id": tool_call_id,
                       "name": raw.get("name") if role != "user" else None, **pending})


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


def parse_request(body: Any, served_model: str | list[str]) -> EngineRequest:
    """The engine request of a ``/v1/chat/completions`` body (:func:`read_chat`'s second half; the name this module
    had before the doors built typed requests)."""
    return read_chat(body, [served_model] if isinstance(served_model, str) else served_model)[1]
