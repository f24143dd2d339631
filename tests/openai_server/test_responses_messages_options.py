"""Request options of the Responses and Messages APIs on a scripted engine (no model), checked as a client reads
the answer: the openai and anthropic SDKs against a real uvicorn on a loopback port, and the raw SSE events
validated against the SDKs' event unions.

The scripted model here decodes as a constrained one does: of the answers it would write, in the order it
prefers them, it writes the first that the request's grammar accepts (llguidance over a byte vocabulary, the
engine that decodes the local backends), and it ends at a stop string as llama.cpp does. So a test shows an
option changing the answer: ``tool_choice`` "required" turns the model's ``[]`` into a call, a named tool
turns a call of another tool into one of it, a JSON schema turns prose into an object of the schema."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, Literal

import anthropic
import jsonschema
import llguidance
import openai
import pytest
from anthropic.types import RawMessageStreamEvent
from grammar_oracles import lark_accepts
from openai.types.responses import ResponseStreamEvent
from openai_server_helpers import raw_events
from pydantic import BaseModel

from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.backends.base import GenerationChunk, GenerationSettings, Usage
from hammer_plugins.grammar.builder import Grammar
from hammer_plugins.http_api import BackgroundServer, create_app

# The scripted answers here are keyed by codes ("Q-TWO"), not by questions that hold their values: these tests are
# about the wire format, so the ask-or-call rule is off whatever the default; tests/openai_server/test_ask_or_call_doors.py
# tests it at each door.
RULE_OFF = "call"

KEY = "options-key"
TOOLS_MARK = "[BEGIN OF AVAILABLE TOOLS]"
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
RESPONSES_TOOLS = [
    {"type": "function", "name": "get_weather", "description": "Weather in a city.", "parameters": CITY},
    {"type": "function", "name": "get_time", "description": "Local time in a city.", "parameters": CITY},
]
ANTHROPIC_TOOLS = [{"name": t["name"], "description": t["description"], "input_schema": CITY} for t in RESPONSES_TOOLS]
FORECAST = {
    "type": "object",
    "additionalProperties": False,
    "required": ["city", "temp_c", "sky"],
    "properties": {
        "city": {"type": "string"},
        "temp_c": {"type": "integer"},
        "sky": {"type": "string", "enum": ["sunny", "cloudy", "rainy"]},
    },
}
WEATHER_CALL = '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
TIME_CALL = '[{"name": "get_time", "arguments": {"city": "Paris"}}]'
LONG_PROSE = "Hello there, friend, and welcome to the weather desk."
STOPPED_PROSE = "The answer is 42. END of the story, no more."


class _ByteVocabulary:
    """256 one-byte tokens and an end token: enough for llguidance to read a text against a grammar."""

    eos_token_id = 256
    bos_token_id = None
    tokens = [bytes([i]) for i in range(256)] + [b"</s>"]
    special_token_ids = [256]

    def __call__(self, text: bytes) -> list[int]:
        return list(text)


BYTES = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteVocabulary()))


class ObedientBackend(ScriptedBackend):
    """A scripted model that keeps to the grammar and the stop strings it is given (module docstring)."""

    def __init__(self, answers: Callable[[str], list[str]]) -> None:
        super().__init__()
        self._answers = answers

    def _stream(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None) -> Iterator[GenerationChunk]:
        self.prompts.append(prompt)
        self.grammars.append(grammar)
        self.settings.append(settings)
        wanted = self._answers(prompt)
        answer = next((a for a in wanted if grammar is None or lark_accepts(BYTES, grammar, a)), None)
        assert answer is not None, f"no scripted answer fits the grammar: {wanted}"
        words = answer.split(" ")
        pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]
        text, finish, produced = "", "length", 0
        for piece in pieces[: settings.max_tokens]:
            text += piece
            produced += 1
            stop_at = min((text.find(s) for s in settings.stop if s and s in text), default=-1)
            if stop_at >= 0:  # as llama.cpp: the stop string and what follows are left out
                yield GenerationChunk(text=piece[: max(0, len(piece) - (len(text) - stop_at))])
                finish = "stop"
                break
            yield GenerationChunk(text=piece)
        else:
            finish = "length" if len(pieces) > settings.max_tokens else "stop"
        yield GenerationChunk(
            text="", finish_reason=finish, usage=Usage(prompt_tokens=self.count_tokens(prompt), completion_tokens=produced)
        )


def answers(prompt: str) -> list[str]:
    """What the scripted model would write, most wanted first."""
    question = prompt.rsplit("<|im_start|>user\n", 1)[-1]
    if "Q-REFUSE" in question:  # it finds no tool fits, unless a call is forced
        return ["[]", WEATHER_CALL] if TOOLS_MARK in prompt else ["Hello there, friend."]
    if "weather" in question:  # it calls get_weather even when no tool is offered, and time only if forced
        return [WEATHER_CALL, TIME_CALL]
    if "Q-JSON" in question:  # prose first, then an object short of the schema, then one that keeps it
        return ["It is sunny in Paris.", '{"city": "Paris"}', '{"city": "Paris", "temp_c": 18, "sky": "sunny"}']
    if "Q-STOP" in question:
        return [STOPPED_PROSE]
    return [LONG_PROSE]


@pytest.fixture(scope="module")
def backend() -> ObedientBackend:
    return ObedientBackend(answers)


@pytest.fixture(scope="module")
def server(backend: ObedientBackend) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(HammerEngine(backend=backend, on_missing=RULE_OFF), model_name="hammer",
                                     api_key=KEY)) as running:
        yield running


def responses_events(server: BackgroundServer, **body: Any) -> list[dict[str, Any]]:
    return raw_events(
        server, "/responses", {"model": "hammer", "stream": True, **body}, {"authorization": f"Bearer {KEY}"}, ResponseStreamEvent
    )


def messages_events(server: BackgroundServer, **body: Any) -> list[dict[str, Any]]:
    return raw_events(server, "/messages", {"model": "hammer", "stream": True, **body}, {"x-api-key": KEY}, RawMessageStreamEvent)


# ------------------------------------------------------------------ Responses: text.format json_schema
def test_responses_json_schema_output_keeps_the_schema(oai: openai.OpenAI, backend: ObedientBackend) -> None:
    text = {"format": {"type": "json_schema", "name": "forecast", "schema": FORECAST, "strict": True}}
    reply = oai.responses.create(model="hammer", input="Q-JSON: the forecast for Paris?", text=text)
    assert reply.status == "completed" and [item.type for item in reply.output] == ["message"]
    answer = json.loads(reply.output_text)
    jsonschema.validate(answer, FORECAST)
    assert answer == {"city": "Paris", "temp_c": 18, "sky": "sunny"}
    assert reply.text.format.type == "json_schema" and reply.text.format.name == "forecast"
    assert backend.grammars[-1] is not None  # decoding was constrained to the schema, not just asked in words


def test_responses_parse_with_a_pydantic_format(oai: openai.OpenAI) -> None:
    """``responses.parse`` sends the model's schema as a strict json_schema and parses the answer with it."""

    class Forecast(BaseModel):
        city: str
        temp_c: int
        sky: Literal["sunny", "cloudy", "rainy"]

    parsed = oai.responses.parse(model="hammer", input="Q-JSON: the forecast for Paris?", text_format=Forecast)
    assert parsed.output_parsed == Forecast(city="Paris", temp_c=18, sky="sunny")


def test_responses_json_schema_streamed(server: BackgroundServer) -> None:
    events = responses_events(
        server, input="Q-JSON: the forecast?", text={"format": {"type": "json_schema", "name": "forecast", "schema": FORECAST}}
    )
    streamed = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    jsonschema.validate(json.loads(streamed), FORECAST)
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"]["text"]["format"]["type"] == "json_schema"


# ------------------------------------------------------------------ Responses: max_output_tokens
def test_responses_max_output_tokens_cut_is_incomplete(oai: openai.OpenAI) -> None:
    reply = oai.responses.create(model="hammer", input="hello", max_output_tokens=3)
    assert reply.status == "incomplete" and reply.incomplete_details.reason == "max_output_tokens"
    assert reply.output_text == "Hello there, friend," and reply.usage.output_tokens == 3
    assert reply.max_output_tokens == 3
    whole = oai.responses.create(model="hammer", input="hello", max_output_tokens=64)
    assert whole.status == "completed" and whole.incomplete_details is None and whole.output_text == LONG_PROSE


def test_responses_max_output_tokens_streamed_ends_with_response_incomplete(server: BackgroundServer) -> None:
    events = responses_events(server, input="hello", max_output_tokens=3)
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "response.incomplete" and "response.completed" not in kinds
    last = events[-1]["response"]
    assert last["status"] == "incomplete" and last["incomplete_details"] == {"reason": "max_output_tokens"}
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == "Hello there, friend,"


# ------------------------------------------------------------------ Responses: tool_choice
def test_responses_tool_choice_required_forces_a_call(oai: openai.OpenAI) -> None:
    free = oai.responses.create(model="hammer", input="Q-REFUSE", tools=RESPONSES_TOOLS)  # auto: the model's []
    assert [item.type for item in free.output] == ["message"]
    forced = oai.responses.create(model="hammer", input="Q-REFUSE", tools=RESPONSES_TOOLS, tool_choice="required")
    [call] = forced.output
    assert call.type == "function_call" and call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert forced.tool_choice == "required" and forced.status == "completed"


def test_responses_tool_choice_names_the_function(oai: openai.OpenAI, server: BackgroundServer) -> None:
    choice = {"type": "function", "name": "get_time"}
    reply = oai.responses.create(model="hammer", input="What's the weather in Paris?", tools=RESPONSES_TOOLS, tool_choice=choice)
    [call] = reply.output
    assert call.type == "function_call" and call.name == "get_time" and json.loads(call.arguments) == {"city": "Paris"}
    assert reply.tool_choice.type == "function" and reply.tool_choice.name == "get_time"
    events = responses_events(server, input="What's the weather in Paris?", tools=RESPONSES_TOOLS, tool_choice=choice)
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [(item["type"], item["name"]) for item in done] == [("function_call", "get_time")]


def test_responses_tool_choice_none_returns_no_call(
    oai: openai.OpenAI, backend: ObedientBackend, server: BackgroundServer
) -> None:
    """The scripted model writes a call whatever it is offered; with "none" no function_call item comes back."""
    reply = oai.responses.create(model="hammer", input="What's the weather in Paris?", tools=RESPONSES_TOOLS, tool_choice="none")
    assert [item.type for item in reply.output] == ["message"] and reply.status == "completed"
    assert TOOLS_MARK not in backend.prompts[-1]  # the tools were not offered to the model
    assert reply.tool_choice == "none"
    events = responses_events(server, input="What's the weather in Paris?", tools=RESPONSES_TOOLS, tool_choice="none")
    assert not [e for e in events if e["type"].startswith("response.function_call")]
    assert {e["item"]["type"] for e in events if e["type"] == "response.output_item.added"} == {"message"}


# ------------------------------------------------------------------ Messages: stop_sequences
def test_messages_stop_sequences_cut_the_text(
    claude: anthropic.Anthropic, backend: ObedientBackend, server: BackgroundServer
) -> None:
    """The text ends before the stop sequence. The stop reason is what docs/server.md documents ("a stop sequence
    that ends the answer reports end_turn"), not Anthropic's ``stop_sequence`` (see the report)."""
    free = claude.messages.create(model="hammer", max_tokens=64, messages=[{"role": "user", "content": "Q-STOP"}])
    assert free.content[0].text == STOPPED_PROSE and free.stop_reason == "end_turn"
    reply = claude.messages.create(
        model="hammer", max_tokens=64, stop_sequences=["END", "never"], messages=[{"role": "user", "content": "Q-STOP"}]
    )
    assert backend.settings[-1].stop == ["END", "never"]
    assert [block.type for block in reply.content] == ["text"] and reply.content[0].text == "The answer is 42."
    assert (reply.stop_reason, reply.stop_sequence) == ("end_turn", None)  # documented; Anthropic: ("stop_sequence", "END")
    events = messages_events(server, max_tokens=64, stop_sequences=["END"], messages=[{"role": "user", "content": "Q-STOP"}])
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert text == "The answer is 42."
    [delta] = [e["delta"] for e in events if e["type"] == "message_delta"]
    assert delta == {"stop_reason": "end_turn", "stop_sequence": None}


# ------------------------------------------------------------------ Messages: tool_choice
def test_messages_tool_choice_names_the_tool(claude: anthropic.Anthropic) -> None:
    free = claude.messages.create(
        model="hammer",
        max_tokens=64,
        tools=ANTHROPIC_TOOLS,
        messages=[{"role": "user", "content": "What's the weather in Paris?"}],
    )
    assert [block.name for block in free.content] == ["get_weather"]  # auto: the model's own choice
    reply = claude.messages.create(
        model="hammer",
        max_tokens=64,
        tools=ANTHROPIC_TOOLS,
        tool_choice={"type": "tool", "name": "get_time"},
        messages=[{"role": "user", "content": "What's the weather in Paris?"}],
    )
    [use] = reply.content
    assert use.type == "tool_use" and use.name == "get_time" and use.input == {"city": "Paris"}
    assert use.id and reply.stop_reason == "tool_use"


def test_messages_tool_choice_none_returns_no_tool_use(
    claude: anthropic.Anthropic, backend: ObedientBackend, server: BackgroundServer
) -> None:
    question = [{"role": "user", "content": "What's the weather in Paris?"}]
    reply = claude.messages.create(
        model="hammer", max_tokens=64, tools=ANTHROPIC_TOOLS, tool_choice={"type": "none"}, messages=question
    )
    assert [block.type for block in reply.content] == ["text"] and reply.stop_reason == "end_turn"
    assert TOOLS_MARK not in backend.prompts[-1]
    events = messages_events(server, max_tokens=64, tools=ANTHROPIC_TOOLS, tool_choice={"type": "none"}, messages=question)
    blocks = [e["content_block"]["type"] for e in events if e["type"] == "content_block_start"]
    assert blocks == ["text"]
    assert [e["delta"]["stop_reason"] for e in events if e["type"] == "message_delta"] == ["end_turn"]


# ------------------------------------------------------------------ Messages: max_tokens
def test_messages_max_tokens_cut_says_max_tokens(claude: anthropic.Anthropic, server: BackgroundServer) -> None:
    question = [{"role": "user", "content": "hello"}]
    reply = claude.messages.create(model="hammer", max_tokens=3, messages=question)
    assert reply.stop_reason == "max_tokens" and reply.stop_sequence is None
    assert reply.content[0].text == "Hello there, friend," and reply.usage.output_tokens == 3
    with claude.messages.stream(model="hammer", max_tokens=3, messages=question) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "max_tokens" and final.content[0].text == "Hello there, friend,"
    events = messages_events(server, max_tokens=3, messages=question)
    assert [e["delta"]["stop_reason"] for e in events if e["type"] == "message_delta"] == ["max_tokens"]
