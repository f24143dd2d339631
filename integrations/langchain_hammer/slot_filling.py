"""Slot filling for ``ChatHammer``: ``bind_tools(tools, slot_filling=True)``.

Each user turn the engine's :class:`~hammer_plugins.snapshots.SlotFiller` takes a function-calling
snapshot (the call the model would make now) and plain rules decide: ask for the missing required
slots, or hand back the complete call. This module is only the LangChain edge of it:

* messages in: LangChain history to engine messages; an ``AIMessage`` whose ``response_metadata``
  (or ``additional_kwargs``) holds ``"hammer_snapshot"`` becomes a ``SnapshotMessage``, so the
  filler rebuilds its state from the history alone (a LangGraph checkpointer, a JSON dump, a new
  process: anything that keeps the messages keeps the slot-filling state);
* the step out: an ``AIMessage`` with the follow-up question as content, or with the complete call
  in ``tool_calls``; either way the snapshot (JSON-ready) is in ``response_metadata["hammer_snapshot"]``
  and the decision in ``response_metadata["slot_filling_action"]``.

Example:
    >>> from langchain_core.messages import HumanMessage
    >>> from hammer_plugins.backends.scripted import ScriptedBackend
    >>> from langchain_hammer import ChatHammer
    >>> tool = {"name": "pay_fine", "description": "Pay a traffic fine", "parameters": {"type": "object",
    ...     "properties": {"city": {"type": "string", "description": "Violating city"},
    ...                    "plate": {"type": "string", "description": "License plate number"}},
    ...     "required": ["city", "plate"]}}
    >>> backend = ScriptedBackend(['[{"name": "pay_fine", "arguments": {"city": "Guangzhou"}}]'])
    >>> llm = ChatHammer(backend=backend).bind_tools([tool], slot_filling=True)
    >>> reply = llm.invoke([HumanMessage("Pay my fine in Guangzhou")])
    >>> reply.content, reply.response_metadata["hammer_snapshot"]["missing_required"]
    ('Please provide the license plate number.', ['plate'])
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import tool_call, tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult

from hammer_plugins import Message
from hammer_plugins.snapshots import SlotFillingStep, Snapshot, snapshot_of, with_snapshots

SLOT_FILLING_KEY = "slot_filling"
"""The ``bind_tools`` / call argument that turns slot filling on (``True`` or a dict of options)."""

ACTION_METADATA_KEY = "slot_filling_action"
"""``response_metadata`` key of the step's decision: ``ask``, ``execute``, ``terminate`` or ``none``."""


def to_snapshot_history(messages: Sequence[BaseMessage], converted: Sequence[Message]) -> list[Message]:
    """Engine messages (``converted``, from ``to_engine_messages``) with each AI turn's snapshot attached.

    Example:
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_hammer import to_engine_messages
        >>> history = [HumanMessage("Pay my fine"), AIMessage("Which city?", response_metadata={
        ...     "hammer_snapshot": {"turn": 0, "function": "pay_fine", "state": "collecting"}})]
        >>> to_snapshot_history(history, to_engine_messages(history))[1].snapshot.state
        'collecting'
    """
    return with_snapshots(converted, [{"response_metadata": m.response_metadata, "additional_kwargs": m.additional_kwargs}
                                      if isinstance(m, AIMessage) else None for m in messages])


def snapshot_from_message(message: BaseMessage) -> Snapshot | None:
    """The snapshot an ``AIMessage`` from slot-filling mode carries (also after a JSON round trip).

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> snapshot_from_message(AIMessage("?", response_metadata={"hammer_snapshot": {"turn": 2}})).turn
        2
    """
    return snapshot_of({"response_metadata": message.response_metadata, "additional_kwargs": message.additional_kwargs})


def _parts(step: SlotFillingStep, model_name: str) -> tuple[str, list[Any], UsageMetadata | None, dict[str, Any]]:
    response = step.response
    metadata: dict[str, Any] = {"model_name": model_name, "model_provider": "hammer", ACTION_METADATA_KEY: step.action,
                                **step.snapshot.to_metadata()}
    usage = None
    if response is not None:
        metadata.update(finish_reason=response.finish_reason, output_kind=response.kind,
                        refusal=response.kind == "refusal")
        usage = UsageMetadata(input_tokens=response.usage.prompt_tokens,
                              output_tokens=response.usage.completion_tokens, total_tokens=response.usage.total_tokens)
    calls = [step.call] if step.call is not None else []
    return step.message.content, calls, usage, metadata


def step_result(step: SlotFillingStep, model_name: str) -> ChatResult:
    """A filler step as the ``ChatResult`` of one ``invoke``: the question, or the complete call."""
    content, calls, usage, metadata = _parts(step, model_name)
    message = AIMessage(content=content, tool_calls=[tool_call(name=c.name, args=dict(c.arguments), id=c.id) for c in calls],
                        usage_metadata=usage, response_metadata=metadata)
    info = {"finish_reason": metadata.get("finish_reason", "stop")}
    return ChatResult(generations=[ChatGeneration(message=message, generation_info=info)])


def step_chunk(step: SlotFillingStep, model_name: str) -> ChatGenerationChunk:
    """A filler step as one stream chunk (the decision needs the whole snapshot, so it comes at once)."""
    content, calls, usage, metadata = _parts(step, model_name)
    chunks = [tool_call_chunk(name=c.name, args=json.dumps(c.arguments, ensure_ascii=False), id=c.id, index=i)
              for i, c in enumerate(calls)]
    message = AIMessageChunk(content=content, tool_call_chunks=chunks, usage_metadata=usage,
                             response_metadata=metadata, chunk_position="last")
    return ChatGenerationChunk(message=message, generation_info={"finish_reason": metadata.get("finish_reason", "stop")})


__all__ = [
    "ACTION_METADATA_KEY",
    "SLOT_FILLING_KEY",
    "snapshot_from_message",
    "step_chunk",
    "step_result",
    "to_snapshot_history",
]
