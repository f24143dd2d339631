"""Real OpenAI clients, on their own current entry points, against the OpenAI-compatible server on the
embedded default model: LangChain's ``create_agent`` over ``ChatOpenAI(base_url=...)``, LlamaIndex's
``FunctionAgent`` over ``OpenAILike`` (which streams), and the OpenAI Agents SDK's ``Runner`` over
``OpenAIChatCompletionsModel``, plain and streamed. Each must execute the tool with the right
argument and end with an answer that uses the tool's result. And examples/openai_client.py, run as
users run it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from openai_server_helpers import CLIENTS_KEY, QUESTION, RESULT, assert_create_agent_answers_from_the_tool, weather_tool

from hammer_plugins import HammerEngine
from hammer_plugins.http_api import BackgroundServer, create_app

pytestmark = pytest.mark.real_model

KEY = CLIENTS_KEY


@pytest.fixture(scope="module")
def server(llama_engine: HammerEngine) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(llama_engine, model_name="hammer", api_key=KEY)) as running:
        yield running


def test_langchain_create_agent_over_chat_openai_runs_the_tool(server: BackgroundServer) -> None:
    from langchain_openai import ChatOpenAI

    assert_create_agent_answers_from_the_tool(
        ChatOpenAI(model="hammer", base_url=server.base_url, api_key=KEY, temperature=0, max_retries=0, timeout=300))


async def test_llamaindex_function_agent_over_openai_like_runs_the_tool(server: BackgroundServer) -> None:
    from llama_index.core.agent.workflow import AgentStream, FunctionAgent, ToolCallResult
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.openai_like import OpenAILike

    get_weather, cities = weather_tool()
    llm = OpenAILike(model="hammer", api_base=server.base_url, api_key=KEY, is_chat_model=True,
                     is_function_calling_model=True, context_window=4096, max_retries=0, timeout=300)
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(get_weather)], llm=llm)
    handler = agent.run(QUESTION)
    results, deltas = [], []
    async for event in handler.stream_events():  # FunctionAgent streams: the server's tool-call deltas
        if isinstance(event, ToolCallResult):
            results.append((event.tool_name, event.tool_kwargs, str(event.tool_output)))
        elif isinstance(event, AgentStream) and event.delta:
            deltas.append(event.delta)
    answer = str(await handler)
    assert cities == ["Paris"]
    assert results == [("get_weather", {"city": "Paris"}, RESULT.format(city="Paris"))]
    assert "18" in answer and "".join(deltas).strip() == answer.strip()


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "run_streamed"])
async def test_openai_agents_sdk_runner_runs_the_tool(server: BackgroundServer, streamed: bool) -> None:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from agents.items import ToolCallItem, ToolCallOutputItem
    from openai import AsyncOpenAI

    set_tracing_disabled(True)  # the SDK would otherwise upload traces to OpenAI
    get_weather, cities = weather_tool()
    tool = function_tool(get_weather)
    model = OpenAIChatCompletionsModel(model="hammer", openai_client=AsyncOpenAI(base_url=server.base_url, api_key=KEY,
                                                                                 max_retries=0, timeout=300))
    agent = Agent(name="assistant", instructions="You are a helpful assistant.", model=model, tools=[tool])
    if streamed:  # the SDK raises ModelBehaviorError on tool-call deltas without index, id, type and name
        result = Runner.run_streamed(agent, QUESTION)
        async for _ in result.stream_events():
            pass
    else:
        result = await Runner.run(agent, QUESTION)
    calls = [item.raw_item for item in result.new_items if isinstance(item, ToolCallItem)]
    outputs = [item.output for item in result.new_items if isinstance(item, ToolCallOutputItem)]
    assert [(c.name, c.arguments) for c in calls] == [("get_weather", '{"city": "Paris"}')]
    assert cities == ["Paris"] and outputs == [RESULT.format(city="Paris")]
    assert "18" in str(result.final_output)


def test_the_openai_client_example_runs_against_the_server(server: BackgroundServer) -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "openai_client.py"
    env = {**os.environ, "HAMMER_OPENAI_URL": server.base_url, "HAMMER_SERVER_API_KEY": KEY}
    done = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "models: ['hammer']" in out and "called calculate(" in out and "391" in out
    assert "call 0: get_weather (id call_" in out and "call 1: get_weather (id call_" in out
    assert "'city': 'Paris'" in out and "'city': 'Rome'" in out and "usage:" in out
    assert "Tell me a joke ->" in out
