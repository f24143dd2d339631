"""A large tool set on the real default model: 230 real BFCL functions plus a weather tool, far more than the
4,096-token context holds (about 170 tokens a tool), through every door with default settings. Each door must
call the weather tool with the city asked, say which tools it offered, and never fail for the context window;
masking must survive the selection; and a conversation's third turn, or a new session with the same system
text and tools, must find the prefix's KV state instead of evaluating it again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from hammer_plugins import HammerEngine, Message, ToolCall
from hammer_plugins.backends.llama_cpp import LlamaCppBackend
from hammer_plugins.http_api import BackgroundServer, create_app

pytestmark = [pytest.mark.real_model, pytest.mark.timeout(600)]

KEY = "many-tools-key"
QUESTION = "What's the weather in Paris?"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city, e.g. Paris."}},
                   "required": ["city"]}}}


@pytest.fixture(scope="module")
def many_tools() -> list[dict[str, Any]]:
    """230 BFCL simple_python functions as OpenAI tools (JSON Schema types), the weather tool among them."""
    from hammer_evals.bfcl.bfcl import load_category, to_openai_tools

    functions = {}
    for entry in load_category("simple_python")[0]:
        for function in entry.functions:
            if "weather" not in function["name"].lower():  # the one weather tool is ours
                functions.setdefault(function["name"], function)
    tools, _ = to_openai_tools(list(functions.values())[:230])
    tools.insert(117, WEATHER)
    return tools


def _names(tools: list[dict[str, Any]]) -> list[str]:
    return [t["function"]["name"] for t in tools]


def test_the_engine_offers_the_best_matches_and_calls_the_right_tool(llama_engine: HammerEngine,
                                                                      many_tools: list[dict[str, Any]]) -> None:
    assert llama_engine.count_tokens(json.dumps(many_tools)) > 4 * llama_engine.backend.context_window  # far past it
    response = llama_engine.generate([Message.user(QUESTION)], many_tools)
    assert [(c.name, c.arguments.get("city")) for c in response.tool_calls] == [("get_weather", "Paris")]
    assert response.offered_tools and "get_weather" in response.offered_tools and len(response.offered_tools) <= 4
    assert response.offered_tools == [n for n in _names(many_tools) if n in response.offered_tools]  # their order
    assert response.usage.prompt_tokens < 1500


# Questions that share no word with the weather tool's description, in English and in Chinese: BM25 cannot reach it.
PARAPHRASED = "Do I need a coat in Oslo today?"
CHINESE = "巴黎现在的天气怎么样？"
CITY = {PARAPHRASED: ("Oslo",), CHINESE: ("Paris", "巴黎")}


def test_a_paraphrased_and_a_chinese_question_reach_the_tool_by_meaning(llama_engine: HammerEngine,
                                                                        many_tools: list[dict[str, Any]]) -> None:
    for question in (PARAPHRASED, CHINESE):
        response = llama_engine.generate([Message.user(question)], many_tools)
        assert "get_weather" in (response.offered_tools or []), question
        assert [(c.name, c.arguments.get("city") in CITY[question]) for c in response.tool_calls] == [
            ("get_weather", True)]
        # By words alone the weather tool is never offered: what the selection by meaning adds.
        words = HammerEngine(backend=llama_engine.backend, tool_selector="bm25")
        assert '"get_weather"' not in words.render([Message.user(question)], many_tools)


def test_chathammer_and_hammerllm_with_hundreds_of_tools(default_model_path: str,
                                                          many_tools: list[dict[str, Any]]) -> None:
    from langchain_hammer import ChatHammer
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.hammer import HammerLLM

    chat = ChatHammer(model_path=default_model_path, n_ctx=4096, max_tokens=96)
    message = chat.bind_tools(many_tools).invoke(QUESTION)
    assert [(c["name"], c["args"].get("city")) for c in message.tool_calls] == [("get_weather", "Paris")]
    assert "get_weather" in message.response_metadata["offered_tools"]
    chinese = chat.bind_tools(many_tools).invoke(CHINESE)
    assert [(c["name"], c["args"].get("city") in CITY[CHINESE]) for c in chinese.tool_calls] == [("get_weather", True)]
    pinned = chat.bind_tools(many_tools, pinned_tools=["calculate_triangle_area"]).invoke(QUESTION)
    assert {"get_weather", "calculate_triangle_area"} <= set(pinned.response_metadata["offered_tools"])

    def make(name: str, description: str) -> FunctionTool:
        return FunctionTool.from_defaults(fn=lambda **kwargs: "ok", name=name, description=description)

    functions = [make(t["function"]["name"], t["function"]["description"]) for t in many_tools
                 if t["function"]["name"] != "get_weather"]

    def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        return f"It is 18 C and sunny in {city}."

    functions.insert(50, FunctionTool.from_defaults(fn=get_weather))
    llm = HammerLLM(model_path=default_model_path, n_ctx=4096, max_tokens=96)
    response = llm.chat_with_tools(functions, user_msg=QUESTION)
    selections = llm.get_tool_calls_from_response(response, error_on_no_tool_call=True)
    assert [(s.tool_name, s.tool_kwargs.get("city")) for s in selections] == [("get_weather", "Paris")]
    assert "get_weather" in response.additional_kwargs["offered_tools"]
    paraphrased = llm.chat_with_tools(functions, user_msg=PARAPHRASED)
    selections = llm.get_tool_calls_from_response(paraphrased, error_on_no_tool_call=True)
    assert [(s.tool_name, s.tool_kwargs.get("city") in CITY[PARAPHRASED]) for s in selections] == [("get_weather", True)]


def test_masked_names_survive_the_selection(default_model_path: str, many_tools: list[dict[str, Any]]) -> None:
    engine = HammerEngine(model_path=default_model_path, n_ctx=4096, max_tokens=96, mask_names=True)
    prompt = engine.render([Message.user(QUESTION)], many_tools)
    assert not any(f'"{name}"' in prompt for name in _names(many_tools))  # no real name, offered or not
    response = engine.generate([Message.user(QUESTION)], many_tools)
    assert [(c.name, c.arguments.get("city")) for c in response.tool_calls] == [("get_weather", "Paris")]
    assert "get_weather" in (response.offered_tools or [])


@pytest.fixture(scope="module")
def server(llama_engine: HammerEngine) -> Iterator[BackgroundServer]:
    with BackgroundServer(create_app(llama_engine, model_name="hammer", api_key=KEY)) as running:
        yield running


def test_every_server_api_with_hundreds_of_tools(server: BackgroundServer, many_tools: list[dict[str, Any]]) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key=KEY, max_retries=0, timeout=300)
    chat = client.chat.completions.create(model="hammer", messages=[{"role": "user", "content": QUESTION}],
                                          tools=many_tools)
    call = chat.choices[0].message.tool_calls[0].function
    assert (call.name, json.loads(call.arguments)["city"]) == ("get_weather", "Paris")
    for question in (PARAPHRASED, CHINESE):
        asked = client.chat.completions.create(model="hammer", messages=[{"role": "user", "content": question}],
                                               tools=many_tools)
        call = asked.choices[0].message.tool_calls[0].function
        assert (call.name, json.loads(call.arguments)["city"] in CITY[question]) == ("get_weather", True), question
    flat = [{"type": "function", **t["function"]} for t in many_tools]
    responses = client.responses.create(model="hammer", input=QUESTION, tools=flat)
    item = next(o for o in responses.output if o.type == "function_call")
    assert (item.name, json.loads(item.arguments)["city"]) == ("get_weather", "Paris")
    claude = anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key=KEY, max_retries=0, timeout=300)
    tools = [{"name": t["function"]["name"], "description": t["function"]["description"],
              "input_schema": t["function"]["parameters"]} for t in many_tools]
    message = claude.messages.create(model="hammer", max_tokens=128, tools=tools,
                                     messages=[{"role": "user", "content": QUESTION}])
    use = next(b for b in message.content if b.type == "tool_use")
    assert (use.name, use.input["city"]) == ("get_weather", "Paris")


SYSTEM = ("You are the helpful assistant of a travel agency. When a customer asks about a city, look up what they ask "
          "with the tools you have, then answer in one friendly sentence that names the city. Never guess a figure that "
          "a tool can give you; say so when no tool fits the request, and keep the customer's data private.")


def _turns(engine: HammerEngine, tools: list[Any]) -> list[dict[str, float]]:
    history = [Message.system(SYSTEM), Message.user(QUESTION)]
    first = engine.generate(history, tools)
    call = first.tool_calls[0]
    history += [Message.assistant("", tool_calls=[ToolCall(name=call.name, arguments=call.arguments, id="c1")]),
                Message.tool("It is 18 C and sunny in Paris.", tool_call_id="c1")]
    second = engine.generate(history, tools)
    history += [Message.assistant(second.text), Message.user("And what's the weather in Rome?")]
    third = engine.generate(history, tools)
    return [first.timings, second.timings, third.timings]


def test_turn_three_and_a_new_session_do_not_evaluate_the_prefix_again(default_model_path: str, demo_tools: list[Any],
                                                                        tmp_path: Path) -> None:
    # The disk cache alone (no prompt states kept in memory): what a new process has.
    engine = HammerEngine(backend=LlamaCppBackend(default_model_path, n_ctx=4096, prefix_cache=tmp_path, cache_ram=0),
                          max_tokens=64)
    prefix = engine.count_tokens(engine.render([Message.system(SYSTEM)], demo_tools).rsplit("<|im_start|>assistant", 1)[0])
    turn1, turn2, turn3 = _turns(engine, demo_tools)
    assert turn1["disk_cached_prompt_tokens"] == 0  # first contact: evaluated, then stored
    # Turn 2 answers from the result in prose: its system turn (the instructions) was kept on first contact.
    chat_head = engine.count_tokens(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n")
    assert turn2["disk_cached_prompt_tokens"] >= chat_head - 2
    # Turn 2 answered in prose (another prompt in the one KV sequence); turn 3 offers the tools again and
    # finds the tools block and the instructions on disk instead of evaluating them.
    assert turn3["disk_cached_prompt_tokens"] >= prefix - 2
    assert turn3["cached_prompt_tokens"] >= prefix - 2
    # A new session (a new context, as a new process has) with the same system text and tools.
    fresh = HammerEngine(backend=LlamaCppBackend(default_model_path, n_ctx=4096, prefix_cache=tmp_path, cache_ram=0),
                         max_tokens=64)
    again = fresh.generate([Message.system(SYSTEM), Message.user("What's the weather in Oslo?")], demo_tools)
    assert again.timings["disk_cached_prompt_tokens"] >= prefix - 2
    assert [c.name for c in again.tool_calls] == ["get_weather"]
    # Undone (no disk cache), turn 3 evaluates the prefix again: only ChatML's first tokens are shared.
    plain = HammerEngine(backend=LlamaCppBackend(default_model_path, n_ctx=4096, cache_ram=0), max_tokens=64)
    assert _turns(plain, demo_tools)[2]["cached_prompt_tokens"] < prefix / 4


def test_the_relevance_gate_refuses_what_no_tool_fits_and_asks_the_model_otherwise(default_model_path: str,
                                                                                   demo_tools: list[Any]) -> None:
    """The stand-in never refuses under constrained decoding (it answers a joke request with some call); with the
    gate on, a question no tool shares a word with is refused without running it, and a fitting one still calls."""
    engine = HammerEngine(model_path=default_model_path, n_ctx=4096, max_tokens=96, relevance_gate=True)
    joke = engine.generate([Message.user("Tell me a joke about penguins.")], demo_tools)
    assert joke.kind == "refusal" and joke.timings.get("relevance_gate") == 1.0
    weather = engine.generate([Message.user(QUESTION)], demo_tools)
    assert [(c.name, c.arguments.get("city")) for c in weather.tool_calls] == [("get_weather", "Paris")]
    ungated = HammerEngine(model_path=default_model_path, n_ctx=4096, max_tokens=96)
    assert ungated.generate([Message.user("Tell me a joke about penguins.")], demo_tools).kind != "refusal"
