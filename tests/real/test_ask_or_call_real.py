"""The ask-or-call rule on the real default model (llama.cpp, greedy): the stand-in invents a plate number for
"Pay my traffic fine from Guangzhou."; under on_missing="ask" the answer asks for it instead, and the next turn,
with the plate, makes the call with both values. Two model calls."""

from __future__ import annotations

import pytest

from hammer_plugins import HammerEngine, Message

pytestmark = pytest.mark.real_model

PAY_FINE = {"name": "pay_fine", "description": "Pay a traffic violation fine", "parameters": {"type": "object",
            "properties": {"city": {"type": "string", "description": "Violating city"},
                           "plate_number": {"type": "string", "description": "License plate number"}},
            "required": ["city", "plate_number"]}}


def test_a_missing_plate_is_asked_for_and_the_next_turn_completes_the_call(llama_engine: HammerEngine) -> None:
    history = [Message.user("Pay my traffic fine from Guangzhou.")]
    asked = llama_engine.generate(history, [PAY_FINE], on_missing="ask")
    assert asked.tool_calls == [] and asked.text == "Please provide the license plate number.", asked.raw
    [pending] = asked.pending_calls
    assert (pending.name, pending.arguments, pending.missing) == ("pay_fine", {"city": "Guangzhou"}, ["plate_number"])
    history += [Message(role="assistant", content=asked.text, pending_calls=asked.pending_calls),
                Message.user("The plate number is D456.")]
    done = llama_engine.generate(history, [PAY_FINE], on_missing="ask")
    assert [(c.name, c.arguments) for c in done.tool_calls] == [
        ("pay_fine", {"city": "Guangzhou", "plate_number": "D456"})], (done.raw, done.text)
    assert done.tool_calls[0].id == pending.id
