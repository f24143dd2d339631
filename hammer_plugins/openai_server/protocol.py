"""The OpenAI chat-completions contract, on the engine's side: requests in, ``openai`` types out.

Free of any web framework: :func:`parse_request` validates a decoded JSON body and turns it into
an :class:`EngineCall` (messages, tools, tool choice and options for
:meth:`~hammer_plugins.HammerEngine.stream`), raising :class:`APIError` with the status and the
OpenAI error fields for anything it cannot serve. :func:`completion` builds the non-streaming
answer and :class:`ChunkWriter` the streamed one, both from the ``openai`` package's own pydantic
types, so what goes on the wire is what the SDK parses.

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

import itertools
import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr, TypeAdapter, ValidationError

from hammer_plugins.tools.choice import normalize_tool_choice
from hammer_plugins.tools.definition import to_tools
from hammer_plugins.values.errors import (
    ContextWindowExceededError,
    GrammarNotSupportedError,
    HammerError,
    SchemaConversionError,
    ServerAuthenticationError,
    ServerError,
    ServerHTTPError,
    ServerModelNotFoundError,
    ServerStreamError,
    ServerTimeoutError,
    ServerUnavailableError,
    UnknownToolError,
)
from hammer_plugins.values.messages import Message, to_message

ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool",
         "function": "tool"}
"""OpenAI message roles and the engine role each becomes (``developer`` is the newer ``system``)."""


class APIError(Exception):
    """An error answered in its API's shape: OpenAI's ``{"error": {"message", "type", "param", "code"}}``,
    or Anthropic's under ``/v1/messages``.

    Example:
        >>> APIError(400, "n must be 1", param="n").body()["error"]["type"]
        'invalid_request_error'
    """

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",  # noqa: A002
                 param: str | None = None, code: str | None = None, headers: dict[str, str] | None = None,
                 anthropic_message: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers  # e.g. Retry-After on a 429
        self.anthropic_message = anthropic_message  # where Anthropic's API words the case differently

    def body(self, path: str = "") -> dict[str, Any]:
        """The error JSON in the shape of the API ``path`` belongs to: Anthropic's under ``/v1/messages``
        (``{"type": "error", "error": {"type", "message"}}``), OpenAI's elsewhere."""
        if path.startswith(MESSAGES_PATH):
            message = self.anthropic_message or self.message
            return {"type": "error", "error": {"type": self.anthropic_type(), "message": message}}
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}

    def anthropic_type(self) -> str:
        """Anthropic's error ``type`` for this status (``api_error`` for the 5xx it has no name for)."""
        return ANTHROPIC_ERROR_TYPES.get(self.status, "invalid_request_error" if self.status < 500 else "api_error")


MESSAGES_PATH = "/v1/messages"
"""Routes under this path are Anthropic's Messages API: their errors take Anthropic's shape."""

ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                         503: "overloaded_error", 504: "timeout_error"}


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


@dataclass
class EngineCall:
    """One validated request, ready for ``engine.stream(messages, tools, tool_choice, **options)``."""

    messages: list[Message]
    tools: list[dict[str, Any]]
    tool_choice: str
    options: dict[str, Any] = field(default_factory=dict)
    stream: bool = False
    include_usage: bool = False


MAX_JSON_DEPTH = 64
"""Deepest nesting of arrays and objects a body may have: a tool schema 25 levels deep fits; a body
built to exhaust recursion (``[[[[...``) is refused."""


# A string, or an unclosed one to the end of the body (such a body is not JSON; its decoding fails
# before any bracket after the quote): each attempt succeeds, so the scan is linear. With the closing
# quote required, a body of '"' + '\\"' * n made every quote start a failing scan to the end (issue 37:
# 40 kB took 12.9 s, holding the GIL).
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def json_too_deep(body: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text ``body`` nests arrays/objects more than ``limit`` deep, told before it is decoded.

    Strings are cut out, the brackets left become +1 / -1 steps, and their running sum's maximum
    is the depth: C-speed loops only (8 MiB of brackets in a fraction of a second), no recursion.

    Example:
        >>> json_too_deep(b'{"a": [[1]], "b": "[[[[["}', limit=3), json_too_deep(b"[" * 5 + b"]" * 5, limit=3)
        (False, True)
    """
    steps = _JSON_STRING.sub(b"", body).translate(_STEPS, _NOT_BRACKETS)
    return bool(steps) and max(itertools.accumulate(memoryview(steps).cast("b"))) > limit


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    """A JSON number as a float, refused when it is not finite (``1e999`` overflows to infinity)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for a 64-bit float")
    return value


def _check_strings(value: Any) -> None:
    """Raise ValueError on a string no UTF-8 encoder takes (a lone surrogate sent as ``\\ud800``)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            item.encode("utf-8")
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def load_json(data: bytes | str, what: str = "The JSON body of your request", *, param: str | None = None,
              code: str = "invalid_json", fix: str = "send valid JSON, its numbers finite") -> Any:
    """``data`` decoded, or a 400 naming ``what``: too deep, not UTF-8, not JSON, a number that is not
    finite (``NaN``, ``Infinity``, ``1e999``), a lone surrogate (``"\\ud800"``, which no UTF-8 encoder takes
    further on). Every JSON text from outside is read here: the body, and the strings in it that hold
    JSON (an assistant call's ``arguments``), so each gets the same limits.

    Example:
        >>> load_json(b'{"a": 1}')
        {'a': 1}
        >>> for bad in (b"[" * 100_000 + b"]" * 100_000, b'{"t": 1e999}', '{"t": Infinity}'):
        ...     try:
        ...         load_json(bad)
        ...     except APIError as exc:
        ...         print(exc.status, exc.code)
        400 invalid_json
        400 invalid_json
        400 invalid_json
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if json_too_deep(raw):
        raise APIError(400, f"{what} nests arrays or objects more than {MAX_JSON_DEPTH} levels deep. Fix: send "
                            "flatter JSON.", param=param, code=code)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise APIError(400, f"{what} is not valid UTF-8 ({exc.reason} at byte {exc.start}). Fix: {fix}.", param=param,
                       code=code) from None
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
        if _SURROGATE_ESCAPE.search(raw):  # only escapes can make a surrogate: walk the strings then
            _check_strings(value)
    except (ValueError, RecursionError) as exc:
        raise APIError(400, f"We could not parse {what[:1].lower() + what[1:]} as JSON ({exc}). Fix: {fix}.", param=param,
                       code=code) from None
    return value


def parse_json(body: bytes) -> Any:
    """The decoded request body (:func:`load_json`), or its 400.

    Example:
        >>> try:
        ...     parse_json(b"[" * 100_000 + b"]" * 100_000)
        ... except APIError as exc:
        ...     print(exc.status, exc.code)
        400 invalid_json
    """
    return load_json(body)


def _validation_error(exc: ValidationError) -> APIError:
    first = exc.errors()[0]
    param = ".".join(str(p) for p in first["loc"]) or None
    return APIError(400, f"Invalid value for '{param}': {first['msg']}.", param=param, code="invalid_value")


def parse_request(body: Any, served_model: str | list[str]) -> EngineCall:
    """Validate a decoded request body and map it to an engine call (raises :class:`APIError`).

    Whatever the body holds, the answer is a call or an :class:`APIError` (400 for anything that
    cannot be read), never another exception.
    """
    try:
        return _parse_request(body, served_model)
    except APIError:
        raise
    except Exception as exc:  # noqa: BLE001 - a body shaped in a way no check foresaw is still the client's error
        raise APIError(400, f"The request could not be read ({type(exc).__name__}: {exc}).",
                       code="invalid_request") from None


def _parse_request(body: Any, served_model: str | list[str]) -> EngineCall:
    if not isinstance(body, Mapping):
        raise APIError(400, "The request body must be a JSON object.", code="invalid_json")
    try:
        request = ChatRequest.model_validate(body)
    except ValidationError as exc:
        raise _validation_error(exc) from None
    served = [served_model] if isinstance(served_model, str) else list(served_model)
    if request.model not in served:
        raise APIError(404, f"The model '{request.model}' does not exist. This server serves {served}.",
                       param="model", code="model_not_found")
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
    tools = _tools(request.tools or [])
    tool_choice = _tool_choice(request.tool_choice, tools)
    stop = [request.stop] if isinstance(request.stop, str) else request.stop
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


def _tools(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for i, tool in enumerate(raw):
        if tool.get("type", "function") != "function" or not isinstance(tool.get("function", tool), Mapping):
            raise APIError(400, f"tools[{i}]: only tools of type 'function' are supported.", param=f"tools[{i}].type",
                           code="unsupported_value")
        function = tool.get("function", tool)
        if not isinstance(function.get("name"), str):
            raise APIError(400, f"tools[{i}] needs function.name.", param=f"tools[{i}].function.name",
                           code="invalid_value")
        _text(function.get("description"), f"tools[{i}].function.description")
        if function.get("parameters") is not None and not isinstance(function["parameters"], Mapping):
            raise APIError(400, f"tools[{i}].function.parameters must be a JSON schema object.",
                           param=f"tools[{i}].function.parameters", code="invalid_value")
    try:
        to_tools(raw)
    except SchemaConversionError as exc:
        raise APIError(400, f"Invalid tool schema: {exc}", param="tools", code="invalid_tool_schema") from None
    except (ValueError, TypeError) as exc:
        raise APIError(400, f"Invalid tools: {exc}", param="tools", code="invalid_value") from None
    return raw


def _tool_choice(choice: str | dict[str, Any] | None, tools: list[dict[str, Any]]) -> str:
    names = [t.get("function", t)["name"] for t in tools]
    if not tools:
        if choice in (None, "auto", "none") or (isinstance(choice, Mapping) and choice.get("type") in ("auto", "none")):
            return "none"
        raise APIError(400, f"tool_choice {choice!r} needs tools, and the request has none.", param="tool_choice",
                       code="invalid_value")
    try:
        return normalize_tool_choice(choice, names)
    except UnknownToolError as exc:
        raise APIError(400, str(exc), param="tool_choice", code="invalid_tool_choice") from None


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


UPSTREAM_RETRY_AFTER_SECONDS = 5
"""The ``Retry-After`` of a 503 while the model server behind this API is down or restarting."""


def _upstream_error(exc: Exception) -> APIError | None:
    """The 5xx for a failure of the model server behind this API, or None when ``exc`` is no such failure.

    Its message names no internal address (the exception's, with the URL, goes to this server's log,
    once); 4xx only where the request itself is at fault (the upstream refused its content).
    """
    if not isinstance(exc, ServerError):
        return None
    if not getattr(exc, "_hammer_logged", False):
        logging.getLogger("hammer_plugins.openai_server").error("the model server failed a request: %s", exc)
        try:
            exc._hammer_logged = True  # type: ignore[attr-defined]  # app.py may map the same one twice
        except AttributeError:
            pass
    operator = "if it persists, this server's operator should read its log"
    status = exc.status_code or 0
    if isinstance(exc, ServerTimeoutError):
        return APIError(504, "The model server behind this API sent nothing in time, so the request was given up. "
                             f"Fix: retry later, or with a shorter conversation or a lower max_tokens; {operator}.",
                        type="server_error", code="upstream_timeout")
    if isinstance(exc, ServerStreamError):
        return APIError(502, "The model server behind this API broke off the answer (it may have crashed; a model "
                             f"server this API started is restarted). Fix: retry the request; {operator}.",
                        type="server_error", code="upstream_connection_lost")
    if isinstance(exc, ServerAuthenticationError):
        return APIError(502, "The model server behind this API refused this API's credentials: a configuration "
                             "error of this server, not of your request. Fix: the operator sets "
                             "$HAMMER_UPSTREAM_API_KEY to the model server's key.",
                        type="server_error", code="upstream_auth_failed")
    if isinstance(exc, ServerUnavailableError) or status == 429:
        return APIError(503, "The model server behind this API is not available right now (starting, restarting "
                             f"or overloaded). Fix: retry in a few seconds; {operator}.", type="server_error",
                        code="upstream_unavailable", headers={"Retry-After": str(UPSTREAM_RETRY_AFTER_SECONDS)})
    if isinstance(exc, (ServerModelNotFoundError, GrammarNotSupportedError)) or status == 404:
        return APIError(502, f"The model server behind this API is misconfigured ({type(exc).__name__}). Fix: "
                             "this server's operator should read its log.", type="server_error",
                        code="upstream_misconfigured")
    if isinstance(exc, ServerHTTPError) and 400 <= status < 500:
        return APIError(400, f"The model server behind this API refused the request (HTTP {status}: "
                             f"{exc.detail[:500]}).", code="upstream_rejected")
    return APIError(502, f"The model server behind this API failed on the request{f' (HTTP {status})' if status else ''}"
                         f". Fix: retry; {operator}.", type="server_error", code="upstream_error")


def engine_error(exc: Exception) -> APIError:
    """The HTTP error for an exception the engine raised on a request (500 for the unexpected).

    The client's own mistakes are 4xx; a failure of the model server behind this API (down, restarting,
    refusing this API's key, answering 5xx, too slow) is 502, 503 (with ``Retry-After``) or 504 with
    ``type: "server_error"``, and names no internal address.

    Example:
        >>> from hammer_plugins.values.errors import ServerUnavailableError
        >>> error = engine_error(ServerUnavailableError("could not connect to http://127.0.0.1:9/v1"))
        >>> error.status, error.type, "127.0.0.1" in error.message, error.headers
        (503, 'server_error', False, {'Retry-After': '5'})
    """
    if isinstance(exc, APIError):
        return exc
    upstream = _upstream_error(exc)
    if upstream is not None:
        return upstream
    if isinstance(exc, ContextWindowExceededError):
        # Anthropic's clients read its own words for this case (Claude Code compacts on them).
        return APIError(400, f"This model's maximum context length is {exc.context_window} tokens. However, your "
                             f"messages resulted in {exc.prompt_tokens} tokens and {exc.max_new_tokens} more are "
                             "reserved for the completion. Please reduce the length of the messages or tools, or "
                             "max_tokens.", param="messages", code="context_length_exceeded",
                        anthropic_message=f"prompt is too long: {exc.prompt_tokens} tokens > {exc.context_window} maximum")
    if isinstance(exc, UnknownToolError):
        return APIError(400, str(exc), param="tool_choice", code="invalid_tool_choice")
    if isinstance(exc, SchemaConversionError):
        return APIError(400, f"Invalid tool schema: {exc}", param="tools", code="invalid_tool_schema")
    if isinstance(exc, (HammerError, ValueError, TypeError)):
        return APIError(400, str(exc), code="invalid_request")
    return APIError(500, f"The server failed to answer the request ({type(exc).__name__}); see the server's log.",
                    type="server_error", code="internal_error")


# The response side moved to chat_completions.py (an encoder of the engine's stream); its names stay
# importable from here, where the server and its tests found them.
from hammer_plugins.openai_server.chat_completions import (  # noqa: E402
    DONE,
    ChunkWriter,
    argument_fragments,
    arguments_json,
    completion,
    new_completion_id,
    sse,
    usage_of,
)

__all__ = ["DONE", "APIError", "ChunkWriter", "EngineCall", "argument_fragments", "arguments_json", "completion",
           "engine_error", "new_completion_id", "parse_json", "parse_request", "sse", "usage_of"]
