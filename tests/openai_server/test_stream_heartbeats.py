"""A stream that stays quiet while a long prompt is evaluated shows it is alive in each API's own terms, for clients
that time out between events rather than between bytes: the Responses API repeats ``response.in_progress`` (its
sequence numbers still counting up), the Messages API sends Anthropic's ``ping``; Chat Completions keeps to SSE
comments, which its clients skip. Codex gave up on a first prompt that took 300 s on a slow machine (its stream idle
timeout; SSE comments are not events to it): tests/openai_server/test_agent_clis_real.py runs Codex itself through
such a wait. Here a scripted model answers after QUIET seconds, with heartbeats every BEAT seconds, and the clients'
own parsers (the openai and anthropic SDKs) and their event unions read each stream."""

from __future__ import annotations

import time
from collections.abc import Iterator

import anthropic
import httpx
import openai
import pytest
from anthropic.types import RawMessageStreamEvent
from openai.types.responses import ResponseStreamEvent
from openai_server_helpers import raw_events, scripted_answer
from pydantic import TypeAdapter

import hammer_plugins.http_api.respond as respond_module
from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.http_api import BackgroundServer, create_app

KEY = "heartbeat-key"
BEAT = 0.25
QUIET = 4 * BEAT  # four beats' worth of silence: at least one heartbeat even on a loaded machine
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def slow_answer(prompt: str) -> str:
    time.sleep(QUIET)  # before the first token, as a long prompt evaluation is
    return scripted_answer(prompt)


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(respond_module, "PING_SECONDS", BEAT)
        engine = HammerEngine(backend=ScriptedBackend(responder=slow_answer), on_missing="call")
        with BackgroundServer(create_app(engine, model_name="hammer", api_key=KEY)) as running:
            yield running


def test_a_quiet_responses_stream_repeats_in_progress(oai: openai.OpenAI, server: BackgroundServer) -> None:
    events = raw_events(server, "/responses", {"model": "hammer", "input": "hello", "stream": True},
                        {"Authorization": f"Bearer {KEY}"}, union=ResponseStreamEvent)
    kinds = [e["type"] for e in events]
    first_output = kinds.index("response.output_item.added")
    assert kinds[0] == "response.created" and kinds[1:first_output].count("response.in_progress") >= 2, kinds
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert all(e["response"]["status"] == "in_progress" for e in events[1:first_output])
    with oai.responses.stream(model="hammer", input="What's the weather in Paris?",
                              tools=[{"type": "function", "name": "get_weather", "parameters": WEATHER}]) as stream:
        final = stream.get_final_response()
    assert final.status == "completed" and [(c.name, c.arguments) for c in final.output] == [
        ("get_weather", '{"city": "Paris"}')]


def test_a_quiet_messages_stream_sends_pings(claude: anthropic.Anthropic, server: BackgroundServer) -> None:
    events = raw_events(server, "/messages", {"model": "hammer", "max_tokens": 64, "stream": True,
                                              "messages": [{"role": "user", "content": "hello"}]}, {"x-api-key": KEY})
    kinds = [e["type"] for e in events]
    assert kinds[0] == "message_start" and kinds[1] == "ping", kinds
    adapter = TypeAdapter(RawMessageStreamEvent)  # the SDK skips pings; every other event is in its union
    for event in events:
        if event["type"] != "ping":
            adapter.validate_python(event)
    with claude.messages.stream(model="hammer", max_tokens=64, messages=[{"role": "user", "content": "hello"}]) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "end_turn" and final.content[0].text == "Hello there, friend."


def test_a_quiet_chat_stream_sends_only_comments(oai: openai.OpenAI, server: BackgroundServer) -> None:
    with httpx.stream("POST", server.base_url + "/chat/completions", headers={"Authorization": f"Bearer {KEY}"},
                      json={"model": "hammer", "stream": True, "messages": [{"role": "user", "content": "hello"}]},
                      timeout=30) as reply:
        lines = [line for line in reply.iter_lines() if line]
    assert any(line.startswith(":") for line in lines), lines  # the comment pings of a quiet stream
    assert all(line.startswith((":", "data: ")) for line in lines), lines
    chunks = oai.chat.completions.create(model="hammer", stream=True, messages=[{"role": "user", "content": "hello"}])
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello there, friend."
