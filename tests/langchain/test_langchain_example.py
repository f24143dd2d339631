"""The LangGraph agent example, end to end on the embedded default model."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
from langchain_core.messages import AIMessage, ToolMessage

pytestmark = pytest.mark.real_model

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_agent.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("langgraph_agent_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_langgraph_agent_calls_real_tools_and_answers_from_their_results(capsys: pytest.CaptureFixture[str]) -> None:
    example = load_example()
    messages = example.run()
    tool_results = {m.name: m.content for m in messages if isinstance(m, ToolMessage)}
    assert tool_results == {"calculate": "1081", "days_between": "60"}  # computed by the Python tools
    final = messages[-1]
    assert isinstance(final, AIMessage) and not final.tool_calls
    assert "1081" in str(final.content) and "60" in str(final.content)
    printed = capsys.readouterr().out
    assert "calls calculate" in printed and "days_between" in printed
