"""Clients of Ollama's native API against the server's ``/api/*`` on the embedded default model: the official
``ollama`` client (``chat`` plain and streamed with a ``tool`` turn, ``generate``, ``list``, ``show``, ``ps``),
LangChain's ``ChatOllama(base_url=...)`` bound to tools and in ``create_agent``, and LlamaIndex's
``Ollama(base_url=...)`` in a ``FunctionAgent``. Each runs the real tool with the right argument and answers
from its result. The server runs without a key, as Ollama does (the key is the front door's, tested with the
other APIs)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from openai_server_helpers import QUESTION, RESULT, assert_create_agent_answers_from_the_tool, weather_tool

from hammer_plugins import HammerEngine
from hammer_plugins.http_api import BackgroundServer, create_app

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(600)]  # agent loops: several model calls each


@pytest.fixture(scope="module")
def server(llama_engine: HammerEngine) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(llama_engine, model_name="hammer")) as running:
        yield running


def test_ollama_client_chat_plain_and_streamed_with_a_tool_turn(server: BackgroundServer) -> None:
    import ollama

    client = ollama.Client(host=server.url, timeout=300)
    get_weather, cities = weather_tool()
    question = [{"role": "user", "content": QUESTION}]
    first = client.chat(model="hammer", messages=question, tools=[get_weather], stream=False)
    assert first.done and first.done_reason == "stop" and first.prompt_eval_count and first.eval_count
    [call] = first.message.tool_calls or []
    assert (call.function.name, dict(call.function.arguments)) == ("get_weather", {"city": "Paris"})
    streamed = list(client.chat(model="hammer", messages=question, tools=[get_weather], stream=True))
    assert [p.done for p in streamed].count(True) == 1 and streamed[-1].done
    assert [(c.function.name, dict(c.function.arguments)) for p in streamed for c in p.message.tool_calls or []] == [
        ("get_weather", {"city": "Paris"})]
    # The tool runs, and its result goes back as Ollama's `tool` turn (named by tool_name), plain and streamed.
    history = [*question, first.message, {"role": "tool", "tool_name": call.function.name,
                                          "content": get_weather(**call.function.arguments)}]
    answer = client.chat(model="hammer", messages=history, tools=[get_weather], stream=False)
    assert not answer.message.tool_calls and "18" in (answer.message.content or "")
    pieces = list(client.chat(model="hammer", messages=history, tools=[get_weather], stream=True))
    text = "".join(p.message.content or "" for p in pieces)
    # Streamed in pieces that answer from the result (not compared with the plain answer word for word: a second
    # run may restore its prompt from the cache, and on another CPU that can change a greedy choice).
    assert len(pieces) > 2 and "18" in text and not any(p.message.tool_calls for p in pieces)
    assert [p.done for p in pieces].count(True) == 1 and pieces[-1].done_reason == "stop"
    assert cities == ["Paris"]
    print(f"\nollama client: {call.function.name}({dict(call.function.arguments)}) -> {answer.message.content!r}")


def test_ollama_client_list_show_ps_and_generate(server: BackgroundServer, llama_engine: HammerEngine) -> None:
    import ollama

    client = ollama.Client(host=server.url, timeout=300)
    [model] = client.list().models
    assert model.model == "hammer:latest" and model.size and model.details and model.details.format == "gguf"
    shown = client.show("hammer")
    assert "tools" in (shown.capabilities or [])
    lengths = [v for k, v in (shown.modelinfo or {}).items() if k.endswith("context_length")]
    assert lengths == [llama_engine.backend.context_window]
    [running] = client.ps().models
    assert running.model == "hammer:latest"
    reply = client.generate(model="hammer", prompt="Say hello in French, in one word.", options={"num_predict": 16})
    assert reply.done and reply.response.strip() and reply.eval_count and reply.eval_count <= 16
    with pytest.raises(ollama.ResponseError) as missing:
        client.chat(model="llama3.2", messages=[{"role": "user", "content": "hi"}])
    assert missing.value.status_code == 404 and "hammer" in missing.value.error
    print(f"\nollama client: list {model.model} {model.size} bytes; show context {lengths[0]}; "
          f"generate {reply.response.strip()!r}")


def test_chat_ollama_bound_to_tools_and_in_create_agent(server: BackgroundServer) -> None:
    from langchain_ollama import ChatOllama

    get_weather, _ = weather_tool()
    llm = ChatOllama(model="hammer", base_url=server.url, temperature=0, client_kwargs={"timeout": 300})
    message = llm.bind_tools([get_weather]).invoke(QUESTION)
    assert [(c["name"], c["args"]) for c in message.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert message.usage_metadata and message.usage_metadata["input_tokens"] > 0
    assert_create_agent_answers_from_the_tool(llm)


async def test_llamaindex_ollama_in_a_function_agent(server: BackgroundServer) -> None:
    from llama_index.core.agent.workflow import FunctionAgent, ToolCallResult
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.ollama import Ollama

    get_weather, cities = weather_tool()
    llm = Ollama(model="hammer", base_url=server.url, request_timeout=300)  # its context window from /api/show
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(get_weather)], llm=llm)
    handler = agent.run(QUESTION)
    results = [(e.tool_name, e.tool_kwargs, str(e.tool_output)) async for e in handler.stream_events()
               if isinstance(e, ToolCallResult)]
    answer = str(await handler)
    assert cities == ["Paris"]
    assert results == [("get_weather", {"city": "Paris"}, RESULT.format(city="Paris"))]
    assert "18" in answer
    print(f"\nLlamaIndex Ollama in FunctionAgent: {answer!r}")
