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

from typing import Literal

from pydantic import BaseModel, Field

from .calls import ToolCall

Role = Literal["system", "user", "assistant", "tool"]


class Message(BaseModel):
    """One turn: a role, its text, and for the assistant the calls it made.

    ``is_error`` marks a tool result that reports a failure (rendered so the model can see it).
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False

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
