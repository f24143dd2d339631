"""The LangGraph agent example, end to end on the embedded default model."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from shared_data import load_example

pytestmark = pytest.mark.real_model

def test_langgraph_agent_calls_real_tools_and_answers_from_their_results(capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example("langgraph_agent.py")
    messages = example.run()
    tool_results = {m.name: m.content for m in messages if isinstance(m, ToolMessage)}
    assert tool_results == {"calculate": "1081", "days_between": "60"}  # computed by the Python tools
    final = messages[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert "1081" in str(final.content) and "60" in str(final.content)
    printed = capsys.readouterr().out
    assert "calls calculate" in printed and "days_between" in printed
