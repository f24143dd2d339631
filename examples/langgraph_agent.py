"""LangGraph's graph API on a local Hammer model: a ``StateGraph`` with a ``ToolNode`` and a checkpointer.

Run it (offline; the embedded default model unless you pass a Hammer GGUF):

    python examples/langgraph_agent.py
    python examples/langgraph_agent.py --model-path Hammer2.1-1.5b.Q4_K_M.gguf

The graph is the one LangGraph's documentation builds by hand: a model node, a tool node, and an
edge back to the model while it asks for tools. ``InMemorySaver`` keeps the conversation per
thread: the second question is asked with the first exchange in the prompt. For the ready-made agent loop use
``langchain.agents.create_agent`` (``examples/langchain_agent.py``); for several agents handing
over to each other, ``examples/multi_agent.py``.
"""

from __future__ import annotations

import argparse
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langchain_hammer import ChatHammer
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from hammer_plugins.tools.demo import calculate, get_weather

TOOLS = [calculate, get_weather]
QUESTIONS = ("What is 23 * 47?", "And what is 1081 * 2?")


def build_graph(llm: ChatHammer, tools: list[Any] = TOOLS) -> Any:
    """model -> (tools -> model)* -> END, with an in-memory checkpointer."""
    bound = llm.bind_tools(tools)

    def model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=InMemorySaver())


def run(questions: tuple[str, ...] = QUESTIONS, llm: ChatHammer | None = None, thread: str = "demo") -> list[Any]:
    """Ask the questions in one thread; prints each step and returns the thread's messages."""
    app = build_graph(llm or ChatHammer())
    config = {"configurable": {"thread_id": thread}}
    for question in questions:
        print(f"user: {question}")
        for update in app.stream({"messages": [HumanMessage(question)]}, config, stream_mode="updates"):
            for node, change in update.items():
                for message in change["messages"]:
                    if isinstance(message, AIMessage) and message.tool_calls:
                        print(f"{node}: calls " + ", ".join(f"{c['name']}({c['args']})" for c in message.tool_calls))
                    else:
                        print(f"{node}: {message.content}")
    return list(app.get_state(config).values["messages"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-path", help="a Hammer .gguf file (default: the embedded stand-in model)")
    args = parser.parse_args()
    run(llm=ChatHammer(model_path=args.model_path))


if __name__ == "__main__":
    main()
