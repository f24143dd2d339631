"""What every API's request becomes: one :class:`EngineCall` for the engine.

Example:
    >>> EngineCall(messages=[], tools=[], tool_choice="none").stream
    False
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hammer_plugins.values.messages import Message


@dataclass
class EngineCall:
    """One validated request, ready for ``engine.stream(messages, tools, tool_choice, **options)``."""

    messages: list[Message]
    tools: list[dict[str, Any]]
    tool_choice: str
    options: dict[str, Any] = field(default_factory=dict)
    stream: bool = False
    include_usage: bool = False
