"""ChatHammer slot filling: decisions replayed from labelled HammerBench snapshots, through LangGraph.

ScriptedBackend answers each turn with HammerBench's own snapshot label for that turn (the call a
perfect model would emit), so these tests check the adapter and the rules, not a model: messages in,
``AIMessage`` out, the snapshot in ``response_metadata``, state kept by the checkpointer and by the
messages alone.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_from_dict, messages_to_dict
from langchain_hammer import ChatHammer, snapshot_from_message
from langgraph.checkpoint.memory import InMemorySaver, MemorySaver
from shared_data import hammerbench_record, label_replay, load_example

from hammer_plugins.backends.scripted import ScriptedBackend

VIOLATION = "Navigation.TrafficViolations.queryViolation"

example = load_example("langgraph_slot_filling.py")
record = hammerbench_record
script = label_replay


def graph_for(outputs: list[str], rec: dict[str, Any], checkpointer: Any) -> tuple[Any, ScriptedBackend]:
    backend = ScriptedBackend(outputs)
    tools = example.hammerbench_tools(rec["multiple_tools"])
    llm = ChatHammer(backend=backend).bind_tools(tools, slot_filling=True)
    return example.build_graph(llm, tools, checkpointer), backend


def turn(graph: Any, text: str, thread: str = "t1") -> AIMessage:
    result = graph.invoke({"messages": [HumanMessage(text)]}, {"configurable": {"thread_id": thread}})
    reply = result["messages"][-1]
    assert isinstance(reply, AIMessage)
    return reply


def test_so_override_asks_for_missing_slots_and_records_the_change_in_the_checkpointed_graph() -> None:
    rec = record("SO_case2")
    users, outputs = script(rec)
    graph, backend = graph_for(outputs, rec, MemorySaver())

    first = turn(graph, users[0])
    assert first.content == "Please provide the license plate number." and not first.tool_calls
    assert first.response_metadata["slot_filling_action"] == "ask"
    assert first.response_metadata["hammer_snapshot"]["function"] == VIOLATION

    second = turn(graph, users[1])
    snap = snapshot_from_message(second)
    assert snap is not None and snap.arguments == {"city": "Guangzhou"} and snap.state == "collecting"

    # "It was wrong before. Violating city should be Shanghai": the override is recorded.
    third = turn(graph, users[2])
    snap = snapshot_from_message(third)
    assert snap is not None and snap.arguments == {"city": "Shanghai"}
    assert [(c.name, c.old, c.new) for c in snap.changed] == [("city", "Guangzhou", "Shanghai")]
    assert third.content == "Please provide the license plate number."

    fourth = turn(graph, users[3])
    snap = snapshot_from_message(fourth)
    assert snap is not None and snap.arguments == {"plate_number": "Yue B67890", "city": "Shanghai"}
    assert snap.missing_required == ["time"] and fourth.content == "Please provide the billing time."
    # After the first turn only the tool being filled is shown (HammerBench's protocol).
    assert "Health.HealthManagement" in backend.prompts[0] and "Health.HealthManagement" not in backend.prompts[-1]


def test_completing_the_call_runs_the_tool_in_the_graph_and_answers_from_its_result() -> None:
    rec = record("SO_case2")
    users, outputs = script(rec)
    complete = {"name": VIOLATION, "arguments": {"city": "Shanghai", "plate_number": "Yue B67890", "time": "March 2024"}}
    outputs += [json.dumps([complete]), "You have one speeding record in Shanghai."]
    graph, _ = graph_for(outputs, rec, InMemorySaver())
    for text in users:
        turn(graph, text)
    answer = turn(graph, "The billing time is March 2024.")
    messages = graph.get_state({"configurable": {"thread_id": "t1"}}).values["messages"]
    call_message, tool_message = messages[-3], messages[-2]
    assert isinstance(call_message, AIMessage) and call_message.response_metadata["slot_filling_action"] == "execute"
    assert call_message.tool_calls[0]["name"] == VIOLATION
    assert call_message.tool_calls[0]["args"] == complete["arguments"]
    assert isinstance(tool_message, ToolMessage) and "speeding" in str(tool_message.content)
    assert tool_message.tool_call_id == call_message.tool_calls[0]["id"]
    assert answer.content == "You have one speeding record in Shanghai." and not answer.tool_calls


def test_intent_shift_terminates_the_unfinished_call() -> None:
    rec = record("IS")
    users, outputs = script(rec)
    # The last turn ("Oh no, <unrelated request>"): [] with the focused tool, [] again with all of them.
    outputs.append("[]")
    graph, _ = graph_for(outputs, rec, InMemorySaver())
    for text in users[:-1]:
        turn(graph, text)
    last = turn(graph, users[-1])
    snap = snapshot_from_message(last)
    assert snap is not None and snap.state == "terminated"
    assert snap.shift is not None and snap.shift.kind == "abandon" and snap.shift.from_function == VIOLATION
    assert last.response_metadata["slot_filling_action"] == "terminate" and not last.tool_calls


def test_state_survives_json_round_trip_and_a_new_graph_fed_only_the_messages() -> None:
    rec = record("SO_case2")
    users, outputs = script(rec)
    graph, _ = graph_for(outputs[:3], rec, InMemorySaver())
    for text in users[:3]:
        turn(graph, text)
    stored = json.dumps(messages_to_dict(graph.get_state({"configurable": {"thread_id": "t1"}}).values["messages"]))

    # A "restart": new model, new graph, new checkpointer; only the messages come back.
    restored = messages_from_dict(json.loads(stored))
    snap = snapshot_from_message(restored[-1])
    assert snap is not None and snap.changed[0].new == "Shanghai"
    # The model re-emits only the new slot: the rebuilt state carries the city over.
    emitted = json.dumps([{"name": VIOLATION, "arguments": {"plate_number": "Yue B67890"}}])
    fresh, _ = graph_for([emitted], rec, InMemorySaver())
    fresh.update_state({"configurable": {"thread_id": "t2"}}, {"messages": restored})
    reply = turn(fresh, users[3], thread="t2")
    snap = snapshot_from_message(reply)
    assert snap is not None and snap.arguments == {"plate_number": "Yue B67890", "city": "Shanghai"}
    assert snap.carried == ["city"] and reply.content == "Please provide the billing time."


def test_stream_and_async_give_the_same_step() -> None:
    rec = record("SO_case1")
    users, outputs = script(rec)
    tools = rec["single_tool"]
    llm = ChatHammer(backend=ScriptedBackend(outputs[:1] * 3)).bind_tools(tools, slot_filling={"ask": "all"})
    invoked = llm.invoke([HumanMessage(users[0])])
    streamed = None
    for chunk in llm.stream([HumanMessage(users[0])]):
        streamed = chunk if streamed is None else streamed + chunk
    import asyncio

    awaited = asyncio.run(llm.ainvoke([HumanMessage(users[0])]))
    expected = "Please provide the license plate number, the violating city and the billing time."
    assert invoked.content == expected and awaited.content == expected
    assert streamed is not None and streamed.content == expected
    assert streamed.response_metadata["hammer_snapshot"] == invoked.response_metadata["hammer_snapshot"]


def test_bind_tools_rejects_forced_tool_choice_and_bad_options() -> None:
    tools = [example.HAMMERBENCH_TOOLS[0]]
    with pytest.raises(ValueError, match="tool_choice"):
        ChatHammer().bind_tools(tools, slot_filling=True, tool_choice="any")
    with pytest.raises(ValueError, match="ask must be"):
        ChatHammer().bind_tools(tools, slot_filling={"ask": "some"})
