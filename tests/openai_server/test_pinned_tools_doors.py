"""``pinned_tools`` in every API's request and ``hammer_offered_tools`` in every API's answer, without a model: each
door's request type converts the field (one declaration, :mod:`hammer_plugins.http_api.hammer_fields`), a bad pin
is a 400 naming it, and each door's writer puts what a selection offered where its API's answer has room. The
real clients against ``hammer serve`` on the real model are in test_pinned_tools_clients_real.py."""

from __future__ import annotations

from typing import Any

import pytest

from hammer_plugins import HammerResponse, ToolCall
from hammer_plugins.http_api.chat_completions.request import read_chat
from hammer_plugins.http_api.chat_completions.writer import ChunkWriter, completion
from hammer_plugins.http_api.errors import APIError
from hammer_plugins.http_api.messages.request import read_messages
from hammer_plugins.http_api.messages.writer import MessagesWriter
from hammer_plugins.http_api.ollama.request import OllamaChatRequest, read_ollama
from hammer_plugins.http_api.ollama.writer import OllamaWriter
from hammer_plugins.http_api.responses.request import ResponsesMeta, read_responses
from hammer_plugins.http_api.responses.writer import ResponsesWriter

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
NAMES = ["get_weather", "get_time"]
QUESTION = "Weather in Paris?"


def _chat(**more: Any) -> tuple[Any, Any]:
    tools = [{"type": "function", "function": {"name": n, "parameters": CITY}} for n in NAMES]
    return read_chat({"model": "hammer", "messages": [{"role": "user", "content": QUESTION}], "tools": tools, **more},
                     ["hammer"])


def _responses(**more: Any) -> tuple[Any, Any]:
    tools = [{"type": "function", "name": NAMES[0], "parameters": CITY},
             {"type": "namespace", "name": "clock", "tools": [{"type": "function", "name": NAMES[1], "parameters": CITY}]}]
    return read_responses({"model": "hammer", "input": QUESTION, "tools": tools, **more}, ["hammer"])


def _messages(**more: Any) -> tuple[Any, Any]:
    tools = [{"name": n, "input_schema": CITY} for n in NAMES]
    return read_messages({"model": "hammer", "max_tokens": 64, "messages": [{"role": "user", "content": QUESTION}],
                          "tools": tools, **more}, ["hammer"])


def _ollama(**more: Any) -> tuple[Any, Any]:
    tools = [{"type": "function", "function": {"name": n, "parameters": CITY}} for n in NAMES]
    return read_ollama({"model": "hammer", "messages": [{"role": "user", "content": QUESTION}], "tools": tools, **more},
                       "hammer", OllamaChatRequest)


# Each API, and the name the pin gives its second tool (the Responses API's namespaced tool: the name the model sees).
READERS = {"chat": (_chat, "get_time"), "responses": (_responses, "clock.get_time"),
           "messages": (_messages, "get_time"), "ollama": (_ollama, "get_time")}


@pytest.mark.parametrize("door", sorted(READERS))
def test_each_door_converts_pinned_tools_into_the_engine_request(door: str) -> None:
    read, second = READERS[door]
    assert read()[1].pinned_tools == ()
    assert read(pinned_tools=[second])[1].pinned_tools == (second,)
    # Hammer's other fields still convert through the same declaration.
    call = read(pinned_tools=[second], mask_names=True, on_missing="call")[1]
    assert (call.mask_names, call.on_missing) == (True, "call")


def test_ollama_also_reads_the_pin_from_options_which_its_python_client_passes_through() -> None:
    assert _ollama(options={"pinned_tools": ["get_time"], "num_predict": 8})[1].pinned_tools == ("get_time",)
    # Sent in both places, the top-level field wins (it is Hammer's own everywhere else too).
    both = _ollama(pinned_tools=["get_weather"], options={"pinned_tools": ["get_time"]})[1]
    assert both.pinned_tools == ("get_weather",)
    with pytest.raises(APIError) as bad:  # a bad pin is named where it was sent
        _ollama(options={"pinned_tools": ["get_time", "get_tme"]})
    assert bad.value.status == 400 and bad.value.message.startswith("options.pinned_tools[1]: "), bad.value.body()


@pytest.mark.parametrize("door", sorted(READERS))
def test_a_pin_that_names_no_tool_is_a_400_naming_its_place_and_the_fix(door: str) -> None:
    read, second = READERS[door]
    with pytest.raises(APIError) as bad:
        read(pinned_tools=[second, "get_tme"])
    assert bad.value.status == 400 and bad.value.param == "pinned_tools[1]", bad.value.body()
    assert "get_tme" in bad.value.message and "Fix: pin names of tools you pass" in bad.value.message


@pytest.mark.parametrize("door", sorted(READERS))
@pytest.mark.parametrize("value", [["get_time"] * 257, "get_time", [7]])
def test_a_pin_list_too_long_or_not_a_list_of_names_is_a_400(door: str, value: Any) -> None:
    read, _ = READERS[door]
    with pytest.raises(APIError) as bad:
        read(pinned_tools=value)
    assert bad.value.status == 400 and "pinned_tools" in (bad.value.param or bad.value.message), bad.value.body()


# ------------------------------------------------------------------ each writer: where the offered tools go
OFFERED = ["get_time", "get_weather"]


def _answer(offered: list[str] | None) -> HammerResponse:
    call = ToolCall(name="get_weather", arguments={"city": "Paris"})
    return HammerResponse(kind="tool_calls", tool_calls=[call], finish_reason="tool_calls", offered_tools=offered)


def _written(door: str, answer: HammerResponse) -> tuple[dict[str, Any], dict[str, Any]]:
    """The whole answer and the streamed event that carries the end of the answer, as each API writes them."""
    if door == "chat":
        whole = completion(answer, "hammer", "Sorry.").model_dump(mode="json", exclude_unset=True)
        chunks = ChunkWriter("hammer", "Sorry.").feed(answer)
        last = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
        return whole, last.model_dump(mode="json", exclude_unset=True)
    if door == "responses":
        writer = ResponsesWriter(ResponsesMeta(model="hammer"))
        events = writer.feed(answer)
        return writer.whole, events[-1]["response"]
    if door == "messages":
        messages = MessagesWriter("hammer")
        events = messages.feed(answer)
        return messages.whole, next(e for e in events if e["type"] == "message_delta")
    lines = (ollama := OllamaWriter("hammer")).feed(answer)
    return ollama.whole, lines[-1]


@pytest.mark.parametrize("door", sorted(READERS))
def test_each_writer_names_the_offered_tools_in_the_whole_and_the_streamed_answer(door: str) -> None:
    whole, streamed = _written(door, _answer(OFFERED))
    assert whole["hammer_offered_tools"] == OFFERED and streamed["hammer_offered_tools"] == OFFERED
    # No selection made (every tool was offered): no field, in either form.
    whole, streamed = _written(door, _answer(None))
    assert "hammer_offered_tools" not in whole and "hammer_offered_tools" not in streamed
