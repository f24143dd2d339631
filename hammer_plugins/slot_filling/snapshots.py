"""Function-calling snapshots: what the model would call after each user turn, and how it travels.

After every user turn of slot filling the model emits the call it would make *now*, with the
arguments known so far (HammerBench's "snapshot" design); :mod:`hammer_plugins.slot_filling.filler`
compares it with the tool's schema. This module holds what that comparison produces and how it is
kept: the :class:`Snapshot` (filled, missing, hallucinated, changed slots, the conversation state),
the messages that carry it (:class:`SnapshotMessage`, or ``metadata["hammer_snapshot"]`` on a dict
message, so any store of messages keeps the slot-filling state), and the helpers that phrase a
follow-up question from the parameters' descriptions and lay out the snapshot prompt.

Example:
    >>> snap = Snapshot(turn=0, function="pay_fine", arguments={"city": "Guangzhou"},
    ...                 missing_required=["plate"], state="collecting")
    >>> snapshot_of({"role": "assistant", "content": "?", "metadata": snap.to_metadata()}).missing_required
    ['plate']
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from hammer_plugins.output.views import history_view, snapshot_view
from hammer_plugins.prompt.render import format_calls
from hammer_plugins.tools.definition import Tool
from hammer_plugins.values.calls import ToolCall
from hammer_plugins.values.messages import Message, to_message

SNAPSHOT_METADATA_KEY = "hammer_snapshot"
"""The key under which a snapshot travels in message metadata (dict messages, framework metadata)."""

SLOT_FILLING_ACTION_KEY = "slot_filling_action"
"""The key under which adapters put a slot-filling turn's decision (``ask``, ``execute``, ...) beside it."""

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

    def __repr__(self) -> str:
        """Short: the turn, the function, the state, the filled and missing slots."""
        return (f"Snapshot(turn={self.turn}, function={self.function!r}, state={self.state!r}, "
                f"filled={self.filled}, missing={self.missing_required})")

    def _repr_html_(self) -> str:
        """The notebook view: the function, each slot's value and whether it is filled, missing, new or changed."""
        return snapshot_view(self)

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


class ConversationState(BaseModel):
    """The slot-filling state recovered from a message history, without any model call.

    Example:
        >>> ConversationState().state
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

    def _repr_html_(self) -> str:
        """The notebook view of a slot-filling history: one row per turn's snapshot, then the state now."""
        return history_view(self)


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

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
# The first clause of a description: up to a sentence end, a bracket, a colon or an example list.
# "\s+ e.g." is tried only where a run of whitespace starts (or after a comma): tried at every space of
# a run, it made a description with a long run quadratic (20 kB: 21 s); inside a run it would
# fail just as it failed at the run's start.
# Chinese descriptions end a clause at full-width punctuation, or an ASCII comma before a Chinese character,
# with no space after it ("价格，单位(元)", "期望的配送时间，格式为 HH:mm", "起始地点,默认当前位置"): the first
# clause is the name, the rest a unit, a format or a default.
_CLAUSE_END = re.compile(r"(?<=[.;!?])\s|\n|\(|:|[，。；：（]|,(?=[\u3400-\u9fff])"
                         r"|(?:,|(?<!\s))\s+(?:e\.g\.?|i\.e\.?|for example)(?=\W|$)"
                         r"|,\s*(?:such as|like|default)\b", re.IGNORECASE)


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


__all__ = [
    "SLOT_FILLING_ACTION_KEY",
    "SNAPSHOT_HINT",
    "SNAPSHOT_METADATA_KEY",
    "ConversationState",
    "IntentShift",
    "SlotChange",
    "Snapshot",
    "SnapshotMessage",
    "dump_history",
    "follow_up_question",
    "load_history",
    "render_transcript",
    "slot_phrase",
    "snapshot_messages",
    "snapshot_of",
    "with_snapshots",
]
