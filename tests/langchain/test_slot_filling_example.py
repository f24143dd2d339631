"""The LangGraph slot-filling example end to end on the embedded default model (a weak stand-in: plumbing only)."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_hammer import snapshot_from_message, to_engine_messages
from shared_data import load_example

from hammer_plugins.slot_filling.filler import SlotFiller

pytestmark = pytest.mark.real_model

def test_example_asks_for_missing_slots_then_calls_the_tool_and_the_messages_hold_the_state(
        capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example("langgraph_slot_filling.py")
    messages = example.run()
    questions = [m for m in messages if isinstance(m, AIMessage) and m.response_metadata.get("slot_filling_action") == "ask"]
    assert questions, "a turn with missing information returns a question"
    snap = snapshot_from_message(questions[-1])
    assert snap is not None and snap.missing_required and questions[-1].content == snap.question
    calls = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    assert calls and calls[-1].tool_calls[0]["name"] == "Navigation.TrafficViolations.queryViolation"
    assert set(calls[-1].tool_calls[0]["args"]) == {"plate_number", "city", "time"}  # complete: all required slots
    assert any(isinstance(m, ToolMessage) and "speeding" in str(m.content) for m in messages)
    # A restart needs the messages only: the state is rebuilt without a model call.
    state = SlotFiller.rebuild(to_engine_messages(messages))
    assert state.state == "executed" and state.function == "Navigation.TrafficViolations.queryViolation"
    assert "calls Navigation.TrafficViolations.queryViolation" in capsys.readouterr().out
