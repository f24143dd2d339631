"""The OpenAI Responses API (``POST /v1/responses``) over the same engine call as Chat Completions.

A request is translated into the Chat Completions body it means (input items become messages,
function tools and namespaces become tools, ``text.format`` becomes ``response_format``) and then
validated by :func:`~..chat_completions.request.parse_request`, so both APIs share every rule and limit. The answer is
encoded from the engine's events by :class:`ResponsesWriter`, one event per step with its
``sequence_number``, in the order OpenAI documents; the non-streamed answer is the same writer's
final ``response`` object.

Rules for what a small local model cannot do (docs/server.md, "The Responses API"):
- stateless, as Ollama's: nothing is stored; ``previous_response_id`` and ``conversation`` are a 400,
  ``store`` is accepted and the answer says ``store: false``;
- built-in tools (``web_search``, ``file_search``, ``computer_use_preview``, ``code_interpreter``,
  ``image_generation``, ``local_shell``, ``shell``, ``apply_patch``, ``mcp``, ``custom``, ...) are left
  out of what the model is offered; a ``tool_choice`` that names one is a 400;
- reasoning, caching, metadata, truncation and every unknown field are accepted and ignored.

Example:
    >>> call, meta = parse_responses_request({"model": "hammer", "input": "hi", "instructions": "Be brief."}, "hammer")
    >>> [m.role for m in call.messages], call.tool_choice, meta.instructions
    (['system', 'user'], 'none', 'Be brief.')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hammer_plugins.openai_server.call import EngineCall
from hammer_plugins.openai_server.chat_completions.request import parse_request
from hammer_plugins.openai_server.errors import APIError

NAMESPACE_SEPARATOR = "."
"""Joins a namespace and a function name into the one name the model sees (``crm.lookup``); Hammer
was trained with dots in names (its function masking draws names from ``[A-Za-z_.0-9]``)."""


IGNORED_ITEMS = frozenset({"reasoning", "web_search_call", "file_search_call", "computer_call", "computer_call_output",
                           "image_generation_call", "code_interpreter_call", "local_shell_call",
                           "local_shell_call_output", "shell_call", "shell_call_output", "apply_patch_call",
                           "apply_patch_call_output", "mcp_list_tools", "mcp_approval_request", "mcp_call",
                           "custom_tool_call", "custom_tool_call_output", "compaction"})
"""Input items that hold no turn this model can read (reasoning it did not write, built-in tools' calls):
left out of the prompt."""


@dataclass
class ResponsesMeta:
    """What the answer echoes back of the request (the fields a ``Response`` object repeats)."""

    model: str
    instructions: str | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: Any = "auto"
    parallel_tool_calls: bool = True
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    text: dict[str, Any] = field(default_factory=lambda: {"format": {"type": "text"}})
    namespaces: dict[str, tuple[str, str]] = field(default_factory=dict)  # model-facing name -> (namespace, name)
    metadata: dict[str, Any] | None = None


def _require(condition: bool, message: str, param: str) -> None:
    if not condition:
        raise APIError(400, message, param=param, code="invalid_value")


def _texts(content: Any, param: str) -> str:
    """A message's content (a string or a list of text parts) as one string; anything else is a 400."""
    if isinstance(content, str):
        return content
    _require(isinstance(content, list), f"{param} must be a string or a list of content parts.", param)
    texts = []
    for j, part in enumerate(content):
        _require(isinstance(part, Mapping), f"{param}[{j}] must be an object.", f"{param}[{j}]")
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            _require(isinstance(part.get("text"), str), f"{param}[{j}].text must be a string.", f"{param}[{j}].text")
            texts.append(part["text"])
        elif kind == "refusal":
            _require(isinstance(part.get("refusal"), str), f"{param}[{j}].refusal must be a string.", f"{param}[{j}]")
            texts.append(part["refusal"])
        else:
            raise APIError(400, f"Content parts of type {kind!r} are not supported by this model (text only): "
                                f"{param}[{j}]. Fix: send input_text parts.", param=f"{param}[{j}].type",
                           code="unsupported_value")
    return "".join(texts)


def _tools(raw: Any, meta: ResponsesMeta) -> list[dict[str, Any]]:
    """Function tools (namespaces flattened) as Chat Completions tools; built-in tools left out."""
    if raw is None:
        return []
    _require(isinstance(raw, list), "tools must be a list.", "tools")
    tools: list[dict[str, Any]] = []

    def add(tool: Mapping[str, Any], param: str, namespace: str | None) -> None:
        _require(isinstance(tool.get("name"), str) and bool(tool.get("name")), f"{param} needs a name.", f"{param}.name")
        name = f"{namespace}{NAMESPACE_SEPARATOR}{tool['name']}" if namespace else tool["name"]
        if namespace:
            meta.namespaces[name] = (namespace, tool["name"])
        function = {"name": name, "description": tool.get("description"), "parameters": tool.get("parameters")}
        if tool.get("strict") is not None:
            function["strict"] = tool["strict"]
        tools.append({"type": "function", "function": {k: v for k, v in function.items() if v is not None}})

    for i, tool in enumerate(raw):
        _require(isinstance(tool, Mapping), f"tools[{i}] must be an object.", f"tools[{i}]")
        if tool.get("type") == "function":
            add(tool, f"tools[{i}]", None)
        elif tool.get("type") == "namespace":
            _require(isinstance(tool.get("name"), str) and isinstance(tool.get("tools"), list),
                     f"tools[{i}] (a namespace) needs a name and a list of tools.", f"tools[{i}]")
            for j, inner in enumerate(tool["tools"]):
                if isinstance(inner, Mapping) and inner.get("type") == "function":
                    add(inner, f"tools[{i}].tools[{j}]", tool["name"])
        # any other type is a built-in tool (or a custom one): not offered to the model (module docstring)
    names = [t["function"]["name"] for t in tools]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    _require(not duplicates, f"Two tools share the name(s) {duplicates} (a namespace's functions are named "
                             f"'namespace{NAMESPACE_SEPARATOR}function').", "tools")
    meta.tools = [{"type": "function", "name": t["function"]["name"], "description": t["function"].get("description"),
                   "parameters": t["function"].get("parameters"), "strict": t["function"].get("strict", False)}
                  for t in tools]
    return tools


def _tool_choice(choice: Any, tools: list[dict[str, Any]], meta: ResponsesMeta) -> Any:
    """Responses' tool_choice as Chat Completions': function -> named, allowed_tools -> a subset of tools."""
    if choice is None or isinstance(choice, str):
        return choice
    _require(isinstance(choice, Mapping), "tool_choice must be a string or an object.", "tool_choice")
    kind = choice.get("type")
    if kind == "function":
        name = choice.get("name")
        if isinstance(choice.get("namespace"), str):
            name = f"{choice['namespace']}{NAMESPACE_SEPARATOR}{name}"
        return {"type": "function", "function": {"name": name}}
    if kind == "allowed_tools":
        allowed = {t.get("name") for t in choice.get("tools") or [] if isinstance(t, Mapping)}
        tools[:] = [t for t in tools if t["function"]["name"] in allowed]
        return "required" if choice.get("mode") == "required" else "auto"
    raise APIError(400, f"tool_choice {dict(choice)!r} names a built-in tool, which this server does not run. Fix: "
                        "send function tools and tool_choice 'auto', 'required', 'none' or a function.",
                   param="tool_choice", code="unsupported_value")


def _messages(request: Mapping[str, Any], meta: ResponsesMeta) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    if request.get("instructions") is not None:
        _require(isinstance(request["instructions"], str), "instructions must be a string.", "instructions")
        meta.instructions = request["instructions"]
        messages.append({"role": "system", "content": request["instructions"]})
    items = request.get("input")
    if isinstance(items, str):
        return [*messages, {"role": "user", "content": items}]
    _require(isinstance(items, list) and bool(items), "input must be a string or a non-empty list of items.", "input")
    for i, item in enumerate(items):
        param = f"input[{i}]"
        _require(isinstance(item, Mapping), f"{param} must be an object.", param)
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            role = item.get("role")
            _require(role in ("user", "system", "developer", "assistant"),
                     f"{param}.role must be user, system, developer or assistant.", f"{param}.role")
            messages.append({"role": role, "content": _texts(item.get("content"), f"{param}.content")})
        elif kind == "function_call":
            _require(isinstance(item.get("call_id"), str) and isinstance(item.get("name"), str),
                     f"{param} (a function_call) needs call_id and name.", param)
            name = item["name"]
            if isinstance(item.get("namespace"), str):
                name = f"{item['namespace']}{NAMESPACE_SEPARATOR}{name}"
            call = {"id": item["call_id"], "type": "function",
                    "function": {"name": name, "arguments": item.get("arguments") or "{}"}}
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant" and not last.get("_answered"):
                last.setdefault("tool_calls", []).append(call)  # one assistant turn: its text and its calls
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else _texts(output, f"{param}.output")
            call_id = item.get("call_id")
            if not isinstance(call_id, str) and isinstance(item.get("name"), str):
                # Codex CLI sends outputs that no call asked for, named instead (name "goal_objective",
                # namespace "agent"). No call of the assistant's is made up for them (that would put words in
                # its turn): the client's text comes as a user turn that says whose output it is.
                name = item["name"]
                if isinstance(item.get("namespace"), str):
                    name = f"{item['namespace']}{NAMESPACE_SEPARATOR}{name}"
                messages.append({"role": "user", "content": f"(output of {name}) {text}"})
                continue
            _require(isinstance(call_id, str), f"{param} needs call_id (or, for an output no call asked for, name).",
                     f"{param}.call_id")
            for message in reversed(messages):  # results close the assistant turn they answer
                if message["role"] == "assistant":
                    message["_answered"] = True
                    break
            messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
        elif kind == "item_reference":
            raise APIError(400, f"{param} is an item_reference, but this server stores nothing (it is stateless). Fix: "
                                "send the items themselves.", param=param, code="unsupported_value")
        elif kind not in IGNORED_ITEMS:
            raise APIError(400, f"{param} has type {kind!r}, which this server does not read. Fix: send messages, "
                                "function_call and function_call_output items.", param=f"{param}.type",
                           code="unsupported_value")
    for message in messages:
        message.pop("_answered", None)
    return messages


def _response_format(text: Any, meta: ResponsesMeta) -> dict[str, Any] | None:
    if text is None:
        return None
    _require(isinstance(text, Mapping), "text must be an object.", "text")
    meta.text = {"format": dict(text.get("format") or {"type": "text"})}
    fmt = text.get("format")
    if not isinstance(fmt, Mapping) or fmt.get("type") in (None, "text"):
        return None
    if fmt.get("type") == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": fmt.get("name", "response"), "schema": fmt.get("schema"),
                                                        "strict": fmt.get("strict")}}
    return dict(fmt)


def parse_responses_request(body: Any, served_model: str | list[str]) -> tuple[EngineCall, ResponsesMeta]:
    """Validate a ``/v1/responses`` body and map it to an engine call (raises :class:`APIError`)."""
    if not isinstance(body, Mapping):
        raise APIError(400, "The request body must be a JSON object.", code="invalid_json")
    for stateful in ("previous_response_id", "conversation"):
        if body.get(stateful) is not None:
            raise APIError(400, f"{stateful} is not supported: this server is stateless and stores no responses. "
                                "Fix: send the whole conversation in input (as Codex does with store: false).",
                           param=stateful, code="unsupported_value")
    if body.get("background"):
        raise APIError(400, "background responses are not supported. Fix: leave background out and stream instead.",
                       param="background", code="unsupported_value")
    meta = ResponsesMeta(model=str(body.get("model")), temperature=body.get("temperature"), top_p=body.get("top_p"),
                         max_output_tokens=body.get("max_output_tokens"),
                         metadata=body.get("metadata") if isinstance(body.get("metadata"), Mapping) else None)
    tools = _tools(body.get("tools"), meta)
    chat: dict[str, Any] = {"model": body.get("model"), "messages": _messages(body, meta), "tools": tools or None,
                            "stream": body.get("stream", False)}
    choice = _tool_choice(body.get("tool_choice"), tools, meta)
    if not tools and choice not in (None, "auto", "none"):
        raise APIError(400, f"tool_choice {body.get('tool_choice')!r} needs function tools, and the request has none "
                            "(built-in tools are not run here).", param="tool_choice", code="invalid_value")
    chat["tool_choice"] = choice if tools else None
    meta.tool_choice = body.get("tool_choice") or "auto"
    for name in ("temperature", "top_p", "parallel_tool_calls", "top_k", "repeat_penalty", "seed", "mask_names",
                 "on_refusal", "constrained", "stop"):
        if body.get(name) is not None:
            chat[name] = body[name]
    # Agent clients (Codex, the Agents SDK, Claude Code) show whatever comes back: Hammer's [] is answered in
    # prose by a tool-free pass, as Hammer's own client does, unless the request asks for the refusal text.
    chat.setdefault("on_refusal", "answer")
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    chat["response_format"] = _response_format(body.get("text"), meta)
    meta.parallel_tool_calls = body.get("parallel_tool_calls") is not False
    call = parse_request(chat, served_model)
    return call, meta
