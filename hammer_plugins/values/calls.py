"""Tool calls as the model produced them: well-formed, or invalid with the raw text kept.

Example:
    >>> from hammer_plugins import ToolCall
    >>> ToolCall(name="get_weather", arguments={"city": "Paris"}).id.startswith("call_")
    True
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field, ValidationError


def new_call_id() -> str:
    """A fresh, unique tool-call id in the OpenAI style (``call_`` + 24 hex chars)."""
    return f"call_{uuid.uuid4().hex[:24]}"


def call_id_for(message: int, position: int) -> str:
    """The id of a call that a client sent without one: call ``position`` of message ``message`` of the
    conversation, the same on every turn, so the results that answer it by place find it (one scheme for
    every door).

    Example:
        >>> call_id_for(2, 0)
        'call_2_0'
    """
    return f"call_{message}_{position}"


class ToolCall(BaseModel):
    """One well-formed call: a bound tool's name and its arguments.

    Example:
        >>> ToolCall(name="send_email", arguments={"to": "bob@x.com"}).arguments["to"]
        'bob@x.com'
    """

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str = Field(default_factory=new_call_id)


class InvalidToolCall(BaseModel):
    """A call the model tried to make that cannot be executed, with why and the raw text.

    Example:
        >>> InvalidToolCall(raw="[{", reason="truncated JSON").reason
        'truncated JSON'
    """

    raw: str
    reason: str
    name: str | None = None
    arguments: str | None = None
    id: str = Field(default_factory=new_call_id)


PENDING_CALLS_KEY = "hammer_pending_calls"
"""Where a door puts the calls an ask holds back (a message's extension field, or its metadata)."""


class PendingCall(ToolCall):
    """A call the engine held back because nobody gave some required values (``missing``): the answer asks
    for them, and the next user turn completes it (``on_missing="ask"``, :mod:`hammer_plugins.engine.missing`).

    Example:
        >>> pending = PendingCall(name="pay_fine", arguments={"city": "Guangzhou"}, missing=["plate"])
        >>> pending.to_wire()["missing"], PendingCall.from_wire(pending.to_wire()) == pending
        (['plate'], True)
    """

    missing: list[str] = Field(default_factory=list)

    def to_wire(self) -> dict[str, Any]:
        """The JSON every door sends under :data:`PENDING_CALLS_KEY` (one shape for every API)."""
        return {"id": self.id, "name": self.name, "arguments": dict(self.arguments), "missing": list(self.missing)}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> PendingCall:
        return cls.model_validate(dict(data))


def pending_calls_of(holder: Mapping[str, Any]) -> list[PendingCall]:
    """The pending calls a message dict carries: under :data:`PENDING_CALLS_KEY` at its top level, or inside
    ``metadata``, ``response_metadata`` or ``additional_kwargs`` (where frameworks keep extensions).

    Example:
        >>> pending_calls_of({"additional_kwargs": {"hammer_pending_calls": [{"name": "f", "missing": ["a"]}]}})[0].missing
        ['a']
    """
    for place in (holder, *(holder.get(k) for k in ("metadata", "response_metadata", "additional_kwargs"))):
        if isinstance(place, Mapping) and isinstance(place.get(PENDING_CALLS_KEY), list):
            return [call for item in place[PENDING_CALLS_KEY] if (call := _read(item)) is not None]
    return []


def _read(item: Any) -> PendingCall | None:
    # What a client sends back is not ours to trust: a malformed entry is left out (the model proposes anew).
    try:
        return PendingCall.from_wire(item) if isinstance(item, Mapping) else None
    except ValidationError:
        return None
