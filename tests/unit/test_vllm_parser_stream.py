"""The vLLM tool parser fed token by token, as vLLM's API loop feeds it, without a vLLM server.

The parser file imports vLLM's classes; vLLM is not installed in the project's venv (it has its own,
scripts/install_vllm.sh), so these tests load the real parser file over a stand-in of the few vLLM
names it imports (a base class with vLLM's bookkeeping lists, pydantic messages with vLLM's field
names). What is tested is our code: the parser's linear work per stream and that only offered
names ever become calls (issue 37, class 5). tests/vllm/test_vllm_real.py runs it inside real vLLM.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from pydantic import BaseModel, Field

from hammer_plugins.output.call_stream import CallStream
from hammer_plugins.output.response import DEFAULT_REFUSAL_TEXT

PARSER_FILE = Path(__file__).resolve().parents[2] / "hammer_plugins" / "vllm_plugin" / "vllm_tool_parser.py"
PACKAGE = str(PARSER_FILE.parents[1])


# ----------------------------------------------------------------- vLLM's names, as the parser uses them
class _DeltaFunctionCall(BaseModel):
    name: str | None = None
    arguments: str | None = None


class _DeltaToolCall(BaseModel):
    id: str | None = None
    type: str | None = None
    index: int
    function: dict[str, Any] | None = None


class _DeltaMessage(BaseModel):
    content: str | None = None
    tool_calls: list[_DeltaToolCall] = Field(default_factory=list)


class _FunctionCall(BaseModel):
    name: str
    arguments: str


class _ToolCall(BaseModel):
    id: str
    type: str = "function"
    function: _FunctionCall


class _Extracted(BaseModel):
    tools_called: bool
    tool_calls: list[_ToolCall]
    content: str | None = None


class _ToolParser:
    def __init__(self, tokenizer: Any, tools: Any = None) -> None:
        self.prev_tool_call_arr: list[dict[str, Any]] = []
        self.streamed_args_for_tool: list[str] = []
        self.current_tool_id = -1
        self.current_tool_name_sent = False

    def adjust_request(self, request: Any) -> Any:
        return request


class _Manager:
    @staticmethod
    def register_module(name: str) -> Any:
        return lambda cls: cls


class _Logger:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warning(self, message: str, *args: Any) -> None:
        self.warnings.append(message % args)

    def exception(self, message: str, *args: Any) -> None:
        raise AssertionError("the parser hit an exception on model output: " + message % args)


@pytest.fixture(scope="module")
def parser_module() -> Iterator[types.ModuleType]:
    """The real vllm_tool_parser.py, imported over stand-ins of vLLM (removed again afterwards)."""
    ids = iter(range(10**9))
    logger = _Logger()
    fakes = {
        "vllm": types.ModuleType("vllm"),
        "vllm.tool_parsers": types.SimpleNamespace(ToolParser=_ToolParser, ToolParserManager=_Manager),
        "vllm.entrypoints": types.ModuleType("vllm.entrypoints"),
        "vllm.entrypoints.generate": types.ModuleType("vllm.entrypoints.generate"),
        "vllm.entrypoints.generate.base": types.ModuleType("vllm.entrypoints.generate.base"),
        "vllm.entrypoints.generate.base.protocol": types.SimpleNamespace(
            DeltaFunctionCall=_DeltaFunctionCall, DeltaMessage=_DeltaMessage, DeltaToolCall=_DeltaToolCall,
            ExtractedToolCallInformation=_Extracted, FunctionCall=_FunctionCall, ToolCall=_ToolCall),
        "vllm.renderers": types.ModuleType("vllm.renderers"),
        "vllm.renderers.chat_utils": types.SimpleNamespace(make_tool_call_id=lambda: f"call_{next(ids)}"),
        "vllm.logger": types.SimpleNamespace(init_logger=lambda name: logger),
        "vllm.sampling_params": types.SimpleNamespace(StructuredOutputsParams=dict),
    }
    saved = {name: sys.modules.get(name) for name in fakes}
    sys.modules.update(fakes)  # type: ignore[arg-type]
    try:
        spec = importlib.util.spec_from_file_location("hammer_vllm_tool_parser_under_test", PARSER_FILE)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.test_logger = logger  # type: ignore[attr-defined]
        yield module
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old


def _tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {
        "text": {"type": "string"}}}}}


def _request(names: tuple[str, ...] = ("write_note", "get_weather"), tool_choice: Any = "auto") -> Any:
    return types.SimpleNamespace(tools=[_tool(n) for n in names], tool_choice=tool_choice,
                                 messages=[{"role": "user", "content": "hi"}], chat_template_kwargs=None)


def _stream(module: types.ModuleType, output: str, request: Any, step: int = 3) -> tuple[Any, dict[int, dict[str, str]], str]:
    """Feed ``output`` ``step`` characters at a time, as vLLM does (the whole text so far, and the new
    piece); returns the parser, the calls its deltas add up to, and the content they sent."""
    parser = module.HammerToolParser(tokenizer=None)
    calls: dict[int, dict[str, str]] = {}
    content = []
    previous = ""
    for at in range(0, len(output), step):
        delta = output[at:at + step]
        current = previous + delta
        message = parser.extract_tool_calls_streaming(previous, current, delta, [], [], [], request)
        previous = current
        if message is None:
            continue
        content.append(message.content or "")
        for call in message.tool_calls:
            entry = calls.setdefault(call.index, {"name": "", "arguments": ""})
            entry["name"] += (call.function or {}).get("name") or ""
            entry["arguments"] += (call.function or {}).get("arguments") or ""
    return parser, calls, "".join(content)


def _call_list(*calls: tuple[str, dict[str, Any]]) -> str:
    return json.dumps([{"name": n, "arguments": a} for n, a in calls])


# --------------------------------------------------------------------------------------------- linear
def _traced_lines(run: Any) -> int:
    """Lines of the project's Python run by ``run()``: the work done, counted, not timed."""
    count = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(PACKAGE) else None

    sys.settrace(calls)
    try:
        run()
    finally:
        sys.settrace(None)
    return count


def test_a_growing_call_costs_work_linear_in_its_length(parser_module: types.ModuleType) -> None:
    """One call whose argument grows to 2k and to 8k characters, fed 3 characters per token: 4 times
    the text must cost about 4 times the work (re-parsing the answer on each token costs 16 times)."""
    request = _request()
    work, results = {}, {}
    for size in (2_000, 8_000):
        output = _call_list(("write_note", {"text": "a, [b] {c} \\\" " * (size // 14)}))
        result: dict[str, Any] = {"output": output}

        def run(output: str = output, result: dict[str, Any] = result) -> None:
            result["parser"], result["calls"], _ = _stream(parser_module, output, request)

        work[size] = _traced_lines(run)
        results[size] = result
    assert work[8_000] < 5 * work[2_000], work
    assert work[8_000] < 30 * 8_000, work  # a few lines per character, not per character per token
    for result in results.values():
        output = result["output"]
        assert result["calls"] == {0: {"name": "write_note", "arguments": json.dumps(json.loads(output)[0]["arguments"])}}
        assert result["parser"]._stream.scanned == len(output)  # each character looked at once


# ------------------------------------------------------------------------------------------ fail closed
def test_a_name_the_request_never_offered_is_never_a_call(parser_module: types.ModuleType) -> None:
    output = _call_list(("delete_all_files", {"path": "/"}))
    request = _request()
    whole = parser_module.HammerToolParser(tokenizer=None).extract_tool_calls(output, request)
    assert (whole.tools_called, whole.tool_calls, whole.content) == (False, [], output)
    parser, calls, content = _stream(parser_module, output, request)
    assert calls == {} and parser.prev_tool_call_arr == []
    assert json.loads(content) == {"name": "delete_all_files", "arguments": {"path": "/"}}
    assert any("delete_all_files" in w for w in parser_module.test_logger.warnings)


def test_a_named_tool_choice_allows_that_name_alone(parser_module: types.ModuleType) -> None:
    output = _call_list(("get_weather", {"text": "Paris"}), ("write_note", {"text": "x"}))
    request = _request(tool_choice={"type": "function", "function": {"name": "write_note"}})
    whole = parser_module.HammerToolParser(tokenizer=None).extract_tool_calls(output, request)
    assert [(c.function.name, c.function.arguments) for c in whole.tool_calls] == [("write_note", '{"text": "x"}')]
    _, calls, content = _stream(parser_module, output, request)
    assert calls == {0: {"name": "write_note", "arguments": '{"text": "x"}'}}
    assert json.loads(content)["name"] == "get_weather"


def test_tool_choice_none_allows_no_call(parser_module: types.ModuleType) -> None:
    output = _call_list(("write_note", {"text": "x"}))
    request = _request(tool_choice="none")
    whole = parser_module.HammerToolParser(tokenizer=None).extract_tool_calls(output, request)
    assert (whole.tools_called, whole.tool_calls) == (False, [])
    assert _stream(parser_module, output, request)[1] == {}


def test_a_second_name_key_cannot_swap_the_call_after_its_name_was_sent(parser_module: types.ModuleType) -> None:
    """JSON keeps the last of two "name" keys: the whole answer reads "rm", so the stream, which sent
    "write_note" early, must not give that call any arguments."""
    output = '[{"name": "write_note", "name": "rm", "arguments": {"path": "/"}}]'
    request = _request()
    assert parser_module.HammerToolParser(tokenizer=None).extract_tool_calls(output, request).tool_calls == []
    _, calls, content = _stream(parser_module, output, request)
    assert calls == {0: {"name": "write_note", "arguments": ""}}
    assert '"rm"' in content


def test_offered_calls_stream_as_they_are_answered_whole(parser_module: types.ModuleType) -> None:
    output = "```\n" + _call_list(("get_weather", {"text": "Paris"}), ("write_note", {"text": "a}\"]"})) + "\n```"
    request = _request()
    whole = parser_module.HammerToolParser(tokenizer=None).extract_tool_calls(output, request)
    _, calls, content = _stream(parser_module, output, request, step=1)
    assert [(c["name"], c["arguments"]) for c in calls.values()] == [
        (c.function.name, c.function.arguments) for c in whole.tool_calls]
    assert len(calls) == 2 and content == ""


def test_hammers_empty_list_streams_the_refusal_once(parser_module: types.ModuleType) -> None:
    _, calls, content = _stream(parser_module, "```\n[ ]\n```", _request(), step=1)
    assert (calls, content) == ({}, DEFAULT_REFUSAL_TEXT)


_NAMES = st.sampled_from(["write_note", "get_weather", "rm", "write_note ", "", "get_weather\u200b"])
_ARGS = st.dictionaries(st.sampled_from(["text", "name", "arguments"]), st.text(max_size=8) | st.integers(), max_size=3)


@settings(max_examples=examples(150), deadline=None)
@given(items=st.lists(st.tuples(_NAMES, _ARGS), max_size=4), step=st.integers(1, 7),
       offered=st.sets(st.sampled_from(["write_note", "get_weather"])))
def test_whatever_the_model_writes_only_offered_names_become_calls(items: list[tuple[str, dict[str, Any]]],
                                                                   step: int, offered: set[str]) -> None:
    """The framework-free stream the parser uses: for any call list, chunked any way, every call
    named in the events is offered, and the calls match the whole answer's offered calls."""
    output = _call_list(*items)
    stream = CallStream(frozenset(offered))
    names: dict[int, str] = {}
    arguments: dict[int, str] = {}
    for at in range(0, len(output), step):
        for event in stream.feed(output[at:at + step]):
            if event.kind == "name":
                names[event.index] = event.text
            elif event.kind == "arguments":
                arguments[event.index] = event.text
    assert set(names.values()) <= offered
    expected = [(n.strip(), json.dumps(a, ensure_ascii=False)) for n, a in items if n.strip() in offered]
    assert [(names[i], arguments[i]) for i in sorted(arguments)] == expected


# ----------------------------------------------------------------- a Responses API request (issue 39, part 5)
class _ResponsesRequest(BaseModel):
    """vLLM's ResponsesRequest as the parser reads it: flat function tools, namespaces, built-in tools,
    ``tool_choice`` objects with ``name``, ``input`` items, ``text.format``; no ``messages``."""

    input: Any
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_choice: Any = "auto"
    parallel_tool_calls: bool | None = True
    structured_outputs: Any = None
    text: Any = None


RESPONSES_TOOLS = [
    {"type": "function", "name": "send", "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}},
    {"type": "namespace", "name": "crm", "description": "CRM", "tools": [
        {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}}}]},
    {"type": "web_search"},
]


def test_a_responses_request_is_constrained_and_its_offered_names_are_read(parser_module: types.ModuleType) -> None:
    """vLLM hands adjust_request a ResponsesRequest too (when it runs the tool parser for /v1/responses): the
    grammar is built from its flat tools and namespaces (``crm__lookup``, vLLM's name for the template), set in
    place with ``text`` cleared (vLLM refuses both), and a ``tool_choice`` object with ``name`` is honoured."""
    parser = parser_module.HammerToolParser(tokenizer=None)
    request = _ResponsesRequest(input="hi", tools=RESPONSES_TOOLS, text={"format": {"type": "text"}})
    assert parser.adjust_request(request) is request
    grammar = request.structured_outputs["grammar"]
    assert '\\"send\\"' in grammar and '\\"crm__lookup\\"' in grammar and "web_search" not in grammar
    assert request.text is None
    assert parser_module.offered_names(request) == frozenset({"send", "crm__lookup"})
    named = _ResponsesRequest(input="hi", tools=RESPONSES_TOOLS, tool_choice={"type": "function", "name": "send"})
    assert parser_module.offered_names(named) == frozenset({"send"})
    parser.adjust_request(named)
    assert "crm__lookup" not in named.structured_outputs["grammar"]


def test_a_responses_request_after_a_tool_result_or_with_a_text_format_is_left_alone(
        parser_module: types.ModuleType) -> None:
    parser = parser_module.HammerToolParser(tokenizer=None)
    answered = _ResponsesRequest(tools=RESPONSES_TOOLS, input=[
        {"type": "message", "role": "user", "content": "send hi"},
        {"type": "function_call", "call_id": "c1", "name": "send", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sent"}])
    parser.adjust_request(answered)
    assert answered.structured_outputs is None  # the answer after tool results is prose (hammer.jinja's rule)
    schema = {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}
    formatted = _ResponsesRequest(input="hi", tools=RESPONSES_TOOLS, text=schema)
    parser.adjust_request(formatted)
    assert formatted.structured_outputs is None and formatted.text == schema
