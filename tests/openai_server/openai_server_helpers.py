"""What several OpenAI-server test modules do alike: run ``hammer serve --openai`` as a process until
Ctrl-C, ask one arithmetic question per client from many clients at once, and read a stream's SSE events."""

from __future__ import annotations

import json
import threading
from typing import Any

import httpx
from openai import OpenAI
from pydantic import TypeAdapter
from serve_process import ServeProcess, hammer_serve

__all__ = ["ServeProcess", "ask_at_once", "assert_each_got_its_own_answer", "hammer_serve", "raw_events",
           "scripted_answer"]


def ask_at_once(base_url: str, key: str, numbers: list[int], tools: list[dict[str, Any]]) -> dict[int, Any]:
    """Each number asked ``What is <n> * 7?`` by its own client, all at once; the calls each got back."""
    answers: dict[int, Any] = {}

    def ask(number: int) -> None:
        client = OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=600)
        reply = client.chat.completions.create(model="hammer", messages=[{"role": "user", "content": f"What is {number} * 7?"}],
                                               tools=tools)
        answers[number] = reply.choices[0].message.tool_calls

    threads = [threading.Thread(target=ask, args=(n,)) for n in numbers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    return answers


def assert_each_got_its_own_answer(answers: dict[int, Any], numbers: list[int]) -> None:
    """Every client answered, with a ``calculate`` call of its own number, and no call id twice."""
    assert sorted(answers) == sorted(numbers)
    for number, calls in answers.items():
        assert calls[0].function.name == "calculate"
        assert json.loads(calls[0].function.arguments)["expression"].replace(" ", "") == f"{number}*7"
    ids = [c.id for calls in answers.values() for c in calls]
    assert len(set(ids)) == len(ids)


# ------------------------------------------------------------------ the real clients' tool and agent
CLIENTS_KEY = "clients-key"
QUESTION = "What's the weather in Paris?"
RESULT = "It is 18 C and sunny in {city}."


def weather_tool() -> tuple[Any, list[str]]:
    """The tool every client gets (a plain function, as users write them), and the cities it was called with."""
    cities: list[str] = []

    def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        cities.append(city)
        return RESULT.format(city=city)

    return get_weather, cities


def assert_create_agent_answers_from_the_tool(llm: Any) -> None:
    """LangChain's ``create_agent`` over ``llm`` with the weather tool: the tool runs once for Paris, and the last
    message is an answer in words that uses its result."""
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import StructuredTool

    get_weather, cities = weather_tool()
    messages = create_agent(llm, [StructuredTool.from_function(get_weather)]).invoke(
        {"messages": [("user", QUESTION)]})["messages"]
    assert cities == ["Paris"]
    assert [m.content for m in messages if isinstance(m, ToolMessage)] == [RESULT.format(city="Paris")]
    final = messages[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls and "18" in final.text


def raw_events(server: Any, path: str, body: dict[str, Any], headers: dict[str, str],
               union: Any = None) -> list[dict[str, Any]]:
    """The data of every SSE event of one streamed request to ``server`` (a ``BackgroundServer``), each
    checked to carry its ``event:`` name as its type and, given an SDK's event union, valid under it."""
    adapter = TypeAdapter(union) if union is not None else None
    events = []
    with httpx.stream("POST", server.base_url + path, json=body, headers=headers, timeout=30) as reply:
        assert reply.status_code == 200, reply.read()
        name = None
        for line in reply.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
                assert data["type"] == name
                if adapter is not None:
                    adapter.validate_python(data)
                events.append(data)
    return events


def scripted_answer(prompt: str) -> str:
    """A scripted model for the API logic tests: a call, two calls, a namespaced call or a refusal by a marker in
    the last user turn, and after a tool's result (18 C) the answer in prose."""
    question = prompt.rsplit("<|im_start|>user\n", 1)[-1]
    if "18 C" in prompt:  # after the tool's result: the calls pass says done ([]), the answer pass answers
        return "[]" if "[BEGIN OF AVAILABLE TOOLS]" in prompt else "It is 18 C in Paris."
    if "Q-SEARCH" in question:  # a tool search's question: search, then call what the search loaded
        if '"name": "get_weather"' in prompt:
            return '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
        return '[{"name": "tool_search", "arguments": {"paths": ["get_weather"]}}]'
    if "Q-TWO" in question:
        return ('[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
                '{"name": "get_weather", "arguments": {"city": "Rome"}}]')
    if "Q-NS" in question:
        return '[{"name": "crm.lookup", "arguments": {"id": 7}}]'
    if "Q-REFUSE" in question and "[BEGIN OF AVAILABLE TOOLS]" in prompt:
        return "[]"
    if "[BEGIN OF AVAILABLE TOOLS]" in prompt:
        return '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    return "Hello there, friend."
