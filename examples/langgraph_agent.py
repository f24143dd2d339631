"""A LangGraph ReAct agent on a local Hammer model, with three real Python tools.

Run it (offline; the embedded default model unless you pass a Hammer GGUF):

    python examples/langgraph_agent.py
    python examples/langgraph_agent.py --model-path hammer2.1-1.5b.Q4_K_M.gguf "What is 2**10?"

The model calls the tools (several at once when the question needs several), LangGraph runs them,
and the model answers in plain language from their results.

The agent is LangGraph's own ReAct loop with nothing added: the engine ends the turn. Hammer's
format has no "final answer" token; a Hammer model signals "no more calls" with ``[]``, and after
tool results the engine answers that in plain language (a tool-free pass). The embedded stand-in
model (a base model, not a Hammer fine-tune) tends to call a tool again instead, so after
``max_tool_rounds`` rounds of tool calls in one user turn (default 1) the engine answers from the
results without offering the tools again, and a repeat of a call already answered ends the turn
too. With a real Hammer checkpoint you can raise ``--max-tool-rounds`` for multi-step chains.
``on_refusal="answer"`` answers questions that need no tool in plain language.
"""

from __future__ import annotations

import argparse
import datetime as dt
import warnings
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langchain_hammer import ChatHammer

from hammer_plugins.demo_tools import calculate as _calculate


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression such as 23 * 47 or (2 + 3) ** 2.

    Args:
        expression: The arithmetic expression to evaluate.
    """
    return _calculate(expression)


@tool
def days_between(start: str, end: str) -> int:
    """Count the days from one calendar date to another.

    Args:
        start: The first date, as YYYY-MM-DD.
        end: The second date, as YYYY-MM-DD.
    """
    return (dt.date.fromisoformat(end) - dt.date.fromisoformat(start)).days


@tool
def word_count(text: str) -> int:
    """Count the words in a piece of text.

    Args:
        text: The text whose words to count.
    """
    return len(text.split())


TOOLS = [calculate, days_between, word_count]
QUESTION = "What is 23 * 47? And how many days are there from 2024-01-01 to 2024-03-01?"


def make_llm(model_path: str | None = None, max_tool_rounds: int | None = 1) -> ChatHammer:
    """The model for the agent: the default's recommended settings, ``[]`` answered in words."""
    return ChatHammer(model_path=model_path, n_ctx=4096, max_tokens=256, repeat_penalty=1.1, on_refusal="answer",
                      max_tool_rounds=max_tool_rounds)


def build_agent(llm: ChatHammer, tools: Sequence[Any] = TOOLS) -> Any:
    """LangGraph's ReAct agent on ``llm``; the engine ends each turn (see the module docstring)."""
    # create_react_agent moved to langchain.agents.create_agent in LangGraph 1.0; it still works
    # and needs only langgraph, so this example uses it and silences the notice.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(llm, list(tools))


def run(question: str = QUESTION, llm: ChatHammer | None = None) -> list[BaseMessage]:
    """Ask the agent one question; returns the whole conversation, printed as it goes."""
    agent = build_agent(llm or make_llm())
    print(f"user: {question}")
    messages: list[BaseMessage] = []
    for update in agent.stream({"messages": [HumanMessage(question)]}, stream_mode="updates"):
        for node, change in update.items():
            for message in change["messages"]:
                messages.append(message)
                if isinstance(message, AIMessage) and message.tool_calls:
                    calls = ", ".join(f"{c['name']}({c['args']})" for c in message.tool_calls)
                    print(f"{node}: calls {calls}")
                else:
                    print(f"{node}: {message.content}")
    return messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default=QUESTION)
    parser.add_argument("--model-path", help="a Hammer .gguf file (default: the embedded stand-in model)")
    parser.add_argument("--max-tool-rounds", type=int, default=1,
                        help="rounds of tool calls per question before the model answers (default 1)")
    args = parser.parse_args()
    run(args.question, make_llm(args.model_path, args.max_tool_rounds))


if __name__ == "__main__":
    main()
