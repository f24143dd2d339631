"""HammerLLM's own logic, on a scripted backend: what goes to the engine and what comes back.

The real-model behaviour is in test_llama_index_real.py; here every answer is scripted so each
LlamaIndex rule (tool_required, parallel calls, refusals, streaming, ids, agents) is checked exactly.
"""

from __future__ import annotations

import doctest
import json
import re
import time
from typing import Any

import llama_index.llms.hammer
import llama_index.llms.hammer.base
import pytest
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, ImageBlock, TextBlock, ToolCallBlock
from llama_index.core.prompts import PromptTemplate
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.tools import FunctionTool, QueryEngineTool
from llama_index.llms.hammer import HammerLLM, to_engine_message, to_engine_messages, to_engine_tool
from pydantic import BaseModel

from hammer_plugins import RefusalError
from hammer_plugins.backends.scripted import ScriptedBackend


def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name, e.g. Paris.
    """
    return f"Sunny and 21 C in {city}"


def send_email(to: str, body: str) -> str:
    """Send an email.

    Args:
        to: Recipient address.
        body: Text of the email.
    """
    return f"sent to {to}"


WEATHER = FunctionTool.from_defaults(get_weather)
EMAIL = FunctionTool.from_defaults(send_email)


def calls_text(*calls: tuple[str, dict[str, Any]]) -> str:
    return json.dumps([{"name": n, "arguments": a} for n, a in calls])


def scripted(*answers: str, **fields: Any) -> tuple[HammerLLM, ScriptedBackend]:
    backend = ScriptedBackend(list(answers))
    return HammerLLM(backend=backend, **fields), backend


def block_calls(response: Any) -> list[ToolCallBlock]:
    return [b for b in response.message.blocks if isinstance(b, ToolCallBlock)]


# --------------------------------------------------------------------- metadata
class LazyBackend(ScriptedBackend):
    """A scripted backend that, like llama.cpp's, has a model to load (on ``load`` or the first call)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.loaded = False

    @property
    def is_loaded(self) -> bool:
        return self.loaded

    def load(self) -> None:
        self.loaded = True

    def _stream(self, *args: Any) -> Any:
        self.loaded = True
        return super()._stream(*args)


def test_metadata_reports_function_calling_and_the_loaded_window() -> None:
    llm = HammerLLM(backend=LazyBackend(["hello"], context_window=1234), max_tokens=77, n_ctx=4096)
    before = llm.metadata
    assert before.is_function_calling_model and before.is_chat_model
    assert (before.context_window, before.num_output, before.model_name) == (4096, 77, "scripted")  # nothing loaded yet
    missing = HammerLLM(model_path="/models/hammer2.1-1.5b.Q4_K_M.gguf")  # no such file: no error until a call
    assert missing.metadata.model_name == "hammer2.1-1.5b.Q4_K_M.gguf"
    llm.complete("hi")
    after = llm.metadata
    assert (after.context_window, after.model_name) == (1234, "scripted")  # read from the loaded model
    assert HammerLLM(backend=LazyBackend(context_window=99)).load().metadata.context_window == 99


# ------------------------------------------------------------------ tool calling
def test_chat_with_tools_returns_tool_call_blocks_with_unique_ids() -> None:
    llm, _ = scripted(calls_text(("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})))
    response = llm.chat_with_tools([WEATHER], user_msg="Weather in Paris and Rome?", allow_parallel_tool_calls=True)
    blocks = block_calls(response)
    assert [(b.tool_name, b.tool_kwargs) for b in blocks] == [("get_weather", {"city": "Paris"}),
                                                              ("get_weather", {"city": "Rome"})]
    ids = [b.tool_call_id for b in blocks]
    assert all(ids) and len(set(ids)) == 2
    selections = llm.get_tool_calls_from_response(response)
    assert [(s.tool_id, s.tool_name, s.tool_kwargs) for s in selections] == [
        (b.tool_call_id, b.tool_name, b.tool_kwargs) for b in blocks]
    legacy = response.message.additional_kwargs["tool_calls"]
    assert [(c["id"], json.loads(c["function"]["arguments"])) for c in legacy] == [
        (ids[0], {"city": "Paris"}), (ids[1], {"city": "Rome"})]
    assert response.raw["usage"]["total_tokens"] == response.additional_kwargs["total_tokens"] > 0
    assert response.raw["kind"] == "tool_calls"


def test_the_prompt_tokens_a_cache_served_are_in_additional_kwargs_and_raw() -> None:
    llm = HammerLLM(backend=ScriptedBackend([calls_text(("get_weather", {"city": "Paris"}))] * 2, prefix_cache=True))
    cold, warm = (llm.chat_with_tools([WEATHER], user_msg="Weather in Paris?") for _ in range(2))
    assert cold.additional_kwargs["cached_prompt_tokens"] == 0
    cached = warm.additional_kwargs["cached_prompt_tokens"]
    assert 0.9 * warm.additional_kwargs["prompt_tokens"] < cached < warm.additional_kwargs["prompt_tokens"]
    assert warm.raw["usage"]["cached_prompt_tokens"] == cached


def test_record_passes_puts_what_the_model_read_in_additional_kwargs_and_raw() -> None:
    """``record_passes=True`` on a call: the response's ``additional_kwargs["passes"]`` (beside the token counts and
    ``offered_tools``) and ``raw["passes"]``, each pass as the backend read it; streamed alike, absent when not
    asked."""
    weather, joke = calls_text(("get_weather", {"city": "Paris"})), "Why did the chicken cross the road?"
    llm, backend = scripted(weather, "[]", joke, "[]", joke, weather, on_refusal="answer")
    [done] = llm.chat_with_tools([WEATHER, EMAIL], user_msg="Weather in Paris?", record_passes=True,
                                 mask_names=True).additional_kwargs["passes"]
    assert done["prompt"] == backend.prompts[-1] and done["offered_tools"] == ["get_weather", "send_email"]
    assert done["shown_names"]["get_weather"] in done["prompt"] and "get_weather" not in done["prompt"]
    refused = llm.chat_with_tools([WEATHER], user_msg="Tell me a joke", record_passes=True)
    assert [(p["stage"], p["offered_tools"]) for p in refused.additional_kwargs["passes"]] == [
        ("tools", ["get_weather"]), ("answer", [])]
    assert [p["prompt"] for p in refused.additional_kwargs["passes"]] == backend.prompts[1:3]
    assert refused.raw["passes"] == refused.additional_kwargs["passes"]
    *_, last = llm.stream_chat_with_tools([WEATHER], user_msg="Tell me a joke", record_passes=True)
    assert [p["prompt"] for p in last.additional_kwargs["passes"]] == backend.prompts[3:5]
    assert "passes" not in llm.chat_with_tools([WEATHER], user_msg="Weather in Paris?").additional_kwargs


def test_tool_required_forces_a_call_and_explicit_tool_choice_wins() -> None:
    llm, backend = scripted(calls_text(("get_weather", {"city": "Oslo"})),
                            calls_text(("send_email", {"to": "a@b.c", "body": "hi"})), "Hello there")
    tools = [WEATHER, EMAIL]
    binding = llm.engine.bind([to_engine_tool(t) for t in tools])
    llm.chat_with_tools(tools, user_msg="Oslo?", tool_required=True)
    assert backend.grammars[-1] == binding.grammar("required", False)
    llm.chat_with_tools(tools, user_msg="mail a@b.c: hi", tool_required=True, tool_choice="send_email")
    assert backend.grammars[-1] == binding.grammar("send_email", False)
    response = llm.chat_with_tools(tools, user_msg="hi", tool_choice="none")
    assert backend.grammars[-1] is None and "AVAILABLE TOOLS" not in backend.prompts[-1]
    assert response.message.content == "Hello there" and not block_calls(response)


def test_parallel_calls_follow_allow_parallel_tool_calls() -> None:
    two = calls_text(("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"}))
    llm, backend = scripted(two, two, constrained=False)
    single = llm.chat_with_tools([WEATHER], user_msg="Paris and Rome?")  # LlamaIndex's default: one call
    assert [b.tool_kwargs for b in block_calls(single)] == [{"city": "Paris"}]
    assert len(single.message.additional_kwargs["tool_calls"]) == 1
    both = llm.chat_with_tools([WEATHER], user_msg="Paris and Rome?", allow_parallel_tool_calls=True)
    assert len(block_calls(both)) == 2
    constrained, backend = scripted(two, two, two)
    grammar = constrained.engine.bind([to_engine_tool(WEATHER)]).grammar
    constrained.chat_with_tools([WEATHER], user_msg="Paris and Rome?")
    assert backend.grammars[-1] == grammar("auto", False)
    constrained.chat_with_tools([WEATHER], user_msg="Paris and Rome?", allow_parallel_tool_calls=True)
    assert backend.grammars[-1] == grammar("auto", True)
    constrained.parallel_tool_calls = False  # the field caps what LlamaIndex allows
    constrained.chat_with_tools([WEATHER], user_msg="Paris and Rome?", allow_parallel_tool_calls=True)
    assert backend.grammars[-1] == grammar("auto", False)


def test_refusal_is_a_message_without_calls() -> None:
    llm, _ = scripted("[]", "[]", refusal_text="No tool fits.")
    response = llm.chat_with_tools([WEATHER], user_msg="Tell me a joke")
    assert response.message.content == "No tool fits." and not block_calls(response)
    assert response.raw["kind"] == "refusal" and response.raw["raw"] == "[]"
    assert llm.get_tool_calls_from_response(response, error_on_no_tool_call=False) == []
    with pytest.raises(ValueError, match="0 tool calls"):
        llm.get_tool_calls_from_response(response)
    assert llm.predict_and_call([WEATHER], user_msg="Tell me a joke", error_on_no_tool_call=False).response == "No tool fits."


def test_on_refusal_raise_and_answer() -> None:
    llm, _ = scripted("[]", on_refusal="raise")
    with pytest.raises(RefusalError):
        llm.chat_with_tools([WEATHER], user_msg="Tell me a joke")
    llm, backend = scripted("[]", "Why did the chicken cross the road?", on_refusal="answer")
    response = llm.chat_with_tools([WEATHER], user_msg="Tell me a joke")
    assert response.message.content == "Why did the chicken cross the road?" and not block_calls(response)
    assert "AVAILABLE TOOLS" not in backend.prompts[-1]


def test_invalid_calls_are_reported_not_executed() -> None:
    llm, _ = scripted('[{"name": "get_weather", "arguments": {"city": "Par', max_tokens=12, constrained=False)
    response = llm.chat_with_tools([WEATHER], user_msg="Paris?")
    assert not block_calls(response) and response.raw["kind"] == "invalid"
    assert response.message.additional_kwargs["invalid_tool_calls"][0]["name"] == "get_weather"
    with pytest.raises(ValueError, match="not complete JSON"):
        llm.get_tool_calls_from_response(response)


def test_unknown_options_are_rejected() -> None:
    llm, _ = scripted("hi")
    with pytest.raises(TypeError, match="max_new_tokens"):
        llm.chat([ChatMessage(role="user", content="hi")], max_new_tokens=5)


def test_settings_and_per_call_overrides_reach_the_engine() -> None:
    llm, backend = scripted("a", "b", max_tokens=40)
    llm.complete("hi")
    llm.max_tokens = 30  # a changed field takes effect on the next call
    llm.complete("hi", max_tokens=20, stop=["\n"])
    assert [s.max_tokens for s in backend.settings] == [40, 20] and backend.settings[-1].stop == ["\n"]
    assert llm.engine.settings.max_tokens == 30


# -------------------------------------------------------------- tools and turns
def test_function_and_query_engine_tools_are_shown_to_the_model() -> None:
    class Docs(CustomQueryEngine):
        def custom_query(self, query_str: str) -> str:
            return "Hammer is a function-calling model."

    docs = QueryEngineTool.from_defaults(Docs(), name="search_docs", description="Search the Hammer documentation.")
    llm, backend = scripted(calls_text(("search_docs", {"input": "what is hammer"})))
    response = llm.chat_with_tools([WEATHER, docs], user_msg="What is Hammer?")
    tools_block = backend.prompts[-1].split("[BEGIN OF AVAILABLE TOOLS]\n")[1].split("\n[END OF AVAILABLE TOOLS]")[0]
    shown = {t["name"]: t for t in json.loads(tools_block)}
    assert shown["search_docs"]["parameters"]["input"]["required"] is True
    assert shown["get_weather"]["parameters"]["city"]["type"] == "string"
    # FunctionTool's signature line is dropped; the docstring stays, dedented.
    assert shown["get_weather"]["description"].startswith("Get the current weather for a city.\n\nArgs:\n    city:")
    assert shown["search_docs"]["description"] == "Search the Hammer documentation."
    assert llm.get_tool_calls_from_response(response)[0].tool_kwargs == {"input": "what is hammer"}


def test_tool_results_are_rendered_back_in_a_multi_turn_conversation() -> None:
    llm, backend = scripted(calls_text(("get_weather", {"city": "Paris"})), "[]", "Sunny.",
                            calls_text(("get_weather", {"city": "Rome"})), max_tool_rounds=None)
    first = llm.chat_with_tools([WEATHER], user_msg="Weather in Paris?")
    call = llm.get_tool_calls_from_response(first)[0]
    history = [ChatMessage(role="user", content="Weather in Paris?"), first.message,
               ChatMessage(role="tool", content=WEATHER.call(**call.tool_kwargs).content,
                           additional_kwargs={"tool_call_id": call.tool_id})]
    answer = llm.chat_with_tools([WEATHER], chat_history=history)
    assert answer.message.content == "Sunny." and not block_calls(answer)
    # The tool pass saw the call in Hammer's layout and the result as a tool turn.
    assert '```\n[{"name": "get_weather", "arguments": {"city": "Paris"}}]\n```' in backend.prompts[1]
    assert "<|im_start|>tool\nSunny and 21 C in Paris<|im_end|>" in backend.prompts[1]
    second = llm.chat_with_tools([WEATHER], user_msg="And in Rome?", chat_history=[*history, answer.message])
    assert llm.get_tool_calls_from_response(second)[0].tool_kwargs == {"city": "Rome"}
    assert "Sunny.<|im_end|>" in backend.prompts[3]


def test_message_conversion() -> None:
    legacy = ChatMessage(role="assistant", content="", additional_kwargs={"tool_calls": [
        {"id": "call_7", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]})
    converted = to_engine_message(legacy)
    assert [(c.id, c.name, c.arguments) for c in converted.tool_calls] == [("call_7", "get_weather", {"city": "Oslo"})]
    blocks = ChatMessage(role="assistant", blocks=[TextBlock(text="Checking."), ToolCallBlock(
        tool_call_id="call_8", tool_name="get_weather", tool_kwargs={"city": "Rome"})])
    converted = to_engine_message(blocks)
    assert (converted.content, converted.tool_calls[0].id) == ("Checking.", "call_8")
    assert to_engine_message(ChatMessage(role="developer", content="Be brief.")).role == "system"
    result = ChatMessage(role="tool", content="Sunny", additional_kwargs={"tool_call_id": "call_8"})
    assert [m.tool_call_id for m in to_engine_messages([blocks, result])] == [None, "call_8"]
    with pytest.raises(ValueError, match="text only"):
        to_engine_message(ChatMessage(role="user", blocks=[ImageBlock(url="https://example.com/x.png")]))


# ---------------------------------------------------------- after tool results
def _after_result(llm: HammerLLM) -> list[ChatMessage]:
    # The question names both cities the scripted calls ask about (the ask-or-call rule holds invented values).
    first = llm.chat_with_tools([WEATHER], user_msg="Weather in Paris and Rome?")
    call = llm.get_tool_calls_from_response(first)[0]
    return [ChatMessage(role="user", content="Weather in Paris and Rome?"), first.message,
            ChatMessage(role="tool", content="Sunny, 21 C", additional_kwargs={"tool_call_id": call.tool_id})]


def test_repeating_an_answered_call_ends_the_turn_with_an_answer() -> None:
    paris = calls_text(("get_weather", {"city": "Paris"}))
    llm, backend = scripted(paris, paris, "It is sunny and 21 C in Paris.", on_refusal="raise", max_tool_rounds=None)
    response = llm.chat_with_tools([WEATHER], chat_history=_after_result(llm))
    assert response.message.content == "It is sunny and 21 C in Paris." and not block_calls(response)
    # The answer pass is the engine's tool-free prompt: the call and its result in words, no JSON.
    answer_prompt = backend.prompts[-1]
    assert "AVAILABLE TOOLS" not in answer_prompt and "```" not in answer_prompt
    assert ('I called get_weather({"city": "Paris"}), which returned:<|im_end|>\n<|im_start|>tool\nSunny, 21 C<|im_end|>'
            in answer_prompt)
    assert response.raw["usage"]["completion_tokens"] == sum(
        len(a.split(" ")) for a in (paris, "It is sunny and 21 C in Paris."))


def test_empty_list_after_a_result_is_an_answer_not_a_refusal() -> None:
    llm, _ = scripted(calls_text(("get_weather", {"city": "Paris"})), "[]", "Sunny in Paris.", on_refusal="raise",
                      max_tool_rounds=None)
    response = llm.chat_with_tools([WEATHER], chat_history=_after_result(llm))
    assert response.message.content == "Sunny in Paris."


def test_new_calls_after_a_result_are_kept_and_repeats_dropped() -> None:
    llm, _ = scripted(calls_text(("get_weather", {"city": "Paris"})),
                      calls_text(("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})), max_tool_rounds=None)
    response = llm.chat_with_tools([WEATHER], chat_history=_after_result(llm), allow_parallel_tool_calls=True)
    assert [b.tool_kwargs for b in block_calls(response)] == [{"city": "Rome"}]


def test_max_tool_rounds_answers_once_the_rounds_are_used() -> None:
    llm, backend = scripted(calls_text(("get_weather", {"city": "Paris"})), "Sunny in Paris.")
    response = llm.chat_with_tools([WEATHER], chat_history=_after_result(llm))  # default: one round
    assert response.message.content == "Sunny in Paris." and len(backend.prompts) == 2  # no second call pass
    rome = calls_text(("get_weather", {"city": "Rome"}))
    llm, backend = scripted(calls_text(("get_weather", {"city": "Paris"})), rome, "Sunny in both.", max_tool_rounds=2)
    history = _after_result(llm)
    second = llm.chat_with_tools([WEATHER], chat_history=history)
    assert [b.tool_kwargs for b in block_calls(second)] == [{"city": "Rome"}]
    call = llm.get_tool_calls_from_response(second)[0]
    history += [second.message, ChatMessage(role="tool", content="Sunny", additional_kwargs={"tool_call_id": call.tool_id})]
    assert llm.chat_with_tools([WEATHER], chat_history=history).message.content == "Sunny in both."
    assert "AVAILABLE TOOLS" not in backend.prompts[-1] and len(backend.prompts) == 3


def test_max_tool_rounds_field_and_per_call_reach_the_engine() -> None:
    paris, rome = calls_text(("get_weather", {"city": "Paris"})), calls_text(("get_weather", {"city": "Rome"}))
    llm, backend = scripted(paris, rome, rome, "Sunny in Paris.")
    assert llm.engine.max_tool_rounds == 1
    history = _after_result(llm)
    llm.max_tool_rounds = 3  # a changed field takes effect on the next call
    assert llm.engine.max_tool_rounds == 3
    assert [b.tool_kwargs for b in block_calls(llm.chat_with_tools([WEATHER], chat_history=history))] == [
        {"city": "Rome"}]
    llm.max_tool_rounds = 1
    per_call = llm.chat_with_tools([WEATHER], chat_history=history, max_tool_rounds=None)  # lifts the cap
    assert [b.tool_kwargs for b in block_calls(per_call)] == [{"city": "Rome"}]
    assert llm.chat_with_tools([WEATHER], chat_history=history).message.content == "Sunny in Paris."
    assert [("AVAILABLE TOOLS" in p) for p in backend.prompts] == [True, True, True, False]


# ------------------------------------------------------------------- streaming
def test_streamed_chunks_carry_the_calls_so_far_and_end_like_chat() -> None:
    two = calls_text(("get_weather", {"city": "Paris"}), ("send_email", {"to": "bob@x.com", "body": "hi"}))
    llm, _ = scripted(two, two)
    chunks = list(llm.stream_chat_with_tools([WEATHER, EMAIL], user_msg="Paris weather, and mail bob@x.com: hi",
                                             allow_parallel_tool_calls=True))
    counts = [len(block_calls(c)) for c in chunks]
    assert counts == sorted(counts) and counts[0] == 0 and 1 in counts and counts[-1] == 2
    final = [(b.tool_call_id, b.tool_name, b.tool_kwargs) for b in block_calls(chunks[-1])]
    for chunk in chunks:  # a call, once streamed, keeps its id and arguments
        assert [(b.tool_call_id, b.tool_name, b.tool_kwargs) for b in block_calls(chunk)] == final[: len(block_calls(chunk))]
    assert all(c.delta == "" for c in chunks)  # call syntax is not content
    assert "".join(c.raw["delta"] for c in chunks[:-1] if c.raw) == two
    whole = llm.chat_with_tools([WEATHER, EMAIL], user_msg="Paris weather, and mail bob@x.com: hi",
                                allow_parallel_tool_calls=True)
    assert [(b.tool_name, b.tool_kwargs) for b in block_calls(whole)] == [(n, k) for _, n, k in final]
    assert chunks[-1].raw["usage"] == whole.raw["usage"]


def test_streamed_text_deltas_add_up_to_the_content() -> None:
    llm, _ = scripted("Hello there, how can I help?")
    chunks = list(llm.stream_chat([ChatMessage(role="user", content="hi")]))
    assert "".join(c.delta or "" for c in chunks) == chunks[-1].message.content == "Hello there, how can I help?"
    assert [c.message.content for c in chunks[:2]] == ["Hello", "Hello there,"]  # trailing space held back


def test_on_refusal_answer_streams_its_prose_live() -> None:
    joke = "Why did the chicken cross the road? To get to the other side."
    llm, _ = scripted("[]", joke, "[]", joke, on_refusal="answer")
    chunks = list(llm.stream_chat_with_tools([WEATHER], user_msg="Tell me a joke"))
    live = [c.delta for c in chunks[:-1] if c.delta]
    assert len(live) > 5 and "".join(live) == joke and chunks[-1].delta == ""
    assert chunks[-1].message.content == llm.chat_with_tools([WEATHER], user_msg="Tell me a joke").message.content
    assert chunks[-1].raw["kind"] == "refusal"


def test_streamed_refusal_and_answer_after_results() -> None:
    llm, _ = scripted("[]")
    chunks = list(llm.stream_chat_with_tools([WEATHER], user_msg="Tell me a joke"))
    assert chunks[-1].message.content == chunks[-1].delta == llm.refusal_text
    paris = calls_text(("get_weather", {"city": "Paris"}))
    llm, _ = scripted(paris, paris, "Sunny in Paris.", max_tool_rounds=None)
    chunks = list(llm.stream_chat_with_tools([WEATHER], chat_history=_after_result(llm)))
    assert all(not block_calls(c) for c in chunks)  # the repeated call never shows up
    assert "".join(c.delta or "" for c in chunks) == chunks[-1].message.content == "Sunny in Paris."


async def test_async_variants_match_and_leave_the_loop_free(loop_ticker: Any) -> None:
    def slow(prompt: str) -> str:
        time.sleep(0.4)
        return calls_text(("get_weather", {"city": "Paris"})) if "AVAILABLE TOOLS" in prompt else "Hi!"

    llm = HammerLLM(backend=ScriptedBackend(responder=slow))
    async with loop_ticker(0.02) as ticker:
        response = await llm.achat_with_tools([WEATHER], user_msg="Paris?")
    assert ticker.ticks >= 10  # the loop kept running during the 0.4 s generation
    assert llm.get_tool_calls_from_response(response)[0].tool_kwargs == {"city": "Paris"}
    chunks = [c async for c in await llm.astream_chat_with_tools([WEATHER], user_msg="Paris?")]
    assert [b.tool_kwargs for b in block_calls(chunks[-1])] == [{"city": "Paris"}]
    assert (await llm.acomplete("hi")).text == "Hi!"
    assert [c.delta async for c in await llm.astream_complete("hi")][-1] == ""
    assert "".join([c.delta async for c in await llm.astream_complete("hi")]) == "Hi!"
    assert "".join(c.delta for c in llm.stream_complete("hi")) == "Hi!"
    result = await llm.apredict_and_call([WEATHER], user_msg="Paris?")
    assert result.response == "Sunny and 21 C in Paris"


# ----------------------------------------------------------- masking, structure
def test_mask_names_hides_real_names_and_maps_calls_back() -> None:
    def responder(prompt: str) -> str:
        tools = json.loads(prompt.split("[BEGIN OF AVAILABLE TOOLS]\n")[1].split("\n[END OF AVAILABLE TOOLS]")[0])
        name, param = tools[0]["name"], next(iter(tools[0]["parameters"]))
        return json.dumps([{"name": name, "arguments": {param: "Paris"}}])

    backend = ScriptedBackend(responder=responder)
    llm = HammerLLM(backend=backend, mask_names=True)
    tool = FunctionTool.from_defaults(get_weather, description="Look up the current weather of a place.")
    response = llm.chat_with_tools([tool], user_msg="Weather in Paris?")
    assert "get_weather" not in backend.prompts[-1] and "city" not in backend.prompts[-1]
    assert [(s.tool_name, s.tool_kwargs) for s in llm.get_tool_calls_from_response(response)] == [
        ("get_weather", {"city": "Paris"})]
    plain = llm.chat_with_tools([tool], user_msg="Weather in Paris?", mask_names=False)
    assert "get_weather" in backend.prompts[-1] and block_calls(plain)[0].tool_name == "get_weather"


class Person(BaseModel):
    """A person mentioned in the text."""

    name: str
    age: int


def test_structured_predict_forces_a_call_of_the_output_class() -> None:
    llm, backend = scripted(calls_text(("Person", {"name": "Alice", "age": 31})),
                            calls_text(("Person", {"name": "Bob", "age": 40})),
                            calls_text(("Person", {"name": "Cy", "age": 5})))
    person = llm.structured_predict(Person, PromptTemplate("Extract the person: {text}"), text="Alice is 31.")
    assert person == Person(name="Alice", age=31)
    assert backend.grammars[-1] == llm.engine.bind([Person]).grammar("required", False)
    streamed = list(llm.stream_structured_predict(Person, PromptTemplate("Extract the person: {text}"), text="Bob, 40"))
    assert streamed[-1] == Person(name="Bob", age=40)
    assert backend.grammars[-1] == llm.engine.bind([Person]).grammar("required", False)
    structured = llm.as_structured_llm(Person).chat([ChatMessage(role="user", content="Cy is 5.")])
    assert structured.raw == Person(name="Cy", age=5)


def test_response_format_gives_constrained_json() -> None:
    llm, backend = scripted('{"name": "Alice", "age": 31}')
    schema = Person.model_json_schema()
    response = llm.chat([ChatMessage(role="user", content="Alice is 31")],
                        response_format={"type": "json_schema", "schema": schema})
    assert Person.model_validate_json(response.message.content) == Person(name="Alice", age=31)
    assert backend.grammars[-1] is not None and re.search(r'"\\"age\\""', backend.grammars[-1].gbnf)


# ----------------------------------------------------------------------- agents
# llama-index-workflows inspects the pydantic agent with inspect.getmembers, which trips pydantic's
# deprecation warnings for __fields__ & co; they come from that library, not from this adapter.
@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20",
                            "ignore::pydantic.warnings.PydanticDeprecatedSince211")
async def test_function_agent_loop_on_scripted_answers() -> None:
    def responder(prompt: str) -> str:
        if "AVAILABLE TOOLS" not in prompt:
            return "Paris is sunny; I emailed bob."
        if "<|im_start|>tool" in prompt:
            return "[]"
        return calls_text(("get_weather", {"city": "Paris"}), ("send_email", {"to": "bob@x.com", "body": "sunny"}))

    llm = HammerLLM(backend=ScriptedBackend(responder=responder))
    for streaming in (False, True):
        agent = FunctionAgent(tools=[get_weather, send_email], llm=llm, streaming=streaming)
        handler = agent.run("Check the Paris weather and email \"sunny\" to bob@x.com.")
        results = [e async for e in handler.stream_events() if type(e).__name__ == "ToolCallResult"]
        output = await handler
        assert sorted((r.tool_name, r.tool_output.content) for r in results) == [
            ("get_weather", "Sunny and 21 C in Paris"), ("send_email", "sent to bob@x.com")]
        assert str(output) == "Paris is sunny; I emailed bob."
    workflow = AgentWorkflow.from_tools_or_functions([get_weather, send_email], llm=llm)
    assert isinstance(workflow.agents[workflow.root_agent], FunctionAgent)
    answer = await workflow.run("Check the Paris weather and email \"sunny\" to bob@x.com.")
    assert str(answer) == "Paris is sunny; I emailed bob."


@pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecatedSince20",
                            "ignore::pydantic.warnings.PydanticDeprecatedSince211")
async def test_function_agent_chains_rounds_up_to_max_tool_rounds() -> None:
    def responder(prompt: str) -> str:
        if "AVAILABLE TOOLS" not in prompt:
            return "Sunny in Paris; bob knows."
        if "<|im_start|>tool" in prompt:  # the weather came back: now the email that uses it
            return calls_text(("send_email", {"to": "bob@x.com", "body": "Sunny in Paris"}))
        return calls_text(("get_weather", {"city": "Paris"}))

    agent = FunctionAgent(tools=[get_weather, send_email], llm=HammerLLM(backend=ScriptedBackend(responder=responder),
                                                                         max_tool_rounds=2))
    handler = agent.run("Check the Paris weather, then email it to bob@x.com.")
    results = [e.tool_name async for e in handler.stream_events() if type(e).__name__ == "ToolCallResult"]
    assert results == ["get_weather", "send_email"] and str(await handler) == "Sunny in Paris; bob knows."


@pytest.mark.parametrize("module", [llama_index.llms.hammer, llama_index.llms.hammer.base])
def test_docstring_examples_run(module: Any) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
