"""Slot filling for ``HammerLLM``: ``chat_with_tools(..., slot_filling=True)`` and ``SlotFillingWorkflow``.

Each user turn the engine's :class:`~hammer_plugins.slot_filling.filler.SlotFiller` takes a function-calling
snapshot (the call the model would make now) and plain rules decide: ask for the missing required
slots, or hand back the complete call. This module is the LlamaIndex edge of it:

* messages in: an assistant ``ChatMessage`` whose ``additional_kwargs`` hold ``"hammer_snapshot"``
  becomes a ``SnapshotMessage`` (``to_engine_message``), so the filler rebuilds its state from the
  history alone;
* the step out: a ``ChatResponse`` whose message is the follow-up question, or holds the complete
  call as a ``ToolCallBlock``; the snapshot (JSON-ready) is in ``message.additional_kwargs["hammer_snapshot"]``
  and the decision in ``additional_kwargs["slot_filling_action"]``;
* :class:`SlotFillingWorkflow`: one run per user turn, state in the workflow ``Context`` (or a
  ``chat_history`` you pass), the tool executed and its result answered when the call is complete.

Example:
    >>> from hammer_plugins.backends.scripted import ScriptedBackend
    >>> from llama_index.llms.hammer import HammerLLM
    >>> tool = {"name": "pay_fine", "description": "Pay a traffic fine", "parameters": {"type": "object",
    ...     "properties": {"city": {"type": "string", "description": "Violating city"},
    ...                    "plate": {"type": "string", "description": "License plate number"}},
    ...     "required": ["city", "plate"]}}
    >>> llm = HammerLLM(backend=ScriptedBackend(['[{"name": "pay_fine", "arguments": {"city": "Guangzhou"}}]']))
    >>> reply = llm.chat_with_tools([tool], "Pay my fine in Guangzhou", slot_filling=True)
    >>> reply.message.content, reply.message.additional_kwargs["hammer_snapshot"]["missing_required"]
    ('Please provide the license plate number.', ['plate'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.workflow import Context, Event, StartEvent, StopEvent, Workflow, step
from pydantic import BaseModel, ConfigDict, Field

from hammer_plugins import ToolCall
from hammer_plugins.slot_filling.snapshots import SLOT_FILLING_ACTION_KEY, Snapshot, StepAction, snapshot_of

from .base import HammerLLM, to_engine_tool

if TYPE_CHECKING:
    from llama_index.core.tools.types import BaseTool

def snapshot_from_message(message: ChatMessage) -> Snapshot | None:
    """The snapshot a slot-filling assistant message carries (also after a JSON round trip).

    Example:
        >>> snapshot_from_message(ChatMessage(role="assistant", content="?",
        ...                                   additional_kwargs={"hammer_snapshot": {"turn": 3}})).turn
        3
    """
    return snapshot_of(message.additional_kwargs)


# ------------------------------------------------------------------ the workflow
class SlotFillingResult(BaseModel):
    """What one :class:`SlotFillingWorkflow` run (one user turn) produced.

    ``reply`` is what to show the user: the follow-up question, the answer after the tool ran, or
    the refusal text. ``call`` and ``tool_output`` are set when the call was complete and executed.

    Example:
        >>> SlotFillingResult(action="ask", reply="Which city?", snapshot=Snapshot(turn=0)).call is None
        True
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    action: StepAction
    reply: str
    snapshot: Snapshot
    call: ToolCall | None = None
    tool_output: str | None = None
    chat_history: list[ChatMessage] = Field(default_factory=list)


class ExecuteEvent(Event):
    """The complete call, to be executed by the workflow's tool."""

    call: ToolCall
    snapshot: Snapshot


class SlotFillingWorkflow(Workflow):
    """One user turn per run: ask for missing slots, or execute the complete call and answer.

    The conversation lives in the run's ``Context`` (``ctx.store["chat_history"]``, JSON-ready
    message dicts), so reusing one ``Context`` continues it, and ``ctx.to_dict()`` /
    ``Context.from_dict(workflow, data)`` carries it across processes. ``chat_history=`` on a run
    replaces it: the slot-filling state is rebuilt from the messages alone.

    Args:
        llm: the ``HammerLLM`` to ask.
        tools: LlamaIndex tools (``FunctionTool`` ...); a complete call runs ``tool.acall(**arguments)``.
        slot_filling: ``True`` or a dict of :class:`~hammer_plugins.slot_filling.filler.SlotFiller` options.

    Example:
        >>> import asyncio
        >>> from llama_index.core.tools import FunctionTool
        >>> from hammer_plugins.backends.scripted import ScriptedBackend
        >>> from llama_index.llms.hammer import HammerLLM
        >>> def pay_fine(city: str, plate: str) -> str:
        ...     '''Pay a traffic fine.'''
        ...     return f"paid {plate} in {city}"
        >>> llm = HammerLLM(backend=ScriptedBackend(['[{"name": "pay_fine", "arguments": {"city": "Paris"}}]']))
        >>> flow = SlotFillingWorkflow(llm, [FunctionTool.from_defaults(pay_fine)])
        >>> async def turn(text: str) -> SlotFillingResult:
        ...     return await flow.run(user_msg=text)      # runs need a running event loop
        >>> asyncio.run(turn("Pay my fine in Paris")).reply
        'Please provide the plate.'
    """

    def __init__(self, llm: HammerLLM, tools: Sequence[BaseTool], slot_filling: bool | Mapping[str, Any] = True,
                 timeout: float | None = 600.0, **kwargs: Any) -> None:
        super().__init__(timeout=timeout, **kwargs)
        self.llm = llm
        self.tools = list(tools)
        # Calls come back under the name the model saw: LlamaIndex's OpenAI form of the tool name
        # (dots become underscores there), so look tools up by that name too.
        self.by_name: dict[str, BaseTool] = {}
        for tool in self.tools:
            self.by_name[tool.metadata.get_name()] = tool
            self.by_name[to_engine_tool(tool)["function"]["name"]] = tool
        self.slot_filling = slot_filling

    async def _history(self, ctx: Context) -> list[ChatMessage]:
        return [ChatMessage.model_validate(m) for m in await ctx.store.get("chat_history", default=[])]

    async def _save(self, ctx: Context, history: Sequence[ChatMessage]) -> None:
        await ctx.store.set("chat_history", [m.model_dump(mode="json") for m in history])

    @step
    async def fill(self, ctx: Context, ev: StartEvent) -> ExecuteEvent | StopEvent:
        """Take the snapshot for the new user message; stop with the question, or go on to execute."""
        given = ev.get("chat_history")
        history = list(given) if given is not None else await self._history(ctx)
        history.append(ChatMessage(role=MessageRole.USER, content=str(ev.get("user_msg", ""))))
        response = await self.llm.achat(history, tools=self.tools, slot_filling=self.slot_filling)
        history.append(response.message)
        await self._save(ctx, history)
        snapshot = snapshot_from_message(response.message)
        assert snapshot is not None
        action = response.message.additional_kwargs[SLOT_FILLING_ACTION_KEY]
        if action == "execute":
            call = snapshot.call()
            assert call is not None
            # Use the id the message carries, so the tool result answers exactly that call.
            call = ToolCall(name=call.name, arguments=call.arguments,
                            id=self.llm.get_tool_calls_from_response(response)[0].tool_id)
            return ExecuteEvent(call=call, snapshot=snapshot)
        return StopEvent(result=SlotFillingResult(action=action, reply=response.message.content or "", snapshot=snapshot,
                                                  chat_history=history))

    @step
    async def execute(self, ctx: Context, ev: ExecuteEvent) -> StopEvent:
        """Run the complete call, record the result, and let the model answer from it."""
        history = await self._history(ctx)
        tool = self.by_name[ev.call.name]
        output = await tool.acall(**ev.call.arguments)
        history.append(ChatMessage(role=MessageRole.TOOL, content=str(output),
                                   additional_kwargs={"tool_call_id": ev.call.id, "name": ev.call.name}))
        # After tool results the normal path answers (slot filling only handles user turns).
        answer = await self.llm.achat(history, tools=self.tools, slot_filling=self.slot_filling)
        history.append(answer.message)
        await self._save(ctx, history)
        return StopEvent(result=SlotFillingResult(action="execute", reply=answer.message.content or "",
                                                  snapshot=ev.snapshot, call=ev.call, tool_output=str(output),
                                                  chat_history=history))


__all__ = ["ExecuteEvent", "SlotFillingResult", "SlotFillingWorkflow", "snapshot_from_message"]
