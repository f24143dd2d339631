"""Tool calls as the model produced them: well-formed, or invalid with the raw text kept.

Example:
    >>> from hammer_plugins import ToolCall
    >>> ToolCall(name="get_weather", arguments={"city": "Paris"}).id.startswith("call_")
    True
"""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import BaseModel, Field


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
