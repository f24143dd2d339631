"""Real clients of the Responses and Messages APIs, on their own entry points, against the server on the
embedded default model: the openai SDK's ``responses.create`` (plain, streamed, a second turn with the
``function_call_output``), the OpenAI Agents SDK on its default model class (Responses: no
``set_default_openai_api``), LangChain's ``create_agent`` over ``ChatOpenAI(use_responses_api=True)`` and
over ``ChatAnthropic(base_url=...)``, LlamaIndex's ``OpenAIResponses``, and the anthropic SDK's
``messages.create`` (plain, streamed, a ``tool_result`` turn, ``tool_choice`` any). Each runs the real
tool with the right argument and answers from its result."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from openai_server_helpers import CLIENTS_KEY, QUESTION, RESULT, assert_create_agent_answers_from_the_tool, weather_tool

from hammer_plugins import HammerEngine
from hammer_plugins.http_api import BackgroundServer, create_app

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(600)]  # agent loops: several model calls each

KEY = CLIENTS_KEY
WEATHER = {"type": "object", "properties": {"city": {"type": "string", "description": "The city"}},
           "required": ["city"]}


@pytest.fixture(scope="module")
def server(llama_engine: HammerEngine) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(llama_engine, model_name="hammer", api_key=KEY)) as running:
        yield running


# ------------------------------------------------------------------ the Responses API
def test_openai_sdk_responses_plain_streamed_and_second_turn(server: BackgroundServer) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=300)
    tools = [{"type": "function", "name": "get_weather", "description": "Get the current weather in a city.",
              "parameters": WEATHER}]
    first = client.responses.create(model="hammer", input=QUESTION, tools=tools)
    [call] = first.output
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    with client.responses.stream(model="hammer", input=QUESTION, tools=tools) as stream:
        streamed = stream.get_final_response()
    assert [(i.name, json.loads(i.arguments)) for i in streamed.output] == [("get_weather", {"city": "Paris"})]
    get_weather, _ = weather_tool()
    second = client.responses.create(model="hammer", tools=tools, input=[
        {"role": "user", "content": QUESTION},
        {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": get_weather(**json.loads(call.arguments))}])
    assert second.status == "completed" and "18" in second.output_text
    assert not [i for i in second.output if i.type == "function_call"]


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_openai_agents_sdk_default_model_runs_the_tool(server: BackgroundServer, streamed: bool) -> None:
    from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
    from agents.items import ToolCallItem, ToolCallOutputItem
    from agents.models.openai_provider import OpenAIProvider
    from agents.models.openai_responses import OpenAIResponsesModel
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # the SDK would otherwise upload traces to OpenAI
    provider = OpenAIProvider(openai_client=AsyncOpenAI(base_url=server.base_url, api_key=KEY, max_retries=0,
                                                        timeout=300))
    assert isinstance(provider.get_model("hammer"), OpenAIResponsesModel)  # the SDK's default: the Responses API
    get_weather, cities = weather_tool()
    agent = Agent(name="assistant", instructions="You are a helpful assistant.", model="hammer",
                  tools=[function_tool(get_weather)])
    config = RunConfig(model_provider=provider)
    if streamed:
        result = Runner.run_streamed(agent, QUESTION, run_config=config)
        async for _ in result.stream_events():
            pass
    else:
        result = await Runner.run(agent, QUESTION, run_config=config)
    calls = [item.raw_item for item in result.new_items if isinstance(item, ToolCallItem)]
    outputs = [item.output for item in result.new_items if isinstance(item, ToolCallOutputItem)]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Paris"})]
    assert cities == ["Paris"] and outputs == [RESULT.format(city="Paris")]
    assert "18" in str(result.final_output)


async def test_openai_agents_sdk_tool_search_reaches_a_deferred_tool(server: BackgroundServer) -> None:
    """The Agents SDK's hosted tool search (``ToolSearchTool()`` beside a ``defer_loading`` tool, as its docs show):
    the server's search is the engine's selector, so the deferred tool is called and its result answered."""
    from agents import Agent, RunConfig, Runner, ToolSearchTool, function_tool, set_tracing_disabled
    from agents.items import ToolCallItem
    from agents.models.openai_provider import OpenAIProvider
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    provider = OpenAIProvider(openai_client=AsyncOpenAI(base_url=server.base_url, api_key=KEY, max_retries=0,
                                                        timeout=300))
    get_weather, cities = weather_tool()
    agent = Agent(name="assistant", instructions="You are a helpful assistant.", model="hammer",
                  tools=[ToolSearchTool(), function_tool(get_weather, defer_loading=True)])
    result = await Runner.run(agent, QUESTION, run_config=RunConfig(model_provider=provider))
    calls = [item.raw_item for item in result.new_items if isinstance(item, ToolCallItem)]
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("get_weather", {"city": "Paris"})]
    assert cities == ["Paris"] and "18" in str(result.final_output)


def test_openai_sdk_client_executed_tool_search_loads_then_calls_the_tool(server: BackgroundServer) -> None:
    """OpenAI's client-executed tool search with the openai SDK and the real model: the model, offered only
    ``tool_search`` (the deferred tools listed in its description), asks to load the weather tool; the client answers
    with a ``tool_search_output`` holding its definition; the model then calls it, and answers from its result."""
    from openai import OpenAI
    from openai.types.responses import ResponseToolSearchCall

    client = OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=300)
    deferred = {"get_weather": {"type": "function", "name": "get_weather", "defer_loading": True,
                                "description": "Get the current weather in a city.", "parameters": WEATHER},
                "send_email": {"type": "function", "name": "send_email", "defer_loading": True,
                               "description": "Send an email to an address.",
                               "parameters": {"type": "object", "properties": {"to": {"type": "string"}},
                                              "required": ["to"]}}}
    tools = [{"type": "tool_search", "execution": "client"}, *deferred.values()]
    first = client.responses.create(model="hammer", input=QUESTION, tools=tools)
    [search] = first.output
    assert isinstance(search, ResponseToolSearchCall) and search.execution == "client"
    paths = search.arguments["paths"]
    assert "get_weather" in paths and set(paths) <= set(deferred)  # the stand-in may load the other tool too
    history = [{"role": "user", "content": QUESTION},
               {"type": "tool_search_call", "call_id": search.call_id, "execution": "client",
                "arguments": search.arguments, "status": "completed"},
               {"type": "tool_search_output", "call_id": search.call_id, "execution": "client", "status": "completed",
                "tools": [deferred[p] for p in paths if p in deferred]}]
    second = client.responses.create(model="hammer", input=history, tools=tools)
    [call] = second.output
    assert call.type == "function_call" and (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
    get_weather, _ = weather_tool()
    third = client.responses.create(model="hammer", tools=tools, input=[
        *history, {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": get_weather(city="Paris")}])
    assert third.status == "completed" and "18" in third.output_text


def test_langchain_create_agent_over_chat_openai_responses_api(server: BackgroundServer) -> None:
    from langchain_openai import ChatOpenAI

    assert_create_agent_answers_from_the_tool(
        ChatOpenAI(model="hammer", base_url=server.base_url, api_key=KEY, temperature=0, max_retries=0, timeout=300,
                   use_responses_api=True))


async def test_llamaindex_openai_responses_runs_the_tool(server: BackgroundServer) -> None:
    from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.openai import OpenAIResponses

    get_weather, cities = weather_tool()
    # temperature=0 as the LangChain tests pin it: OpenAIResponses' default (0.1) samples, and a 0.5B stand-in then
    # varies its call or its answer from run to run (CI once failed here; 2 of 2 runs passed on this machine).
    llm = OpenAIResponses(model="hammer", api_base=server.base_url, api_key=KEY, max_retries=0, timeout=300,
                          context_window=4096, is_function_calling_model=True, temperature=0)
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(get_weather)], llm=llm)
    handler = agent.run(QUESTION)
    results = [(e.tool_name, e.tool_kwargs) async for e in handler.stream_events() if isinstance(e, ToolCallResult)]
    answer = str(await handler)
    assert cities == ["Paris"] and results == [("get_weather", {"city": "Paris"})]
    assert "18" in answer


# ------------------------------------------------------------------ the Messages API
def test_anthropic_sdk_messages_plain_streamed_tool_result_and_any(server: BackgroundServer) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key=KEY, max_retries=0, timeout=300)
    tools = [{"name": "get_weather", "description": "Get the current weather in a city.", "input_schema": WEATHER}]
    question = [{"role": "user", "content": QUESTION}]
    first = client.messages.create(model="hammer", max_tokens=256, tools=tools, tool_choice={"type": "any"},
                                   messages=question)
    assert first.stop_reason == "tool_use"
    [use] = [b for b in first.content if b.type == "tool_use"]
    assert (use.name, use.input) == ("get_weather", {"city": "Paris"})
    with client.messages.stream(model="hammer", max_tokens=256, tools=tools, messages=question) as stream:
        streamed = stream.get_final_message()
    assert [(b.name, b.input) for b in streamed.content if b.type == "tool_use"] == [("get_weather", {"city": "Paris"})]
    get_weather, _ = weather_tool()
    second = client.messages.create(model="hammer", max_tokens=256, tools=tools, messages=[
        *question, {"role": "assistant", "content": [use.model_dump(include={"type", "id", "name", "input"})]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": get_weather(**use.input)}]}])
    assert second.stop_reason == "end_turn" and "18" in second.content[0].text


def test_langchain_create_agent_over_chat_anthropic(server: BackgroundServer) -> None:
    from langchain_anthropic import ChatAnthropic

    assert_create_agent_answers_from_the_tool(
        ChatAnthropic(model="hammer", base_url=server.base_url.removesuffix("/v1"), api_key=KEY, temperature=0,
                      max_retries=0, timeout=300, max_tokens=256))


# ------------------------------------------------------------------ strict and parallel_tool_calls, every API
STRICT = {"type": "object", "additionalProperties": False, "required": ["city", "unit"],
          "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}}
TWO_CITIES = "What's the weather in Paris and in Rome?"


def _calls(server: BackgroundServer, api: str, parallel: bool) -> list[tuple[str, dict]]:
    """The calls one request gets on ``api``, with a strict schema and parallel calls on or off."""
    from anthropic import Anthropic
    from openai import OpenAI

    description = "Get the current weather in a city."
    if api == "chat":
        client = OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=300)
        reply = client.chat.completions.create(
            model="hammer", messages=[{"role": "user", "content": TWO_CITIES}], parallel_tool_calls=parallel,
            tools=[{"type": "function", "function": {"name": "get_weather", "description": description,
                                                     "parameters": STRICT, "strict": True}}])
        return [(c.function.name, json.loads(c.function.arguments)) for c in reply.choices[0].message.tool_calls or []]
    if api == "responses":
        client = OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=300)
        reply = client.responses.create(model="hammer", input=TWO_CITIES, parallel_tool_calls=parallel, tools=[
            {"type": "function", "name": "get_weather", "description": description, "parameters": STRICT, "strict": True}])
        return [(i.name, json.loads(i.arguments)) for i in reply.output if i.type == "function_call"]
    claude = Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key=KEY, max_retries=0, timeout=300)
    message = claude.messages.create(
        model="hammer", max_tokens=256, messages=[{"role": "user", "content": TWO_CITIES}],
        tools=[{"name": "get_weather", "description": description, "input_schema": STRICT, "strict": True}],
        tool_choice={"type": "auto", "disable_parallel_tool_use": not parallel})
    return [(b.name, b.input) for b in message.content if b.type == "tool_use"]


@pytest.mark.parametrize("api", ["chat", "responses", "messages"])
def test_strict_schemas_hold_and_parallel_off_gives_one_call(server: BackgroundServer, api: str) -> None:
    import jsonschema

    several = _calls(server, api, parallel=True)
    single = _calls(server, api, parallel=False)
    assert len(several) >= 2, several  # the control: asked for two cities, the model calls twice when allowed
    assert len(single) == 1, single
    for name, arguments in several + single:
        assert name == "get_weather"
        jsonschema.validate(arguments, STRICT)  # as written: both required, the enum, nothing else
