"""Several agents on one local Hammer model, handing the conversation over to each other.

Run it (offline; the embedded default model unless you pass a Hammer GGUF):

    python examples/multi_agent.py
    python examples/multi_agent.py --model-path Hammer2.1-1.5b.Q4_K_M.gguf

Two frameworks, the same shape: a triage agent that can only hand over, and a math agent with a
calculator.

* LangGraph: a swarm (``langgraph_swarm.create_swarm``) of two ``create_agent`` agents; the
  hand-off tools are ``transfer_to_<agent>``.
* LlamaIndex: an ``AgentWorkflow`` of two ``FunctionAgent`` s; the hand-off tool is ``handoff``.

The agent handed to sees the whole conversation, the hand-off call included, and calls its own
tools: the engine counts tool rounds per agent and never counts a hand-off (docs/engine.md, "The
end of an agent's turn").
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langchain_hammer import ChatHammer
from langgraph.checkpoint.memory import InMemorySaver
from langgraph_swarm import create_handoff_tool, create_swarm
from llama_index.core.agent.workflow import AgentOutput, AgentWorkflow, FunctionAgent, ToolCallResult
from llama_index.llms.hammer import HammerLLM

from hammer_plugins.tools.demo import calculate as _calculate

QUESTION = "What is 23 * 47?"
TRIAGE_PROMPT = "You are a triage agent. Hand each question to the agent that can answer it."


@tool
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression such as 23 * 47 or (2 + 3) ** 2.

    Args:
        expression: The arithmetic expression to evaluate.
    """
    return _calculate(expression)


def langgraph_swarm(question: str = QUESTION, llm: ChatHammer | None = None) -> list[Any]:
    """A LangGraph swarm: triage hands over to math; returns the conversation."""
    llm = llm or ChatHammer()
    triage = create_agent(llm, [create_handoff_tool(agent_name="math", description="Hand over to the math agent, "
                                                    "which can calculate.")], name="triage", system_prompt=TRIAGE_PROMPT)
    math = create_agent(llm, [calculate, create_handoff_tool(agent_name="triage")], name="math",
                        system_prompt="You are a math agent.")
    app = create_swarm([triage, math], default_active_agent="triage").compile(checkpointer=InMemorySaver())
    state = app.invoke({"messages": [HumanMessage(question)]}, {"configurable": {"thread_id": "swarm"}})
    print(f"user: {question}")
    for message in state["messages"][1:]:
        if isinstance(message, AIMessage) and message.tool_calls:
            print(f"{message.name}: calls " + ", ".join(f"{c['name']}({c['args']})" for c in message.tool_calls))
        else:
            print(f"{message.name or 'tool'}: {message.content}")
    return list(state["messages"])


def multiply(a: float, b: float) -> float:
    """Multiply two numbers and return the product.

    Args:
        a (float): The first number.
        b (float): The second number.
    """
    return a * b


async def llama_index_workflow(question: str = "What is 12.5 times 4?", llm: HammerLLM | None = None) -> list[str]:
    """A LlamaIndex AgentWorkflow: triage hands over to math; returns what each step printed."""
    llm = llm or HammerLLM()
    triage = FunctionAgent(name="triage", description="Routes each question to the right agent.",
                           system_prompt=TRIAGE_PROMPT, tools=[], llm=llm, can_handoff_to=["math"])
    math = FunctionAgent(name="math", description="Does arithmetic with a multiply tool.",
                         system_prompt="You are a math agent.", tools=[multiply], llm=llm)
    handler = AgentWorkflow(agents=[triage, math], root_agent="triage").run(user_msg=question)
    lines = [f"user: {question}"]
    async for event in handler.stream_events():
        if isinstance(event, ToolCallResult):
            lines.append(f"tool call: {event.tool_name}({event.tool_kwargs}) -> {event.tool_output.content}")
        elif isinstance(event, AgentOutput) and not event.tool_calls:
            lines.append(f"{event.current_agent_name}: {event.response.content}")
    await handler
    print("\n".join(lines))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", help="a Hammer .gguf file (default: the embedded stand-in model)")
    args = parser.parse_args()
    print("== LangGraph swarm")
    langgraph_swarm(llm=ChatHammer(model_path=args.model_path))
    print("\n== LlamaIndex AgentWorkflow")
    asyncio.run(llama_index_workflow(llm=HammerLLM(model_path=args.model_path)))


if __name__ == "__main__":
    main()
