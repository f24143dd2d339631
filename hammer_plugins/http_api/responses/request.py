"""The OpenAI Responses API (``POST /v1/responses``) over the same engine call as Chat Completions.

A request is read into its own type (:class:`ResponsesRequest`, so a wrong value is named as the
Responses API names it: ``max_output_tokens``, ``input[3].call_id``), its input items become the
engine's messages, function tools and namespaces its tools, and ``text.format`` its
``response_format``; the checks every API makes (the model, the tools, ``tool_choice``, stop lists, a
result answering a call) are the engine's (:mod:`~hammer_plugins.engine.rules`), their errors named here in
the Responses API's fields. Every walk over the request is linear in its size. The answer is encoded from the engine's events by
:class:`~hammer_plugins.http_api.responses.writer.ResponsesWriter`.

Rules for what a small local model cannot do (docs/server.md, "The Responses API"):
- stateless, as Ollama's: nothing is stored; ``previous_response_id`` and ``conversation`` are a 400,
  ``store`` is accepted and the answer says ``store: false``;
- built-in tools (``web_search``, ``file_search``, ``computer_use_preview``, ``code_interpreter``,
  ``image_generation``, ``local_shell``, ``shell``, ``apply_patch``, ``mcp``, ``custom``, ...) are left
  out of what the model is offered; a ``tool_choice`` that names one is a 400;
- tool search (``tool_search``, ``defer_loading``): :mod:`~hammer_plugins.http_api.responses.tool_search`;
- reasoning, caching, metadata, truncation and every unknown field are accepted and ignored.

Example:
    >>> responses, call = read_responses({"model": "hammer", "input": "hi", "instructions": "Be brief."}, ["hammer"])
    >>> [m.role for m in call.messages], call.tool_choice, responses.meta().instructions
    (['system', 'user'], 'auto', 'Be brief.')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ConfigDict, Field, PrivateAttr

from hammer_plugins.engine.request import COUNT_MAX, SEED_MAX, TOP_K_MAX, EngineRequest
from hammer_plugins.engine.rules import shown_id
from hammer_plugins.http_api.errors import APIError, api_errors_only
from hammer_plugins.http_api.hammer_fields import HammerFields
from hammer_plugins.http_api.json_body import load_json
from hammer_plugins.http_api.request_checks import FieldNames, checked_stop, engine_request, located, read_request
from hammer_plugins.http_api.responses.tool_search import ToolSearch, read_tool_search
from hammer_plugins.values.calls import ToolCall, pending_calls_of
from hammer_plugins.values.errors import RequestError
from hammer_plugins.values.messages import Message

NAMESPACE_SEPARATOR = "."
"""Joins a namespace and a function name into the one name the model sees (``crm.lookup``); Hammer
was trained with dots in names (its function masking draws names from ``[A-Za-z_.0-9]``)."""


IGNORED_ITEMS = frozenset({"reasoning", "web_search_call", "file_search_call", "computer_call", "computer_call_output",
                           "image_generation_call", "code_interpreter_call", "local_shell_call",
                           "local_shell_call_output", "shell_call", "shell_call_output", "apply_patch_call",
                           "apply_patch_call_output", "mcp_list_tools", "mcp_approval_request", "mcp_call",
                           "custom_tool_call", "custom_tool_call_output", "compaction", "tool_search_call",
                           "tool_search_output"})
"""Input items that hold no turn this model can read (reasoning it did not write, built-in tools' calls):
left out of the prompt. A tool search's round is one of them: what it loaded is offered from then on
(:mod:`~hammer_plugins.http_api.responses.tool_search`), so the model meets the question again with the tool it needs
(the stand-in, shown its search and "Tool loaded: get_weather", took the turn for done and made up an answer)."""


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
    tool_search: ToolSearch = field(default_factory=ToolSearch)


class ResponsesRequest(HammerFields):
    """The fields of ``POST /v1/responses`` this server reads (others are accepted and ignored), plus Hammer's own."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    model: str
    input: Any = None
    instructions: Any = None
    tools: Any = None
    tool_choice: Any = None
    text: Any = None
    parallel_tool_calls: bool | None = Field(None, strict=True)
    max_output_tokens: int | None = Field(None, ge=1, le=COUNT_MAX)
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = Field(None, ge=0, le=SEED_MAX)  # outside it, C wrapped 2**64 + 5 to seed 5
    stream: bool = Field(False, strict=True)
    metadata: Any = None
    # Hammer's own options (the SDK's extra_body=...).
    stop: str | list[str] | None = None
    top_k: int | None = Field(None, ge=0, le=TOP_K_MAX)
    repeat_penalty: float | None = Field(None, gt=0)
    _meta: ResponsesMeta | None = PrivateAttr(None)
    _names: FieldNames | None = PrivateAttr(None)

    def to_engine_request(self) -> EngineRequest:
        """The engine's request: input items as messages, function tools and namespaces as tools, ``text.format``
        as the response format; what the answer echoes back is kept in :meth:`meta`."""
        meta = ResponsesMeta(model=self.model, temperature=self.temperature, top_p=self.top_p,
                             max_output_tokens=self.max_output_tokens,
                             metadata=self.metadata if isinstance(self.metadata, Mapping) else None,
                             tool_search=read_tool_search(self.tools, self.input))
        tools, places = _tools(self.tools, meta)
        messages, origins = _messages({"instructions": self.instructions, "input": self.input}, meta)
        choice = _tool_choice(self.tool_choice, tools, places)
        meta.tool_choice = self.tool_choice or "auto"
        meta.parallel_tool_calls = self.parallel_tool_calls is not False
        self._meta = meta
        self._names = FieldNames(messages=origins, message_id="call_id", tools=places, tool_schema="parameters",
                                 tool_name="name", response_format="text.format", conversation="input")
        return EngineRequest(
            messages=messages, tools=tools, tool_choice=choice, max_tokens=self.max_output_tokens,
            temperature=self.temperature, top_p=self.top_p, seed=self.seed, stop=checked_stop(self.stop, "stop"),
            top_k=self.top_k, repeat_penalty=self.repeat_penalty, parallel_tool_calls=self.parallel_tool_calls,
            response_format=_response_format(self.text, meta),
            # Agent clients (Codex, the Agents SDK) show whatever comes back: Hammer's [] is answered in prose by a
            # tool-free pass, as Hammer's own client does, unless the request asks for the refusal text.
            **self.hammer_options(on_refusal="answer"))

    def meta(self) -> ResponsesMeta:
        """What the answer echoes back of the request (once converted)."""
        assert self._meta is not None, "to_engine_request() reads it"
        return self._meta

    def field_names(self) -> FieldNames:
        assert self._names is not None, "to_engine_request() names the fields"
        return self._names

    def api_error(self, exc: RequestError, request: EngineRequest) -> APIError:
        if exc.rule == "unanswered_result" and len(exc.loc) > 1 and isinstance(exc.loc[1], int):
            place, answered = self.field_names().messages[exc.loc[1]], request.messages[exc.loc[1]].tool_call_id
            return located(exc, self.field_names(), f"{place} is the output of call_id {shown_id(answered)}, which no earlier "
                                                    "function_call item in input made. Fix: send the function_call item "
                                                    "before its output (a stateless server needs the whole conversation "
                                                    "in input).")
        return located(exc, self.field_names())


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


def _tools(raw: Any, meta: ResponsesMeta) -> tuple[list[dict[str, Any]], list[str]]:
    """Function tools (namespaces flattened) as OpenAI function tools, and where each came from; built-in tools
    left out, and so are deferred tools under a client-executed tool search until a search loads them
    (:mod:`~hammer_plugins.http_api.responses.tool_search`)."""
    search = meta.tool_search
    if raw is None and not search.definitions:
        return [], []
    _require(raw is None or isinstance(raw, list), "tools must be a list.", "tools")
    tools: list[dict[str, Any]] = []
    places: list[str] = []
    hidden: list[tuple[str, str]] = []  # deferred tools a client search can still load: name, description

    def add(tool: Mapping[str, Any], param: str, namespace: str | None, deferred: bool = False) -> None:
        _require(isinstance(tool.get("name"), str) and bool(tool.get("name")), f"{param} needs a name.", f"{param}.name")
        if search.hides(tool["name"], deferred=deferred or tool.get("defer_loading") is True, namespace=namespace):
            hidden.append((f"{namespace}{NAMESPACE_SEPARATOR}{tool['name']}" if namespace else tool["name"],
                           tool["description"] if isinstance(tool.get("description"), str) else ""))
            return
        _require(tool.get("description") is None or isinstance(tool["description"], str),
                 f"{param}.description must be a string.", f"{param}.description")
        _require(tool.get("parameters") is None or isinstance(tool["parameters"], Mapping),
                 f"{param}.parameters must be a JSON schema object.", f"{param}.parameters")
        name = f"{namespace}{NAMESPACE_SEPARATOR}{tool['name']}" if namespace else tool["name"]
        if namespace:
            meta.namespaces[name] = (namespace, tool["name"])
        elif tool.get("defer_loading") is True:
            # OpenAI's wire shape for a call of a deferred top-level function: its name as its namespace too (the
            # Agents SDK finds the function by that pair, and refuses the call without it).
            meta.namespaces[name] = (name, name)
        function = {"name": name, "description": tool.get("description"), "parameters": tool.get("parameters")}
        if tool.get("strict") is not None:
            function["strict"] = tool["strict"]
        tools.append({"type": "function", "function": {k: v for k, v in function.items() if v is not None}})
        places.append(param)

    def add_any(tool: Mapping[str, Any], param: str) -> None:
        if tool.get("type") == "function":
            add(tool, param, None)
        elif tool.get("type") == "namespace":
            _require(isinstance(tool.get("name"), str) and isinstance(tool.get("tools"), list),
                     f"{param} (a namespace) needs a name and a list of tools.", param)
            for j, inner in enumerate(tool["tools"]):
                if isinstance(inner, Mapping) and inner.get("type") == "function":
                    add(inner, f"{param}.tools[{j}]", tool["name"], deferred=tool.get("defer_loading") is True)
        # any other type is a built-in tool (or a custom one): not offered to the model (module docstring)

    for i, tool in enumerate(raw or []):
        _require(isinstance(tool, Mapping), f"tools[{i}] must be an object.", f"tools[{i}]")
        add_any(tool, f"tools[{i}]")
    # What a search loaded that the request's tools do not list: the search's output holds the definitions.
    for definition in search.unlisted(tools, NAMESPACE_SEPARATOR):
        add_any(definition, "tool_search_output.tools")
    if search.execution == "client":
        tools.append(search.function(hidden, {t["function"]["name"] for t in tools}))
        places.append("tools")
    meta.tools = [{"type": "function", "name": t["function"]["name"], "description": t["function"].get("description"),
                   "parameters": t["function"].get("parameters"), "strict": t["function"].get("strict", False)}
                  for t in tools]
    return tools, places


def _tool_choice(choice: Any, tools: list[dict[str, Any]], places: list[str]) -> Any:
    """Responses' tool_choice as the engine's: function -> named, allowed_tools -> a subset of tools (and of
    their places)."""
    if choice is None or isinstance(choice, str):
        return choice
    _require(isinstance(choice, Mapping), "tool_choice must be a string or an object.", "tool_choice")
    kind = choice.get("type")
    if kind == "function":
        name, namespace = choice.get("name"), choice.get("namespace")
        _require(isinstance(name, str), "tool_choice.name must be a string.", "tool_choice.name")
        if isinstance(namespace, str):
            name = f"{namespace}{NAMESPACE_SEPARATOR}{name}"
        return {"type": "function", "function": {"name": name}}
    if kind == "allowed_tools":
        listed = choice.get("tools")
        _require(listed is None or isinstance(listed, list), "tool_choice.tools must be a list of tools.",
                 "tool_choice.tools")
        allowed = {t.get("name") for t in listed or [] if isinstance(t, Mapping) and isinstance(t.get("name"), str)}
        kept = [i for i, t in enumerate(tools) if t["function"]["name"] in allowed]
        tools[:], places[:] = [tools[i] for i in kept], [places[i] for i in kept]
        return "required" if choice.get("mode") == "required" else "auto"
    raise APIError(400, f"tool_choice of type {str(kind)[:40]!r} names a built-in tool, which this server does not "
                        "run. Fix: send function tools and tool_choice 'auto', 'required', 'none' or a function.",
                   param="tool_choice", code="unsupported_value")


def _item_name(item: Mapping[str, Any]) -> str:
    name, namespace = item["name"], item.get("namespace")
    # A namespace equal to the name is OpenAI's shape for a deferred top-level function, not a namespace.
    return f"{namespace}{NAMESPACE_SEPARATOR}{name}" if isinstance(namespace, str) and namespace != name else name


def _call(item: Mapping[str, Any], param: str) -> ToolCall:
    """A ``function_call`` item as the engine's call; its ``arguments`` a JSON object in a string."""
    _require(isinstance(item.get("call_id"), str) and isinstance(item.get("name"), str),
             f"{param} (a function_call) needs call_id and name.", param)
    arguments = item.get("arguments") or "{}"
    parsed = load_json(arguments, f"{param}.arguments", param=f"{param}.arguments", code="invalid_value",
                       fix="arguments must be a JSON object in a string") if isinstance(arguments, str) else arguments
    _require(isinstance(parsed, dict), f"{param}.arguments must be a JSON object in a string.", f"{param}.arguments")
    return ToolCall(id=item["call_id"], name=_item_name(item), arguments=parsed)


def _messages(request: Mapping[str, Any], meta: ResponsesMeta) -> tuple[list[Message], list[str]]:
    """The engine's messages, and for each the item of ``input`` it came from (for errors)."""
    messages: list[Message] = []
    origins: list[str] = []
    if request.get("instructions") is not None:
        _require(isinstance(request["instructions"], str), "instructions must be a string.", "instructions")
        meta.instructions = request["instructions"]
        messages.append(Message.system(request["instructions"]))
        origins.append("instructions")
    items = request.get("input")
    if isinstance(items, str):
        return [*messages, Message.user(items)], [*origins, "input"]
    _require(isinstance(items, list) and bool(items), "input must be a string or a non-empty list of items.", "input")
    open_turn: Message | None = None  # the assistant turn calls still join (until a result answers it)
    for i, item in enumerate(items):
        param = f"input[{i}]"
        _require(isinstance(item, Mapping), f"{param} must be an object.", param)
        kind = item.get("type", "message" if "role" in item else None)
        _require(kind is None or isinstance(kind, str), f"{param}.type must be a string.", f"{param}.type")
        if kind == "message":
            role = item.get("role")
            _require(role in ("user", "system", "developer", "assistant"),
                     f"{param}.role must be user, system, developer or assistant.", f"{param}.role")
            text = _texts(item.get("content"), f"{param}.content")
            # An ask's held-back calls, sent back on its message item (hammer_pending_calls): this turn completes them.
            message = Message(role="system" if role == "developer" else role, content=text,
                              pending_calls=pending_calls_of(item) if role == "assistant" else [])
            open_turn = message if role == "assistant" else None
        elif kind == "function_call":
            call = _call(item, param)
            if open_turn is not None:
                open_turn.tool_calls.append(call)  # one assistant turn: its text and its calls
                continue
            message = open_turn = Message.assistant(tool_calls=[call])
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else _texts(output, f"{param}.output")
            call_id = item.get("call_id")
            if not isinstance(call_id, str) and isinstance(item.get("name"), str):
                # Codex CLI sends outputs that no call asked for, named instead (name "goal_objective",
                # namespace "agent"). No call of the assistant's is made up for them (that would put words in
                # its turn): the client's text comes as a user turn that says whose output it is.
                message = Message.user(f"(output of {_item_name(item)}) {text}")
            else:
                _require(isinstance(call_id, str), f"{param} needs call_id (or, for an output no call asked for, "
                                                   "name).", f"{param}.call_id")
                message = Message.tool(text, tool_call_id=call_id)
            open_turn = None  # results close the assistant turn they answer
        elif kind == "item_reference":
            raise APIError(400, f"{param} is an item_reference, but this server stores nothing (it is stateless). Fix: "
                                "send the items themselves.", param=param, code="unsupported_value")
        elif kind not in IGNORED_ITEMS:
            raise APIError(400, f"{param} has type {str(kind)[:40]!r}, which this server does not read. Fix: send "
                                "messages, function_call and function_call_output items.", param=f"{param}.type",
                           code="unsupported_value")
        else:
            continue
        messages.append(message)
        origins.append(param)
    return messages, origins


def _response_format(text: Any, meta: ResponsesMeta) -> dict[str, Any] | None:
    if text is None:
        return None
    _require(isinstance(text, Mapping), "text must be an object.", "text")
    fmt = text.get("format")
    _require(fmt is None or isinstance(fmt, Mapping), "text.format must be an object.", "text.format")
    meta.text = {"format": dict(fmt or {"type": "text"})}
    if fmt is None or fmt.get("type") in (None, "text"):
        return None
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if fmt.get("type") == "json_schema":
        _require(isinstance(fmt.get("schema"), Mapping), "text.format.schema must be a JSON schema object.",
                 "text.format.schema")
        return {"type": "json_schema", "json_schema": {"name": fmt.get("name", "response"), "schema": fmt["schema"],
                                                        "strict": fmt.get("strict")}}
    raise APIError(400, f"text.format type {str(fmt.get('type'))[:40]!r} is not supported; use 'text', 'json_object' "
                        "or 'json_schema'.", param="text.format.type", code="unsupported_value")


@api_errors_only
def read_responses(body: Any, served: list[str]) -> tuple[ResponsesRequest, EngineRequest]:
    """A ``/v1/responses`` body as the door's request and the engine's (raises :class:`APIError` only)."""
    responses = read_request(body, ResponsesRequest, served)
    for stateful in ("previous_response_id", "conversation"):
        if body.get(stateful) is not None:
            raise APIError(400, f"{stateful} is not supported: this server is stateless and stores no responses. "
                                "Fix: send the whole conversation in input (as Codex does with store: false).",
                           param=stateful, code="unsupported_value")
    if body.get("background"):
        raise APIError(400, "background responses are not supported. Fix: leave background out and stream instead.",
                       param="background", code="unsupported_value")
    return responses, engine_request(responses)
