"""The LlamaIndex slot-filling example end to end on the embedded default model (a weak stand-in: plumbing only)."""

from __future__ import annotations

import pytest
from shared_data import load_example

pytestmark = pytest.mark.real_model

def test_example_asks_for_missing_slots_and_records_snapshots(capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example("llama_index_slot_filling.py")
    results = example.run()
    assert len(results) == 3
    asks = [r for r in results if r.action == "ask"]
    assert asks, "a turn with missing information returns a question"
    assert asks[-1].reply == asks[-1].snapshot.question and asks[-1].snapshot.missing_required
    # Each user turn's step message carries its snapshot (the answer after a tool result does not).
    history = results[-1].chat_history
    assert sum("hammer_snapshot" in m.additional_kwargs for m in history) == 3
    # The last turn gives the last missing slot: the call is made, complete, and the tool runs (as the
    # LangGraph example's test checks).
    executed = [r for r in results if r.call is not None]
    assert executed, [(r.action, r.reply) for r in results]
    assert set(executed[-1].call.arguments) == {"plate_number", "city", "time"}  # complete: all required slots
    assert executed[-1].tool_output and "speeding" in executed[-1].tool_output  # query_violation's own answer
    assert "user: Check if my car" in capsys.readouterr().out
