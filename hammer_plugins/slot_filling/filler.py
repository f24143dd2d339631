"""Multi-turn slot filling: one function-calling snapshot per user turn, then ask, execute or stop.

After every user turn the model emits the call it would make *now*, with the arguments known so
far (HammerBench's "snapshot" design, :mod:`hammer_plugins.slot_filling.snapshots`). Plain rules then compare
that call with the tool's schema: which slots are filled, which required ones are missing, which
names are not in the schema, which values changed since the previous snapshot, and whether the
user shifted intent (another function, or ``[]`` in the middle of filling). Missing required slots
turn into a follow-up question built from the parameters' descriptions; a complete call is handed
back ready to execute.

The snapshot calls go through the engine's one pipeline: ``engine.generate(history, tools,
slot_filling=True)`` (or a dict of :class:`SlotFiller` options, or a filler) runs
:meth:`SlotFiller.steps` with the engine's prompt, context check, masking and parsing, and a
grammar that allows one partial call (every parameter optional) or ``[]``. Both adapters pass
``slot_filling`` through as any other call option.

Everything is recorded in the message history: each assistant message carries its
:class:`~hammer_plugins.slot_filling.snapshots.Snapshot`, and an executed call is an assistant ``tool_calls``
message answered by ``tool`` messages. :meth:`SlotFiller.rebuild` recovers the whole state from the
history alone, with no model call, so a conversation survives a restart.

Example:
    >>> from hammer_plugins import HammerEngine, Message
    >>> from hammer_plugins.backends.scripted import ScriptedBackend
    >>> tool = {"name": "pay_fine", "description": "Pay a traffic fine", "parameters": {"type": "object",
    ...     "properties": {"city": {"type": "string", "description": "Violating city"},
    ...                    "plate": {"type": "string", "description": "License plate number"}},
    ...     "required": ["city", "plate"]}}
    >>> engine = HammerEngine(backend=ScriptedBackend(['[{"name": "pay_fine", "arguments": {"city": "Guangzhou"}}]']))
    >>> step = SlotFiller(engine, [tool]).step([Message.user("Pay my fine in Guangzhou")])
    >>> step.action, step.snapshot.missing_required, step.question
    ('ask', ['plate'], 'Please provide the license plate number.')
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel

from hammer_plugins.output.response import HammerResponse
from hammer_plugins.slot_filling.snapshots import (
    SNAPSHOT_HINT,
    AskMode,
    ConversationState,
    IntentShift,
    Layout,
    SlotChange,
    Snapshot,
    SnapshotMessage,
    StepAction,
    follow_up_question,
    snapshot_messages,
    snapshot_of,
)
from hammer_plugins.slot_filling.values import clean_arguments, given_text, same_value, ungrounded_values
from hammer_plugins.tools.definition import Tool, to_tools
from hammer_plugins.values.calls import ToolCall
from hammer_plugins.values.messages import Message, to_message

SnapshotRequest = tuple[list[Message], list[Tool]]
"""One snapshot call :meth:`SlotFiller.steps` asks for: the conversation as shown, and the tools shown."""


class SnapshotEngine(Protocol):
    """The engine as a slot filler sees it: it answers calls (``slot_filling=`` among their options),
    and says what a refusal reads. :class:`~hammer_plugins.HammerEngine` is one; this module needs
    no import of it.

    Example:
        >>> from hammer_plugins import HammerEngine, ScriptedBackend
        >>> engine: SnapshotEngine = HammerEngine(backend=ScriptedBackend(["Hi"]))
        >>> engine.generate([Message.user("hi")]).text
        'Hi'
    """

    refusal_text: str

    def generate(self, messages: Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None = None,
                 tool_choice: Any = "auto", **options: Any) -> HammerResponse: ...

    async def agenerate(self, messages: Sequence[Message | Mapping[str, Any]], tools: Sequence[Any] | None = None,
                        tool_choice: Any = "auto", **options: Any) -> HammerResponse: ...


class SlotFillingResponse(HammerResponse):
    """The answer to a slot-filling turn: an engine answer plus the turn's ``snapshot`` and decision,
    ``slot_filling_action``: ``"ask"`` (``text`` is the question), ``"execute"`` (the complete call),
    ``"terminate"`` or ``"none"``. Slot filling's own type: the core answer carries none of it.

    Example:
        >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend
        >>> tool = {"name": "pay_fine", "parameters": {"type": "object", "properties": {
        ...     "city": {"type": "string"}, "plate": {"type": "string"}}, "required": ["city", "plate"]}}
        >>> engine = HammerEngine(backend=ScriptedBackend(['[{"name": "pay_fine", "arguments": {"city": "Paris"}}]']))
        >>> answer = engine.generate([Message.user("Pay my fine from Paris.")], tools=[tool], slot_filling=True)
        >>> type(answer).__name__, answer.slot_filling_action
        ('SlotFillingResponse', 'ask')
    """

    snapshot: Snapshot | None = None
    slot_filling_action: StepAction | None = None


class SlotFillingStep(BaseModel):
    """What to do after a user turn: ``ask`` the question, ``execute`` the call, ``terminate``, or ``none``.

    ``none`` means no tool applies and no filling was in progress: answer in plain language.
    ``message`` is the assistant message to append to the history (it carries the snapshot);
    ``response`` the engine's answer to the turn (its usage, and the model's raw output in ``raw``).

    Example:
        >>> step = SlotFillingStep(action="ask", question="Which city?",
        ...     snapshot=Snapshot(turn=0, function="pay_fine", state="collecting"),
        ...     message=SnapshotMessage(role="assistant", content="Which city?"))
        >>> step.call is None
        True
    """

    action: StepAction
    snapshot: Snapshot
    message: SnapshotMessage
    question: str | None = None
    call: ToolCall | None = None
    response: HammerResponse | None = None




QuestionBuilder = Callable[[Tool, list[str]], str]


class SlotFiller:
    """Multi-turn slot filling over an engine: one snapshot per user turn, then ask or execute.

    Args:
        engine: the :class:`HammerEngine` to ask.
        tools: every tool the assistant offers (anything :func:`to_tool` accepts).
        ask: ``"one"`` (default) asks for the first missing required slot, ``"all"`` for all.
        carry_over: keep known values the model left out of a later snapshot of the same function
            (small models often re-emit only the newest slot). Off: the snapshot is the model's alone.
        focus: while a call is being filled (or was just executed), show the model only that tool,
            as HammerBench does after the first turn; a ``[]`` then triggers a second pass with every
            tool to tell an intent switch from an abandoned task.
        layout: ``"chat"`` (each message its own turn) or ``"transcript"`` (HammerBench's single
            ``role:content`` block).
        hint: an instruction shown before the conversation (default :data:`SNAPSHOT_HINT`; ``None``: none).
        relax_required: make every parameter optional in the grammar (default on).
        mask_names: per-call override of the engine's name masking.
        question_builder: ``(tool, missing) -> str`` to phrase follow-up questions yourself.
        grounding: ``"report"`` (default) lists new values that share no word with the user's
            messages in ``Snapshot.ungrounded``; ``"enforce"`` also treats them as missing (asked
            for), which stops invented values but can re-ask when the model reformats an answer
            ("2023-04-01" for "April 1"); ``"off"``.

    Example:
        >>> from hammer_plugins import HammerEngine
        >>> from hammer_plugins.backends.scripted import ScriptedBackend
        >>> engine = HammerEngine(backend=ScriptedBackend(['[{"name": "f", "arguments": {"a": "1"}}]']))
        >>> tool = {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}},
        ...         "required": ["a"]}}
        >>> step = SlotFiller(engine, [tool]).step([Message.user("f with a=1")])
        >>> step.action, step.call.arguments
        ('execute', {'a': '1'})
    """

    def __init__(
        self,
        engine: SnapshotEngine,
        tools: Sequence[Any],
        *,
        ask: AskMode = "one",
        carry_over: bool = True,
        focus: bool = True,
        layout: Layout = "chat",
        hint: str | None = SNAPSHOT_HINT,
        relax_required: bool = True,
        mask_names: bool | None = None,
        question_builder: QuestionBuilder | None = None,
        grounding: Literal["report", "enforce", "off"] = "report",
    ) -> None:
        if ask not in ("one", "all"):
            raise ValueError(f"ask must be 'one' or 'all', got {ask!r}")
        if layout not in ("chat", "transcript"):
            raise ValueError(f"layout must be 'chat' or 'transcript', got {layout!r}")
        self.engine = engine
        self.tools = to_tools(tools)
        if not self.tools:
            raise ValueError("SlotFiller needs at least one tool")
        self.by_name = {t.name: t for t in self.tools}
        self.ask = ask
        self.carry_over = carry_over
        self.focus = focus
        self.layout = layout
        self.hint = hint
        self.relax_required = relax_required
        self.mask_names = mask_names
        self.question_builder = question_builder
        if grounding not in ("report", "enforce", "off"):
            raise ValueError(f"grounding must be 'report', 'enforce' or 'off', got {grounding!r}")
        self.grounding = grounding

    # ------------------------------------------------------------- history
    @staticmethod
    def rebuild(history: Sequence[Message | Mapping[str, Any]]) -> ConversationState:
        """The slot-filling state recorded in ``history`` (snapshots and executed calls); no model call.

        Snapshots come from message metadata; an assistant ``tool_calls`` message without one counts
        as a ready snapshot of its first call, and ``tool`` messages answering it mark it executed.
        """
        state = ConversationState()
        calls_by_id: dict[str, ToolCall] = {}
        last_event: Literal["snapshot", "executed"] | None = None
        for item in history:
            message = item if isinstance(item, Message) else to_message(item)
            snap = snapshot_of(item)
            if message.role == "user":
                state.user_turns += 1
            if snap is None and message.role == "assistant" and message.tool_calls:
                first = message.tool_calls[0]
                snap = Snapshot(turn=max(0, state.user_turns - 1), function=first.name,
                                arguments=clean_arguments(first.arguments), model_arguments=dict(first.arguments),
                                filled=sorted(clean_arguments(first.arguments)), state="ready")
            if snap is not None:
                state.snapshots.append(snap)
                last_event = "snapshot"
            if message.role == "assistant" and message.tool_calls:
                for call in message.tool_calls:
                    calls_by_id[call.id] = call
                state.pending = list(message.tool_calls)
            if message.role == "tool" and message.tool_call_id in calls_by_id:
                done = calls_by_id.pop(message.tool_call_id)
                state.executed.append(done)
                state.pending = [c for c in state.pending if c.id != done.id]
                last_event = "executed"
        if last_event == "executed" and not state.pending:
            done = state.executed[-1]
            state.state, state.function, state.arguments = "executed", done.name, clean_arguments(done.arguments)
        elif state.snapshots:
            last = state.snapshots[-1]
            state.state, state.function, state.arguments = last.state, last.function, dict(last.arguments)
        if state.state != "ready":
            state.pending = []
        return state

    # ------------------------------------------------------------- one turn
    def step(self, history: Sequence[Message | Mapping[str, Any]], *, record_passes: bool = False) -> SlotFillingStep:
        """Take the snapshot for the latest user turn and decide: ask, execute, terminate or none.

        The snapshot call goes through the engine's one pipeline (prompt, grammar, context check,
        masking, parsing), as every model call does. ``record_passes=True``: ``step.response.passes`` holds what
        the model read for each snapshot call that ran (:mod:`hammer_plugins.output.record`).
        """
        return self.step_from(self.engine.generate(history, self.tools, slot_filling=self,
                                                   record_passes=record_passes))

    async def astep(self, history: Sequence[Message | Mapping[str, Any]], *,
                    record_passes: bool = False) -> SlotFillingStep:
        """Async :meth:`step`: native on async backends (a server), else in a worker thread."""
        return self.step_from(await self.engine.agenerate(history, self.tools, slot_filling=self,
                                                          record_passes=record_passes))

    def steps(self, history: Sequence[Message | Mapping[str, Any]]) -> Generator[SnapshotRequest, HammerResponse,
                                                                                 tuple[Snapshot, HammerResponse]]:
        """The decision for one user turn, free of I/O: yields the snapshot calls it needs
        (conversation, tools shown), receives each answer, and returns the snapshot and the last answer.

        The engine drives it (``engine.generate(history, tools, slot_filling=filler)``); a test can too.
        """
        messages = [m if isinstance(m, Message) else to_message(m) for m in history]
        if not messages or not any(m.role == "user" for m in messages):
            raise ValueError("history has no user message. Fix: append the user's turn before calling step()")
        previous = self.rebuild(history)
        in_progress = previous.state in ("collecting", "ready")
        focused = previous.function if previous.state in ("collecting", "ready", "executed") else None
        shown = [self.by_name[focused]] if self.focus and focused in self.by_name else list(self.tools)
        convo = snapshot_messages(messages, self.layout, self.hint)
        response = yield convo, shown
        if response.kind != "tool_calls" and response.kind != "invalid" and len(shown) < len(self.tools):
            # With only the current tool shown the model can say "not this one" but not what else:
            # ask again with every tool to tell a switch from an abandoned task.
            response = yield convo, list(self.tools)
        said = given_text(messages)  # the user's turns, the instructions and tool results: what was given
        snapshot = self.interpret(response, previous, turn=previous.user_turns - 1, in_progress=in_progress,
                                  user_text=said)
        return snapshot, response

    @staticmethod
    def step_from(response: HammerResponse) -> SlotFillingStep:
        """The step an engine response to a slot-filling call carries (``response.snapshot``)."""
        if not isinstance(response, SlotFillingResponse) or response.snapshot is None or response.slot_filling_action is None:
            raise ValueError("the response carries no slot-filling step. Fix: call the engine with slot_filling=")
        action = response.slot_filling_action
        call = response.tool_calls[0] if action == "execute" and response.tool_calls else None
        message = SnapshotMessage(role="assistant", content=response.text, tool_calls=[call] if call else [],
                                  snapshot=response.snapshot)
        return SlotFillingStep(action=action, snapshot=response.snapshot, message=message, call=call, response=response,
                               question=response.text if action == "ask" else None)

    def interpret(self, response: HammerResponse, previous: ConversationState, turn: int,
                  in_progress: bool | None = None, user_text: str | None = None) -> Snapshot:
        """Compare the model's call with the schema and the previous state: the rules, no model call.

        ``user_text`` (what was given so far: :func:`~hammer_plugins.slot_filling.values.given_text`) enables
        the grounding check.
        """
        if in_progress is None:
            in_progress = previous.state in ("collecting", "ready")
        call = response.tool_calls[0] if response.tool_calls else None
        kind = response.kind
        if call is not None and call.name not in self.by_name:
            call, kind = None, "invalid"
        if call is None and kind == "invalid" and previous.function is not None and previous.state != "executed":
            # Malformed output is no evidence of a new intent: keep the task and ask again.
            call = ToolCall(name=previous.function, arguments={})
        if call is None:
            if in_progress and previous.function is not None:
                return Snapshot(turn=turn, state="terminated", output_kind=kind, raw=response.raw,
                                shift=IntentShift(kind="abandon", from_function=previous.function))
            return Snapshot(turn=turn, state="idle", output_kind=kind, raw=response.raw)
        tool = self.by_name[call.name]
        props = tool.properties
        emitted = clean_arguments(call.arguments)
        hallucinated = [k for k in emitted if k not in props]
        known = {k: v for k, v in emitted.items() if k in props}
        ungrounded: list[str] = []
        if self.grounding != "off" and user_text is not None:
            # Only values that are new or changed need support; accepted ones stay accepted.
            # The engine's ask-or-call rule (engine/missing.py) uses the same check.
            accepted = previous.arguments if previous.function == call.name else {}
            ungrounded = ungrounded_values(known, user_text, accepted)
            if self.grounding == "enforce":
                for key in ungrounded:
                    known.pop(key)
        after_execution = previous.state == "executed" and previous.function == call.name
        same_task = previous.function == call.name and previous.state in ("collecting", "ready", "executed")
        base = dict(previous.arguments) if same_task else {}
        carried: list[str] = []
        if self.carry_over and same_task:
            for key, value in base.items():
                if key not in known and key in props:
                    known[key] = value
                    carried.append(key)
        changed = [SlotChange(name=k, old=base[k], new=v) for k, v in known.items()
                   if k in base and not same_value(base[k], v)]
        added = [k for k in known if k not in base]
        ordered = {k: known[k] for k in props if k in known}
        missing_required = [k for k in tool.required if k not in ordered]
        missing_optional = [k for k in props if k not in ordered and k not in tool.required]
        shift = None
        if in_progress and previous.function is not None and previous.function != call.name:
            shift = IntentShift(kind="switch", from_function=previous.function, to_function=call.name)
        snapshot = Snapshot(
            turn=turn, function=call.name, arguments=ordered, model_arguments=dict(call.arguments),
            filled=list(ordered), missing_required=missing_required, missing_optional=missing_optional,
            hallucinated=hallucinated, ungrounded=ungrounded, added=added, changed=changed, carried=carried,
            state="collecting" if missing_required else "ready", shift=shift,
            after_execution=after_execution, output_kind=kind, raw=response.raw,
        )
        if missing_required:
            snapshot.question = self.question(tool, missing_required)
        return snapshot

    def question(self, tool: Tool, missing: list[str]) -> str:
        """The follow-up question for ``missing`` (the builder's, else one from descriptions)."""
        if self.question_builder is not None:
            return self.question_builder(tool, missing)
        return follow_up_question(tool, missing, self.ask)

    def decide(self, snapshot: Snapshot, response: HammerResponse) -> SlotFillingResponse:
        """The answer to the turn: the question (``ask``), the complete call (``execute``), the refusal
        text (``terminate``), or what the model said (``none``); it carries the snapshot."""
        refusal = self.engine.refusal_text
        if snapshot.state == "collecting":
            action, kind, text, calls = "ask", "text", snapshot.question or "", []
        elif snapshot.state == "ready":
            call = snapshot.call()
            assert call is not None
            action, kind, text, calls = "execute", "tool_calls", "", [call]
        elif snapshot.state == "terminated":
            action, kind, text, calls = "terminate", "refusal", refusal, []
        else:
            action, kind, calls = "none", ("refusal" if response.kind == "refusal" else "text"), []
            text = response.text or refusal
        fields = {name: getattr(response, name) for name in HammerResponse.model_fields}
        fields.update({
            "kind": kind, "text": text, "tool_calls": calls, "invalid_tool_calls": [], "snapshot": snapshot,
            "slot_filling_action": action,
            "finish_reason": "tool_calls" if calls and response.finish_reason in ("stop", "tool_calls") else (
                "stop" if response.finish_reason == "tool_calls" else response.finish_reason)})
        return SlotFillingResponse(**fields)


__all__ = ["SlotFiller", "SlotFillingResponse", "SlotFillingStep", "SnapshotEngine", "SnapshotRequest"]
