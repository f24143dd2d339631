"""A mobile assistant that fills tool arguments over several turns: LangGraph + ChatHammer slot filling.

Run it (offline; the embedded default model unless you pass a Hammer GGUF):

    python examples/langgraph_slot_filling.py
    python examples/langgraph_slot_filling.py --model-path hammer2.1-1.5b.Q4_K_M.gguf

The tools are HammerBench's mobile-assistant tools (schemas copied from the benchmark's data, with
canned results). ``bind_tools(tools, slot_filling=True)`` makes every user turn a slot-filling step:
the model emits the call it would make now (a snapshot), and plain rules compare it with the schema.
Missing required arguments give a follow-up question (the graph ends the turn there, the snapshot
in ``response_metadata["hammer_snapshot"]``); a complete call goes to LangGraph's ``ToolNode``, and
the model answers from its result. The graph's checkpointer keeps the messages, and the messages
are the whole slot-filling state: a new graph fed only the old messages continues the task.

The embedded stand-in model is a small base model, not a Hammer fine-tune: it is weak at slot
filling (it may invent values or miss some); a Hammer 2.1 checkpoint is what this is built for.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, StructuredTool
from langchain_hammer import ChatHammer, snapshot_from_message
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

# HammerBench tool schemas (MadeAgents/HammerBench, Apache-2.0), exactly as the benchmark gives them.
HAMMERBENCH_TOOLS: list[dict[str, Any]] = [
    {"name": "Navigation.TrafficViolations.queryViolation", "description": "Query traffic violation records by conditions",
     "parameters": {"type": "object", "properties": {
         "plate_number": {"type": "string", "description": "License plate number"},
         "city": {"type": "string", "description": "Violating city"},
         "time": {"type": "string", "description": "Billing Time"}},
         "required": ["plate_number", "city", "time"]}},
    {"name": "Travel.HotelServices.getHotelReservationHistory", "description": "Query hotel reservation history",
     "parameters": {"type": "object", "properties": {
         "hotel_name": {"type": "string", "description": "Hotel name"},
         "check_in_date": {"type": "string", "description": "Check-in date"}},
         "required": ["hotel_name"]}},
    {"name": "Health.HealthManagement.searchDietRecord", "description": "Search diet records",
     "parameters": {"type": "object", "properties": {
         "date": {"type": "string", "description": "Date of the meal"},
         "meal_type": {"type": "string", "description": "Meal type, such as breakfast, lunch or dinner"}},
         "required": ["date"]}},
]

# What each tool returns: a phone's answers, canned so the example runs offline.
_RESULTS = {
    "Navigation.TrafficViolations.queryViolation": "1 record: speeding, fine 200 yuan, 3 points.",
    "Travel.HotelServices.getHotelReservationHistory": "2 stays found.",
    "Health.HealthManagement.searchDietRecord": "Oatmeal and a banana, 350 kcal.",
}


def hammerbench_tools(schemas: Sequence[dict[str, Any]] = HAMMERBENCH_TOOLS) -> list[BaseTool]:
    """LangChain tools with HammerBench's names and JSON schemas (what ``ToolNode`` executes)."""
    tools: list[BaseTool] = []
    for schema in schemas:
        name = schema["name"]

        def run(_name: str = name, **arguments: Any) -> str:
            return f"{_RESULTS.get(_name, 'done')} (arguments: {json.dumps(arguments, ensure_ascii=False)})"

        tools.append(StructuredTool.from_function(func=run, name=name, description=schema["description"],
                                                  args_schema=schema["parameters"]))
    return tools


def build_graph(llm: Runnable[LanguageModelInput, BaseMessage], tools: Sequence[BaseTool],
                checkpointer: BaseCheckpointSaver[Any] | None = None) -> CompiledStateGraph[Any, Any, Any, Any]:
    """assistant -> (a complete call) tools -> assistant; a question ends the turn.

    ``llm`` is ``ChatHammer(...).bind_tools(tools, slot_filling=True)``: after the tool result it
    answers in plain language, so ``tools_condition`` then ends the turn.
    """

    def assistant(state: MessagesState) -> dict[str, list[BaseMessage]]:
        return {"messages": [llm.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("assistant", assistant)
    graph.add_node("tools", ToolNode(list(tools)))
    graph.add_edge(START, "assistant")
    graph.add_conditional_edges("assistant", tools_condition)
    graph.add_edge("tools", "assistant")
    return graph.compile(checkpointer=checkpointer)


def describe(message: BaseMessage) -> str:
    """One line for a reply: the question with the snapshot, the call, or the answer."""
    snap = snapshot_from_message(message)
    if isinstance(message, AIMessage) and message.tool_calls:
        call = message.tool_calls[0]
        return f"calls {call['name']}({json.dumps(call['args'], ensure_ascii=False)})"
    if snap is not None:
        return (f"{message.content!r}  [snapshot: {snap.function} {snap.arguments} missing={snap.missing_required} "
                f"state={snap.state}]")
    return f"{message.content!r}"


TURNS = (
    "Check if my car has any illegal records",
    "The violating city is Guangzhou, license plate number Yue B67890.",
    "The billing time is March 2024.",
)


def run(turns: Sequence[str] = TURNS, model_path: str | None = None, thread_id: str = "phone-1",
        max_tokens: int = 64) -> list[BaseMessage]:
    """Play ``turns`` through the graph on one checkpointed thread; print and return the messages."""
    llm = ChatHammer(model_path=model_path, n_ctx=4096, max_tokens=max_tokens)
    tools = hammerbench_tools()
    graph = build_graph(llm.bind_tools(tools, slot_filling=True), tools, InMemorySaver())
    config = {"configurable": {"thread_id": thread_id}}
    messages: list[BaseMessage] = []
    for text in turns:
        print(f"user: {text}")
        before = len(graph.get_state(config).values.get("messages", []))  # type: ignore[arg-type]
        messages = graph.invoke({"messages": [HumanMessage(text)]}, config)["messages"]  # type: ignore[arg-type]
        for message in messages[before + 1:]:
            who = "tool" if message.type == "tool" else "assistant"
            print(f"  {who}: {describe(message) if who == 'assistant' else message.content}")
    return messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("turns", nargs="*", help="user turns (default: a traffic-violation query over three turns)")
    parser.add_argument("--model-path", help="a Hammer .gguf (default: the embedded stand-in model)")
    args = parser.parse_args()
    run(args.turns or TURNS, model_path=args.model_path)


if __name__ == "__main__":
    main()
