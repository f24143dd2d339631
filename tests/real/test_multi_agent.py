"""Agents handing over to each other (examples/multi_agent.py) on the embedded default model.

The agent handed to must see and call its own tool: each tool records its calls where it runs.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from shared_data import load_example

pytestmark = pytest.mark.real_model

EXAMPLE = load_example("multi_agent.py")


def test_langgraph_swarm_hands_over_and_the_math_agent_calls_its_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_core.tools import tool

    executed: list[dict[str, Any]] = []

    @tool
    def calculate(expression: str) -> str:
        """Evaluate an arithmetic expression such as 23 * 47 or (2 + 3) ** 2.

        Args:
            expression: The arithmetic expression to evaluate.
        """
        executed.append({"expression": expression})
        return EXAMPLE._calculate(expression)

    monkeypatch.setattr(EXAMPLE, "calculate", calculate)
    messages = EXAMPLE.langgraph_swarm()
    calls = [(m.name, c["name"]) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert calls == [("triage", "transfer_to_math"), ("math", "calculate")]
    assert executed == [{"expression": "23 * 47"}]
    assert [m.content for m in messages if isinstance(m, ToolMessage)][-1] == "1081"
    final = messages[-1]
    assert isinstance(final, AIMessage) and final.name == "math" and "1081" in str(final.content)


async def test_llama_index_workflow_hands_over_and_the_math_agent_calls_its_tool(monkeypatch: pytest.MonkeyPatch) -> None:
    executed: list[tuple[float, float]] = []
    original = EXAMPLE.multiply

    def multiply(a: float, b: float) -> float:
        """Multiply two numbers and return the product.

        Args:
            a (float): The first number.
            b (float): The second number.
        """
        executed.append((a, b))
        return original(a, b)

    monkeypatch.setattr(EXAMPLE, "multiply", multiply)
    lines = await EXAMPLE.llama_index_workflow()
    assert any(line.startswith("tool call: handoff({'to_agent': 'math'") for line in lines)
    assert executed == [(12.5, 4)]
    assert lines[-1].startswith("math: ") and "50" in lines[-1]
