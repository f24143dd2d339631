"""The Responses and Messages APIs' contract on a scripted engine (no model), checked by the clients' own
parsers: the openai SDK's ``responses.create`` / ``responses.stream`` (which rebuilds the answer from the
events and fails on a malformed or out-of-order one) and the anthropic SDK's ``messages.create`` /
``messages.stream`` (which joins ``input_json_delta`` pieces into the call's input), against a real
uvicorn on a loopback port; every stream event is also validated against the SDKs' event unions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest
from anthropic.types import RawMessageStreamEvent
from openai.types.responses import Response, ResponseStreamEvent
from openai_server_helpers import raw_events, scripted_answer
from pydantic import TypeAdapter

from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.http_api import BackgroundServer, create_app

# The scripted answers here are keyed by codes ("Q-TWO"), not by questions that hold their values: these tests are
# about the wire format, so the ask-or-call rule is off whatever the default; tests/openai_server/test_ask_or_call_doors.py
# tests it at each door.
RULE_OFF = "call"

KEY = "apis-key"
REFUSAL = "Sorry, no tool is suitable for your request."
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
RESPONSES_TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather in a city.",
                    "parameters": WEATHER}]
ANTHROPIC_TOOLS = [{"name": "get_weather", "description": "Weather in a city.", "input_schema": WEATHER}]


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    engine = HammerEngine(backend=ScriptedBackend(responder=scripted_answer), on_missing=RULE_OFF)
    with BackgroundServer(create_app(engine, model_name="hammer", api_key=KEY)) as running:
        yield running


# ------------------------------------------------------------------ Responses
def test_responses_call_then_second_turn_answers_from_the_result(oai: openai.OpenAI) -> None:
    first = oai.responses.create(model="hammer", input="What's the weather in Paris?", tools=RESPONSES_TOOLS)
    assert isinstance(first, Response) and first.status == "completed"
    [call] = first.output
    assert call.type == "function_call" and call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert call.call_id.startswith("call_") and first.usage.total_tokens > 0 and first.store is False
    second = oai.responses.create(model="hammer", tools=RESPONSES_TOOLS, input=[
        {"role": "user", "content": "What's the weather in Paris?"},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "18 C and sunny"}])
    assert second.output_text == "It is 18 C in Paris." and second.output[0].type == "message"


def test_responses_stream_is_what_the_sdk_rebuilds(oai: openai.OpenAI, server: BackgroundServer) -> None:
    with oai.responses.stream(model="hammer", input="Q-TWO", tools=RESPONSES_TOOLS) as stream:
        final = stream.get_final_response()
    assert [json.loads(item.arguments)["city"] for item in final.output] == ["Paris", "Rome"]
    events = raw_events(server, "/responses", {"model": "hammer", "input": "Q-TWO", "tools": RESPONSES_TOOLS,
                                               "stream": True}, {"authorization": f"Bearer {KEY}"})
    adapter = TypeAdapter(ResponseStreamEvent)
    for event in events:
        adapter.validate_python(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert kinds.count("response.output_item.added") == kinds.count("response.output_item.done") == 2
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"
                     and e["output_index"] == 0)
    assert json.loads(deltas) == {"city": "Paris"}


def test_responses_streamed_prose_joins_to_the_output_text(oai: openai.OpenAI) -> None:
    with oai.responses.stream(model="hammer", input="hello") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "Hello there, friend."


def test_refusal_is_answered_in_prose_unless_the_refusal_text_is_asked_for(oai: openai.OpenAI,
                                                                           claude: anthropic.Anthropic) -> None:
    """Agent clients show what comes back: Hammer's [] gets a tool-free answer by default on both APIs."""
    assert oai.responses.create(model="hammer", input="Q-REFUSE", tools=RESPONSES_TOOLS).output_text == "Hello there, friend."
    reply = oai.responses.with_raw_response.create(model="hammer", input="Q-REFUSE", tools=RESPONSES_TOOLS,
                                                   extra_body={"on_refusal": "message"})
    assert reply.headers["x-hammer-refusal"] == "true" and reply.parse().output_text == REFUSAL
    question = [{"role": "user", "content": "Q-REFUSE"}]
    answer = claude.messages.create(model="hammer", max_tokens=64, tools=ANTHROPIC_TOOLS, messages=question)
    assert answer.content[0].text == "Hello there, friend." and answer.stop_reason == "end_turn"
    refusal = claude.messages.create(model="hammer", max_tokens=64, tools=ANTHROPIC_TOOLS, messages=question,
                                     extra_body={"on_refusal": "message"})
    assert refusal.content[0].text == REFUSAL


def test_responses_namespaces_built_in_tools_and_client_fields(oai: openai.OpenAI) -> None:
    """What Codex sends: a namespace of functions, a built-in web_search (not offered), reasoning and cache fields."""
    reply = oai.responses.create(
        model="hammer", input=[{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Be terse."}]},
                               {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Q-NS"}]}],
        tools=[*RESPONSES_TOOLS, {"type": "web_search"},
               {"type": "namespace", "name": "crm", "description": "CRM", "tools": [
                   {"type": "function", "name": "lookup", "parameters": {"type": "object", "properties": {
                       "id": {"type": "integer"}}, "required": ["id"]}}]}],
        reasoning={"summary": "auto"}, store=False, include=["reasoning.encrypted_content"], prompt_cache_key="k",
        extra_body={"client_metadata": {"x": "y"}}, parallel_tool_calls=True, tool_choice="auto")
    [call] = reply.output
    assert (call.namespace, call.name, json.loads(call.arguments)) == ("crm", "lookup", {"id": 7})


DEFERRED = [{"type": "function", "name": "get_weather", "description": "Weather in a city.", "parameters": WEATHER,
             "defer_loading": True},
            {"type": "namespace", "name": "mail", "description": "Email.", "defer_loading": True, "tools": [
                {"type": "function", "name": "send", "parameters": {"type": "object", "properties": {}}}]}]


def _offered(body: dict[str, Any]) -> list[str]:
    from hammer_plugins.http_api.responses.request import read_responses

    _, call = read_responses({"model": "hammer", **body}, ["hammer"])
    return [t["function"]["name"] for t in call.tools]


def test_responses_client_tool_search_loads_deferred_tools_when_its_output_names_them(
        oai: openai.OpenAI, server: BackgroundServer) -> None:
    """OpenAI's client-executed tool search, through the openai SDK's own types: the deferred tools stay out and the
    model is offered ``tool_search`` (naming what it can load); its call comes back as a ``tool_search_call`` item
    (streamed too, each event valid under the SDK's union); once the client's ``tool_search_output`` loads a tool,
    the next turn offers it and calls it (the search's round itself is not shown to the model)."""
    from openai.types.responses import ResponseToolSearchCall

    tools = [{"type": "tool_search", "execution": "client"}, *DEFERRED]
    assert _offered({"input": "Q-SEARCH", "tools": tools}) == ["tool_search"]
    first = oai.responses.create(model="hammer", input="Q-SEARCH", tools=tools)
    [search] = first.output
    assert isinstance(search, ResponseToolSearchCall)
    assert (search.execution, search.status, search.arguments) == ("client", "completed", {"paths": ["get_weather"]})
    assert search.call_id and search.id.startswith("tsc_")
    events = raw_events(server, "/responses", {"model": "hammer", "input": "Q-SEARCH", "tools": tools, "stream": True},
                        {"authorization": f"Bearer {KEY}"}, ResponseStreamEvent)
    assert [e["type"] for e in events if e["type"].startswith("response.output_item")] == [
        "response.output_item.added", "response.output_item.done"]
    assert events[-1]["response"]["output"][0]["type"] == "tool_search_call"
    loaded = {"type": "tool_search_output", "call_id": search.call_id, "execution": "client", "status": "completed",
              "tools": [DEFERRED[0]]}
    history = [{"role": "user", "content": "Q-SEARCH"},
               {"type": "tool_search_call", "call_id": search.call_id, "execution": "client",
                "arguments": search.arguments, "status": "completed"}, loaded]
    assert _offered({"input": history, "tools": tools}) == ["get_weather", "tool_search"]
    second = oai.responses.create(model="hammer", input=history, tools=tools)
    [call] = second.output
    assert call.type == "function_call" and (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
    # A namespace loads as a whole; a tool the output defines that the request does not list is added.
    extra = {"type": "function", "name": "get_time", "parameters": {"type": "object", "properties": {}}}
    more = [*history[:2], {**loaded, "tools": [{"type": "namespace", "name": "mail", "tools": []}, extra]}]
    assert _offered({"input": more, "tools": tools}) == ["mail.send", "get_time", "tool_search"]
    # The default description names what can be loaded; a client's own description and parameters are kept.
    from hammer_plugins.http_api.responses.request import read_responses

    _, plain = read_responses({"model": "hammer", "input": "hi", "tools": tools}, ["hammer"])
    assert "get_weather" in plain.tools[0]["function"]["description"]
    assert "mail.send" in plain.tools[0]["function"]["description"]
    own = {"type": "tool_search", "execution": "client", "description": "Find tools.",
           "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}
    _, mine = read_responses({"model": "hammer", "input": "hi", "tools": [own, *DEFERRED]}, ["hammer"])
    assert mine.tools[0]["function"]["description"] == "Find tools."
    assert mine.tools[0]["function"]["parameters"] == own["parameters"]
    # The names are held to the loadable ones; a catalog too long to list whole (an agent's 2,000 deferred tools)
    # is cut and takes any name, so the offered search stays a few thousand characters whatever the tool count.
    assert plain.tools[0]["function"]["parameters"]["properties"]["paths"]["items"]["enum"] == ["get_weather", "mail.send"]
    many = [{"type": "function", "name": f"tool_{i}", "description": "Does one thing.", "defer_loading": True}
            for i in range(2000)]
    _, large = read_responses({"model": "hammer", "input": "hi", "tools": [tools[0], *many]}, ["hammer"])
    [offered] = large.tools
    assert len(json.dumps(offered)) < 5000 and "enum" not in json.dumps(offered["function"]["parameters"])


def test_responses_server_tool_search_offers_deferred_tools_to_the_selector_and_skips_its_items(
        oai: openai.OpenAI) -> None:
    """The default, server-executed search: the engine's selector is the search, so the deferred tools join the
    tool set and a question reaches its tool at once; a server search's items in a replayed history are skipped
    (they were a 400), and with no tool_search tool deferred tools are offered as any others."""
    tools = [{"type": "tool_search"}, *DEFERRED]
    assert _offered({"input": "hi", "tools": tools}) == ["get_weather", "mail.send"]
    assert _offered({"input": "hi", "tools": DEFERRED}) == ["get_weather", "mail.send"]
    history = [{"role": "user", "content": "What's the weather in Paris?"},
               {"type": "tool_search_call", "call_id": None, "execution": "server", "arguments": {"paths": ["x"]},
                "status": "completed"},
               {"type": "tool_search_output", "call_id": None, "execution": "server", "status": "completed",
                "tools": [DEFERRED[0]]}]
    reply = oai.responses.create(model="hammer", input=history, tools=tools)
    [call] = reply.output
    assert call.type == "function_call" and call.name == "get_weather"


@pytest.mark.parametrize(("body", "param"), [
    ({"tools": [{"type": "tool_search"}, {"type": "tool_search"}]}, "tools[1]"),
    ({"tools": [{"type": "tool_search", "execution": "elsewhere"}]}, "tools[0].execution"),
    ({"tools": [{"type": "tool_search", "execution": "client"}, {"type": "function", "name": "tool_search"}]},
     "tools"),
    ({"tools": [{"type": "tool_search", "execution": "client"}],
      "input": [{"role": "user", "content": "hi"}, {"type": "tool_search_output", "execution": "client",
                                                    "call_id": "c", "tools": "get_weather"}]}, "input[1].tools"),
])
def test_responses_tool_search_mistakes_name_the_field(oai: openai.OpenAI, body: dict[str, Any], param: str) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        oai.responses.create(**{"model": "hammer", "input": "hi", **body})
    assert caught.value.body["param"] == param


@pytest.mark.parametrize(("body", "param"), [
    ({"previous_response_id": "resp_1"}, "previous_response_id"),
    ({"input": [{"type": "item_reference", "id": "x"}]}, "input[0]"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0].type"),
    ({"tool_choice": {"type": "web_search"}, "tools": [{"type": "web_search"}]}, "tool_choice"),
    ({"model": "gpt-5"}, "model"),
    ({"input": [{"role": "user", "content": "hi"}, {"type": "function_call_output", "output": "x"}]}, "input[1].call_id"),
])
def test_responses_refusals_name_the_field(oai: openai.OpenAI, body: dict[str, Any], param: str) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        oai.responses.create(**{"model": "hammer", "input": "hi", **body})
    error = caught.value.body
    assert caught.value.status_code in (400, 404) and error["param"] == param and error["message"]


def test_an_output_no_call_asked_for_is_a_user_turn_naming_it() -> None:
    """Codex CLI sends a function_call_output with a name and namespace and no call_id (its goal's objective):
    the text reaches the model as a user turn saying whose output it is; no assistant call is made up."""
    from hammer_plugins.http_api.responses.request import ResponsesMeta, _messages

    request = {"input": [{"role": "user", "content": "Say hello."},
                         {"type": "function_call_output", "name": "goal_objective", "namespace": "agent",
                          "output": "Be brief."}]}
    messages, origins = _messages(request, ResponsesMeta(model="hammer"))
    assert [(m.role, m.content, m.tool_calls) for m in messages] == [
        ("user", "Say hello.", []), ("user", "(output of agent.goal_objective) Be brief.", [])]
    assert origins == ["input[0]", "input[1]"]


def test_stored_responses_are_not_kept(server: BackgroundServer) -> None:
    reply = httpx.get(server.base_url + "/responses/resp_1", headers={"authorization": f"Bearer {KEY}"})
    assert reply.status_code == 404 and "stateless" in reply.json()["error"]["message"]


# ------------------------------------------------------------------ Messages
def test_messages_tool_use_then_tool_result_answer(claude: anthropic.Anthropic) -> None:
    first = claude.messages.create(model="hammer", max_tokens=64, tools=ANTHROPIC_TOOLS, tool_choice={"type": "any"},
                                   system=[{"type": "text", "text": "You help."}],
                                   messages=[{"role": "user", "content": "What's the weather in Paris?"}])
    assert first.stop_reason == "tool_use"
    [use] = first.content
    assert use.type == "tool_use" and use.name == "get_weather" and use.input == {"city": "Paris"}
    second = claude.messages.create(model="hammer", max_tokens=64, tools=ANTHROPIC_TOOLS, messages=[
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "18 C, sunny"}]}])
    assert second.stop_reason == "end_turn" and second.content[0].text == "It is 18 C in Paris."
    assert second.usage.input_tokens > 0 and second.usage.output_tokens > 0


def test_messages_stream_is_what_the_sdk_rebuilds(claude: anthropic.Anthropic, server: BackgroundServer) -> None:
    with claude.messages.stream(model="hammer", max_tokens=64, tools=ANTHROPIC_TOOLS,
                                messages=[{"role": "user", "content": "Q-TWO"}]) as stream:
        final = stream.get_final_message()
    assert [b.input for b in final.content] == [{"city": "Paris"}, {"city": "Rome"}]
    assert final.stop_reason == "tool_use" and final.usage.input_tokens > 0
    events = raw_events(server, "/messages?beta=true", {"model": "hammer", "max_tokens": 64, "stream": True,
                                                        "messages": [{"role": "user", "content": "hello"}]},
                        {"x-api-key": KEY})
    adapter = TypeAdapter(RawMessageStreamEvent)
    for event in events:
        adapter.validate_python(event)
    kinds = [e["type"] for i, e in enumerate(events) if i == 0 or e["type"] != events[i - 1]["type"]]
    assert kinds == ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                     "message_delta", "message_stop"]
    assert "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta") == "Hello there, friend."
    assert [e["delta"]["stop_reason"] for e in events if e["type"] == "message_delta"] == ["end_turn"]


def test_messages_what_claude_code_sends_is_tolerated(claude: anthropic.Anthropic) -> None:
    """A system turn inside messages, server tools, thinking, context management, an oversized max_tokens."""
    reply = claude.messages.create(
        model="hammer", max_tokens=32000, messages=[{"role": "system", "content": "Project rules."},
                                                    {"role": "user", "content": [{"type": "text", "text": "hello",
                                                                                  "cache_control": {"type": "ephemeral"}}]}],
        tools=[{"type": "web_search_20250305", "name": "web_search"}], thinking={"type": "adaptive"},
        metadata={"user_id": "u"}, timeout=60,
        extra_body={"context_management": {"edits": []}, "output_config": {"effort": "low"}})
    assert reply.content[0].text == "Hello there, friend." and reply.stop_reason == "end_turn"


def test_messages_errors_are_anthropic_errors(claude: anthropic.Anthropic, server: BackgroundServer) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        claude.messages.create(model="hammer", max_tokens=64, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}])
    assert caught.value.body["type"] == "error" and caught.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.AuthenticationError):
        anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key="wrong", max_retries=0).messages.create(
            model="hammer", max_tokens=8, messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.create(model="claude-x", max_tokens=8, messages=[{"role": "user", "content": "hi"}])


def test_count_tokens_counts_the_rendered_prompt(claude: anthropic.Anthropic) -> None:
    small = claude.messages.count_tokens(model="hammer", messages=[{"role": "user", "content": "hi"}])
    tooled = claude.messages.count_tokens(model="hammer", messages=[{"role": "user", "content": "hi"}],
                                          tools=ANTHROPIC_TOOLS)
    assert 0 < small.input_tokens < tooled.input_tokens


def test_is_error_results_are_marked_for_the_model() -> None:
    from hammer_plugins.http_api.messages.request import read_messages

    _, call = read_messages({"model": "hammer", "max_tokens": 8, "tools": ANTHROPIC_TOOLS, "messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "X"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                                      "content": [{"type": "text", "text": "no such city"}]}]}]}, ["hammer"])
    assert call.messages[-1].role == "tool" and call.messages[-1].content == "Error: no such city"


def test_a_prompt_over_the_context_is_each_apis_own_error() -> None:
    """A 400 in each API's words (Claude Code reads Anthropic's "prompt is too long" to compact), and a max_tokens
    above the context is capped rather than refused."""
    engine = HammerEngine(backend=ScriptedBackend(responder=scripted_answer, context_window=400),
                          on_missing=RULE_OFF)
    with BackgroundServer(create_app(engine, model_name="hammer", api_key=KEY)) as small:
        oai = openai.OpenAI(base_url=small.base_url, api_key=KEY, max_retries=0)
        claude = anthropic.Anthropic(base_url=small.base_url.removesuffix("/v1"), api_key=KEY, max_retries=0)
        long = "word " * 2000
        with pytest.raises(openai.BadRequestError) as caught:
            oai.responses.create(model="hammer", input=long)
        assert caught.value.body["code"] == "context_length_exceeded"
        with pytest.raises(anthropic.BadRequestError) as too_long:
            claude.messages.create(model="hammer", max_tokens=64, messages=[{"role": "user", "content": long}])
        assert too_long.value.body["error"]["message"].startswith("prompt is too long: ")
        capped = claude.messages.create(model="hammer", max_tokens=32000, timeout=60,
                                        messages=[{"role": "user", "content": "hello"}])
        assert capped.content[0].text == "Hello there, friend."


def test_deferred_tools_are_offered_once_a_tool_search_result_references_them(claude: anthropic.Anthropic) -> None:
    """Anthropic's tool search as Claude Code uses it: a ``defer_loading`` tool is not in the prompt until a
    ``tool_result`` holds a ``tool_reference`` naming it, which the model reads as "Tool loaded: <name>"; through
    the anthropic SDK such a turn is answered (it was a 400, and Claude Code then dropped tool search and sent a
    new, uncached tool set); a reference without a name is a 400 naming the field."""
    from hammer_plugins.http_api.messages.request import read_messages

    search = {"name": "tool_search", "description": "Find tools by keyword.",
              "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}
    email = {"name": "send_email", "description": "Send an email.", "defer_loading": True,
             "input_schema": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}}
    tools = [*ANTHROPIC_TOOLS, search, email]
    asked = [{"role": "user", "content": "Email bob that it is sunny"}]
    searched = [*asked, {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "tool_search",
                                                           "input": {"query": "email"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
                    {"type": "tool_reference", "tool_name": "send_email"}]}]}]
    _, first = read_messages({"model": "hammer", "max_tokens": 8, "tools": tools, "messages": asked}, ["hammer"])
    _, second = read_messages({"model": "hammer", "max_tokens": 8, "tools": tools, "messages": searched}, ["hammer"])
    assert [t["function"]["name"] for t in first.tools] == ["get_weather", "tool_search"]
    assert [t["function"]["name"] for t in second.tools] == ["get_weather", "tool_search", "send_email"]
    assert second.messages[-1].role == "tool" and second.messages[-1].content == "Tool loaded: send_email"
    reply = claude.messages.create(model="hammer", max_tokens=64, tools=tools, messages=searched, timeout=60)
    assert reply.stop_reason in ("tool_use", "end_turn")
    counted = [claude.messages.count_tokens(model="hammer", tools=tools, messages=m).input_tokens for m in (asked, searched)]
    assert counted[0] < counted[1]
    nameless = [*searched[:2], {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
        {"type": "tool_reference"}]}]}]
    with pytest.raises(anthropic.BadRequestError, match=r"messages\[2\]\.content\[0\]\.content\[0\]\.tool_name"):
        claude.messages.create(model="hammer", max_tokens=8, tools=tools, messages=nameless)
