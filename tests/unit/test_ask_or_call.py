"""The engine's ask-or-call rule (hammer_plugins/engine/missing.py) on a scripted backend: a call whose
required values nobody gave is held back and asked for; the next turn completes it; a change of intent
drops it; corrections replace; "call" and "error"; streaming; the shared grounding check."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hammer_plugins import HammerEngine, Message, ScriptedBackend, TextDelta, ToolCallDelta
from hammer_plugins.engine.missing import MissingArgumentsError
from hammer_plugins.slot_filling.questions import language_of, missing_question
from hammer_plugins.slot_filling.values import ground_call, ungrounded_values
from hammer_plugins.tools.definition import Tool
from hammer_plugins.values.calls import PENDING_CALLS_KEY, PendingCall

PAY_FINE = {"name": "pay_fine", "description": "Pay a traffic fine", "parameters": {"type": "object", "properties": {
    "city": {"type": "string", "description": "Violating city"},
    "plate": {"type": "string", "description": "License plate number"},
    "note": {"type": "string", "description": "A note"}}, "required": ["city", "plate"]}}
WEATHER = {"name": "get_weather", "description": "Weather of a city", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "unit": {"type": "string", "default": "celsius"}}, "required": ["city", "unit"]}}


def call(name: str, **arguments: str) -> str:
    import json

    return json.dumps([{"name": name, "arguments": arguments}])


def engine_of(*outputs: str, on_missing: str = "ask") -> HammerEngine:
    return HammerEngine(backend=ScriptedBackend(list(outputs)), on_missing=on_missing)  # type: ignore[arg-type]


def answered(history: list[Message], response) -> list[Message]:  # noqa: ANN001
    """The history with the answer appended as a door keeps it (its pending calls on the message)."""
    return [*history, Message(role="assistant", content=response.text, tool_calls=response.tool_calls,
                              pending_calls=response.pending_calls)]


def test_an_invented_required_value_is_asked_for_and_the_next_turn_completes_the_call() -> None:
    engine = engine_of(call("pay_fine", city="Guangzhou", plate="ABC123"),
                       call("pay_fine", plate="D456"))  # the model re-emits only the new value
    history = [Message.user("Pay my traffic fine in Guangzhou")]
    first = engine.generate(history, [PAY_FINE])
    assert first.kind == "text" and first.tool_calls == []
    assert first.text == "Please provide the license plate number."
    [pending] = first.pending_calls
    assert pending.arguments == {"city": "Guangzhou"} and pending.missing == ["plate"]
    second = engine.generate([*answered(history, first), Message.user("D456")], [PAY_FINE])
    [done] = second.tool_calls
    assert done.arguments == {"city": "Guangzhou", "plate": "D456"}
    assert done.id == pending.id  # the call the ask announced is the one that goes out
    assert second.pending_calls == []


def test_a_correction_replaces_the_value_given_before() -> None:
    engine = engine_of(call("pay_fine", city="Guangzhou", plate="X"), call("pay_fine", city="Shenzhen", plate="D456"))
    history = [Message.user("Pay my fine in Guangzhou")]
    first = engine.generate(history, [PAY_FINE])
    history = [*answered(history, first), Message.user("Sorry, it was Shenzhen, plate D456")]
    assert engine.generate(history, [PAY_FINE]).tool_calls[0].arguments == {"city": "Shenzhen", "plate": "D456"}


def test_a_correction_nobody_gave_keeps_the_value_given_before() -> None:
    engine = engine_of(call("pay_fine", city="Guangzhou", plate="X"), call("pay_fine", city="Beijing", plate="D456"))
    history = [Message.user("Pay my fine in Guangzhou")]
    first = engine.generate(history, [PAY_FINE])
    history = [*answered(history, first), Message.user("plate D456")]
    assert engine.generate(history, [PAY_FINE]).tool_calls[0].arguments == {"city": "Guangzhou", "plate": "D456"}


def test_a_change_of_intent_drops_the_pending_call() -> None:
    engine = engine_of(call("pay_fine", city="Guangzhou", plate="X"), call("get_weather", city="Paris"))
    history = [Message.user("Pay my fine in Guangzhou")]
    first = engine.generate(history, [PAY_FINE, WEATHER])
    history = [*answered(history, first), Message.user("Never mind, what's the weather in Paris?")]
    second = engine.generate(history, [PAY_FINE, WEATHER])
    assert [(c.name, c.arguments) for c in second.tool_calls] == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    assert second.pending_calls == []


def test_a_refusal_after_an_ask_drops_the_pending_call() -> None:
    engine = engine_of(call("pay_fine", city="Guangzhou", plate="X"), "[]")
    history = [Message.user("Pay my fine in Guangzhou")]
    first = engine.generate(history, [PAY_FINE])
    second = engine.generate([*answered(history, first), Message.user("forget it")], [PAY_FINE])
    assert second.kind == "refusal" and second.pending_calls == []


def test_values_given_by_a_tool_result_or_the_instructions_count() -> None:
    engine = engine_of(call("pay_fine", city="Guangzhou", plate="YUE-B888"))
    history = [Message.system("The user's car has plate YUE-B888."), Message.user("Pay my fine in Guangzhou")]
    assert engine.generate(history, [PAY_FINE]).tool_calls[0].arguments == {"city": "Guangzhou", "plate": "YUE-B888"}


def test_a_value_equal_to_the_schema_default_is_kept() -> None:
    engine = engine_of(call("get_weather", city="Paris", unit="celsius"))
    assert engine.generate([Message.user("weather in Paris")], [WEATHER]).tool_calls[0].arguments == {
        "city": "Paris", "unit": "celsius"}


def test_a_schema_default_fills_a_required_value_and_optional_inventions_are_dropped() -> None:
    engine = engine_of(call("get_weather", city="Paris", unit="kelvin"), call("pay_fine", city="Paris", plate="AB1",
                                                                            note="made up"))
    [weather] = engine.generate([Message.user("weather in Paris")], [WEATHER]).tool_calls
    assert weather.arguments == {"city": "Paris", "unit": "celsius"}
    [fine] = engine.generate([Message.user("pay the fine of AB1 in Paris")], [PAY_FINE]).tool_calls
    assert fine.arguments == {"city": "Paris", "plate": "AB1"}


def test_call_sends_the_model_s_values_and_error_raises() -> None:
    engine = engine_of(call("pay_fine", city="Guangzhou", plate="X"), call("pay_fine", city="Guangzhou", plate="X"),
                       on_missing="call")
    history = [Message.user("Pay my fine in Guangzhou")]
    assert engine.generate(history, [PAY_FINE]).tool_calls[0].arguments == {"city": "Guangzhou", "plate": "X"}
    with pytest.raises(MissingArgumentsError) as caught:
        engine.generate(history, [PAY_FINE], on_missing="error")  # the request's option wins
    assert caught.value.pending_calls[0].missing == ["plate"]


def test_a_request_can_turn_the_rule_on_over_the_engine_s_setting() -> None:
    engine = engine_of(call("pay_fine", city="Guangzhou", plate="X"), on_missing="call")
    assert engine.generate([Message.user("Pay my fine in Guangzhou")], [PAY_FINE], on_missing="ask").pending_calls


def test_streaming_never_sends_a_held_call() -> None:
    engine = engine_of(call("pay_fine", city="Guangzhou", plate="X"), call("pay_fine", city="Guangzhou", plate="D4"))
    events = list(engine.stream([Message.user("Pay my fine in Guangzhou")], [PAY_FINE], parallel_tool_calls=False))
    assert not any(isinstance(e, ToolCallDelta) for e in events) and events[-1].pending_calls
    events = list(engine.stream([Message.user("fine D4 in Guangzhou")], [PAY_FINE], parallel_tool_calls=False))
    [delta] = [e for e in events if isinstance(e, ToolCallDelta)]
    assert delta.call.id == events[-1].tool_calls[0].id and delta.call.arguments == events[-1].tool_calls[0].arguments


def test_a_complete_parallel_call_goes_out_and_the_other_is_asked_for() -> None:
    engine = engine_of('[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
                       '{"name": "pay_fine", "arguments": {"city": "Paris", "plate": "Q"}}]')
    response = engine.generate([Message.user("Weather in Paris, and pay my fine there")], [WEATHER, PAY_FINE])
    assert [c.name for c in response.tool_calls] == ["get_weather"]
    assert response.text == "Please provide the license plate number."
    assert [(p.name, p.missing) for p in response.pending_calls] == [("pay_fine", ["plate"])]


@pytest.mark.parametrize(("text", "question"), [
    ("帮我交广州的违章罚款", "请提供：license plate number。"),
    ("Quiero pagar mi multa en Madrid", "Por favor, indique: license plate number."),
    ("Je veux payer mon amende à Paris", "Veuillez préciser : license plate number."),
    ("Ich möchte meine Strafe in Berlin bezahlen", "Bitte geben Sie an: license plate number."),
])
def test_the_question_is_in_the_user_s_language(text: str, question: str) -> None:
    city = {"帮": "广州"}.get(text[0], text.split()[-1] if not text.endswith("bezahlen") else "Berlin")
    engine = engine_of(call("pay_fine", city=city, plate="ZZ-999"))
    assert engine.generate([Message.user(text)], [PAY_FINE]).text == question


def test_the_pending_call_travels_in_a_message_dict() -> None:
    wire = {"role": "assistant", "content": "Which plate?",
            PENDING_CALLS_KEY: [PendingCall(name="pay_fine", arguments={"city": "Paris"}, missing=["plate"]).to_wire()]}
    engine = engine_of(call("pay_fine", plate="D4"))
    response = engine.generate([{"role": "user", "content": "fine in Paris"}, wire, {"role": "user", "content": "D4"}],
                               [PAY_FINE])
    assert response.tool_calls[0].arguments == {"city": "Paris", "plate": "D4"}


def test_slot_filling_and_the_rule_share_one_grounding_check() -> None:
    tool = Tool.model_validate(PAY_FINE)
    said = "Pay my fine in Guangzhou"
    assert ungrounded_values({"city": "Guangzhou", "plate": "1234567890"}, said) == ["plate"]
    grounding = ground_call(tool, {"city": "Guangzhou", "plate": "1234567890"}, said)
    assert grounding.arguments == {"city": "Guangzhou"} and grounding.missing == ["plate"]
    # SlotFiller(grounding="enforce") asks for the same value through the same check.
    from hammer_plugins.slot_filling import SlotFiller

    filler_engine = HammerEngine(backend=ScriptedBackend([call("pay_fine", city="Guangzhou", plate="1234567890")]))
    step = SlotFiller(filler_engine, [PAY_FINE], grounding="enforce").step([Message.user(said)])
    assert step.action == "ask" and step.snapshot.ungrounded == ["plate"]


def test_a_slot_filling_turn_is_not_judged_twice() -> None:
    engine = engine_of(call("pay_fine", city="Guangzhou"))  # a partial snapshot: the filler's to judge
    response = engine.generate([Message.user("Pay my fine in Guangzhou")], [PAY_FINE], slot_filling=True)
    assert response.slot_filling_action == "ask" and response.pending_calls == []


def test_language_detection_and_question_wording() -> None:
    assert language_of("What is the weather") == "en"
    tool = Tool.model_validate(PAY_FINE)
    assert missing_question([(tool, ["city", "plate"])]) == "Please provide the violating city and the license plate number."


def test_a_chinese_user_is_asked_in_chinese_naming_each_value_by_its_first_clause() -> None:
    # A HammerBench zh tool (ST_Perfect): its descriptions end the name at a full-width comma, no space after it.
    order = {"name": "orderFood", "parameters": {"type": "object", "required": ["dish", "time", "start"], "properties": {
        "dish": {"type": "string", "description": "菜品名称"},
        "time": {"type": "string", "description": "期望的配送时间，格式为 HH:mm"},
        "start": {"type": "string", "description": "起始地点,默认当前位置"}}}}
    engine = engine_of(call("orderFood", dish="宫保鸡丁", time="12:00", start="北京"))
    asked = engine.generate([Message.user("帮我点一份宫保鸡丁")], [order])
    assert asked.text == "请提供：期望的配送时间和起始地点。" and asked.tool_calls == []
    assert asked.pending_calls[0].arguments == {"dish": "宫保鸡丁"}


def test_the_hammerbench_runner_scores_a_held_call_as_its_pending_call() -> None:
    from hammer_evals.hammerbench.data import BenchTurn, LabelCall
    from hammer_evals.hammerbench.runner import predict_turn

    turn = BenchTurn(index=0, history=[{"role": "user", "content": "Pay my fine in Guangzhou"}],
                     label=LabelCall(name="pay_fine"), tools=[PAY_FINE])
    asked = predict_turn(engine_of(call("pay_fine", city="Guangzhou", plate="X")), turn)
    assert asked.asked and asked.call == {"name": "pay_fine", "arguments": {"city": "Guangzhou"}}
    plain = predict_turn(engine_of(call("pay_fine", city="Guangzhou", plate="X"), on_missing="call"), turn)
    assert not plain.asked and plain.call == {"name": "pay_fine", "arguments": {"city": "Guangzhou", "plate": "X"}}


def _mixed_answer_and_results() -> tuple[HammerEngine, list[Message], PendingCall]:
    """A parallel answer whose weather call went out while the fine was held; the weather result sent back."""
    engine = engine_of('[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
                       '{"name": "pay_fine", "arguments": {"city": "Paris", "plate": "Q"}}]',
                       "It is sunny in Paris.",  # after the result (one round of calls by default): the answer
                       call("pay_fine", plate="D456"))
    history = [Message.user("Weather in Paris, and pay my fine there")]
    first = engine.generate(history, [WEATHER, PAY_FINE])
    [held] = first.pending_calls
    [went] = first.tool_calls
    return engine, [*answered(history, first), Message.tool("sunny, 21 C", tool_call_id=went.id)], held


def test_a_held_call_is_still_asked_for_after_the_results_of_the_calls_that_went_out() -> None:
    engine, history, held = _mixed_answer_and_results()
    after = engine.generate(history, [WEATHER, PAY_FINE])
    assert after.text == "It is sunny in Paris.\n\nPlease provide the license plate number."
    assert after.pending_calls == [held]  # the same call, its id and values
    done = engine.generate([*answered(history, after), Message.user("D456")], [WEATHER, PAY_FINE])
    assert [(c.name, c.arguments, c.id) for c in done.tool_calls] == [
        ("pay_fine", {"city": "Paris", "plate": "D456"}, held.id)]


def test_a_held_call_streams_its_question_after_the_prose_answer() -> None:
    engine, history, held = _mixed_answer_and_results()
    events = list(engine.stream(history, [WEATHER, PAY_FINE]))
    prose = "".join(e.text for e in events if isinstance(e, TextDelta) and e.channel == "prose")
    final = events[-1]
    assert prose == "It is sunny in Paris." and final.text.startswith(prose) and final.pending_calls == [held]


def test_a_held_call_proposed_again_after_the_results_is_still_held_with_its_id() -> None:
    engine = engine_of('[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
                       '{"name": "pay_fine", "arguments": {"city": "Paris", "plate": "Q"}}]',
                       call("pay_fine", city="Paris", plate="Z9"))  # a new invention after the result
    history = [Message.user("Weather in Paris, and pay my fine there")]
    first = engine.generate(history, [WEATHER, PAY_FINE])
    history = [*answered(history, first), Message.tool("sunny", tool_call_id=first.tool_calls[0].id)]
    again = engine.generate(history, [WEATHER, PAY_FINE], max_tool_rounds=None)  # tools offered after results
    assert again.tool_calls == [] and again.pending_calls == first.pending_calls
    assert again.text == "Please provide the license plate number."


def test_a_plate_a_tool_result_gives_completes_the_held_call() -> None:
    engine = engine_of('[{"name": "get_weather", "arguments": {"city": "Paris"}}, '
                       '{"name": "pay_fine", "arguments": {"city": "Paris", "plate": "Q"}}]',
                       call("pay_fine", plate="PX-77"))
    history = [Message.user("Weather in Paris, and pay my fine there")]
    first = engine.generate(history, [WEATHER, PAY_FINE])
    history = [*answered(history, first), Message.tool("sunny; your car PX-77 has a fine",
                                                       tool_call_id=first.tool_calls[0].id)]
    done = engine.generate(history, [WEATHER, PAY_FINE], max_tool_rounds=None)
    assert [(c.arguments, c.id) for c in done.tool_calls] == [({"city": "Paris", "plate": "PX-77"},
                                                               first.pending_calls[0].id)]
    assert done.pending_calls == []


@pytest.mark.parametrize("choice", ["required", "pay_fine"])
def test_a_call_the_caller_forced_is_never_held(choice: str) -> None:
    """tool_choice "required" or a named tool demands a call (structured output, an agent's answer tool): the
    call goes out as the model wrote it, even under on_missing="ask"."""
    engine = engine_of(call("pay_fine", city="Guangzhou", plate="ABC123"))
    out = engine.generate([Message.user("Pay my fine in Guangzhou")], [PAY_FINE], tool_choice=choice)
    assert [c.arguments for c in out.tool_calls] == [{"city": "Guangzhou", "plate": "ABC123"}]
    assert out.pending_calls == []


# Chinese writes no spaces: a value must be written as the user wrote it (values.py says why). Reading runs of
# characters as pairs let these invented values through on HammerBench's Chinese ST_Imperfect (65.00 -> 45.00).
@pytest.mark.parametrize(("value", "said"), [
    ("公交1", "查一下公交的全部信息"),
    ("停车计时器未开启", "帮我处理一下违章申诉，因为停车计时器没开。"),
])
def test_a_chinese_value_the_user_did_not_write_is_not_given(value: str, said: str) -> None:
    assert ungrounded_values({"v": value}, said) == ["v"]


@pytest.mark.parametrize(("value", "said"), [
    ("粤C99999", "帮我交一下广州的违章罚款"),
    ("张三", "帮我订一张去北京的火车票"),
    ("上海", "我明天要去上班"),
    ("東京タワー", "大阪に行きたい"),
])
def test_a_chinese_or_japanese_value_nobody_said_is_not_given(value: str, said: str) -> None:
    assert ungrounded_values({"v": value}, said) == ["v"]


@given(st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF), min_size=1, max_size=12),
       st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), max_size=30),
       st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), max_size=30))
@settings(max_examples=200, deadline=None)
def test_a_chinese_value_the_user_wrote_is_always_given(value: str, before: str, after: str) -> None:
    assert ungrounded_values({"v": value}, before + value + after) == []


@given(st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x4FFF), min_size=2, max_size=12),
       st.text(alphabet=st.characters(min_codepoint=0x5000, max_codepoint=0x9FFF), max_size=40))
@settings(max_examples=200, deadline=None)
def test_a_chinese_value_sharing_no_character_with_the_user_is_never_given(value: str, said: str) -> None:
    assert ungrounded_values({"v": value}, said) == ["v"]
