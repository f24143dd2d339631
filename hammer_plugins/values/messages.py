"""Conversation messages in the engine's own, framework-free form.

Adapters convert LangChain / LlamaIndex messages to these at the edge.

Example:
    >>> from hammer_plugins import Message, ToolCall
    >>> call = ToolCall(name="get_weather", arguments={"city": "Paris"})
    >>> history = [Message.user("Weather in Paris?"), Message.assistant(tool_calls=[call]),
    ...            Message.tool('{"temp": 21}', tool_call_id=call.id, name="get_weather")]
    >>> [m.role for m in history]
    ['user', 'assistant', 'tool']
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from hammer_plugins.values.calls import PendingCall, ToolCall, new_call_id, pending_calls_of

Role = Literal["system", "user", "assistant", "tool"]


class Message(BaseModel):
    """One turn: a role, its text, and for the assistant the calls it made.

    ``is_error`` marks a tool result that reports a failure (rendered so the model can see it).
    ``pending_calls``: on an assistant message that asked for missing values, the calls it held back
    (never rendered: the next turn's ask-or-call rule completes them).

    Example:
        >>> Message.tool("city not found", tool_call_id="call_1", is_error=True).is_error
        True
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    pending_calls: list[PendingCall] = Field(default_factory=list)

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: list[ToolCall] | None = None) -> Message:
        return cls(role="assistant", content=content, tool_calls=list(tool_calls or []))

    @classmethod
    def tool(cls, content: str, tool_call_id: str | None = None, name: str | None = None,
             is_error: bool = False) -> Message:
        return cls(role="tool", content=content, tool_call_id=tool_call_id, name=name, is_error=is_error)


def to_message(message: Message | Mapping[str, Any]) -> Message:
    """An engine message from a :class:`Message` or an OpenAI-style message dict.

    Example:
        >>> to_message({"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}).tool_calls[0].name
        'f'
    """
    if isinstance(message, Message):
        return message
    calls = []
    for raw in message.get("tool_calls") or []:
        function = raw.get("function", raw)
        args = function.get("arguments", function.get("args", {}))
        if isinstance(args, str):
            args = json.loads(args) if args.strip() else {}
        calls.append(ToolCall(name=function["name"], arguments=args, id=raw.get("id") or new_call_id()))
    content = message.get("content") or ""
    if not isinstance(content, str):
        content = "".join(part.get("text", "") if isinstance(part, Mapping) else str(part) for part in content)
    return Message(role=message["role"], content=content, tool_calls=calls,
                   tool_call_id=message.get("tool_call_id"), name=message.get("name"),
                   is_error=bool(message.get("is_error", False)), pending_calls=pending_calls_of(message))
