"""LangChain 1.x agents on a local Hammer model: ``create_agent`` with tools, a structured answer, middleware.

Run it (offline; the embedded default model unless you pass a Hammer GGUF):

    python examples/langchain_agent.py
    python examples/langchain_agent.py --model-path Hammer2.1-1.5b.Q4_K_M.gguf "What is 2**10?"

Three agents, all ``langchain.agents.create_agent`` with nothing added for Hammer:

1. tools only: the model calls the tools (several at once when the question needs several),
   the agent runs them, and the model answers in plain language from their results;
2. tools and ``response_format=Answer``: the same loop, and the agent's ``structured_response``
   is an ``Answer`` holding the tools' results (LangChain picks its provider strategy, because
   ChatHammer declares native structured output: the tools stay available on every step and the
   answer comes in the schema when the agent is done);
3. tools with the middleware people use with small models: a model-call limit, a tool-call limit
   and summarization of long histories, which counts tokens with the model's own tokenizer.

Hammer's format has no "final answer" token; a Hammer model says "no more calls" with ``[]``, and
the engine then answers from the results. The embedded stand-in (a base model, not a Hammer
fine-tune) tends to call again instead, so after ``max_tool_rounds`` rounds of calls in one user
turn (default 1) the engine answers without offering the tools again. With a real Hammer
checkpoint raise ``--max-tool-rounds`` for multi-step chains.
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware, SummarizationMiddleware, ToolCallLimitMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import tool
from langchain_hammer import ChatHammer
from pydantic import BaseModel, Field

from hammer_plugins.tools.demo import calculate as _calculate


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


TOOLS = [calculate, days_between]
QUESTION = "What is 23 * 47? And how many days are there from 2024-01-01 to 2024-03-01?"


class Answer(BaseModel):
    """The answer to the user's question."""

    product: int = Field(description="the result of the multiplication")
    days: int = Field(description="the number of days between the two dates")


def make_llm(model_path: str | None = None, max_tool_rounds: int | None = 1) -> ChatHammer:
    """The model for the agents: ChatHammer's defaults, ``[]`` answered in words."""
    return ChatHammer(model_path=model_path, on_refusal="answer", max_tool_rounds=max_tool_rounds)


def middleware(llm: ChatHammer) -> list[Any]:
    """What small-model agents commonly run with: call limits and summarization by real token counts."""
    return [
        ModelCallLimitMiddleware(run_limit=4, exit_behavior="end"),
        ToolCallLimitMiddleware(run_limit=4, exit_behavior="continue"),
        SummarizationMiddleware(llm, trigger=("tokens", 3000), keep=("messages", 6),
                                token_counter=llm.get_num_tokens_from_messages),
    ]


def run(question: str = QUESTION, llm: ChatHammer | None = None, response_format: Any = None,
        use_middleware: bool = False) -> dict[str, Any]:
    """Ask one agent one question; prints the conversation and returns the agent's final state."""
    llm = llm or make_llm()
    agent = create_agent(llm, TOOLS, response_format=response_format,
                         middleware=middleware(llm) if use_middleware else ())
    print(f"user: {question}")
    state: dict[str, Any] = agent.invoke({"messages": [HumanMessage(question)]})
    for message in state["messages"][1:]:
        print(describe(message))
    if state.get("structured_response") is not None:
        print(f"structured: {state['structured_response']!r}")
    return state


def describe(message: BaseMessage) -> str:
    if isinstance(message, AIMessage) and message.tool_calls:
        return "model: calls " + ", ".join(f"{c['name']}({c['args']})" for c in message.tool_calls)
    who = "model" if isinstance(message, AIMessage) else f"tool {message.name}"
    return f"{who}: {message.content}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default=QUESTION)
    parser.add_argument("--model-path", help="a Hammer .gguf file (default: the embedded stand-in model)")
    parser.add_argument("--max-tool-rounds", type=int, default=1,
                        help="rounds of tool calls per question before the model answers (default 1)")
    args = parser.parse_args()
    llm = make_llm(args.model_path, args.max_tool_rounds)
    print("== tools")
    run(args.question, llm)
    print("\n== tools and a structured answer")
    run(args.question, llm, response_format=Answer)
    print("\n== tools and middleware")
    run(args.question, llm, use_middleware=True)


if __name__ == "__main__":
    main()
