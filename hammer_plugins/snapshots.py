"""Slot filling with function-calling snapshots: what to ask next, and when a call is complete.

After every user turn the model emits the call it would make *now*, with the arguments known so
far (HammerBench's "snapshot" design). Plain rules then compare that call with the tool's schema:
which slots are filled, which required ones are missing, which names are not in the schema, which
values changed since the previous snapshot, and whether the user shifted intent (another function,
or ``[]`` in the middle of filling). Missing required slots turn into a follow-up question built
from the parameters' descriptions; a complete call is handed back ready to execute.

Everything is recorded in the message history: each assistant message the filler produces carries
its :class:`Snapshot` (a :class:`SnapshotMessage`, or ``metadata["hammer_snapshot"]`` on a dict
message), and an executed call is an assistant ``tool_calls`` message answered by ``tool``
messages. :meth:`SlotFiller.rebuild` recovers the whole state from the history alone, with no
model call, so a conversation survives a restart.

Example:
    >>> from hammer_plugins import HammerEngine, Message
    >>> from hammer_plugins.backends.scripted import ScriptedBackend
    >>> tool = {"name": "pay_fine", "description": "Pay a traffic fine", "parameters": {"type": "object",
    ...     "properties": {"city": {"type": "string", "description": "Violating city"},
    ...                    "plate": {"type": "string", "description": "License plate number"}},
    ...     "required": ["city", "plate"]}}
    >>> engine = HammerEngine(backend=ScriptedBackend(['[{"name": "pay_fine", "arguments": {"city": "Guangzhou"}}]']))
    >>> filler = SlotFiller(engine, [tool])
    >>> step = filler.step([Message.user("Pay my fine in Guangzhou")])
    >>> step.action, step.snapshot.missing_required, step.question
    ('ask', ['plate'], 'Please provide the license plate number.')
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from .agent_turn import after_tool_results
from .calls import InvalidToolCall, ToolCall
from .engine import HammerEngine, to_message
from .grammar import Grammar, build_grammar
from .messages import Message
from .parsing import parse_output
from .prompt import format_calls
from .response import HammerResponse, Usage
from .tools import Tool, to_tools

SNAPSHOT_METADATA_KEY = "hammer_snapshot"
"""The key under which a snapshot travels in message metadata (dict messages, framework metadata)."""

SNAPSHOT_HINT = (
    "Output the call you would make now, with only the parameter values the user has actually given "
    "in this conversation; leave out every parameter the user has not mentioned (or give it an empty "
    "string ''). Never invent values, and keep times and dates in the user's own wording. If the user's "
    "latest request cannot be served by the tools, output []."
)
"""Extra instruction shown before the conversation in snapshot mode.

The HammerBench authors give non-Hammer models a similar note ("If some parameters are not
mentioned in the user request, please directly output an empty string"). Measured on the stand-in
0.5B base model, it turns invented values for unmentioned slots into empty ones in some turns.
"""

SnapshotState = Literal["idle", "collecting", "ready", "executed", "terminated"]
StepAction = Literal["ask", "execute", "terminate", "none"]
AskMode = Literal["one", "all"]
Layout = Literal["chat", "transcript"]


class SlotChange(BaseModel):
    """A slot whose known value was replaced (slot overriding).

    Example:
        >>> SlotChange(name="plate", old="D456", new="D789").new
        'D789'
    """

    name: str
    old: Any
    new: Any


class IntentShift(BaseModel):
    """The user left an unfinished call: ``switch`` to another function, or ``abandon`` (``[]``).

    Example:
        >>> IntentShift(kind="abandon", from_function="pay_fine").to_function is None
        True
    """

    kind: Literal["switch", "abandon"]
    from_function: str
    to_function: str | None = None


class Snapshot(BaseModel):
    """The call the model would make after one user turn, compared with the tool's schema.

    ``arguments`` holds the known slots (empty strings and ``None`` mean "not given"; string
    values are stripped), after carrying over values the model left out (``carried``).
    ``model_arguments`` is what the model emitted. ``hallucinated`` lists argument names that are
    not in the schema (they are kept out of ``arguments``). ``ungrounded`` lists new values with no
    support in what the user said (likely invented). ``changed`` lists overridden values
    relative to the previous snapshot of the same function, or to the executed call when
    ``after_execution``. ``state`` is the conversation state after this turn.

    Example:
        >>> snap = Snapshot(turn=0, function="pay_fine", arguments={"city": "Guangzhou"},
        ...                 missing_required=["plate"], state="collecting")
        >>> Snapshot.model_validate_json(snap.model_dump_json()) == snap
        True
    """

    turn: int
    function: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    model_arguments: dict[str, Any] = Field(default_factory=dict)
    filled: list[str] = Field(default_factory=list)
    missing_required: list[str] = Field(default_factory=list)
    missing_optional: list[str] = Field(default_factory=list)
    hallucinated: list[str] = Field(default_factory=list)
    ungrounded: list[str] = Field(default_factory=list)
    added: list[str] = Field(default_factory=list)
    changed: list[SlotChange] = Field(default_factory=list)
    carried: list[str] = Field(default_factory=list)
    state: SnapshotState = "idle"
    shift: IntentShift | None = None
    after_execution: bool = False
    question: str | None = None
    output_kind: str = "tool_calls"
    raw: str = ""

    @property
    def complete(self) -> bool:
        """True when a function is chosen and no required slot is missing."""
        return self.function is not None and not self.missing_required

    def call(self, call_id: str | None = None) -> ToolCall | None:
        """The call built from the known slots (``None`` without a function)."""
        if self.function is None:
            return None
        if call_id:
            return ToolCall(name=self.function, arguments=dict(self.arguments), id=call_id)
        return ToolCall(name=self.function, arguments=dict(self.arguments))

    def to_metadata(self) -> dict[str, Any]:
        """``{"hammer_snapshot": {...}}``: what adapters store in message metadata."""
        return {SNAPSHOT_METADATA_KEY: self.model_dump(mode="json")}

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any] | None) -> Snapshot | None:
        """The snapshot stored by :meth:`to_metadata` (a dict or its JSON text), else ``None``."""
        if not metadata or SNAPSHOT_METADATA_KEY not in metadata:
            return None
        value = metadata[SNAPSHOT_METADATA_KEY]
        if isinstance(value, Snapshot):
            return value
        if isinstance(value, str):
            return cls.model_validate_json(value)
        return cls.model_validate(value)


class SnapshotMessage(Message):
    """An engine :class:`Message` that carries the :class:`Snapshot` it was produced with.

    It renders exactly like a plain message (the model never sees the snapshot).

    Example:
        >>> msg = SnapshotMessage(role="assistant", content="Which city?",
        ...                       snapshot=Snapshot(turn=0, function="pay_fine", state="collecting"))
        >>> snapshot_of(msg).function
        'pay_fine'
    """

    snapshot: Snapshot | None = None


class SlotFillingStep(BaseModel):
    """What to do after a user turn: ``ask`` the question, ``execute`` the call, ``terminate``, or ``none``.

    ``none`` means no tool applies and no filling was in progress: answer in plain language.
    ``message`` is the assistant message to append to the history (it carries the snapshot).

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


class ConversationState(BaseModel):
    """The slot-filling state recovered from a message history, without any model call.

    Example:
        >>> SlotFiller.rebuild([Message.user("hi")]).state
        'idle'
    """

    state: SnapshotState = "idle"
    function: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    snapshots: list[Snapshot] = Field(default_factory=list)
    executed: list[ToolCall] = Field(default_factory=list)
    pending: list[ToolCall] = Field(default_factory=list)
    user_turns: int = 0

    @property
    def last(self) -> Snapshot | None:
        """The latest snapshot, if any."""
        return self.snapshots[-1] if self.snapshots else None


# --------------------------------------------------------------------------- helpers
def snapshot_of(message: Message | Mapping[str, Any]) -> Snapshot | None:
    """The snapshot a history message carries, if any.

    Looks at :class:`SnapshotMessage` ``.snapshot``, and for dict messages at ``hammer_snapshot``
    at the top level or inside ``metadata``, ``response_metadata`` or ``additional_kwargs``.

    Example:
        >>> snapshot_of({"role": "assistant", "content": "?", "metadata": {"hammer_snapshot":
        ...     {"turn": 1, "function": "f", "state": "collecting"}}}).turn
        1
    """
    if isinstance(message, SnapshotMessage):
        return message.snapshot
    if isinstance(message, Message):
        return None
    if isinstance(message, Mapping):
        found = Snapshot.from_metadata(message)
        if found is not None:
            return found
        for key in ("metadata", "response_metadata", "additional_kwargs"):
            inner = message.get(key)
            if isinstance(inner, Mapping):
                found = Snapshot.from_metadata(inner)
                if found is not None:
                    return found
    return None



def with_snapshots(messages: Sequence[Message], metadata: Sequence[Mapping[str, Any] | None]) -> list[Message]:
    """Engine messages with the snapshots their framework messages carried in ``metadata``.

    Adapters pass each message's metadata dict (LangChain ``response_metadata``, LlamaIndex
    ``additional_kwargs``; ``None`` for messages that cannot carry one).

    Example:
        >>> history = with_snapshots([Message.user("Pay my fine"), Message.assistant("Which city?")],
        ...                          [None, {"hammer_snapshot": {"turn": 0, "state": "collecting"}}])
        >>> history[1].snapshot.state
        'collecting'
    """
    out: list[Message] = []
    for message, meta in zip(messages, metadata, strict=True):
        snap = snapshot_of(meta) if meta is not None and message.role == "assistant" else None
        out.append(SnapshotMessage(**message.model_dump(), snapshot=snap) if snap is not None else message)
    return out

def relaxed_tool(tool: Tool) -> Tool:
    """The same tool with no required parameters: a snapshot may omit slots the user has not given.

    Used for the grammar only; the prompt still marks the required parameters.

    Example:
        >>> t = Tool(name="f", parameters={"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
        >>> relaxed_tool(t).required
        []
    """
    if not tool.required:
        return tool
    return Tool(name=tool.name, description=tool.description, parameters={**tool.parameters, "required": []})


def is_empty_value(value: Any) -> bool:
    """Empty strings, ``None`` and HammerBench's ``"\\\\"`` placeholder mean "not given"."""
    if value is None:
        return True
    return isinstance(value, str) and value.strip() in ("", "\\")


def clean_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Drop unknown (empty) values and strip strings: the slots the call actually fills.

    Example:
        >>> clean_arguments({"city": " Paris ", "date": "", "n": 0})
        {'city': 'Paris', 'n': 0}
    """
    out: dict[str, Any] = {}
    for key, value in arguments.items():
        if is_empty_value(value):
            continue
        out[key] = value.strip() if isinstance(value, str) else value
    return out


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# The first clause of a description: up to a sentence end, a bracket, a colon or an example list.
_CLAUSE_END = re.compile(
    r"(?<=[.;!?])\s|\n|\(|:|,?\s+(?:e\.g\.?|i\.e\.?|for example)(?=\W|$)|,\s*(?:such as|like|default)\b", re.IGNORECASE)


def slot_phrase(name: str, schema: Mapping[str, Any]) -> str:
    """A short noun phrase for a parameter: its description's first clause, else its name in words.

    Example:
        >>> slot_phrase("plate_number", {"description": "License plate number."})
        'license plate number'
        >>> slot_phrase("city", {"description": "City name, e.g. Paris"})
        'city name'
        >>> slot_phrase("startDate", {})
        'start date'
    """
    description = str(schema.get("description") or "").strip()
    if description:
        phrase = _CLAUSE_END.split(description, maxsplit=1)[0].strip().rstrip(".;:!?, ")
        if len(phrase) > 80:
            phrase = phrase[:80].rsplit(" ", 1)[0]
        # Descriptions are often Title Case ("Billing Time"); lower such words but keep acronyms
        # ("URL") and mixed-case names ("WeChat").
        phrase = " ".join(w.lower() if w[:1].isupper() and w[1:].islower() else w for w in phrase.split(" "))
        phrase = re.sub(r"^(?:the|a|an|your)\s+", "", phrase)  # the question adds its own article
        if phrase:
            return phrase
    words = _CAMEL.sub(" ", name).replace("_", " ").replace("-", " ").replace(".", " ")
    return " ".join(words.split()).lower() or name


def follow_up_question(tool: Tool, missing: Sequence[str], ask: AskMode = "one") -> str:
    """A question for the missing slots, built from the parameters' descriptions.

    ``ask="one"`` asks for the first missing slot (in schema order), ``"all"`` for every one.

    Example:
        >>> t = Tool(name="f", parameters={"type": "object", "properties": {
        ...     "city": {"type": "string", "description": "Violating city"},
        ...     "time": {"type": "string", "description": "Billing Time"}}})
        >>> follow_up_question(t, ["city", "time"], ask="all")
        'Please provide the violating city and the billing time.'
    """
    if not missing:
        return ""
    props = tool.properties
    names = list(missing) if ask == "all" else list(missing)[:1]
    phrases = [f"the {slot_phrase(n, props.get(n, {}))}" for n in names]
    if len(phrases) == 1:
        joined = phrases[0]
    else:
        joined = ", ".join(phrases[:-1]) + " and " + phrases[-1]
    return f"Please provide {joined}."


def render_transcript(messages: Sequence[Message]) -> Message:
    """The whole conversation as one user turn of ``role:content`` lines (HammerBench's inference layout).

    Example:
        >>> render_transcript([Message.user("Pay my fine"), Message.assistant("Which city?"),
        ...                    Message.user("Guangzhou")]).content
        'user:Pay my fine\\nassistant:Which city?\\nuser:Guangzhou'
    """
    lines: list[str] = []
    for message in messages:
        content = message.content
        if message.role == "assistant" and message.tool_calls:
            calls = format_calls(message.tool_calls)
            content = f"{content.strip()}\n{calls}" if content.strip() else calls
        lines.append(f"{message.role}:{content}")
    return Message.user("\n".join(lines))


def snapshot_messages(messages: Sequence[Message], layout: Layout = "chat", hint: str | None = None) -> list[Message]:
    """The conversation as the snapshot prompt shows it: ``layout`` applied, ``hint`` first.

    Example:
        >>> [m.role for m in snapshot_messages([Message.user("hi")], "transcript", hint="Be brief.")]
        ['system', 'user']
    """
    convo = list(messages)
    if layout == "transcript":
        systems = [m for m in convo if m.role == "system"]
        convo = systems + [render_transcript([m for m in convo if m.role != "system"])]
    if hint:
        convo = [Message.system(hint), *convo]
    return convo


def dump_history(messages: Sequence[Message | Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The history as JSON-ready dicts, snapshots under ``metadata["hammer_snapshot"]``.

    Example:
        >>> msg = SnapshotMessage(role="assistant", content="Which city?",
        ...                       snapshot=Snapshot(turn=0, function="f", state="collecting"))
        >>> dump_history([Message.user("hi"), msg])[1]["metadata"]["hammer_snapshot"]["function"]
        'f'
    """
    out: list[dict[str, Any]] = []
    for item in messages:
        message = item if isinstance(item, Message) else to_message(item)
        data = Message.model_validate(message.model_dump(exclude={"snapshot"})).model_dump(mode="json")
        snap = snapshot_of(item)
        if snap is not None:
            data["metadata"] = snap.to_metadata()
        out.append(data)
    return out


def load_history(items: Sequence[Mapping[str, Any]]) -> list[Message]:
    """Messages from :func:`dump_history` output (or OpenAI-style dicts), snapshots restored.

    Example:
        >>> data = [{"role": "assistant", "content": "?", "metadata": {"hammer_snapshot":
        ...     {"turn": 0, "function": "f", "state": "collecting"}}}]
        >>> load_history(data)[0].snapshot.state
        'collecting'
    """
    out: list[Message] = []
    for item in items:
        message = to_message(item)
        snap = snapshot_of(item)
        out.append(SnapshotMessage(**message.model_dump(), snapshot=snap) if snap is not None else message)
    return out


# --------------------------------------------------------------------------- generation
_RELAXED_GRAMMARS: dict[tuple[Any, ...], Grammar] = {}
_RELAXED_LOCK = threading.Lock()


def _snapshot_grammar(tools: Sequence[Tool], relax_required: bool) -> Grammar:
    key = (tuple(t.fingerprint() for t in tools), relax_required)
    with _RELAXED_LOCK:
        cached = _RELAXED_GRAMMARS.get(key)
    if cached is not None:
        return cached
    shown = [relaxed_tool(t) for t in tools] if relax_required else list(tools)
    # One call per snapshot: the snapshot is "the call you would make now".
    text = build_grammar(shown, "auto", parallel=False)
    with _RELAXED_LOCK:
        if len(_RELAXED_GRAMMARS) > 256:
            _RELAXED_GRAMMARS.clear()
        _RELAXED_GRAMMARS[key] = text
    return text


def snapshot_generate(
    engine: HammerEngine,
    messages: Sequence[Message | Mapping[str, Any]],
    tools: Sequence[Any],
    *,
    mask_names: bool | None = None,
    constrained: bool | None = None,
    relax_required: bool = True,
    max_tokens: int | None = None,
) -> HammerResponse:
    """Ask the engine for one snapshot call: the prompt the engine renders, a snapshot grammar.

    The prompt is the engine's own (tools block with required parameters marked, masking when on).
    The grammar differs from :meth:`HammerEngine.generate`'s: at most one call, ``[]`` allowed, and
    with ``relax_required`` every parameter optional, so a partial call is well-formed.

    Example:
        >>> from hammer_plugins.backends.scripted import ScriptedBackend
        >>> engine = HammerEngine(backend=ScriptedBackend(['[{"name": "f", "arguments": {}}]']))
        >>> tool = {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}},
        ...         "required": ["a"]}}
        >>> snapshot_generate(engine, [Message.user("do f")], [tool]).tool_calls[0].arguments
        {}
    """
    started = time.perf_counter()
    binding = engine.bind(tools, mask_names)
    if not binding.tools:
        raise ValueError("snapshot_generate needs at least one tool")
    prompt = engine.render(messages, tools, "auto", mask_names)
    use_grammar = engine.constrained if constrained is None else constrained
    grammar = _snapshot_grammar(binding.prompt_tools, relax_required) if use_grammar else None
    settings = engine.settings.model_copy()
    if max_tokens is not None:
        settings.max_tokens = max_tokens
    backend = engine.backend
    room = backend.context_window - backend.count_tokens(prompt)
    settings.max_tokens = max(1, min(settings.max_tokens, room))
    parts: list[str] = []
    usage = Usage()
    finish = "stop"
    timings: dict[str, float] = {}
    for chunk in backend.stream(prompt, settings, grammar):
        if chunk.text:
            parts.append(chunk.text)
        if chunk.usage is not None:
            usage = Usage(prompt_tokens=chunk.usage.prompt_tokens, completion_tokens=chunk.usage.completion_tokens)
            finish = chunk.finish_reason or "stop"
            timings = dict(chunk.timings)
    raw = "".join(parts)
    parsed = parse_output(raw)
    calls: list[ToolCall] = []
    invalid: list[InvalidToolCall] = list(parsed.invalid_tool_calls)
    names = {t.name for t in binding.tools}
    for call in parsed.tool_calls:
        real: ToolCall | InvalidToolCall = binding.mask.unmask(call) if binding.mask else call
        if isinstance(real, ToolCall) and real.name not in names:
            real = InvalidToolCall(raw=raw, name=real.name, id=real.id, arguments=json.dumps(real.arguments, default=str),
                                   reason=f"the model called {real.name!r}, which is not a bound tool")
        (calls if isinstance(real, ToolCall) else invalid).append(real)  # type: ignore[arg-type]
    kind = parsed.kind
    if kind == "tool_calls" and not calls:
        kind = "invalid"
    timings["engine_total"] = time.perf_counter() - started
    return HammerResponse(kind=kind, tool_calls=calls, invalid_tool_calls=invalid,
                          text=engine.refusal_text if kind == "refusal" else parsed.text, raw=raw, usage=usage,
                          finish_reason=finish, model=backend.model_name, timings=timings)


# --------------------------------------------------------------------------- the filler
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
        engine: HammerEngine,
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

    @classmethod
    def for_turn(cls, engine: HammerEngine, tools: Sequence[Any], history: Sequence[Message],
                 setting: bool | Mapping[str, Any] | None) -> SlotFiller | None:
        """The filler for this call, or None when slot filling is off or the turn goes on after tool results.

        ``setting`` is what adapters take from their users: ``True`` or a dict of options. After tool
        results the normal path answers from them (the engine's end-of-turn rules); taking the
        snapshot again there would repeat the call.

        Example:
            >>> from hammer_plugins.backends.scripted import ScriptedBackend
            >>> engine = HammerEngine(backend=ScriptedBackend())
            >>> SlotFiller.for_turn(engine, [{"name": "f", "parameters": {}}], [Message.user("hi")], {"ask": "all"}).ask
            'all'
        """
        if not setting or after_tool_results(history):
            return None
        return cls(engine, tools, **({} if setting is True else dict(setting)))

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
    def step(self, history: Sequence[Message | Mapping[str, Any]]) -> SlotFillingStep:
        """Take the snapshot for the latest user turn and decide: ask, execute, terminate or none."""
        messages = [m if isinstance(m, Message) else to_message(m) for m in history]
        if not messages or not any(m.role == "user" for m in messages):
            raise ValueError("history has no user message. Fix: append the user's turn before calling step()")
        previous = self.rebuild(history)
        in_progress = previous.state in ("collecting", "ready")
        focused = previous.function if previous.state in ("collecting", "ready", "executed") else None
        shown = [self.by_name[focused]] if self.focus and focused in self.by_name else list(self.tools)
        response = self.generate(messages, shown)
        if response.kind != "tool_calls" and response.kind != "invalid" and len(shown) < len(self.tools):
            # With only the current tool shown the model can say "not this one" but not what else:
            # ask again with every tool to tell a switch from an abandoned task.
            response = self.generate(messages, self.tools)
        said = "\n".join(m.content for m in messages if m.role == "user")
        snapshot = self.interpret(response, previous, turn=previous.user_turns - 1, in_progress=in_progress,
                                  user_text=said)
        return self._decide(snapshot, response)

    async def astep(self, history: Sequence[Message | Mapping[str, Any]]) -> SlotFillingStep:
        """Async :meth:`step`: runs in a worker thread so the event loop stays free."""
        return await asyncio.to_thread(self.step, history)

    def generate(self, messages: Sequence[Message], tools: Sequence[Tool]) -> HammerResponse:
        """The raw snapshot call for this conversation and tool subset (layout and hint applied)."""
        convo = snapshot_messages(messages, self.layout, self.hint)
        return snapshot_generate(self.engine, convo, tools, mask_names=self.mask_names,
                                 relax_required=self.relax_required)

    def interpret(self, response: HammerResponse, previous: ConversationState, turn: int,
                  in_progress: bool | None = None, user_text: str | None = None) -> Snapshot:
        """Compare the model's call with the schema and the previous state: the rules, no model call.

        ``user_text`` (what the user said so far) enables the grounding check.
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
            accepted = previous.arguments if previous.function == call.name else {}
            ungrounded = [k for k, v in known.items()
                          if not (k in accepted and _same_value(accepted[k], v)) and not is_grounded(v, user_text)]
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
                   if k in base and not _same_value(base[k], v)]
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

    def _decide(self, snapshot: Snapshot, response: HammerResponse) -> SlotFillingStep:
        if snapshot.state == "collecting":
            question = snapshot.question or ""
            message = SnapshotMessage(role="assistant", content=question, snapshot=snapshot)
            return SlotFillingStep(action="ask", snapshot=snapshot, message=message, question=question,
                                   response=response)
        if snapshot.state == "ready":
            call = snapshot.call()
            assert call is not None
            message = SnapshotMessage(role="assistant", content="", tool_calls=[call], snapshot=snapshot)
            return SlotFillingStep(action="execute", snapshot=snapshot, message=message, call=call, response=response)
        text = self.engine.refusal_text if snapshot.state == "terminated" else (response.text or self.engine.refusal_text)
        message = SnapshotMessage(role="assistant", content=text, snapshot=snapshot)
        action: StepAction = "terminate" if snapshot.state == "terminated" else "none"
        return SlotFillingStep(action=action, snapshot=snapshot, message=message, response=response)


_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def is_grounded(value: Any, said: str) -> bool:
    """Whether a slot value is supported by what the user said: a substring, or half its words.

    Booleans always count as grounded (users rarely say "true"). Example:
        >>> is_grounded("Yue B88888", "My plate number is yue b88888."), is_grounded("1234567890", "Pay my fine")
        (True, False)
    """
    if isinstance(value, bool) or value is None:
        return True
    text = str(value).strip().casefold()
    haystack = said.casefold()
    if not text or text in haystack:
        return True
    words = _WORD.findall(text)
    if not words:
        return True
    spoken = set(_WORD.findall(haystack))
    return sum(w in spoken for w in words) * 2 >= len(words)


def _same_value(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().casefold() == b.strip().casefold()
    return bool(a == b)


__all__ = [
    "SNAPSHOT_HINT",
    "SNAPSHOT_METADATA_KEY",
    "ConversationState",
    "IntentShift",
    "SlotChange",
    "SlotFiller",
    "SlotFillingStep",
    "Snapshot",
    "SnapshotMessage",
    "clean_arguments",
    "dump_history",
    "follow_up_question",
    "is_grounded",
    "load_history",
    "relaxed_tool",
    "render_transcript",
    "slot_phrase",
    "snapshot_generate",
    "snapshot_messages",
    "snapshot_of",
]
