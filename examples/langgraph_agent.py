"""A LangGraph ReAct agent on a local Hammer model, with three real Python tools.

Run it (offline; the embedded default model unless you pass a Hammer GGUF):

    python examples/langgraph_agent.py
    python examples/langgraph_agent.py --model-path hammer2.1-1.5b.Q4_K_M.gguf "What is 2**10?"

The model calls the tools (several at once when the question needs several), LangGraph runs them,
and the model answers in plain language from their results.

One policy keeps a small model on track: ``max_tool_rounds``. Hammer's format has no "final
answer" token; a Hammer model signals "no more calls" with ``[]``, which ``on_refusal="answer"``
turns into a plain-language answer. The embedded stand-in model (a base model, not a Hammer
fine-tune) tends to call a tool again instead, so after ``max_tool_rounds`` rounds of tool calls
in one user turn the agent asks the model for its answer without tools (LangGraph's dynamic
model). With a real Hammer checkpoint you can raise it for multi-step chains.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import operator
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langchain_hammer import ChatHammer

_OPS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow, ast.Mod: operator.mod, ast.USub: operator.neg,
}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.operand))
    raise ValueError("only numbers and + - * / % ** are allowed")


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression such as 23 * 47 or (2 + 3) ** 2.

    Args:
        expression: The arithmetic expression to evaluate.
    """
    return str(_eval(ast.parse(expression, mode="eval").body))


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


def build_agent(llm: ChatHammer, tools: Sequence[Any] = TOOLS, max_tool_rounds: int = 1) -> Any:
    """A LangGraph ReAct agent that answers without tools after ``max_tool_rounds`` rounds of calls."""
    with_tools = llm.bind_tools(list(tools))

    def pick_model(state: dict[str, Any], runtime: Any) -> Runnable[LanguageModelInput, BaseMessage]:
        messages: list[BaseMessage] = state["messages"]
        last_user = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        rounds = sum(1 for m in messages[last_user:] if isinstance(m, AIMessage) and m.tool_calls)
        return llm if rounds >= max_tool_rounds else with_tools

    # create_react_agent moved to langchain.agents.create_agent in LangGraph 1.0; it still works
    # and needs only langgraph, so this example uses it and silences the notice.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(pick_model, list(tools))


def run(question: str = QUESTION, llm: ChatHammer | None = None, max_tool_rounds: int = 1) -> list[BaseMessage]:
    """Ask the agent one question; returns the whole conversation, printed as it goes."""
    llm = llm or ChatHammer(n_ctx=4096, max_tokens=256, repeat_penalty=1.1, on_refusal="answer")
    agent = build_agent(llm, max_tool_rounds=max_tool_rounds)
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
    parser.add_argument("--max-tool-rounds", type=int, default=1)
    args = parser.parse_args()
    llm = ChatHammer(model_path=args.model_path, n_ctx=4096, max_tokens=256, repeat_penalty=1.1, on_refusal="answer")
    run(args.question, llm, args.max_tool_rounds)


if __name__ == "__main__":
    main()
