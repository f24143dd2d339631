"""Engine logic on a scripted backend: tool_choice, grammar, masking, refusals, limits, streaming, async."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from hammer_plugins import (
    ContextWindowExceededError,
    HammerEngine,
    HammerResponse,
    Message,
    RefusalError,
    TextDelta,
    ToolCall,
    UnknownToolError,
    normalize_tool_choice,
)
from hammer_plugins.backends.scripted import ScriptedBackend

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
EMAIL = {"name": "send_email", "description": "Mail",
         "parameters": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}}
TOOLS = [WEATHER, EMAIL]
USER = [Message.user("Weather in Paris?")]


def engine_with(*answers: str, **kwargs: object) -> tuple[HammerEngine, ScriptedBackend]:
    backend = ScriptedBackend(list(answers))
    return HammerEngine(backend=backend, **kwargs), backend  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("choice", "expected"),
    [(None, "auto"), ("auto", "auto"), ("any", "required"), ("required", "required"), (True, "required"),
     ("none", "none"), (False, "none"), ("get_weather", "get_weather"),
     ({"type": "function", "function": {"name": "send_email"}}, "send_email"),
     ({"type": "tool", "name": "send_email"}, "send_email"), ({"type": "any"}, "required")],
)
def test_tool_choice_spellings(choice: object, expected: str) -> None:
    assert normalize_tool_choice(choice, ["get_weather", "send_email"]) == expected


def test_true_with_one_tool_forces_it_and_unknown_names_fail() -> None:
    assert normalize_tool_choice(True, ["only"]) == "only"
    with pytest.raises(UnknownToolError, match="'nope' is not among the bound tools"):
        normalize_tool_choice("nope", ["get_weather"])
    engine, _ = engine_with("[]")
    with pytest.raises(UnknownToolError, match="Fix"):
        engine.generate(USER, tools=TOOLS, tool_choice="get_time")


def test_call_with_grammar_and_usage() -> None:
    engine, backend = engine_with('[{"name": "get_weather", "arguments": {"city": "Paris"}}]')
    out = engine.generate(USER, tools=TOOLS)
    assert out.kind == "tool_calls" and out.finish_reason == "tool_calls"
    assert out.tool_calls[0].name == "get_weather" and out.tool_calls[0].arguments == {"city": "Paris"}
    assert out.usage.prompt_tokens > 0 and out.usage.completion_tokens > 0
    assert backend.grammars[0] is not None and '"\\"get_weather\\""' in backend.grammars[0].gbnf
    assert "[BEGIN OF AVAILABLE TOOLS]" in backend.prompts[0]


def test_forced_and_required_grammars_differ_and_constrained_off_has_none() -> None:
    engine, backend = engine_with(*["[]"] * 4)
    engine.generate(USER, tools=TOOLS, tool_choice="auto")
    engine.generate(USER, tools=TOOLS, tool_choice="required")
    engine.generate(USER, tools=TOOLS, tool_choice="send_email")
    engine.generate(USER, tools=TOOLS, constrained=False)
    auto, required, forced, off = backend.grammars
    assert auto and required and forced and off is None
    assert "call ::= call-0 | call-1" in auto.gbnf and "call ::= call-1" in forced.gbnf
    assert '( call ( ws "," ws call )* )?' in auto.gbnf and '( call ( ws "," ws call )* )?' not in required.gbnf


def test_none_renders_a_plain_chat_without_grammar() -> None:
    engine, backend = engine_with("Hello there!")
    out = engine.generate(USER, tools=TOOLS, tool_choice="none")
    assert out.kind == "text" and out.text == "Hello there!"
    assert backend.grammars == [None] and "[BEGIN OF AVAILABLE TOOLS]" not in backend.prompts[0]


def test_unknown_tool_name_becomes_invalid_call() -> None:
    engine, _ = engine_with('[{"name": "get_time", "arguments": {}}]')
    out = engine.generate(USER, tools=TOOLS, constrained=False)
    assert out.kind == "invalid" and not out.tool_calls
    assert "not a bound tool" in out.invalid_tool_calls[0].reason


def test_refusal_modes() -> None:
    engine, _ = engine_with("[]")
    out = engine.generate(USER, tools=TOOLS)
    assert out.kind == "refusal" and out.text == "Sorry, no tool is suitable for your request."
    engine, backend = engine_with("[]", "I cannot check weather, but Paris is lovely.")
    out = engine.generate(USER, tools=TOOLS, on_refusal="answer")
    assert out.kind == "refusal" and out.text == "I cannot check weather, but Paris is lovely."
    assert backend.grammars[1] is None and "[BEGIN OF AVAILABLE TOOLS]" not in backend.prompts[1]
    assert out.usage.completion_tokens > 1  # both passes counted
    engine, _ = engine_with("[]")
    with pytest.raises(RefusalError):
        engine.generate(USER, tools=TOOLS, on_refusal="raise")


def test_masking_round_trip_through_the_engine() -> None:
    def respond(prompt: str) -> str:
        if "[BEGIN OF AVAILABLE TOOLS]" not in prompt:
            return "It is 21C."  # the tool-free answer that ends the turn
        block = prompt.split("[BEGIN OF AVAILABLE TOOLS]\n")[1].split("\n[END OF AVAILABLE TOOLS]")[0]
        tools = json.loads(block)
        masked = tools[0]
        assert masked["name"] != "get_weather" and "city" not in masked["parameters"]
        arg = next(iter(masked["parameters"]))
        return json.dumps([{"name": masked["name"], "arguments": {arg: "Paris"}}])

    backend = ScriptedBackend(responder=respond)
    engine = HammerEngine(backend=backend, mask_names=True)
    out = engine.generate(USER, tools=TOOLS)
    assert out.kind == "tool_calls"
    assert (out.tool_calls[0].name, out.tool_calls[0].arguments) == ("get_weather", {"city": "Paris"})
    assert "get_weather" not in backend.prompts[0] and "city" not in backend.prompts[0].split("[END OF AVAILABLE")[0]
    # Earlier turns are rendered with the masked names too, and the prefix is stable across turns.
    history = [*USER, Message.assistant(tool_calls=out.tool_calls), Message.tool("21C", out.tool_calls[0].id)]
    engine.generate(history, tools=TOOLS, max_tool_rounds=None)
    first, second = backend.prompts[:2]
    prefix = first.split("<|im_start|>user\nWeather")[0]
    assert second.startswith(prefix) and "get_weather" not in second


def test_masking_forced_tool_pins_the_masked_name() -> None:
    engine, backend = engine_with("[]", mask_names=True)
    engine.generate(USER, tools=TOOLS, tool_choice="send_email")
    masked_email = engine.bind(TOOLS).prompt_tools[1].name
    assert f'"\\"{masked_email}\\""' in backend.grammars[0].gbnf


def test_binding_is_cached() -> None:
    engine, _ = engine_with()
    assert engine.bind(TOOLS) is engine.bind(TOOLS)
    assert engine.bind(TOOLS) is not engine.bind(TOOLS, mask_names=True)


def test_context_window_error_names_counts_and_fix() -> None:
    backend = ScriptedBackend(["[]"], context_window=300)
    engine = HammerEngine(backend=backend, max_tokens=64)
    with pytest.raises(ContextWindowExceededError) as info:
        engine.generate([Message.user("x " * 2000)], tools=TOOLS)
    assert info.value.context_window == 300 and info.value.prompt_tokens > 300
    assert "n_ctx" in str(info.value) and "300" in str(info.value)


def test_max_tokens_shrinks_to_the_room_left() -> None:
    backend = ScriptedBackend(["[]"], context_window=1000)
    engine = HammerEngine(backend=backend, max_tokens=5000)
    engine.generate(USER, tools=TOOLS)
    assert 0 < backend.settings[0].max_tokens < 1000


def test_truncated_output_is_invalid_with_length_finish() -> None:
    engine, _ = engine_with('[{"name": "get_weather", "arguments": {"city": "Pa ris and more words here"}}]')
    out = engine.generate(USER, tools=TOOLS, max_tokens=3)
    assert out.kind == "invalid" and out.finish_reason == "length"
    assert out.invalid_tool_calls[0].name == "get_weather"


def test_stream_yields_deltas_then_the_response() -> None:
    engine, _ = engine_with('[{"name": "get_weather", "arguments": {"city": "Paris"}}]')
    events = list(engine.stream(USER, tools=TOOLS))
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1 and isinstance(events[-1], HammerResponse)
    assert "".join(d.text for d in deltas) == events[-1].raw


def test_openai_style_message_dicts() -> None:
    engine, backend = engine_with("[]", "5C in Oslo.")
    engine.generate([
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "5C"}]},
    ], tools=TOOLS, max_tool_rounds=None)
    assert '{"name": "get_weather", "arguments": {"city": "Oslo"}}' in backend.prompts[0]
    assert "<|im_start|>tool\n5C<|im_end|>" in backend.prompts[0]


async def test_async_generate_and_stream_do_not_block_the_loop() -> None:
    engine, _ = engine_with('[{"name": "get_weather", "arguments": {"city": "Paris"}}]', "[]")
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    out = await engine.agenerate(USER, tools=TOOLS)
    events = [e async for e in engine.astream(USER, tools=TOOLS)]
    task.cancel()
    assert out.tool_calls[0].name == "get_weather"
    assert isinstance(events[-1], HammerResponse) and events[-1].kind == "refusal"
    assert ticks > 0


def test_concurrent_calls_are_serialized() -> None:
    active = 0
    peak = 0
    lock = threading.Lock()

    def respond(prompt: str) -> str:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        threading.Event().wait(0.01)
        with lock:
            active -= 1
        return "[]"

    engine = HammerEngine(backend=ScriptedBackend(responder=respond))
    threads = [threading.Thread(target=engine.generate, args=(USER, TOOLS)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak == 1


def test_constructor_loads_nothing(tmp_path: object) -> None:
    engine = HammerEngine(model_path="/definitely/missing.gguf")
    assert engine._backend is None  # lazy: the missing file is only noticed on use
    from hammer_plugins import ModelNotFoundError

    with pytest.raises(ModelNotFoundError, match="does not exist"):
        engine.load()


PERSON = {"type": "object", "properties": {"name": {"type": "string", "description": "Full name"},
                                          "age": {"type": "integer"}}, "required": ["name", "age"]}


def test_response_format_without_tools_is_one_json_pass_told_the_fields() -> None:
    engine, backend = engine_with('{"name": "Ada", "age": 36}', '{"a": 1}')
    out = engine.generate(USER, response_format={"type": "json_schema", "schema": PERSON})
    assert out.kind == "text" and json.loads(out.text) == {"name": "Ada", "age": 36}
    assert backend.grammars[0].gbnf.startswith("root ::= ws j-root") and "[BEGIN OF AVAILABLE" not in backend.prompts[0]
    assert "Answer as a JSON object with these fields: name (string): Full name; age (integer)." in backend.prompts[0]
    engine.generate(USER, response_format={"type": "json_object"})
    assert backend.grammars[1].gbnf.startswith("root ::= ws object\n")


def test_tools_beside_a_response_format_are_offered_and_the_answer_comes_when_done() -> None:
    """LangChain's create_agent(..., response_format=Schema) under ProviderStrategy binds both."""
    call = '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    engine, backend = engine_with(call, '{"name": "Ada", "age": 36}')
    fmt = {"type": "json_schema", "json_schema": {"name": "Person", "schema": PERSON}}
    first = engine.generate(USER, tools=TOOLS, response_format=fmt)
    assert first.kind == "tool_calls" and first.tool_calls[0].name == "get_weather"
    assert "[BEGIN OF AVAILABLE TOOLS]" in backend.prompts[0] and "call-0" in backend.grammars[0].gbnf
    history = [*USER, Message.assistant(tool_calls=first.tool_calls),
               Message.tool("sunny", tool_call_id=first.tool_calls[0].id)]
    # After the results (the round spent by default) the answer pass writes the response format.
    done = engine.generate(history, tools=TOOLS, response_format=fmt)
    assert done.kind == "text" and json.loads(done.text) == {"name": "Ada", "age": 36} and not done.tool_calls
    assert backend.prompts[1].endswith('Now answer my question "Weather in Paris?" as a JSON object with these fields: '
                                       "name (string): Full name; age (integer).<|im_end|>\n<|im_start|>assistant\n")
    assert backend.grammars[1].gbnf.startswith("root ::= ws j-root")
    # Answering [] with no tool needed ends in the response format too (never a refusal text).
    engine2, backend2 = engine_with("[]", '{"name": "Ada", "age": 36}')
    out = engine2.generate(USER, tools=TOOLS, response_format=fmt)
    assert out.kind == "text" and json.loads(out.text)["name"] == "Ada"
    assert len(backend2.prompts) == 2 and "[BEGIN OF AVAILABLE TOOLS]" in backend2.prompts[0]


def test_rounds_are_counted_per_agent_and_hand_offs_do_not_count() -> None:
    handoff = ToolCall(name="handoff", arguments={"to_agent": "weather", "reason": "weather question"})
    history = [*USER, Message.assistant(tool_calls=[handoff]), Message.tool("Agent weather is now handling it",
                                                                            tool_call_id=handoff.id)]
    call = '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    engine, backend = engine_with(call)
    out = engine.generate(history, tools=[*TOOLS, {"name": "handoff", "parameters": {"type": "object", "properties": {
        "to_agent": {"type": "string"}, "reason": {"type": "string"}}}}])
    assert out.kind == "tool_calls" and out.tool_calls[0].name == "get_weather"  # the agent handed to calls its tool
    # A round made by another agent (a tool the current one does not hold) is not this agent's either.
    other = ToolCall(name="lookup_account", arguments={})
    history = [*USER, Message.assistant(tool_calls=[other]), Message.tool("ok", tool_call_id=other.id)]
    engine, backend = engine_with(call)
    assert engine.generate(history, tools=TOOLS).kind == "tool_calls"


def test_a_required_call_after_the_spent_rounds_must_be_to_a_tool_not_called_yet() -> None:
    """LangChain's ToolStrategy binds tool_choice="any": the agent must end by calling its answer tool."""
    weather = ToolCall(name="get_weather", arguments={"city": "Paris"})
    history = [*USER, Message.assistant(tool_calls=[weather]), Message.tool("sunny", tool_call_id=weather.id)]
    engine, backend = engine_with('[{"name": "send_email", "arguments": {"to": "a", "body": "sunny"}}]')
    engine.generate(history, tools=TOOLS, tool_choice="any")
    grammar = backend.grammars[0].gbnf
    assert '"\\"send_email\\""' in grammar and '"\\"get_weather\\""' not in grammar


def test_stream_announces_each_call_as_it_completes_with_final_ids() -> None:
    from hammer_plugins import ToolCallDelta

    answer = ('[{"name": "get_weather", "arguments": {"city": "Pa]ris}"}}, '
              '{"name": "send_email", "arguments": {"to": "a@b.c"}}]')
    engine, _ = engine_with(answer)
    # The question gives both calls' values (the ask-or-call rule holds a call whose values nobody gave).
    events = list(engine.stream([Message.user("Weather in Pa]ris}? Then mail a@b.c")], tools=TOOLS))
    deltas = [(i, e) for i, e in enumerate(events) if isinstance(e, ToolCallDelta)]
    final = events[-1]
    assert isinstance(final, HammerResponse)
    assert [e.index for _, e in deltas] == [0, 1]
    assert [e.call for _, e in deltas] == final.tool_calls  # same names, arguments and ids
    assert deltas[0][0] < deltas[1][0] < len(events) - 1  # the first call arrives before the answer ends
    assert final.tool_calls[0].arguments == {"city": "Pa]ris}"}


def test_stream_masked_calls_arrive_unmasked() -> None:
    from hammer_plugins import ToolCallDelta

    def respond(prompt: str) -> str:
        block = json.loads(prompt.split("[BEGIN OF AVAILABLE TOOLS]\n")[1].split("\n[END OF AVAILABLE TOOLS]")[0])
        arg = next(iter(block[0]["parameters"]))
        return json.dumps([{"name": block[0]["name"], "arguments": {arg: "Oslo"}}])

    engine = HammerEngine(backend=ScriptedBackend(responder=respond), mask_names=True)
    deltas = [e for e in engine.stream([Message.user("Weather in Oslo?")], tools=TOOLS) if isinstance(e, ToolCallDelta)]
    assert [(d.call.name, d.call.arguments) for d in deltas] == [("get_weather", {"city": "Oslo"})]


def test_call_scanner_ignores_braces_in_strings_and_nested_objects() -> None:
    from hammer_plugins.output.call_scanner import CallScanner

    scanner = CallScanner()
    text = '```json\n[\n {"name": "f", "arguments": {"a": {"b": "}{\\"}"}, "c": [1, {"d": 2}]}},\n {"name": "g"'
    found = [item for ch in text for item in scanner.feed(ch)]
    assert found == [{"name": "f", "arguments": {"a": {"b": '}{"}'}, "c": [1, {"d": 2}]}}]


# ---------------------------------------------------------------- end of an agent turn
CALL_JSON = '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'


def _after_result() -> list[Message]:
    from hammer_plugins import ToolCall

    call = ToolCall(name="get_weather", arguments={"city": "Paris"})
    return [*USER, Message.assistant(tool_calls=[call]), Message.tool("sunny, 21C", tool_call_id=call.id)]


def test_rounds_cap_answers_from_the_results_without_offering_tools() -> None:
    engine, backend = engine_with("It is sunny and 21C in Paris.")
    out = engine.generate(_after_result(), tools=TOOLS)  # default max_tool_rounds=1
    assert out.kind == "text" and out.text == "It is sunny and 21C in Paris." and not out.tool_calls
    assert backend.grammars == [None] and "[BEGIN OF AVAILABLE TOOLS]" not in backend.prompts[0]
    assert "which returned:<|im_end|>\n<|im_start|>tool\nsunny, 21C<|im_end|>" in backend.prompts[0]


def test_a_tool_search_leaves_the_turn_its_round_of_calls_and_a_second_search_does_not() -> None:
    """OpenAI's ``tool_search`` and Claude Code's ``ToolSearch`` load tools: with one round a turn (the default), the
    call the search readied is still made; a second search in the turn is a round, so the turn then ends."""
    from hammer_plugins import ToolCall

    search = {"name": "tool_search", "description": "Load tools.",
              "parameters": {"type": "object", "properties": {"paths": {"type": "array", "items": {"type": "string"}}}}}
    first = ToolCall(name="tool_search", arguments={"paths": ["get_weather"]})
    searched = [*USER, Message.assistant(tool_calls=[first]), Message.tool("Tool loaded: get_weather", tool_call_id=first.id)]
    engine, backend = engine_with(CALL_JSON)
    out = engine.generate(searched, tools=[*TOOLS, search])
    assert out.kind == "tool_calls" and [c.name for c in out.tool_calls] == ["get_weather"]
    assert "[BEGIN OF AVAILABLE TOOLS]" in backend.prompts[0]
    again = ToolCall(name="tool_search", arguments={"paths": ["send_email"]})
    twice = [*searched, Message.assistant(tool_calls=[again]), Message.tool("Tool loaded: send_email", tool_call_id=again.id)]
    engine, backend = engine_with("No weather tool answered.")
    out = engine.generate(twice, tools=[*TOOLS, search])
    assert out.kind == "text" and "[BEGIN OF AVAILABLE TOOLS]" not in backend.prompts[0]


def test_empty_list_after_results_means_done_not_refusal() -> None:
    engine, backend = engine_with("[]", "Sunny, 21C.")
    out = engine.generate(_after_result(), tools=TOOLS, max_tool_rounds=None, on_refusal="raise")
    assert out.kind == "text" and out.text == "Sunny, 21C."
    assert backend.grammars[0] is not None and backend.grammars[1] is None


def test_repeated_answered_calls_are_dropped_new_ones_kept() -> None:
    from hammer_plugins import ToolCallDelta

    engine, _ = engine_with(CALL_JSON, "Sunny.")
    out = engine.generate(_after_result(), tools=TOOLS, max_tool_rounds=None)
    assert out.kind == "text" and out.text == "Sunny."  # only a repeat: the turn ends with the answer
    both = CALL_JSON[:-1] + ', {"name": "send_email", "arguments": {"to": "a@b.c"}}]'
    engine, _ = engine_with(both)
    mailed = [Message.user("Weather in Paris? Mail it to a@b.c"), *_after_result()[1:]]  # the new call's value given
    events = list(engine.stream(mailed, tools=TOOLS, max_tool_rounds=None))
    final = events[-1]
    assert isinstance(final, HammerResponse) and [c.name for c in final.tool_calls] == ["send_email"]
    assert [e.call.name for e in events if isinstance(e, ToolCallDelta)] == ["send_email"]


def test_forced_choice_after_results_still_calls() -> None:
    engine, backend = engine_with(CALL_JSON)
    out = engine.generate(_after_result(), tools=TOOLS, tool_choice="get_weather")
    assert out.kind == "tool_calls" and backend.grammars[0] is not None


def test_parallel_off_keeps_the_first_call_even_unconstrained() -> None:
    both = CALL_JSON[:-1] + ', {"name": "send_email", "arguments": {"to": "a@b.c"}}]'
    engine, _ = engine_with(both)
    out = engine.generate(USER, tools=TOOLS, constrained=False, parallel_tool_calls=False)
    assert [c.name for c in out.tool_calls] == ["get_weather"]


def test_unknown_settings_are_rejected() -> None:
    engine, _ = engine_with("[]")
    with pytest.raises(TypeError, match="max_new_tokens"):
        engine.generate(USER, tools=TOOLS, max_new_tokens=5)


def test_prose_deltas_add_up_to_the_text() -> None:
    engine, _ = engine_with("  \n Hello   there  \n ")
    events = list(engine.stream(USER, tools=TOOLS, tool_choice="none"))
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert all(d.channel == "prose" for d in deltas)
    assert "".join(d.text for d in deltas) == events[-1].text == "Hello   there"


def test_stream_validates_at_the_call_and_rounds_must_be_positive() -> None:
    engine, _ = engine_with("[]")
    with pytest.raises(UnknownToolError):
        engine.stream(USER, tools=TOOLS, tool_choice="nope")  # no iteration needed
    with pytest.raises(ValueError, match="max_tool_rounds"):
        engine.stream(USER, tools=TOOLS, max_tool_rounds=0)
    with pytest.raises(ValueError, match="max_tool_rounds"):
        HammerEngine(backend=ScriptedBackend(), max_tool_rounds=0)


def test_is_loaded_never_loads(tmp_path: object) -> None:
    engine = HammerEngine(model_path="/nowhere/model.gguf")
    assert engine.is_loaded is False and engine._backend is None
    assert HammerEngine(backend=ScriptedBackend()).is_loaded is True
