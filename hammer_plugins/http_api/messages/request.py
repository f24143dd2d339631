"""The Anthropic Messages API (``POST /v1/messages``, ``/v1/messages/count_tokens``) over the same engine call.

A request is read into its own type (:class:`MessagesRequest`: a wrong value is named as Anthropic's API
names it, ``stop_sequences``, ``messages[2].content[0].tool_use_id``): ``system`` (a string or text
blocks, also a ``system`` turn inside ``messages``, as Claude Code sends) becomes system messages,
``tool_use`` blocks assistant tool calls, ``tool_result`` blocks tool messages (``is_error`` results are
marked as errors for the model). The rules every request is held to are the engine's
(:mod:`~hammer_plugins.engine.rules`), their errors named here in Anthropic's fields and words. The answer is
:class:`~hammer_plugins.http_api.messages.writer.MessagesWriter`'s; errors are Anthropic's
``{"type": "error", "error": {"type", "message"}}``.

Rules for what a small local model cannot do (docs/server.md, "The Messages API"): server tools
(``web_search_*``, ``bash_*``, ``text_editor_*``, ``computer_*``, ``code_execution_*``: any tool with a
``type`` other than ``custom``) are not offered to the model, and a ``tool_choice`` naming one is a 400;
a ``defer_loading`` tool is offered once a tool result references it (a ``tool_reference`` block, which the
model reads as "Tool loaded: <name>"), as Anthropic's tool search and Claude Code use it; images and documents
are a 400; ``thinking``, ``cache_control``, ``context_management``, ``metadata``,
``output_config`` and every unknown field are accepted and ignored; ``max_tokens`` above the context
is capped to the room the prompt leaves.

Example:
    >>> _, call = read_messages({"model": "hammer", "max_tokens": 64, "system": "Be brief.",
    ...                          "messages": [{"role": "user", "content": "hi"}]}, ["hammer"])
    >>> [m.role for m in call.messages], call.max_tokens
    (['system', 'user'], 64)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ConfigDict, Field, PrivateAttr

from hammer_plugins.engine.request import COUNT_MAX, SEED_MAX, TOP_K_MAX, EngineRequest
from hammer_plugins.engine.rules import shown_id
from hammer_plugins.http_api.errors import APIError, api_errors_only
from hammer_plugins.http_api.hammer_fields import HammerFields
from hammer_plugins.http_api.request_checks import FieldNames, checked_stop, engine_request, located, read_request
from hammer_plugins.values.calls import ToolCall, pending_calls_of
from hammer_plugins.values.errors import RequestError
from hammer_plugins.values.messages import Message

TOOL_ERROR_PREFIX = "Error: "
"""Put before the text of a ``tool_result`` with ``is_error: true``, so the model reads that the call failed."""


class MessagesRequest(HammerFields):
    """The fields of ``POST /v1/messages`` this server reads (others are accepted and ignored), plus Hammer's own."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    model: str
    max_tokens: int | None = Field(None, ge=1, le=COUNT_MAX, strict=True)  # required, except by count_tokens
    messages: Any = None
    system: Any = None
    tools: Any = None
    tool_choice: Any = None
    temperature: float | None = Field(None, ge=0, le=1)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=0, le=TOP_K_MAX)
    stop_sequences: list[str] | None = None
    stream: Any = False
    # Hammer's own options (the SDK's extra_body=...).
    seed: int | None = Field(None, ge=0, le=SEED_MAX)  # outside it, C wrapped 2**64 + 5 to seed 5
    repeat_penalty: float | None = Field(None, gt=0)
    _count_only: bool = PrivateAttr(False)  # count_tokens: max_tokens is not required
    _names: FieldNames | None = PrivateAttr(None)

    def to_engine_request(self) -> EngineRequest:
        """The engine's request: ``system`` and the turns as messages (``tool_use`` blocks as calls, ``tool_result``
        blocks as results), custom tools as tools, ``tool_choice`` as the engine's."""
        if not self._count_only:
            _require(self.max_tokens is not None, "max_tokens is required: a positive integer.", "max_tokens")
        _require(isinstance(self.messages, list) and bool(self.messages), "must be a non-empty list.", "messages")
        turns: list[tuple[Message, str]] = []
        loaded: set[str] = set()  # the deferred tools a tool search's result referenced
        if self.system is not None:
            turns.append((Message.system(_text_of(self.system, "system")), "system"))
        for index, raw in enumerate(self.messages):
            _require(isinstance(raw, Mapping), "must be an object.", f"messages[{index}]")
            turns += _turn(raw, index, loaded)
        tools, places = _tools(self.tools, loaded)
        tool_choice, parallel = _tool_choice(self.tool_choice)
        self._names = FieldNames(messages=[place for _, place in turns], message_id="tool_use_id", tools=places,
                                 tool_schema="input_schema", tool_name="name")
        return EngineRequest(
            messages=[message for message, _ in turns], tools=tools, tool_choice=tool_choice,
            max_tokens=None if self._count_only else self.max_tokens, temperature=self.temperature, top_p=self.top_p,
            top_k=self.top_k, seed=self.seed, stop=checked_stop(self.stop_sequences, "stop_sequences"),
            repeat_penalty=self.repeat_penalty, parallel_tool_calls=False if parallel is False else None,
            # Agent clients (Claude Code) show whatever comes back: Hammer's [] is answered in prose by a tool-free
            # pass, as Hammer's own client does, unless the request asks for the refusal text.
            **self.hammer_options(on_refusal="answer"))

    def field_names(self) -> FieldNames:
        assert self._names is not None, "to_engine_request() names the fields"
        return self._names

    def api_error(self, exc: RequestError, request: EngineRequest) -> APIError:
        """``exc`` in Anthropic's field names, a lone result in its own words."""
        names = self.field_names()
        if exc.rule == "unanswered_result" and len(exc.loc) > 1 and isinstance(exc.loc[1], int):
            place, answered = names.param(exc.loc), request.messages[exc.loc[1]].tool_call_id
            return located(exc, names, f"{place}: unexpected `tool_use_id` found in `tool_result` blocks: "
                                       f"{shown_id(answered)}. Each "
                                       "`tool_result` block must have a corresponding `tool_use` block in an earlier "
                                       "assistant message.")
        return located(exc, names, in_message=True)


def _require(condition: bool, message: str, param: str) -> None:
    if not condition:
        raise APIError(400, f"{param}: {message}", param=param, code="invalid_value")


def _block_text(block: Mapping[str, Any], param: str) -> str | None:
    """A text block's text; None for blocks the model does not read (thinking); a 400 for images and documents."""
    kind = block.get("type")
    if kind == "text":
        _require(isinstance(block.get("text"), str), "text must be a string.", f"{param}.text")
        return block["text"]
    if kind in ("thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result",
                "code_execution_tool_result", "container_upload"):
        return None
    raise APIError(400, f"{param}: content blocks of type {kind!r} are not supported by this model (text, tool_use and "
                        "tool_result only).", param=f"{param}.type", code="unsupported_value")


def _reference_name(block: Mapping[str, Any], param: str) -> str:
    _require(isinstance(block.get("tool_name"), str) and bool(block["tool_name"]), "tool_name must be a tool's name.",
             f"{param}.tool_name")
    return block["tool_name"]


def _text_of(content: Any, param: str, loaded: set[str] | None = None) -> str:
    """The text of ``content``; in a tool result (``loaded`` given), a ``tool_reference`` block's name is added
    to ``loaded`` and read as "Tool loaded: <name>"."""
    if isinstance(content, str):
        return content
    _require(isinstance(content, list), "must be a string or a list of content blocks.", param)
    texts = []
    for j, block in enumerate(content):
        _require(isinstance(block, Mapping), "must be an object.", f"{param}[{j}]")
        if loaded is not None and block.get("type") == "tool_reference":  # a tool search's answer
            name = _reference_name(block, f"{param}[{j}]")
            loaded.add(name)
            texts.append(f"Tool loaded: {name}")
            continue
        text = _block_text(block, f"{param}[{j}]")
        if text is not None:
            texts.append(text)
    return "\n\n".join(texts)


def _turn(raw: Mapping[str, Any], index: int, loaded: set[str]) -> list[tuple[Message, str]]:
    """One Anthropic message as the engine's messages it holds, each with its place in the request (the tools its
    tool results load are added to ``loaded``)."""
    param = f"messages[{index}]"
    role = raw.get("role")
    _require(role in ("user", "assistant", "system"), "role must be user or assistant.", f"{param}.role")
    content = raw.get("content")
    # An ask's held-back calls, sent back on the assistant message (hammer_pending_calls): this turn completes them.
    pending = pending_calls_of(raw) if role == "assistant" else []
    if isinstance(content, str) or role == "system":
        return [(Message(role=role, content=_text_of(content, f"{param}.content"), pending_calls=pending), param)]
    _require(isinstance(content, list), "content must be a string or a list of content blocks.", f"{param}.content")
    texts: list[str] = []
    calls: list[ToolCall] = []
    results: list[tuple[Message, str]] = []
    for j, block in enumerate(content):
        where = f"{param}.content[{j}]"
        _require(isinstance(block, Mapping), "must be an object.", where)
        kind = block.get("type")
        if kind == "tool_use" and role == "assistant":
            _require(isinstance(block.get("id"), str) and isinstance(block.get("name"), str), "needs id and name.", where)
            arguments = block.get("input") if block.get("input") is not None else {}
            _require(isinstance(arguments, Mapping), "input must be an object.", f"{where}.input")
            calls.append(ToolCall(id=block["id"], name=block["name"], arguments=dict(arguments)))
        elif kind == "tool_result" and role == "user":
            _require(isinstance(block.get("tool_use_id"), str), "needs tool_use_id.", f"{where}.tool_use_id")
            text = _text_of(block.get("content") if block.get("content") is not None else "", f"{where}.content",
                            loaded)
            if block.get("is_error") is True:
                text = TOOL_ERROR_PREFIX + text
            results.append((Message.tool(text, tool_call_id=block["tool_use_id"]), where))
        else:
            text = _block_text(block, where)
            if text is not None:
                texts.append(text)
    if role == "assistant":
        return [(Message(role="assistant", content="\n\n".join(texts), tool_calls=calls, pending_calls=pending), param)]
    return results + ([(Message.user("\n\n".join(texts)), param)] if texts or not results else [])


def _tools(raw: Any, referenced: set[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """The custom tools as OpenAI function tools, and where each came from: server tools are left out, and so is a
    ``defer_loading`` tool until a tool result references it (``referenced``), as Anthropic's tool search does."""
    if raw is None:
        return [], []
    _require(isinstance(raw, list), "must be a list.", "tools")
    tools = []
    places = []
    for i, tool in enumerate(raw):
        _require(isinstance(tool, Mapping), "must be an object.", f"tools[{i}]")
        if tool.get("type") not in (None, "custom"):
            continue  # a server tool (web search, bash, text editor, ...): not offered to the model
        _require(isinstance(tool.get("name"), str), "needs a name.", f"tools[{i}].name")
        if tool.get("defer_loading") is True and tool["name"] not in referenced:
            continue
        function = {"name": tool["name"], "description": tool.get("description"),
                    "parameters": tool.get("input_schema"), "strict": tool.get("strict")}
        tools.append({"type": "function", "function": {k: v for k, v in function.items() if v is not None}})
        places.append(f"tools[{i}]")
    return tools, places


def _tool_choice(choice: Any) -> tuple[Any, bool | None]:
    """Anthropic's tool_choice as Chat Completions' (and whether parallel calls are off)."""
    if choice is None:
        return None, None
    _require(isinstance(choice, Mapping), "must be an object such as {\"type\": \"auto\"}.", "tool_choice")
    parallel = False if choice.get("disable_parallel_tool_use") is True else None
    kind = choice.get("type")
    if kind == "tool":
        _require(isinstance(choice.get("name"), str), "name must be a string.", "tool_choice.name")
        return {"type": "function", "function": {"name": choice["name"]}}, parallel
    _require(kind in ("auto", "any", "none"), "type must be auto, any, tool or none.", "tool_choice.type")
    return {"auto": "auto", "any": "required", "none": "none"}[kind], parallel


@api_errors_only
def read_messages(body: Any, served: list[str], *, count_only: bool = False) -> tuple[MessagesRequest, EngineRequest]:
    """A ``/v1/messages`` body (or a ``count_tokens`` one) as the door's request and the engine's (raises
    :class:`APIError` only)."""
    request = read_request(body, MessagesRequest, served)
    request._count_only = count_only
    return request, engine_request(request)
