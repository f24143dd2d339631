"""The record of what the model read for an answer, pass by pass (``record_passes=True``): each pass's prompt is the
one the backend was given, the answer pass after tool results offers no tools, a gate refusal says the model did
not run, and nothing is kept when nobody asks."""

from __future__ import annotations

from typing import Any

from hammer_plugins import HammerEngine, Message, ScriptedBackend, SlotFiller
from hammer_plugins.engine.inspection import inspect_request

WEATHER = {"name": "get_weather", "description": "Current weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
EMAIL = {"name": "send_email", "description": "Send an email.",
         "parameters": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}}
CALL = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
AFTER_RESULT: list[Any] = [Message.user("Weather in Paris?"), {"role": "assistant", "tool_calls": [CALL]},
                           {"role": "tool", "tool_call_id": "c1", "content": "18 C, sunny"}]


def test_nothing_is_kept_unless_asked() -> None:
    engine = HammerEngine(backend=ScriptedBackend(['[{"name": "get_weather", "arguments": {"city": "Paris"}}]']))
    assert engine.generate([Message.user("Weather in Paris?")], tools=[WEATHER]).passes is None


def test_the_tools_pass_is_the_prompt_the_backend_read() -> None:
    backend = ScriptedBackend(['[{"name": "get_weather", "arguments": {"city": "Paris"}}]'])
    engine = HammerEngine(backend=backend)
    answer = engine.generate([Message.user("Weather in Paris?")], tools=[WEATHER, EMAIL], record_passes=True,
                             mask_names=True)
    [done] = answer.passes or []
    assert done.stage == "tools" and done.prompt == backend.prompts[-1] and done.model_ran
    assert done.offered_tools == ["get_weather", "send_email"]
    assert done.shown_names["get_weather"] != "get_weather" and done.shown_names["get_weather"] in done.prompt


def test_after_a_result_the_answer_pass_offers_no_tools() -> None:
    """The panel's bug (issue 61): after a result the engine answers from a tool-free prompt, not the tools prompt
    that planning the request again shows."""
    backend = ScriptedBackend(["It is 18 C and sunny in Paris."])
    engine = HammerEngine(backend=backend)
    answer = engine.generate(AFTER_RESULT, tools=[WEATHER, EMAIL], record_passes=True, max_tool_rounds=1)
    [done] = answer.passes or []
    assert done.stage == "answer" and done.offered_tools == [] and done.prompt == backend.prompts[-1]
    assert "[BEGIN OF AVAILABLE TOOLS]" not in done.prompt and "18 C, sunny" in done.prompt
    assert done.prompt != inspect_request(engine, AFTER_RESULT, [WEATHER, EMAIL]).prompt  # planning again shows another one


def test_a_gate_refusal_says_the_model_did_not_run() -> None:
    backend = ScriptedBackend([])  # the model must not run
    engine = HammerEngine(backend=backend, relevance_gate=True)
    answer = engine.generate([Message.user("Tell me a joke about penguins.")], tools=[WEATHER], record_passes=True)
    [done] = answer.passes or []
    assert answer.is_refusal and not done.model_ran and done.gated and done.prompt_tokens is None
    assert backend.prompts == []
    assert "not run: the relevance gate refused" in answer._repr_html_()


def test_the_gate_can_be_turned_off_for_one_request() -> None:
    backend = ScriptedBackend(["[]"])
    engine = HammerEngine(backend=backend, relevance_gate=True)
    answer = engine.generate([Message.user("Tell me a joke about penguins.")], tools=[WEATHER], record_passes=True,
                             relevance_gate=False)
    [done] = answer.passes or []
    assert done.model_ran and not done.gated and backend.prompts == [done.prompt]


def test_a_refusal_answered_in_words_records_both_passes() -> None:
    backend = ScriptedBackend(["[]", "I can only check the weather."])
    engine = HammerEngine(backend=backend, on_refusal="answer")
    answer = engine.generate([Message.user("Tell me a joke.")], tools=[WEATHER], record_passes=True)
    assert [p.stage for p in answer.passes or []] == ["tools", "answer"]
    assert [p.prompt for p in answer.passes or []] == backend.prompts


FINE = {"name": "pay_fine", "description": "Pay a traffic fine.", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "plate": {"type": "string"}}, "required": ["city", "plate"]}}


def test_a_slot_filling_turn_records_each_snapshot_call_as_it_ran() -> None:
    """The playground's slot-filling panel (issue 61): a focused snapshot call that answers ``[]`` is asked again with
    every tool; the record holds both, as the backend read them, where planning the turn again shows the first."""
    weather = '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'
    backend = ScriptedBackend(['[{"name": "pay_fine", "arguments": {"city": "Paris"}}]', "[]", weather, "[]", weather])
    engine = HammerEngine(backend=backend)
    filler = SlotFiller(engine, [FINE, WEATHER])
    first = filler.step([Message.user("Pay my traffic fine from Paris.")], record_passes=True)
    assert [p.prompt for p in first.response.passes or []] == backend.prompts  # one call: every tool shown
    history = [Message.user("Pay my traffic fine from Paris."), first.message,
               Message.user("Actually, what's the weather in Paris?")]
    answer = engine.generate(history, [FINE, WEATHER], slot_filling=filler, record_passes=True)
    focused, widened = answer.passes or []
    assert [focused.prompt, widened.prompt] == backend.prompts[1:3]
    assert focused.offered_tools == ["pay_fine"] and widened.offered_tools == ["pay_fine", "get_weather"]
    assert answer.slot_filling_action == "execute" and answer.tool_calls[0].name == "get_weather"
    assert engine.generate(history, [FINE, WEATHER], slot_filling=filler).passes is None  # not asked: none kept


def test_a_slot_filling_turn_takes_the_gate_of_its_request() -> None:
    """The page's gate setting holds in slot-filling mode too: the engine's gate refuses unrun, the request's off
    lets the model answer."""
    backend = ScriptedBackend(['[{"name": "pay_fine", "arguments": {}}]'])
    engine = HammerEngine(backend=backend, relevance_gate=True)
    gated = engine.generate([Message.user("Tell me a joke about penguins.")], [FINE], slot_filling=True,
                            record_passes=True)
    assert [(p.model_ran, p.gated) for p in gated.passes or []] == [(False, True)] and backend.prompts == []
    ran = engine.generate([Message.user("Tell me a joke about penguins.")], [FINE], slot_filling=True,
                          record_passes=True, relevance_gate=False)
    assert [(p.model_ran, p.gated) for p in ran.passes or []] == [(True, False)] and len(backend.prompts) == 1
