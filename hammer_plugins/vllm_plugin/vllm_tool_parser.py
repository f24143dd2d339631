"""Hammer's tool-call parser for vLLM: ``--tool-parser-plugin FILE --tool-call-parser hammer``.

Loaded by vLLM's API server, never by hammer_plugins itself (it imports vLLM). It reads Hammer's
answers with the engine's own parser (:func:`hammer_plugins.output.parsing.parse_output`): a fenced or
bare JSON list of ``{"name", "arguments"}``; ``[]`` (no suitable tool) becomes a refusal in
``content``. Streaming sends each call's id and name as soon as its name is written, then its
arguments when its object closes, the same JSON text as the non-streamed answer; the scanning
state is kept between tokens (:class:`hammer_plugins.output.call_stream.CallStream`), so a stream costs
work linear in its length, not a re-parse of the whole answer per token.
Fail-closed: only a name the request offered (under a named ``tool_choice``, that name alone; under
``"none"``, none) is ever returned as a call. A call to any other name (possible where the answer
is not constrained: a request with its own ``structured_outputs`` or ``response_format``, a schema
the grammar cannot express) is logged and dropped; when no call is left, the whole output is the
message's ``content``, as vLLM's own parsers return output that is not a valid call. Streamed, such
a call's name is never sent and its JSON object goes out as ``content`` when it closes.
Every request with tools is decoded under the engine's own grammar
(:func:`hammer_plugins.grammar.builder.build_grammar`, through vLLM's ``structured_outputs``): a call list or
``[]`` under ``"auto"``, at least one call under ``"required"``, only the named tool under a named
``tool_choice``; ``"none"``, or a request that sets its own ``structured_outputs`` or
``response_format``, is left as it is. After tool results the template asks for the answer in
prose (``hammer.jinja``); under ``"auto"`` that answer goes out as ``content``, with no grammar.

Run (``hammer vllm`` prints these paths and the whole command)::

    python -m vllm.entrypoints.openai.api_server --model DIR \\
        --chat-template .../hammer_plugins/prompt/templates/hammer.jinja \\
        --enable-auto-tool-choice --tool-parser-plugin .../hammer_plugins/vllm_plugin/vllm_tool_parser.py \\
        --tool-call-parser hammer

The file finds the ``hammer_plugins`` package it sits in even where vLLM's environment has none
installed (its only dependency, pydantic, comes with vLLM). It lives in a folder without
``__init__.py`` so that walking ``hammer_plugins``'s modules (the package's own import checks,
where vLLM is not installed) never imports it.

Layer 4: a door.

Example (inside vLLM's environment):
    >>> parser = HammerToolParser(tokenizer)  # doctest: +SKIP
    >>> parser.extract_tool_calls('[{"name": "f", "arguments": {"x": 1}}]', request).tool_calls[0].function.name  # doctest: +SKIP
    'f'
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _load_hammer_plugins() -> None:
    """Make ``hammer_plugins`` importable: the installed package where vLLM's environment has one,
    else the folder this file sits in, as a bare package (its ``__init__`` reads the installed
    distribution's version, which is not there; the modules used here need only pydantic)."""
    here = Path(__file__).resolve().parents[1]
    if "hammer_plugins" in sys.modules:
        return
    if importlib.util.find_spec("hammer_plugins") is not None:
        try:
            importlib.import_module("hammer_plugins")
            return
        except Exception:  # a checkout on sys.path (vLLM started in it), not installed: no version to read
            for name in [m for m in sys.modules if m == "hammer_plugins" or m.startswith("hammer_plugins.")]:
                del sys.modules[name]
    if not (here / "output" / "parsing.py").is_file():
        raise ImportError(f"{__file__} needs the hammer_plugins package. Fix: pip install hammer-plugins in vLLM's "
                          "environment, or pass the vllm_tool_parser.py inside an installed hammer_plugins folder")
    if importlib.util.find_spec("re2") is None:  # the package's one requirement vLLM does not bring
        raise ImportError("the hammer tool parser needs google-re2 (hammer_plugins checks schema patterns in linear "
                          "time). Fix: pip install 'google-re2>=1.1,<2' in vLLM's environment, or pip install "
                          "hammer-plugins there")
    package = types.ModuleType("hammer_plugins")
    package.__path__ = [str(here)]
    package.__file__ = str(here / "__init__.py")
    sys.modules["hammer_plugins"] = package


_load_hammer_plugins()

from hammer_plugins.grammar.builder import build_grammar  # noqa: E402
from hammer_plugins.output.call_stream import CallEvent, CallStream, arguments_text, offered_calls  # noqa: E402
from hammer_plugins.output.parsing import parse_output  # noqa: E402
from hammer_plugins.output.response import DEFAULT_REFUSAL_TEXT  # noqa: E402
from hammer_plugins.tools.definition import Tool as HammerTool  # noqa: E402

# vLLM moves these between releases (0.32: vllm.tool_parsers, vllm.entrypoints.generate.base.protocol,
# vllm.renderers.chat_utils; before ~0.11: vllm.entrypoints.openai.tool_parsers and .protocol).
try:
    from vllm.tool_parsers import ToolParser, ToolParserManager
except ImportError:  # older vLLM
    from vllm.entrypoints.openai.tool_parsers import ToolParser, ToolParserManager  # type: ignore[no-redef]
try:
    from vllm.entrypoints.generate.base.protocol import (
        DeltaFunctionCall,
        DeltaMessage,
        DeltaToolCall,
        ExtractedToolCallInformation,
        FunctionCall,
        ToolCall,
    )
except ImportError:  # older vLLM
    from vllm.entrypoints.openai.protocol import (  # type: ignore[no-redef]
        DeltaFunctionCall,
        DeltaMessage,
        DeltaToolCall,
        ExtractedToolCallInformation,
        FunctionCall,
        ToolCall,
    )
try:
    from vllm.renderers.chat_utils import make_tool_call_id
except ImportError:  # older vLLM
    from vllm.entrypoints.chat_utils import make_tool_call_id  # type: ignore[no-redef]
from vllm.logger import init_logger  # noqa: E402
from vllm.sampling_params import StructuredOutputsParams  # noqa: E402

logger = init_logger(__name__)


NAMESPACE_JOIN = "__"
"""How vLLM names a Responses namespace's function for the chat template (``ns__name``, its
``get_function_tools``): the grammar and the offered names use the same."""


def _plain(value: Any) -> Any:
    return value.model_dump(exclude_none=True) if hasattr(value, "model_dump") else value


def _function_specs(request: Any) -> list[dict[str, Any]]:
    """The request's function tools as ``{"name", "description", "parameters"}``, whichever request it is:
    a chat request's ``{"type": "function", "function": {...}}``, a Responses request's flat ``FunctionTool``
    and its namespaces' functions (``ns__name``, as vLLM's template sees them); built-in tools are left out."""
    specs: list[dict[str, Any]] = []
    for raw in request.tools or []:
        tool = _plain(raw)
        if not isinstance(tool, dict):
            continue
        if isinstance(tool.get("function"), dict):
            specs.append(tool["function"])
        elif tool.get("type", "function") == "function" and isinstance(tool.get("name"), str):
            specs.append({k: tool[k] for k in ("name", "description", "parameters") if tool.get(k) is not None})
        elif tool.get("type") == "namespace":
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and inner.get("type", "function") == "function" and inner.get("name"):
                    specs.append({**{k: inner[k] for k in ("description", "parameters") if inner.get(k) is not None},
                                  "name": f"{tool.get('name')}{NAMESPACE_JOIN}{inner['name']}"})
    return specs


def _tool_specs(request: Any) -> list[HammerTool]:
    """The request's tools as the engine's Tool (the grammar's input)."""
    return [HammerTool.from_openai({"type": "function", "function": spec}) for spec in _function_specs(request)]


def _forced_name(request: Any) -> str | None:
    """The tool a named ``tool_choice`` asks for, else None: chat's ``{"function": {"name"}}`` or the
    Responses API's ``{"type": "function", "name"}``."""
    choice = _plain(request.tool_choice)
    if not isinstance(choice, dict):
        return None
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if name is None and choice.get("type") == "function":
        name = choice.get("name")
    return name if isinstance(name, str) else None


def _is_responses(request: Any) -> bool:
    """A Responses API request (``input`` and ``text``, no ``messages``)."""
    return not hasattr(request, "messages") and hasattr(request, "input")


def _answering(request: Any) -> bool:
    """Whether hammer.jinja rendered the answer after tool results (its rule: the last message is a
    tool's and ``chat_template_kwargs`` does not say ``"hammer_after_tools": "call"``) for a request
    that leaves the choice to the model: then the model answers in prose, with no grammar and no
    call parsing. Under a required or named ``tool_choice`` the grammar still holds it to a call."""
    messages = getattr(request, "messages", None) or []
    if _is_responses(request):  # its last input item: a function_call_output is the tool's turn
        items = request.input if isinstance(request.input, list) else []
        messages = [{"role": "tool"} if _plain(i).get("type") == "function_call_output" else _plain(i)
                    for i in items if isinstance(_plain(i), dict)]
    last = messages[-1] if messages else None
    role = last.get("role") if isinstance(last, dict) else getattr(last, "role", None)
    mode = (getattr(request, "chat_template_kwargs", None) or {}).get("hammer_after_tools") or "answer"
    return (role == "tool" and mode == "answer" and _forced_name(request) is None
            and request.tool_choice != "required")


@ToolParserManager.register_module("hammer")
class HammerToolParser(ToolParser):
    """Hammer's answers (a JSON list of calls, ``[]`` to refuse) to OpenAI tool calls.

    Example:
        >>> # vllm serve DIR --tool-parser-plugin hammer_plugins/vllm_plugin/vllm_tool_parser.py --tool-call-parser hammer
    """

    # vLLM's generic required/named handling forces OpenAI's own JSON shape, which Hammer never
    # writes; adjust_request gives vLLM Hammer's grammar instead, and the answers are parsed here.
    supports_required_and_named = False

    def __init__(self, tokenizer: Any, tools: Any = None) -> None:
        if tools is not None:
            super().__init__(tokenizer, tools)
        else:  # older vLLM's ToolParser takes the tokenizer alone
            super().__init__(tokenizer)
        self._stream: CallStream | None = None  # made on the first token (it needs the request)
        self._fed = 0  # characters of the answer given to it

    # ------------------------------------------------------------------ request
    def adjust_request(self, request: Any) -> Any:
        request = super().adjust_request(request)
        if not request.tools or request.tool_choice == "none":
            return request
        if getattr(request, "structured_outputs", None) is not None or getattr(request, "response_format", None):
            return request  # the caller constrains the answer itself
        text = _plain(getattr(request, "text", None))
        text_format = text.get("format") if isinstance(text, dict) else None
        if isinstance(text_format, dict) and text_format.get("type") not in (None, "text"):
            return request  # a Responses request's text.format: the caller constrains the answer itself
        if _answering(request):
            return request  # the answer after tool results is prose: no call grammar
        # Hammer's answer is always a call list (the format block of its prompt says so): under "auto"
        # too the grammar holds the model to it ([] allowed), as the engine's constrained decoding does.
        # Without it, small models wrap the list in prose, and a stream cannot tell prose from calls.
        forced = _forced_name(request)
        choice = forced if forced is not None else ("required" if request.tool_choice == "required" else "auto")
        try:
            grammar = build_grammar(_tool_specs(request), choice,
                                    parallel=getattr(request, "parallel_tool_calls", True) is not False)
        except Exception as exc:  # a schema the grammar cannot express: answer unconstrained, say why
            logger.warning("hammer: no grammar for tool_choice=%r (%s); the answer is not constrained", choice, exc)
            return request
        request.structured_outputs = StructuredOutputsParams(grammar=grammar.gbnf)
        # In place (vLLM keeps the request object, not what this returns). A Responses request has no
        # response_format; its text.format must not be set beside structured_outputs (vLLM refuses both).
        if _is_responses(request):
            request.text = None
        else:
            request.response_format = None
        return request

    # -------------------------------------------------------------- complete
    def extract_tool_calls(self, model_output: str, request: Any) -> Any:
        if _answering(request):
            return ExtractedToolCallInformation(tools_called=False, tool_calls=[], content=model_output)
        parsed = parse_output(model_output)
        if parsed.kind == "tool_calls":
            kept, dropped = offered_calls(parsed.tool_calls, offered_names(request))
            _warn_dropped([c.name for c in dropped])
            if not kept:  # no call the request offered: the output is content, as vLLM's parsers do with output that is no call
                return ExtractedToolCallInformation(tools_called=False, tool_calls=[], content=model_output)
            calls = [ToolCall(id=make_tool_call_id(), type="function",
                              function=FunctionCall(name=c.name, arguments=arguments_text(c)))
                     for c in kept]
            return ExtractedToolCallInformation(tools_called=True, tool_calls=calls, content=parsed.text or None)
        if parsed.kind == "refusal":
            # tools_called=True with no call: vLLM then answers with this content (for tools_called=False
            # it sends the raw output, the "[]"), and still as a plain message, finish_reason "stop".
            return ExtractedToolCallInformation(tools_called=True, tool_calls=[], content=DEFAULT_REFUSAL_TEXT)
        return ExtractedToolCallInformation(tools_called=False, tool_calls=[], content=model_output)

    # ------------------------------------------------------------- streaming
    def extract_tool_calls_streaming(
        self,
        previous_text: str,
        current_text: str,
        delta_text: str,
        previous_token_ids: Sequence[int],
        current_token_ids: Sequence[int],
        delta_token_ids: Sequence[int],
        request: Any,
    ) -> Any:
        try:
            if self._stream is None:
                self._stream = CallStream(offered_names(request), prose=_answering(request))
            # Only the new characters: the stream keeps its state, so a long answer costs linear work.
            delta, self._fed = current_text[self._fed:], len(current_text)
            dropped = len(self._stream.dropped)
            message = self._message(self._stream.feed(delta))
            _warn_dropped(self._stream.dropped[dropped:])
            return message
        except Exception:  # model output never breaks the stream
            logger.exception("hammer: could not parse the streamed answer")
            return None

    def _message(self, events: list[CallEvent]) -> Any:
        content: list[str] = []
        deltas: list[Any] = []
        for event in events:
            if event.kind == "content":
                content.append(event.text)
            elif event.kind == "refusal":
                content.append(DEFAULT_REFUSAL_TEXT)
            elif event.kind == "name":
                self.prev_tool_call_arr.append({"name": event.text})
                self.streamed_args_for_tool.append("")
                self.current_tool_id = event.index
                self.current_tool_name_sent = True
                deltas.append(DeltaToolCall(index=event.index, type="function", id=make_tool_call_id(),
                                            function=DeltaFunctionCall(name=event.text).model_dump(exclude_none=True)))
            else:
                deltas.append(DeltaToolCall(index=event.index,
                                            function=DeltaFunctionCall(arguments=event.text).model_dump(exclude_none=True)))
                self.prev_tool_call_arr[event.index]["arguments"] = json.loads(event.text)
                self.streamed_args_for_tool[event.index] = event.text
        if not content and not deltas:
            return None
        return DeltaMessage(content="".join(content) if content else None, tool_calls=deltas)


def offered_names(request: Any) -> frozenset[str]:
    """The names a call may have: the named ``tool_choice`` alone, else every tool of the request;
    none under ``"none"``."""
    if request.tool_choice == "none":
        return frozenset()
    names = {spec["name"] for spec in _function_specs(request) if isinstance(spec.get("name"), str)}
    forced = _forced_name(request)
    if forced is not None:
        return frozenset({forced} & names)
    return frozenset(names)


def _warn_dropped(names: list[str]) -> None:
    for name in names:
        logger.warning("hammer: the model called %s, which the request did not offer; sent as content, not as a call",
                       ascii(name)[:200])
