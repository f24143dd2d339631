"""Ollama's native API requests (``POST /api/chat``, ``/api/generate``, ``/api/show``) read into engine calls.

A body is read into its own type (:class:`OllamaChatRequest`, :class:`OllamaGenerateRequest`: a wrong value
is named as Ollama names it, ``options.num_predict``, ``messages[2].tool_calls[0].function.arguments``).
``messages`` are Ollama's: ``tool_calls`` carry arguments as an object (a JSON string is read too), and a
``tool`` turn names its call by ``tool_name`` (Ollama's own clients), ``tool_call_id`` (ChatOllama) or
nothing (LlamaIndex): it answers the first call of the last assistant turn that no result answered yet,
the first with that name when it gives one. ``format`` (``"json"`` or a JSON Schema) is structured output.
``options`` maps to the engine's sampling settings (``num_predict`` is ``max_tokens``; ``-1`` and ``-2``,
Ollama's "no limit" and "fill the context", are capped at the server's ``--max-tokens``, 512 by default: a
client without a key cannot ask for the whole context); ``num_ctx``, ``keep_alive``, ``think`` and every option a llama.cpp server
tunes itself (``num_gpu``, ``mirostat``, ...) are accepted and ignored: the context is the server's own.

Ollama has no ``tool_choice``: with tools the door lets Hammer choose (``auto``), and Hammer's ``[]`` is
answered in prose by a tool-free pass, as the chat apps that speak Ollama show whatever comes back. Hammer's
own fields (``tool_choice``, ``mask_names``, ``on_refusal``, ``constrained``) may be sent beside Ollama's.

Example:
    >>> chat, call = read_ollama({"model": "hammer:latest", "messages": [{"role": "user", "content": "hi"}],
    ...                           "options": {"num_predict": 32}}, "hammer", OllamaChatRequest)
    >>> chat.stream, call.max_tokens, chat.model
    (True, 32, 'hammer:latest')
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

from hammer_plugins.engine.request import COUNT_MAX, SEED_MAX, TOP_K_MAX, EngineRequest
from hammer_plugins.http_api.errors import APIError, api_errors_only
from hammer_plugins.http_api.hammer_fields import HammerFields, PinnedTools
from hammer_plugins.http_api.json_body import load_json
from hammer_plugins.http_api.request_checks import (
    FieldNames,
    check_model,
    checked_stop,
    engine_request,
    function_tool_names,
    function_tools,
    located,
    read_request,
)
from hammer_plugins.values.calls import ToolCall, call_id_for, pending_calls_of
from hammer_plugins.values.errors import RequestError
from hammer_plugins.values.messages import Message

LATEST = ":latest"
"""Ollama's default tag: ``hammer`` and ``hammer:latest`` name the same model."""


class OllamaOptions(BaseModel):
    """The ``options`` this door reads; the others Ollama has (``num_ctx``, ``num_gpu``, ``mirostat``, ...) are
    accepted and ignored."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=0, le=TOP_K_MAX)
    num_predict: int | None = Field(None, ge=-2, le=COUNT_MAX)
    seed: int | None = Field(None, ge=0, le=SEED_MAX)  # outside it, C wrapped 2**64 + 5 to seed 5
    stop: str | list[str] | None = None
    repeat_penalty: float | None = Field(None, gt=0)
    # Hammer's own, here too: Ollama's Python client sends no field of its own beside its arguments, but passes
    # options through (client.chat(..., options={"pinned_tools": [...]})).
    pinned_tools: PinnedTools = None


class OllamaRequest(HammerFields):
    """What ``/api/chat`` and ``/api/generate`` share: the model, ``format``, ``options``, Hammer's own fields."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    model: str
    format: str | dict[str, Any] | None = None
    options: OllamaOptions | None = None
    stream: bool = Field(True, strict=True)  # Ollama streams unless told not to
    keep_alive: int | float | str | None = None  # accepted: the model stays loaded while the server runs
    think: bool | str | None = None  # accepted: Hammer writes no thinking
    images: list[Any] | None = None

    _names: FieldNames | None = PrivateAttr(None)

    def has_turn(self) -> bool:
        """Whether there is anything to answer (else Ollama's "load")."""
        raise NotImplementedError

    def to_engine_request(self) -> EngineRequest:
        raise NotImplementedError

    def field_names(self) -> FieldNames:
        assert self._names is not None, "to_engine_request() names the fields"
        return self._names

    def api_error(self, exc: RequestError, request: EngineRequest) -> APIError:
        return located(exc, self.field_names(), in_message=True)


class OllamaChatRequest(OllamaRequest):
    """The fields of ``POST /api/chat`` this door reads, plus Hammer's own."""

    messages: list[Any] | None = None
    tools: list[Any] | None = None
    tool_choice: str | dict[str, Any] | None = None  # Hammer's own: Ollama has none

    def has_turn(self) -> bool:
        return bool(self.messages)

    def to_engine_request(self) -> EngineRequest:
        """The engine's request: Ollama's messages (results matched to their calls), its function tools, with
        ``auto`` unless Hammer's own ``tool_choice`` is sent."""
        messages = _messages(self.messages or [])
        tools = function_tools(self.tools or [])
        in_options = self.pinned_tools is None and self.options is not None and self.options.pinned_tools is not None
        self._names = FieldNames(messages=[f"messages[{i}]" for i in range(len(messages))], message_id="tool_name",
                                 tools=function_tool_names(len(tools)), tool_schema="parameters", tool_name="name",
                                 response_format="format",
                                 pinned_tools="options.pinned_tools" if in_options else "pinned_tools")
        return EngineRequest(messages=messages, tools=tools, tool_choice=self.tool_choice, **_options(self))


class OllamaGenerateRequest(OllamaRequest):
    """The fields of ``POST /api/generate`` this door reads, plus Hammer's own."""

    prompt: str | None = None
    system: str | None = None
    suffix: str | None = None
    raw: bool | None = Field(None, strict=True)
    template: str | None = None

    def has_turn(self) -> bool:
        _no_images(self.images, "images")
        _require(not self.raw, "raw prompts are not supported: Hammer is served with its own prompt.", "raw")
        _require(not self.suffix, "fill-in-the-middle is not supported by this model.", "suffix")
        _require(not self.template, "a template of your own is not supported: Hammer is served with its own "
                                    "prompt.", "template")
        return bool(self.prompt)

    def to_engine_request(self) -> EngineRequest:
        """The engine's request: the prompt as a user turn after ``system``, no tools."""
        messages = ([Message.system(self.system)] if self.system else []) + [Message.user(self.prompt or "")]
        self._names = FieldNames(messages=["system", "prompt"][-len(messages):], message_id="", tools=[],
                                 tool_schema="", tool_name="", response_format="format", conversation="prompt")
        return EngineRequest(messages=messages, tool_choice="none", **_options(self))


def served_names(served: str) -> list[str]:
    """The names ``model`` may take for the model served as ``served`` (``:latest`` is Ollama's default tag).

    Example:
        >>> served_names("hammer")
        ['hammer', 'hammer:latest']
    """
    base = served.removesuffix(LATEST)
    return [base, base + LATEST]


def _require(condition: bool, message: str, param: str) -> None:
    if not condition:
        raise APIError(400, f"{param}: {message}", param=param, code="invalid_value")


def _no_images(images: Any, param: str) -> None:
    _require(not images, "this model reads text only: images are not supported.", param)


def _calls(raw: Any, param: str, turn: int) -> list[ToolCall]:
    """An assistant turn's ``tool_calls``; a call without an id (Ollama's own clients) gets one by its place."""
    _require(isinstance(raw, list), "must be a list.", param)
    calls = []
    for j, call in enumerate(raw):
        where = f"{param}[{j}]"
        function = call.get("function") if isinstance(call, Mapping) else None
        _require(isinstance(function, Mapping) and isinstance(function.get("name"), str), "needs function.name.", where)
        arguments = function.get("arguments")
        if isinstance(arguments, str):  # Ollama sends an object; some clients send OpenAI's JSON string
            arguments = load_json(arguments, f"{where}.function.arguments", param=f"{where}.function.arguments",
                                  code="invalid_value", fix="arguments must be a JSON object")
        arguments = {} if arguments is None else arguments
        _require(isinstance(arguments, Mapping), "must be an object.", f"{where}.function.arguments")
        call_id = call.get("id")
        _require(call_id is None or isinstance(call_id, str), "must be a string.", f"{where}.id")
        calls.append(ToolCall(id=call_id or call_id_for(turn, j), name=function["name"], arguments=dict(arguments)))
    return calls


class _Pending:
    """The calls of the last assistant turn that no result answered yet, found by id, by name or by place in
    constant time each (a history of thousands of results is walked once)."""

    def __init__(self, calls: list[ToolCall]) -> None:
        self.open = {call.id: call for call in calls}
        self.order = deque(calls)
        self.named: dict[str, deque[ToolCall]] = defaultdict(deque)
        for call in calls:
            self.named[call.name].append(call)

    def _first(self, queue: deque[ToolCall]) -> ToolCall | None:
        while queue and queue[0].id not in self.open:  # answered already: dropped once, never walked again
            queue.popleft()
        return queue[0] if queue else None

    def take(self, raw: Mapping[str, Any], param: str) -> str:
        """The id of the call a ``tool`` turn answers (see the module's docstring), no longer open; an id no call
        has when it answers none (the engine's rules refuse it, naming this turn)."""
        by_id, by_name = raw.get("tool_call_id"), raw.get("tool_name", raw.get("name"))
        _require(by_id is None or isinstance(by_id, str), "must be a string.", f"{param}.tool_call_id")
        _require(by_name is None or isinstance(by_name, str), "must be a string.", f"{param}.tool_name")
        call = self.open.get(by_id) if by_id is not None else None
        if call is None and (by_id is None or by_name is not None):  # an id this door did not give: by name
            call = self._first(self.named[by_name] if by_name is not None else self.order)
        if call is None:
            return by_id or f"(no open call{f' of {by_name}' if by_name else ''})"
        del self.open[call.id]
        return call.id


def _messages(raw_messages: list[Any]) -> list[Message]:
    messages: list[Message] = []
    pending = _Pending([])
    for index, raw in enumerate(raw_messages):
        param = f"messages[{index}]"
        _require(isinstance(raw, Mapping), "must be an object.", param)
        role = raw.get("role")
        _require(role in ("system", "user", "assistant", "tool"), "role must be system, user, assistant or tool.",
                 f"{param}.role")
        content = raw.get("content")
        _require(content is None or isinstance(content, str), "must be a string (the message's text).",
                 f"{param}.content")
        _no_images(raw.get("images"), f"{param}.images")
        if role == "assistant":
            calls = _calls(raw.get("tool_calls") or [], f"{param}.tool_calls", index)
            pending = _Pending(calls)
            # An ask's held-back calls, sent back on the assistant message: this turn completes them.
            messages.append(Message(role="assistant", content=content or "", tool_calls=calls,
                                    pending_calls=pending_calls_of(raw)))
        elif role == "tool":
            messages.append(Message.tool(content or "", tool_call_id=pending.take(raw, param)))
        else:
            messages.append(Message(role=role, content=content or ""))
    return messages


def _response_format(spec: str | dict[str, Any] | None) -> dict[str, Any] | None:
    """``format``: ``"json"`` is any JSON object, a JSON Schema is that schema."""
    if spec is None or spec == "":
        return None
    if spec == "json":
        return {"type": "json_object"}
    _require(isinstance(spec, dict), "must be \"json\" or a JSON Schema object.", "format")
    return {"type": "json_schema", "json_schema": {"name": "format", "schema": spec}}


def _options(request: OllamaRequest) -> dict[str, Any]:
    """Ollama's ``options`` and ``format`` as the engine request's fields."""
    options = request.options or OllamaOptions()
    predict = options.num_predict
    return {
        "max_tokens": predict if predict is not None and predict > 0 else None,  # -1, -2: capped at --max-tokens
        "temperature": options.temperature, "top_p": options.top_p, "top_k": options.top_k, "seed": options.seed,
        "stop": checked_stop(options.stop, "options.stop"), "repeat_penalty": options.repeat_penalty,
        "response_format": _response_format(request.format),
        **request.hammer_options(on_refusal="answer", pinned_tools=options.pinned_tools),
    }


@api_errors_only
def read_ollama(body: Any, served: str, kind: type[OllamaRequest]) -> tuple[OllamaRequest, EngineRequest | None]:
    """A ``/api/chat`` or ``/api/generate`` body (``kind``) as the door's request and the engine's; the engine's is
    None for a body with nothing to answer, which Ollama answers with ``done_reason: "load"`` (raises
    :class:`APIError` only)."""
    request = read_request(body, kind, None)
    check_model(request.model, served_names(served))
    return request, engine_request(request) if request.has_turn() else None
