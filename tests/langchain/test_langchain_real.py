"""ChatHammer on the embedded default model (real llama.cpp inference): what a user checks first.

The default is Qwen2.5-Coder-0.5B-Instruct, the base of Hammer2.1-0.5b, not a Hammer fine-tune;
constrained decoding carries its tool calls. Prompts here are ones it was measured to handle.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_hammer import ChatHammer
from pydantic import BaseModel

from hammer_plugins.tools.demo import get_weather, send_email

# Longer than the suite's 300 s: streamed parallel calls took 130 s on CI's fresh machine.
pytestmark = [pytest.mark.real_model, pytest.mark.timeout(600)]

SETTINGS: dict[str, Any] = {"n_ctx": 4096, "max_tokens": 128, "repeat_penalty": 1.1}


@pytest.fixture(scope="module")
def llm() -> ChatHammer:
    return ChatHammer(**SETTINGS)


def calls(message: AIMessage) -> list[tuple[str, dict[str, Any]]]:
    return [(c["name"], c["args"]) for c in message.tool_calls]


def test_plain_requests_become_the_right_calls(llm: ChatHammer) -> None:
    bound = llm.bind_tools([get_weather, send_email])
    weather = bound.invoke("What's the weather in Paris?")
    assert [(name, args["city"]) for name, args in calls(weather)] == [("get_weather", "Paris")]
    email = bound.invoke("Email bob@x.com saying hi")
    assert [(name, args["to"]) for name, args in calls(email)] == [("send_email", "bob@x.com")]
    assert email.usage_metadata and email.usage_metadata["input_tokens"] > 100
    assert email.response_metadata["finish_reason"] == "tool_calls"


def test_parallel_calls_stream_and_merge_into_the_invoked_calls(llm: ChatHammer) -> None:
    bound = llm.bind_tools([get_weather, send_email])
    question = "What is the weather in Paris and in Tokyo?"
    invoked = bound.invoke(question)
    assert [(name, args["city"]) for name, args in calls(invoked)] == [("get_weather", "Paris"), ("get_weather", "Tokyo")]
    assert len({c["id"] for c in invoked.tool_calls}) == 2
    chunks: list[AIMessageChunk] = list(bound.stream(question))
    full = chunks[0]
    for chunk in chunks[1:]:
        full = full + chunk
    assert calls(full) == calls(invoked)
    assert [i for i, c in enumerate(chunks) if c.tool_call_chunks][0] < len(chunks) - 1  # calls arrive before the end
    counts = ("input_tokens", "output_tokens", "total_tokens")
    assert full.usage_metadata and invoked.usage_metadata
    assert [full.usage_metadata[k] for k in counts] == [invoked.usage_metadata[k] for k in counts]
    # The same prompt a second time: the cache serves at least what it served the first time.
    cached = [m.usage_metadata.get("input_token_details", {}).get("cache_read", 0) for m in (invoked, full)]
    assert cached[0] <= cached[1] and 0 < cached[1] < full.usage_metadata["input_tokens"], cached


def test_record_passes_shows_the_prompt_the_model_read_for_each_answer(llm: ChatHammer) -> None:
    """``record_passes=True``: the call's pass is Hammer's tools prompt, counted as the model's tokenizer counts it;
    the answer after the result is a tool-free pass holding the result (what planning the request again hides)."""
    bound = llm.bind_tools([get_weather, send_email], record_passes=True)
    question = HumanMessage("What's the weather in Paris?")
    asked = bound.invoke([question])
    [tools_pass] = asked.response_metadata["passes"]
    assert tools_pass["stage"] == "tools" and tools_pass["offered_tools"] == ["get_weather", "send_email"]
    assert tools_pass["prompt_tokens"] == asked.usage_metadata["input_tokens"] == llm.get_num_tokens(tools_pass["prompt"])
    result = ToolMessage("18 C and sunny", tool_call_id=asked.tool_calls[0]["id"])
    answered = bound.invoke([question, asked, result], max_tokens=40)
    [answer_pass] = answered.response_metadata["passes"]
    assert answer_pass["stage"] == "answer" and answer_pass["offered_tools"] == [] and answer_pass["model_ran"]
    assert "18 C and sunny" in answer_pass["prompt"] and "[BEGIN OF AVAILABLE TOOLS]" not in answer_pass["prompt"]


def test_no_suitable_tool_is_a_refusal_or_a_plain_answer(llm: ChatHammer) -> None:
    refused = llm.bind_tools([get_weather, send_email]).invoke("Write a poem about the sea")
    assert refused.tool_calls == [] and refused.response_metadata["refusal"] is True
    assert refused.content == "Sorry, no tool is suitable for your request."
    answered = llm.bind_tools([get_weather, send_email], on_refusal="answer").invoke("Write a poem about the sea")
    assert answered.response_metadata["refusal"] is True and answered.tool_calls == []
    assert "sea" in str(answered.content).lower() and len(str(answered.content)) > 40


def test_forced_tool_choice_cannot_refuse(llm: ChatHammer) -> None:
    forced = llm.bind_tools([get_weather, send_email], tool_choice="get_weather").invoke("Write a poem about the sea")
    assert [name for name, _ in calls(forced)] == ["get_weather"]
    assert forced.response_metadata["refusal"] is False


def test_masked_names_still_reach_the_right_tool() -> None:
    masked = ChatHammer(mask_names=True, **SETTINGS).bind_tools([get_weather, send_email])
    message = masked.invoke("What's the weather in Paris?")
    assert [(name, args["city"]) for name, args in calls(message)] == [("get_weather", "Paris")]
    assert "get_weather" not in message.response_metadata["raw_output"]  # the model saw opaque names


class Person(BaseModel):
    """A person mentioned in the text."""

    name: str
    age: int


@pytest.mark.parametrize("method", ["function_calling", "json_schema", "json_mode"])
def test_structured_output_every_method(llm: ChatHammer, method: str) -> None:
    prompt = "Anna is 31 years old." + (" Reply in JSON with name and age." if method == "json_mode" else "")
    assert llm.with_structured_output(Person, method=method).invoke(prompt) == Person(name="Anna", age=31)


def test_stop_sequence_cuts_the_answer(llm: ChatHammer) -> None:
    # The oracle is the same question without the stop sequence (the model's own wording, whatever it
    # is on this CPU): the stopped answer is that answer cut before its first "5".
    question = "Count from 1 to 10, separated by commas."
    full = str(llm.invoke(question).content)
    message = llm.invoke(question, stop=["5"])
    content = str(message.content)
    assert "5" in full, full
    assert content.strip() and "5" not in content
    assert full.startswith(content.strip()) and full[:full.index("5")].strip() == content.strip(), (full, content)


async def test_ainvoke_leaves_the_event_loop_free(llm: ChatHammer, loop_ticker: Any) -> None:
    async with loop_ticker(0.01) as ticker:
        message = await llm.bind_tools([get_weather]).ainvoke("What's the weather in Rome?")
    assert [(name, args["city"]) for name, args in calls(message)] == [("get_weather", "Rome")]
    assert ticker.ticks >= 10  # generation took well over 0.1 s, and the loop kept ticking through it
