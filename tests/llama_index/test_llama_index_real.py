"""HammerLLM on the real embedded default model (llama.cpp, greedy): what a LlamaIndex user runs.

The default model is Qwen2.5-Coder-0.5B-Instruct, Hammer2.1-0.5b's base, not a Hammer fine-tune:
constrained decoding carries its tool calling. Questions are clear and tool sets small; behaviour
beyond the model (refusing unrelated questions under "auto") is tested on scripted answers in
test_llama_index_logic.py instead.
"""

from __future__ import annotations

import json

import pytest
from llama_index.core.agent.workflow import AgentStream, AgentWorkflow, FunctionAgent, ToolCallResult
from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock
from llama_index.core.memory import Memory
from llama_index.core.prompts import PromptTemplate
from llama_index.core.tools import FunctionTool
from llama_index.llms.hammer import HammerLLM
from pydantic import BaseModel

pytestmark = [
    pytest.mark.real_model,
    # llama-index-workflows inspects the pydantic agent with inspect.getmembers, which trips
    # pydantic's deprecation warnings; they come from that library, not from this adapter.
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20",
                               "ignore::pydantic.warnings.PydanticDeprecatedSince211"),
]


def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city (str): The city name, e.g. Paris.
    """
    return json.dumps({"city": city, "forecast": "sunny", "temperature_c": 21})


def multiply(a: float, b: float) -> float:
    """Multiply two numbers and return the product.

    Args:
        a (float): The first number.
        b (float): The second number.
    """
    return a * b


TOOLS = [FunctionTool.from_defaults(get_weather), FunctionTool.from_defaults(multiply)]


class Person(BaseModel):
    """A person mentioned in the text."""

    name: str
    age: int


def calls_of(response: object) -> list[tuple[str, dict[str, object]]]:
    return [(b.tool_name, dict(b.tool_kwargs)) for b in response.message.blocks  # type: ignore[attr-defined]
            if isinstance(b, ToolCallBlock)]


def test_chat_and_stream_chat_with_tools_agree(hammer_llm: HammerLLM) -> None:
    response = hammer_llm.chat_with_tools(TOOLS, user_msg="What's the weather in Paris?")
    assert calls_of(response) == [("get_weather", {"city": "Paris"})]
    assert response.raw["usage"]["prompt_tokens"] > 100 and response.raw["usage"]["completion_tokens"] > 0
    chunks = list(hammer_llm.stream_chat_with_tools(TOOLS, user_msg="What's the weather in Paris?"))
    counts = [len(calls_of(c)) for c in chunks]
    assert counts == sorted(counts) and counts[0] == 0  # calls appear as they complete, never vanish
    assert calls_of(chunks[-1]) == calls_of(response)
    streamed_ids = {b.tool_call_id for c in chunks for b in c.message.blocks if isinstance(b, ToolCallBlock)}
    assert len(streamed_ids) == 1 and streamed_ids.isdisjoint({b.tool_call_id for b in response.message.blocks
                                                               if isinstance(b, ToolCallBlock)})


def test_record_passes_shows_the_prompt_the_model_read_for_each_answer(hammer_llm: HammerLLM) -> None:
    """``record_passes=True``: the call's pass is Hammer's tools prompt, counted as the model's tokenizer counts it;
    the answer after the result is a tool-free pass holding the result (what planning the request again hides)."""
    question = ChatMessage(role="user", content="What's the weather in Paris?")
    asked = hammer_llm.chat_with_tools(TOOLS, chat_history=[question], record_passes=True)
    [tools_pass] = asked.additional_kwargs["passes"]
    assert tools_pass["stage"] == "tools" and tools_pass["offered_tools"] == ["get_weather", "multiply"]
    assert tools_pass["prompt_tokens"] == asked.additional_kwargs["prompt_tokens"] == hammer_llm.get_num_tokens(
        tools_pass["prompt"])
    [selection] = hammer_llm.get_tool_calls_from_response(asked)
    result = ChatMessage(role="tool", content="18 C and sunny", additional_kwargs={"tool_call_id": selection.tool_id})
    answered = hammer_llm.chat_with_tools(TOOLS, chat_history=[question, asked.message, result], record_passes=True,
                                          max_tokens=40)
    [answer_pass] = answered.additional_kwargs["passes"]
    assert answer_pass["stage"] == "answer" and answer_pass["offered_tools"] == [] and answer_pass["model_ran"]
    assert "18 C and sunny" in answer_pass["prompt"] and "[BEGIN OF AVAILABLE TOOLS]" not in answer_pass["prompt"]


def test_parallel_calls_when_the_question_asks_for_several(hammer_llm: HammerLLM) -> None:
    parallel = HammerLLM(model_path=hammer_llm.model_path, n_ctx=4096, max_tokens=96)
    response = parallel.chat_with_tools(TOOLS, user_msg="What's the weather in Paris and in Rome?",
                                        allow_parallel_tool_calls=True)
    assert calls_of(response) == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})]
    ids = [b.tool_call_id for b in response.message.blocks if isinstance(b, ToolCallBlock)]
    assert len(set(ids)) == 2


def test_predict_and_call_runs_the_chosen_tool(hammer_llm: HammerLLM) -> None:
    result = hammer_llm.predict_and_call(TOOLS, user_msg="What is 12.5 times 4?")
    assert [(s.tool_name, s.raw_output) for s in result.sources] == [("multiply", 50.0)]
    assert result.response == "50.0"


async def test_async_tool_calling(hammer_llm: HammerLLM) -> None:
    response = await hammer_llm.achat_with_tools(TOOLS, user_msg="Is it raining in Tokyo?")
    assert calls_of(response) == [("get_weather", {"city": "Tokyo"})]
    chunks = [c async for c in await hammer_llm.astream_chat_with_tools(TOOLS, user_msg="Multiply 7 by 6.")]
    assert calls_of(chunks[-1]) == [("multiply", {"a": 7, "b": 6})]
    result = await hammer_llm.apredict_and_call(TOOLS, user_msg="Multiply 7 by 6.")
    assert result.response == "42"


def test_structured_predict_returns_the_pydantic_object(hammer_llm: HammerLLM) -> None:
    person = hammer_llm.structured_predict(Person, PromptTemplate("Extract the person from: {text}"),
                                           text="Alice is 31 years old.")
    assert person == Person(name="Alice", age=31)


async def test_astructured_predict(hammer_llm: HammerLLM) -> None:
    person = await hammer_llm.astructured_predict(Person, PromptTemplate("Extract the person from: {text}"),
                                                  text="Bob turned 40 last week.")
    assert person == Person(name="Bob", age=40)


def test_plain_completion_without_tools(hammer_llm: HammerLLM) -> None:
    chunks = list(hammer_llm.stream_complete("Translate 'good morning' into French. Answer with the translation only.",
                                             max_tokens=16))
    text = "".join(c.delta or "" for c in chunks)
    assert "bonjour" in text.lower() and chunks[-1].text == text.strip()
    reply = hammer_llm.chat([ChatMessage(role="user", content="Say hello in French, one word.")], max_tokens=8)
    assert "bonjour" in (reply.message.content or "").lower() and not calls_of(reply)


def test_mask_names_maps_calls_back_to_the_real_tools(hammer_llm: HammerLLM) -> None:
    masked = HammerLLM(model_path=hammer_llm.model_path, n_ctx=4096, max_tokens=96, mask_names=True)
    response = masked.chat_with_tools(TOOLS, user_msg="What's the weather in Paris?")
    assert calls_of(response) == [("get_weather", {"city": "Paris"})]
    assert masked.engine.backend is hammer_llm.engine.backend  # one loaded model for both


async def test_function_agent_end_to_end(hammer_llm: HammerLLM) -> None:
    agent = FunctionAgent(tools=[get_weather, multiply], llm=hammer_llm, streaming=False)
    handler = agent.run("What's the weather in Paris?")
    results = [e async for e in handler.stream_events() if isinstance(e, ToolCallResult)]
    answer = str(await handler)
    assert [(r.tool_name, r.tool_kwargs) for r in results] == [("get_weather", {"city": "Paris"})]
    assert "sunny" in answer.lower() and "{" not in answer


async def test_streaming_function_agent_end_to_end(hammer_llm: HammerLLM) -> None:
    agent = FunctionAgent(tools=[get_weather, multiply], llm=hammer_llm)  # streams by default
    handler = agent.run("What is 12.5 times 4?")
    results, deltas = [], []
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            results.append((event.tool_name, event.tool_output.raw_output))
        elif isinstance(event, AgentStream):
            deltas.append(event.delta)
    answer = str(await handler)
    assert results == [("multiply", 50.0)]
    assert "50" in answer and "200" not in answer  # reports the result; does not multiply it again
    assert "".join(deltas).strip() == answer.strip()


async def test_agent_workflow_from_tools_or_functions_over_two_turns(hammer_llm: HammerLLM) -> None:
    workflow = AgentWorkflow.from_tools_or_functions([get_weather, multiply], llm=hammer_llm)
    assert isinstance(workflow.agents[workflow.root_agent], FunctionAgent)
    memory = Memory.from_defaults(session_id="two-turns", token_limit=3000)
    handler = workflow.run("What's the weather in Rome?", memory=memory)
    results = [e async for e in handler.stream_events() if isinstance(e, ToolCallResult)]
    answer = str(await handler)
    assert [(r.tool_name, r.tool_kwargs) for r in results] == [("get_weather", {"city": "Rome"})]
    assert "sunny" in answer.lower()
    # Second turn, same memory: the earlier call and its result are in the prompt now.
    handler = workflow.run("What is 3 times 7?", memory=memory)
    results = [e async for e in handler.stream_events() if isinstance(e, ToolCallResult)]
    answer = str(await handler)
    assert [(r.tool_name, r.tool_output.raw_output) for r in results] == [("multiply", 21)]
    assert "21" in answer
    assert [m.role.value for m in await memory.aget_all()] == ["user", "assistant", "tool", "assistant"] * 2


def test_token_counts_are_the_models_own(hammer_llm: HammerLLM) -> None:
    from llama_index.core import Settings
    from llama_index.llms.hammer.base import to_engine_messages, to_engine_tool

    llm = hammer_llm
    messages = [ChatMessage(role="user", content="What's the weather in Paris?")]
    tools = [FunctionTool.from_defaults(get_weather)]
    backend = llm.engine.backend
    rendered = llm.engine.render(to_engine_messages(messages), tools=[to_engine_tool(t) for t in tools])
    assert llm.get_num_tokens_from_messages(messages, tools) == len(backend.tokenize(rendered)) > 300
    assert llm.get_num_tokens_from_messages(messages) < 40  # no tools: the plain chat
    assert llm.tokenizer("hello world") == backend.tokenize("hello world") and llm.get_num_tokens("hello world") == 2
    previous = Settings.tokenizer
    try:
        Settings.tokenizer = llm.tokenizer  # what token limits in LlamaIndex then count with
        assert Settings.tokenizer("hello world") == llm.tokenizer("hello world")
    finally:
        Settings.tokenizer = previous
