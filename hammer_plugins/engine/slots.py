"""Slot filling as a caller of the engine's turn rules: a user turn becomes snapshot calls, then a decision.

The engine hands a call here when ``slot_filling=`` is set: the :class:`~hammer_plugins.SlotFiller`
asks for snapshot calls (each planned and run as any call is) and decides from the last one
whether to ask a question, execute the complete call or refuse (see :mod:`hammer_plugins.slot_filling`).

Example:
    >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend
    >>> engine = HammerEngine(backend=ScriptedBackend([]))
    >>> slot_filler(engine, None, [Message.user("hi")], [], "auto") is None
    True
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..agent_turn import after_tool_results
from ..messages import Message, to_message
from ..response import HammerResponse, Usage
from ..slot_filling import SlotFiller, SnapshotRequest, filler_for
from .planning import Plan
from .turn import response_of, run

if TYPE_CHECKING:
    from .api import HammerEngine


def slot_filler(engine: HammerEngine, setting: bool | Mapping[str, Any] | SlotFiller | None,
                messages: Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None,
                tool_choice: Any) -> SlotFiller | None:
    """The filler for this call, or None when it is plain generation: slot filling off, or the turn
    goes on after tool results (the end-of-turn rules answer from them; a snapshot would repeat the call)."""
    filler = filler_for(engine, setting, tools, tool_choice)
    if filler is None:
        return None
    history = [to_message(m) for m in messages]
    return None if after_tool_results(history) else filler


def snapshot_plan(engine: HammerEngine, request: SnapshotRequest, filler: SlotFiller, constrained: bool | None,
                  settings: Mapping[str, Any], fit: bool) -> Plan:
    """One snapshot call: the engine's prompt; one call at most, ``[]`` allowed, partial calls allowed."""
    convo, shown = request
    return engine._plan(convo, shown, "auto", filler.mask_names, constrained, False, settings, fit=fit,
                        partial_calls=filler.relax_required)


def fill_slots(engine: HammerEngine, filler: SlotFiller, steps: Generator[SnapshotRequest, HammerResponse, Any],
               plan: Plan, constrained: bool | None, settings: Mapping[str, Any], fit: bool) -> Generator[Any, Any, None]:
    """A slot-filling turn, free of I/O like :func:`~hammer_plugins.engine.turn.run`: each snapshot call the
    filler asks for runs through it; the turn's answer (question, call, or refusal) is the only event."""
    usage = Usage()
    while True:
        response = yield from response_of(run(engine, plan, "message"))
        usage = usage + response.usage
        try:
            plan = snapshot_plan(engine, steps.send(response), filler, constrained, settings, fit)
        except StopIteration as done:
            snapshot, last = done.value
            break
    yield filler.decide(snapshot, last.model_copy(update={"usage": usage}))
