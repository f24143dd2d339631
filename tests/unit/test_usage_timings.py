"""Usage, timings and decoding as typed fields (issue 57), and the old ``timings`` dict's reads and
construction still working."""

from __future__ import annotations

import pytest

from hammer_plugins import Decoding, HammerEngine, HammerResponse, Message, ScriptedBackend, Timings, Usage

TOOLS = [{"name": "get_weather", "description": "Weather in a city.",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
CALL = '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'


def test_summed_usage_keeps_the_cached_tokens_of_both_passes() -> None:
    first = Usage(prompt_tokens=100, completion_tokens=3, cached_prompt_tokens=90)
    both = first + Usage(prompt_tokens=120, completion_tokens=9, cached_prompt_tokens=100, disk_cached_prompt_tokens=80)
    assert (both.prompt_tokens, both.completion_tokens, both.total_tokens) == (220, 12, 232)
    assert (both.cached_prompt_tokens, both.disk_cached_prompt_tokens, both.evaluated_prompt_tokens) == (190, 80, 30)
    assert (first + first).disk_cached_prompt_tokens is None  # no disk cache on either pass: still unknown


def test_an_engine_answer_carries_the_backends_cached_tokens_in_usage() -> None:
    engine = HammerEngine(backend=ScriptedBackend([CALL, CALL], prefix_cache=True))
    cold, warm = (engine.generate([Message.user("Weather in Paris?")], tools=TOOLS) for _ in range(2))
    assert cold.usage.cached_prompt_tokens == 0
    assert 0.9 * warm.usage.prompt_tokens < warm.usage.cached_prompt_tokens < warm.usage.prompt_tokens
    assert warm.timings.engine_total is not None and warm.timings.parse is not None
    assert warm.timings["cached_prompt_tokens"] == warm.usage.cached_prompt_tokens  # the old way still reads it


def test_a_refusal_answered_in_prose_sums_the_cached_tokens_of_both_passes() -> None:
    engine = HammerEngine(backend=ScriptedBackend(["[]", "No tool fits.", "[]", "No tool fits."], prefix_cache=True),
                          on_refusal="answer")
    engine.generate([Message.user("Tell me a joke.")], tools=TOOLS)
    warm = engine.generate([Message.user("Tell me a joke.")], tools=TOOLS)
    assert warm.text == "No tool fits." and warm.usage.cached_prompt_tokens > 0
    assert warm.usage.cached_prompt_tokens < warm.usage.prompt_tokens


def test_the_old_timings_keys_read_the_typed_fields() -> None:
    response = HammerResponse(kind="tool_calls", usage=Usage(prompt_tokens=50, cached_prompt_tokens=40),
                              timings=Timings(time_to_first_token=0.5, total=2.0),
                              decoding=Decoding(loop_guard_cuts=0, loop_guard_stopped=True, forced_tokens=7))
    t = response.timings
    assert (t["time_to_first_token"], t["total"], t["cached_prompt_tokens"], t["prompt_cached_tokens"]) == (
        0.5, 2.0, 40.0, 40.0)
    assert (t["prompt_evaluated_tokens"], t["loop_guard_stop"], t["loop_guard_cuts"], t["forced_tokens"]) == (
        10.0, 1.0, 0.0, 7.0)
    assert "length_stop" not in t and t.get("relevance_gate") is None and "disk_cached_prompt_tokens" not in t
    with pytest.raises(KeyError):
        t["engine_total"]  # noqa: B018 - not measured: absent, as in the old dict
    copied = response.model_copy(update={"usage": Usage(prompt_tokens=50, cached_prompt_tokens=5)})
    assert copied.timings["cached_prompt_tokens"] == 5.0 and t["cached_prompt_tokens"] == 40.0


def test_a_response_built_from_an_old_timings_dict_gets_typed_fields() -> None:
    response = HammerResponse(kind="refusal", usage=Usage(prompt_tokens=30, completion_tokens=2),
                              timings={"time_to_first_token": 0.25, "cached_prompt_tokens": 20.0,
                                       "disk_cached_prompt_tokens": 16.0, "relevance_gate": 1.0, "length_stop": 0})
    assert response.timings == Timings(time_to_first_token=0.25)
    assert response.usage == Usage(prompt_tokens=30, completion_tokens=2, cached_prompt_tokens=20,
                                   disk_cached_prompt_tokens=16)
    assert response.decoding == Decoding(relevance_gated=True)
    again = HammerResponse.model_validate_json(response.model_dump_json())
    assert again == response and again.timings["relevance_gate"] == 1.0
