"""Slot filling for ``ChatHammer``: ``bind_tools(tools, slot_filling=True)``.

Each user turn the engine's :class:`~hammer_plugins.slot_filling.filler.SlotFiller` takes a function-calling
snapshot (the call the model would make now) and plain rules decide: ask for the missing required
slots, or hand back the complete call. The engine runs it (``slot_filling`` is one more call option
it takes); the LangChain edge is only where the snapshot travels:

* out: an ``AIMessage`` with the follow-up question as content, or with the complete call in
  ``tool_calls``; either way the snapshot (JSON-ready) is in ``response_metadata["hammer_snapshot"]``
  and the decision in ``response_metadata["slot_filling_action"]``;
* in: ``to_engine_messages`` turns an ``AIMessage`` carrying a snapshot into a ``SnapshotMessage``, so
  the filler rebuilds its state from the history alone (a LangGraph checkpointer, a JSON dump, a new
  process: anything that keeps the messages keeps the slot-filling state).

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

from langchain_core.messages import BaseMessage

from hammer_plugins.slot_filling.snapshots import Snapshot, snapshot_of


def snapshot_from_message(message: BaseMessage) -> Snapshot | None:
    """The snapshot an ``AIMessage`` from slot-filling mode carries (also after a JSON round trip).

    Example:
        >>> from langchain_core.messages import AIMessage
        >>> snapshot_from_message(AIMessage("?", response_metadata={"hammer_snapshot": {"turn": 2}})).turn
        2
    """
    return snapshot_of({"response_metadata": message.response_metadata, "additional_kwargs": message.additional_kwargs})


__all__ = ["snapshot_from_message"]
