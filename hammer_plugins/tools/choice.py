"""``tool_choice`` in every spelling users bring, mapped to one of four meanings.

A value type of the call, shared by the engine and every door that accepts a ``tool_choice``
(the OpenAI server validates it before the engine runs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hammer_plugins.values.errors import UnknownToolError


def normalize_tool_choice(tool_choice: Any, tool_names: Sequence[str]) -> str:
    """Map every spelling users bring to ``"auto"``, ``"required"``, ``"none"`` or a tool name.

    Accepts ``None``/``"auto"``, ``"any"``/``"required"``/``True``, ``"none"``/``False``, a tool
    name, ``{"type": "function", "function": {"name": ...}}``, ``{"type": "tool", "name": ...}``
    and ``{"type": "auto" | "any" | "none"}``.

    Example:
        >>> from hammer_plugins.tools.choice import normalize_tool_choice
        >>> normalize_tool_choice({"type": "function", "function": {"name": "ping"}}, ["ping"])
        'ping'
    """
    if tool_choice is None:
        return "auto"
    if tool_choice is True:
        return tool_names[0] if len(tool_names) == 1 else "required"
    if tool_choice is False:
        return "none"
    if isinstance(tool_choice, Mapping):
        function = tool_choice.get("function")
        if isinstance(function, Mapping) and function.get("name"):
            tool_choice = function["name"]
        elif tool_choice.get("name"):
            tool_choice = tool_choice["name"]
        elif tool_choice.get("type") in ("auto", "any", "none", "required"):
            tool_choice = tool_choice["type"]
        else:
            raise UnknownToolError(f"tool_choice {dict(tool_choice)!r} names no tool. Fix: use "
                                   "{'type': 'function', 'function': {'name': <tool>}}")
    if not isinstance(tool_choice, str):
        raise UnknownToolError(f"tool_choice {tool_choice!r} is not understood. Fix: pass 'auto', "
                               "'required', 'none' or a tool name")
    lowered = tool_choice.lower()
    if lowered in ("auto", "none", "required"):
        return lowered
    if lowered == "any":
        return "required"
    if tool_choice not in tool_names:
        # An agent may bind hundreds of tools: the message names a few, not all of them.
        shown = list(tool_names[:20]) + ([f"... {len(tool_names) - 20} more"] if len(tool_names) > 20 else [])
        raise UnknownToolError(
            f"tool_choice {tool_choice!r} is not among the bound tools {shown}. Fix: pass one "
            "of those names, 'auto', 'required' or 'none'."
        )
    return tool_choice
