"""HammerLLM slot filling: labelled HammerBench snapshots replayed through chat_with_tools and the workflow."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.workflow import Context
from llama_index.llms.hammer import HammerLLM, SlotFillingResult, SlotFillingWorkflow, snapshot_from_message
from shared_data import hammerbench_record, label_replay, load_example

from hammer_plugins.backends.scripted import ScriptedBackend

# LlamaIndex's OpenAI form of a tool name turns dots into underscores; that is the name the model sees.
VIOLATION = "Navigation_TrafficViolations_queryViolation"

example = load_example("llama_index_slot_filling.py")


def script(name: str) -> tuple[list[str], list[str]]:
    """The first record's user turns and labelled snapshots, with the names LlamaIndex shows the model."""
    return label_replay(hammerbench_record(name), rename=lambda name: name.replace(".", "_"))


def test_chat_with_tools_replays_an_override_and_the_snapshot_survives_json() -> None:
    users, outputs = script("SO_case2")
    llm = HammerLLM(backend=ScriptedBackend(outputs))
    tools = example.hammerbench_tools()
    history: list[ChatMessage] = []
    replies = []
    for text in users:
        reply = llm.chat_with_tools(tools, text, chat_history=history, slot_filling=True)
        history += [ChatMessage(role="user", content=text), reply.message]
        # What a store would keep: the messages as JSON, read back before the next turn.
        history = [ChatMessage.model_validate_json(m.model_dump_json()) for m in history]
        replies.append(reply)
    assert [r.message.additional_kwargs["slot_filling_action"] for r in replies] == ["ask"] * 4
    override = snapshot_from_message(history[5])
    assert override is not None and [(c.name, c.old, c.new) for c in override.changed] == [("city", "Guangzhou", "Shanghai")]
    last = snapshot_from_message(history[-1])
    assert last is not None and last.arguments == {"plate_number": "Yue B67890", "city": "Shanghai"}
    assert replies[-1].message.content == "Please provide the billing time."


def test_workflow_asks_then_executes_the_tool_and_answers_and_terminates_on_intent_shift() -> None:
    users, outputs = script("SO_case2")
    complete = {"name": VIOLATION, "arguments": {"city": "Shanghai", "plate_number": "Yue B67890", "time": "March 2024"}}
    outputs += [json.dumps([complete]), "One speeding record.", "[]", "[]"]
    flow = SlotFillingWorkflow(HammerLLM(backend=ScriptedBackend(outputs)), example.hammerbench_tools())

    async def play() -> tuple[list[SlotFillingResult], dict[str, Any]]:
        ctx = Context(flow)
        results = [await flow.run(user_msg=text, ctx=ctx) for text in users[:2]]
        # A restart: the context as JSON, loaded into a new Context.
        stored = json.loads(json.dumps(ctx.to_dict()))
        ctx = Context.from_dict(flow, stored)
        results += [await flow.run(user_msg=text, ctx=ctx) for text in [*users[2:], "March 2024", "Start a new task"]]
        return results, stored

    results, _ = asyncio.run(play())
    assert [r.action for r in results] == ["ask", "ask", "ask", "ask", "execute", "none"]
    assert results[2].snapshot.changed[0].new == "Shanghai"
    done = results[4]
    assert done.call is not None and done.call.arguments == complete["arguments"]
    assert done.tool_output is not None and "Yue B67890 in Shanghai" in done.tool_output
    assert done.reply == "One speeding record."


def test_intent_shift_terminates_from_a_history_passed_in() -> None:
    users, outputs = script("IS")
    outputs.append("[]")
    llm = HammerLLM(backend=ScriptedBackend(outputs))
    flow = SlotFillingWorkflow(llm, example.hammerbench_tools())

    async def play() -> SlotFillingResult:
        history: list[ChatMessage] = []
        result = None
        for text in users:
            result = await flow.run(user_msg=text, chat_history=history)
            history = result.chat_history
        assert result is not None
        return result

    result = asyncio.run(play())
    assert result.action == "terminate" and result.snapshot.shift is not None
    assert result.snapshot.shift.kind == "abandon" and result.reply == "Sorry, no tool is suitable for your request."
