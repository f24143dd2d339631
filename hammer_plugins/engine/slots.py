"""Slot filling as a caller of the engine's turn rules: a user turn becomes snapshot calls, then a decision.

The engine hands a call here when ``slot_filling=`` is set: the :class:`~hammer_plugins.SlotFiller`
asks for snapshot calls (each planned and run as any call is) and decides from the last one
whether to ask a question, execute the complete call or refuse (see :mod:`hammer_plugins.slot_filling.filler`).

Example:
    >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend
    >>> from hammer_plugins.engine.request import EngineRequest
    >>> engine = HammerEngine(backend=ScriptedBackend([]))
    >>> slot_filler(engine, EngineRequest.of([Message.user("hi")])) is None
    True
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from typing import Any

from hammer_plugins.engine.core import EngineCore
from hammer_plugins.engine.planning import Plan, make_plan
from hammer_plugins.engine.request import EngineRequest
from hammer_plugins.engine.turn import response_of, run
from hammer_plugins.output.record import PassRecord
from hammer_plugins.output.response import HammerResponse, Usage
from hammer_plugins.slot_filling.filler import SlotFiller, SnapshotEngine, SnapshotRequest
from hammer_plugins.tools.choice import normalize_tool_choice
from hammer_plugins.values.agent_loop import after_tool_results


def filler_for(engine: SnapshotEngine, setting: bool | Mapping[str, Any] | SlotFiller | None, tools: Sequence[Any] | None,
               tool_choice: Any = "auto") -> SlotFiller | None:
    """The filler that a call's ``slot_filling=`` asks for (None: off), checked against its tools and
    ``tool_choice``. The engine calls it for each call, and ChatHammer at ``bind_tools``, so a wrong
    setting fails there with the same message.

    Example:
        >>> from hammer_plugins import HammerEngine, ScriptedBackend
        >>> filler_for(HammerEngine(backend=ScriptedBackend([])), True, [], "auto")
        Traceback (most recent call last):
        ...
        ValueError: slot_filling needs tools. Fix: bind the tools whose arguments are to be filled
    """
    if not setting:
        return None
    if isinstance(setting, SlotFiller):
        return setting
    if not tools:
        raise ValueError("slot_filling needs tools. Fix: bind the tools whose arguments are to be filled")
    filler = SlotFiller(engine, tools, **({} if setting is True else dict(setting)))  # converts the tools once
    if normalize_tool_choice(tool_choice, list(filler.by_name)) != "auto":
        raise ValueError(f"slot_filling decides itself whether to call a tool; tool_choice={tool_choice!r} "
                         "cannot be combined with it. Fix: leave tool_choice unset")
    return filler


def slot_filler(engine: SnapshotEngine, request: EngineRequest) -> SlotFiller | None:
    """The filler for this call, or None when it is plain generation: slot filling off, or the turn
    goes on after tool results (the end-of-turn rules answer from them; a snapshot would repeat the call)."""
    filler = filler_for(engine, request.slot_filling, request.tools, request.tool_choice)
    if filler is None:
        return None
    return None if after_tool_results(list(request.messages)) else filler


def snapshot_plan(engine: EngineCore, snapshot: SnapshotRequest, filler: SlotFiller, request: EngineRequest,
                  fit: bool) -> Plan:
    """One snapshot call of ``request``'s turn: the engine's prompt; one call at most, ``[]`` allowed, partial
    calls allowed (the filler's own rules judge them: the engine's ask-or-call rule is off); ``request``'s
    sampling, ``constrained``, ``relevance_gate`` and ``record_passes``."""
    convo, shown = snapshot
    call = EngineRequest.of(convo, shown, "auto", mask_names=filler.mask_names, constrained=request.constrained,
                            parallel_tool_calls=False, partial_calls=filler.relax_required, on_missing="call",
                            relevance_gate=request.relevance_gate, record_passes=request.record_passes,
                            **request.sampling())
    return make_plan(engine, call, fit=fit)


def fill_slots(engine: EngineCore, filler: SlotFiller, steps: Generator[SnapshotRequest, HammerResponse, Any],
               plan: Plan, request: EngineRequest, fit: bool) -> Generator[Any, Any, None]:
    """A slot-filling turn, free of I/O like :func:`~hammer_plugins.engine.turn.run`: each snapshot call the
    filler asks for runs through it; the turn's answer (question, call, or refusal) is the only event. With
    ``record_passes`` it carries every snapshot call's passes in the order they ran (a focused call, then the
    one with every tool when the focused one answered ``[]``)."""
    usage = Usage()
    passes: list[PassRecord] | None = [] if request.record_passes else None
    while True:
        response = yield from response_of(run(engine, plan, "message"))
        usage = usage + response.usage
        if passes is not None:
            passes += response.passes or []
        try:
            plan = snapshot_plan(engine, steps.send(response), filler, request, fit)
        except StopIteration as done:
            snapshot, last = done.value
            break
    yield filler.decide(snapshot, last.model_copy(update={"usage": usage, "passes": passes}))
