"""BFCL multi-turn through ChatHammer's agent loop on the real default model: one TradingBot entry,
two turns, the calls executed on bfcl-eval's simulator and judged by its checker."""

from __future__ import annotations

import pytest
from langchain_hammer import ChatHammer

from hammer_evals.bfcl.multi_turn import chat_hammer_agent, load_entries, run_entry

pytestmark = pytest.mark.real_model


def test_chat_hammer_drives_a_multi_turn_entry(default_model_path: str) -> None:
    entry = next(e for e in load_entries("multi_turn_base") if e["id"] == "multi_turn_base_100")
    names = {f["name"] for f in entry["function"]}
    llm = ChatHammer(model_path=default_model_path, max_tool_rounds=None, max_tokens=128, n_ctx=8192)
    result = run_entry(entry, chat_hammer_agent(llm), max_steps=2)
    assert len(result.steps) == len(entry["question"]) == 2
    made = [call for turn in result.steps for step in turn for call in step]
    assert made, "the model called nothing in two turns"
    assert {call.split("(")[0] for call in made} <= names  # executed on TradingBot, by name
    assert result.valid or result.error_type.startswith("multi_turn:"), result  # bfcl-eval's checker judged it
