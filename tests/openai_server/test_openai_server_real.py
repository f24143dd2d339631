"""The OpenAI-compatible server on the embedded default model (llama.cpp in process), asked through the
openai SDK: calls, parallel calls, forced and named tool_choice, streaming tool-call deltas, usage,
a too-long prompt, a whole agent turn, and eight clients at once (queued: one runs at a time)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI
from openai_server_helpers import ask_at_once, assert_each_got_its_own_answer

from hammer_plugins import HammerEngine
from hammer_plugins.http_api import BackgroundServer, create_app
from hammer_plugins.tools.definition import to_tools
from hammer_plugins.tools.demo import DEMO_TOOLS

pytestmark = pytest.mark.real_model

KEY = "real-key"
TOOLS = [t.to_openai() for t in to_tools(DEMO_TOOLS)]


@pytest.fixture(scope="module")
def server(llama_engine: HammerEngine) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(llama_engine, model_name="hammer", api_key=KEY)) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: BackgroundServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=300)


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def args(call: Any) -> dict[str, Any]:
    return json.loads(call.function.arguments)


def test_the_readme_question_gets_a_weather_call(client: OpenAI) -> None:
    reply = client.chat.completions.create(model="hammer", messages=user("What's the weather in Paris?"), tools=TOOLS)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert call.function.name == "get_weather" and args(call)["city"] == "Paris"
    assert call.id.startswith("call_") and call.type == "function"
    assert reply.usage.prompt_tokens > 300 and reply.usage.completion_tokens > 5


def test_two_cities_get_two_parallel_calls_with_distinct_ids(client: OpenAI) -> None:
    reply = client.chat.completions.create(model="hammer", messages=user("What's the weather in Paris and in Rome?"),
                                           tools=TOOLS)
    calls = reply.choices[0].message.tool_calls
    assert [c.function.name for c in calls] == ["get_weather", "get_weather"]
    assert {args(c)["city"] for c in calls} == {"Paris", "Rome"} and calls[0].id != calls[1].id


def test_parallel_tool_calls_false_allows_one_call(client: OpenAI) -> None:
    reply = client.chat.completions.create(model="hammer", messages=user("What's the weather in Paris and in Rome?"),
                                           tools=TOOLS, parallel_tool_calls=False)
    assert len(reply.choices[0].message.tool_calls) == 1


def test_required_forces_a_call(client: OpenAI) -> None:
    reply = client.chat.completions.create(model="hammer", messages=user("Hello!"), tools=TOOLS, tool_choice="required")
    assert reply.choices[0].finish_reason == "tool_calls" and reply.choices[0].message.tool_calls


def test_a_named_tool_choice_calls_that_tool(client: OpenAI) -> None:
    reply = client.chat.completions.create(
        model="hammer", messages=user("What is 17 * 23?"), tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "calculate"}})
    [call] = reply.choices[0].message.tool_calls
    assert call.function.name == "calculate" and args(call)["expression"].replace(" ", "") == "17*23"


def test_tool_choice_none_answers_in_prose(client: OpenAI) -> None:
    reply = client.chat.completions.create(model="hammer", messages=user("Say hello in French, one word."), tools=TOOLS,
                                           tool_choice="none", max_tokens=20)
    message = reply.choices[0].message
    assert not message.tool_calls and message.content and reply.choices[0].finish_reason in ("stop", "length")


def test_streamed_calls_carry_id_and_name_first_and_arguments_join(client: OpenAI) -> None:
    stream = client.chat.completions.create(model="hammer", messages=user("What's the weather in Paris and in Rome?"),
                                            tools=TOOLS, stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    first: dict[int, Any] = {}
    joined: dict[int, str] = {}
    for chunk in chunks:
        for call in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            first.setdefault(call.index, call)
            joined[call.index] = joined.get(call.index, "") + (call.function.arguments or "")
    assert sorted(first) == [0, 1]
    assert all(c.id and c.id.startswith("call_") and c.type == "function" and c.function.name == "get_weather"
               for c in first.values())
    assert first[0].id != first[1].id
    assert {json.loads(joined[i])["city"] for i in (0, 1)} == {"Paris", "Rome"}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    usage = chunks[-1].usage
    assert chunks[-1].choices == [] and usage.prompt_tokens > 300 and usage.total_tokens > usage.prompt_tokens


def test_a_whole_agent_turn_ends_with_an_answer(client: OpenAI) -> None:
    messages = user("What is 17 * 23?")
    first = client.chat.completions.create(model="hammer", messages=messages, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "391"}]
    final = client.chat.completions.create(model="hammer", messages=messages, tools=TOOLS, max_tokens=60)
    assert final.choices[0].finish_reason in ("stop", "length") and not final.choices[0].message.tool_calls
    assert "391" in final.choices[0].message.content


def test_a_prompt_over_the_context_window_is_a_400_with_the_counts(client: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="hammer", messages=user("Paris " * 5000), tools=TOOLS)
    body = error.value.body
    assert error.value.code == "context_length_exceeded" and "maximum context length is 4096 tokens" in body["message"]
    assert "resulted in" in body["message"]


def test_eight_clients_at_once_each_get_their_own_answer(server: BackgroundServer) -> None:
    numbers = [12, 23, 37, 41, 58, 66, 79, 91]
    assert_each_got_its_own_answer(ask_at_once(server.base_url, KEY, numbers, TOOLS), numbers)
    assert httpx.get(server.url + "/health").json()["peak_running"] == 1  # queued: one at a time
