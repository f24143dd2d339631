"""The Anthropic Messages API (``POST /v1/messages``, ``/v1/messages/count_tokens``) over the same engine call.

As with the Responses API, a request is translated into the Chat Completions body it means and
validated by :func:`~..chat_completions.request.parse_request` (one set of rules and limits for every API): ``system``
(a string or text blocks, also a ``system`` turn inside ``messages``, as Claude Code sends) becomes
system messages, ``tool_use`` blocks assistant tool calls, ``tool_result`` blocks tool messages
(``is_error`` results are marked as errors for the model). :class:`MessagesWriter` encodes the engine's
events as Anthropic's stream (``message_start``, ``content_block_start`` / ``_delta`` / ``_stop`` with
``text_delta`` and ``input_json_delta``, ``message_delta``, ``message_stop``); errors are Anthropic's
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

import json
from collections.abc import Mapping
from typing import Any

from hammer_plugins.openai_server.call import EngineCall
from hammer_plugins.openai_server.chat_completions.request import parse_request
from hammer_plugins.openai_server.errors import APIError

TOOL_ERROR_PREFIX = "Error: "
"""Put before the text of a ``tool_result`` with ``is_error: true``, so the model reads that the call failed."""


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


def _turn(raw: Mapping[str, Any], index: int) -> list[dict[str, Any]]:
    """One Anthropic message as the Chat Completions messages it holds."""
    param = f"messages[{index}]"
    role = raw.get("role")
    _require(role in ("user", "assistant", "system"), "role must be user or assistant.", f"{param}.role")
    content = raw.get("content")
    if isinstance(content, str) or role == "system":
        return [{"role": role, "content": _text_of(content, f"{param}.content")}]
    _require(isinstance(content, list), "content must be a string or a list of content blocks.", f"{param}.content")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        where = f"{param}.content[{j}]"
        _require(isinstance(block, Mapping), "must be an object.", where)
        kind = block.get("type")
        if kind == "tool_use" and role == "assistant":
            _require(isinstance(block.get("id"), str) and isinstance(block.get("name"), str), "needs id and name.", where)
            arguments = block.get("input") if block.get("input") is not None else {}
            _require(isinstance(arguments, Mapping), "input must be an object.", f"{where}.input")
            calls.append({"id": block["id"], "type": "function",
                          "function": {"name": block["name"], "arguments": json.dumps(arguments, ensure_ascii=False)}})
        elif kind == "tool_result" and role == "user":
            _require(isinstance(block.get("tool_use_id"), str), "needs tool_use_id.", f"{where}.tool_use_id")
            text = _text_of(block.get("content") if block.get("content") is not None else "", f"{where}.content")
            if block.get("is_error") is True:
                text = TOOL_ERROR_PREFIX + text
            results.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": text})
        else:
            text = _block_text(block, where)
            if text is not None:
                texts.append(text)
    if role == "assistant":
        return [{"role": "assistant", "content": "\n\n".join(texts) or None, "tool_calls": calls or None}]
    return results + ([{"role": "user", "content": "\n\n".join(texts)}] if texts or not results else [])


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
        names = {t["function"]["name"] for t in tools}
        if choice.get("name") not in names:
            raise APIError(400, f"tool_choice names the tool {choice.get('name')!r}, which is not among the tools this "
                                f"model is offered {sorted(names)} (server tools are not run here).",
                           param="tool_choice.name", code="invalid_tool_choice")
        return {"type": "function", "function": {"name": choice["name"]}}, parallel
    _require(kind in ("auto", "any", "none"), "type must be auto, any, tool or none.", "tool_choice.type")
    return {"auto": "auto", "any": "required", "none": "none"}[kind], parallel


def parse_messages_request(body: Any, served_model: str | list[str], *, count_only: bool = False) -> EngineCall:
    """Validate a ``/v1/messages`` body (or a ``count_tokens`` one) and map it to an engine call."""
    if not isinstance(body, Mapping):
        raise APIError(400, "The request body must be a JSON object.", code="invalid_json")
    if not count_only:
        _require(isinstance(body.get("max_tokens"), int) and not isinstance(body.get("max_tokens"), bool)
                 and body["max_tokens"] >= 1, "max_tokens is required: a positive integer.", "max_tokens")
    _require(isinstance(body.get("messages"), list) and bool(body.get("messages")), "must be a non-empty list.",
             "messages")
    messages: list[dict[str, Any]] = []
    if body.get("system") is not None:
        messages.append({"role": "system", "content": _text_of(body["system"], "system")})
    for index, raw in enumerate(body["messages"]):
        _require(isinstance(raw, Mapping), "must be an object.", f"messages[{index}]")
        messages += _turn(raw, index)
    tools = _tools(body.get("tools"))
    tool_choice, parallel = _tool_choice(body.get("tool_choice"), tools)
    if not tools and tool_choice == "required":
        raise APIError(400, "tool_choice 'any' needs tools, and the request has none this model is offered.",
                       param="tool_choice", code="invalid_value")
    chat: dict[str, Any] = {"model": body.get("model"), "messages": messages, "tools": tools or None,
                            "tool_choice": tool_choice if tools else None, "stream": body.get("stream", False) is True}
    if not count_only:
        chat["max_tokens"] = body["max_tokens"]
    for name in ("temperature", "top_p", "top_k", "mask_names", "on_refusal", "constrained", "seed", "repeat_penalty"):
        if body.get(name) is not None:
            chat[name] = body[name]
    # Agent clients (Codex, the Agents SDK, Claude Code) show whatever comes back: Hammer's [] is answered in
    # prose by a tool-free pass, as Hammer's own client does, unless the request asks for the refusal text.
    chat.setdefault("on_refusal", "answer")
    if body.get("stop_sequences") is not None:
        chat["stop"] = body["stop_sequences"]
    if parallel is False:
        chat["parallel_tool_calls"] = False
    return parse_request(chat, served_model)
