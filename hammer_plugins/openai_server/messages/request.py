"""The Anthropic Messages API (``POST /v1/messages``, ``/v1/messages/count_tokens``) over the same engine call.

A request is read into its own type (:class:`MessagesRequest`: a wrong value is named as Anthropic's API
names it, ``stop_sequences``, ``messages[2].content[0].tool_use_id``): ``system`` (a string or text
blocks, also a ``system`` turn inside ``messages``, as Claude Code sends) becomes system messages,
``tool_use`` blocks assistant tool calls, ``tool_result`` blocks tool messages (``is_error`` results are
marked as errors for the model). The checks every API makes are
:mod:`~hammer_plugins.openai_server.call`'s. The answer is
:class:`~hammer_plugins.openai_server.messages.writer.MessagesWriter`'s; errors are Anthropic's
``{"type": "error", "error": {"type", "message"}}``.

Rules for what a small local model cannot do (docs/server.md, "The Messages API"): server tools
(``web_search_*``, ``bash_*``, ``text_editor_*``, ``computer_*``, ``code_execution_*``: any tool with a
``type`` other than ``custom``) are not offered to the model, and a ``tool_choice`` naming one is a 400;
images and documents are a 400; ``thinking``, ``cache_control``, ``context_management``, ``metadata``,
``output_config`` and every unknown field are accepted and ignored; ``max_tokens`` above the context
is capped to the room the prompt leaves.

Example:
    >>> call = parse_messages_request({"model": "hammer", "max_tokens": 64, "system": "Be brief.",
    ...                                "messages": [{"role": "user", "content": "hi"}]}, "hammer")
    >>> [m.role for m in call.messages], call.options["max_tokens"]
    (['system', 'user'], 64)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hammer_plugins.openai_server.call import (
    EngineCall,
    check_served,
    checked_stop,
    checked_tool_choice,
    checked_tools,
    engine_call,
    read_request,
)
from hammer_plugins.openai_server.errors import APIError, api_errors_only
from hammer_plugins.values.calls import ToolCall
from hammer_plugins.values.messages import Message

TOOL_ERROR_PREFIX = "Error: "
"""Put before the text of a ``tool_result`` with ``is_error: true``, so the model reads that the call failed."""


class MessagesRequest(BaseModel):
    """The fields of ``POST /v1/messages`` this server reads (others are accepted and ignored), plus Hammer's own."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    model: str
    max_tokens: int | None = Field(None, ge=1, strict=True)  # required, except by count_tokens: checked in the parse
    messages: Any = None
    system: Any = None
    tools: Any = None
    tool_choice: Any = None
    temperature: float | None = Field(None, ge=0, le=1)
    top_p: float | None = Field(None, gt=0, le=1)
    top_k: int | None = Field(None, ge=0)
    stop_sequences: list[str] | None = None
    stream: Any = False
    # Hammer's own options (the SDK's extra_body=...).
    seed: int | None = None
    mask_names: bool | None = Field(None, strict=True)
    on_refusal: Literal["message", "answer"] | None = None
    constrained: bool | None = Field(None, strict=True)
    repeat_penalty: float | None = Field(None, gt=0)


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


def _text_of(content: Any, param: str) -> str:
    if isinstance(content, str):
        return content
    _require(isinstance(content, list), "must be a string or a list of content blocks.", param)
    texts = []
    for j, block in enumerate(content):
        _require(isinstance(block, Mapping), "must be an object.", f"{param}[{j}]")
        text = _block_text(block, f"{param}[{j}]")
        if text is not None:
            texts.append(text)
    return "\n\n".join(texts)


def _turn(raw: Mapping[str, Any], index: int) -> list[tuple[Message, str]]:
    """One Anthropic message as the engine's messages it holds, each with its place in the request."""
    param = f"messages[{index}]"
    role = raw.get("role")
    _require(role in ("user", "assistant", "system"), "role must be user or assistant.", f"{param}.role")
    content = raw.get("content")
    if isinstance(content, str) or role == "system":
        return [(Message(role=role, content=_text_of(content, f"{param}.content")), param)]
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
            text = _text_of(block.get("content") if block.get("content") is not None else "", f"{where}.content")
            if block.get("is_error") is True:
                text = TOOL_ERROR_PREFIX + text
            results.append((Message.tool(text, tool_call_id=block["tool_use_id"]), where))
        else:
            text = _block_text(block, where)
            if text is not None:
                texts.append(text)
    if role == "assistant":
        return [(Message.assistant("\n\n".join(texts), calls), param)]
    return results + ([(Message.user("\n\n".join(texts)), param)] if texts or not results else [])


def _tools(raw: Any) -> list[dict[str, Any]]:
    if raw is None:
        return []
    _require(isinstance(raw, list), "must be a list.", "tools")
    tools = []
    for i, tool in enumerate(raw):
        _require(isinstance(tool, Mapping), "must be an object.", f"tools[{i}]")
        if tool.get("type") not in (None, "custom"):
            continue  # a server tool (web search, bash, text editor, ...): not offered to the model
        _require(isinstance(tool.get("name"), str), "needs a name.", f"tools[{i}].name")
        function = {"name": tool["name"], "description": tool.get("description"),
                    "parameters": tool.get("input_schema"), "strict": tool.get("strict")}
        tools.append({"type": "function", "function": {k: v for k, v in function.items() if v is not None}})
    return tools


def _tool_choice(choice: Any, tools: list[dict[str, Any]]) -> tuple[Any, bool | None]:
    """Anthropic's tool_choice as Chat Completions' (and whether parallel calls are off)."""
    if choice is None:
        return None, None
    _require(isinstance(choice, Mapping), "must be an object such as {\"type\": \"auto\"}.", "tool_choice")
    parallel = False if choice.get("disable_parallel_tool_use") is True else None
    kind = choice.get("type")
    if kind == "tool":
        _require(isinstance(choice.get("name"), str), "name must be a string.", "tool_choice.name")
        names = {t["function"]["name"] for t in tools}
        if choice.get("name") not in names:
            raise APIError(400, f"tool_choice names the tool {choice.get('name')!r}, which is not among the tools this "
                                f"model is offered {sorted(names)[:20]} (server tools are not run here).",
                           param="tool_choice.name", code="invalid_tool_choice")
        return {"type": "function", "function": {"name": choice["name"]}}, parallel
    _require(kind in ("auto", "any", "none"), "type must be auto, any, tool or none.", "tool_choice.type")
    return {"auto": "auto", "any": "required", "none": "none"}[kind], parallel


@api_errors_only
def parse_messages_request(body: Any, served_model: str | list[str], *, count_only: bool = False) -> EngineCall:
    """Validate a ``/v1/messages`` body (or a ``count_tokens`` one) and map it to an engine call (raises
    :class:`APIError` only)."""
    request = read_request(body, MessagesRequest, served_model)
    if not count_only:
        _require(request.max_tokens is not None, "max_tokens is required: a positive integer.", "max_tokens")
    _require(isinstance(request.messages, list) and bool(request.messages), "must be a non-empty list.", "messages")
    check_served(request.model, served_model)
    turns: list[tuple[Message, str]] = []
    if request.system is not None:
        turns.append((Message.system(_text_of(request.system, "system")), "system"))
    for index, raw in enumerate(request.messages):
        _require(isinstance(raw, Mapping), "must be an object.", f"messages[{index}]")
        turns += _turn(raw, index)
    tools = _tools(request.tools)
    tool_choice, parallel = _tool_choice(request.tool_choice, tools)
    if not tools and tool_choice == "required":
        raise APIError(400, "tool_choice 'any' needs tools, and the request has none this model is offered.",
                       param="tool_choice", code="invalid_value")
    tools = checked_tools(tools)
    options: dict[str, Any] = {
        "max_tokens": None if count_only else request.max_tokens, "temperature": request.temperature,
        "top_p": request.top_p, "top_k": request.top_k, "seed": request.seed,
        "stop": checked_stop(request.stop_sequences, "stop_sequences"), "repeat_penalty": request.repeat_penalty,
        "parallel_tool_calls": False if parallel is False else None, "mask_names": request.mask_names,
        "constrained": request.constrained, "response_format": None,
        # Agent clients (Claude Code) show whatever comes back: Hammer's [] is answered in prose by a tool-free
        # pass, as Hammer's own client does, unless the request asks for the refusal text.
        "on_refusal": request.on_refusal or "answer",
    }
    messages = [message for message, _ in turns]

    def origin(index: int) -> tuple[str, str]:
        place = turns[index][1]
        return (f"{place}.tool_use_id", f"{place}: unexpected `tool_use_id` found in `tool_result` blocks: "
                                        f"{messages[index].tool_call_id}. Each `tool_result` block must have a "
                                        "corresponding `tool_use` block in an earlier assistant message.")

    return engine_call(messages, tools, checked_tool_choice(tool_choice if tools else None, tools), options,
                       stream=request.stream is True, origin=origin)
