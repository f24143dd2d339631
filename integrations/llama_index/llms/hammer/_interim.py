"""Interim: the end of an agent turn, until the engine does it (requested from the engine owner).

After a tool result, Hammer answers ``[]`` when it needs no more calls, and its own client then
asks the model for a plain-language answer. Every agent loop needs this (LlamaIndex's FunctionAgent
here, LangGraph's loop in the LangChain adapter), and the engine does not do it yet:

* end the turn after a number of tool rounds (default one: Hammer's training data is one round of
  calls per request), and treat a call that repeats one already answered in this turn (same name and
  arguments, its result in the conversation) as "no more calls". Measured on the stand-in default
  model: after a result it never writes ``[]``; it re-issues the call it has just seen answered
  (weather), or chains new ones on the result (``multiply(50, 4)`` after ``multiply(12.5, 4)`` gave 50,
  or an unasked ``multiply`` after a weather result), so an agent loops to its iteration limit.

The answer itself is the engine's tool-free pass (``render_chat`` tells calls and results in words).
The code is framework-free (engine types only) so it can move into ``hammer_plugins`` verbatim.

Example:
    >>> from hammer_plugins import Message, ToolCall
    >>> call = ToolCall(name="get_weather", arguments={"city": "Paris"})
    >>> history = [Message.user("Weather in Paris?"), Message.assistant(tool_calls=[call]),
    ...            Message.tool("sunny", tool_call_id=call.id)]
    >>> is_answered(ToolCall(name="get_weather", arguments={"city": "Paris"}), answered_calls(history))
    True
    >>> tool_rounds(history)
    1
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from hammer_plugins import Message, ToolCall


def _key(call: ToolCall) -> str:
    return json.dumps([call.name, call.arguments], sort_keys=True, ensure_ascii=False, default=str)


def tool_rounds(messages: Sequence[Message]) -> int:
    """Rounds of tool calls since the last user turn (assistant messages that made calls)."""
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1) + 1
    return sum(1 for m in messages[start:] if m.role == "assistant" and m.tool_calls)


def answered_calls(messages: Sequence[Message]) -> frozenset[str]:
    """Calls made since the last user turn whose results are already in the conversation."""
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1) + 1
    turn = messages[start:]
    results = {m.tool_call_id for m in turn if m.role == "tool" and m.tool_call_id}
    return frozenset(_key(c) for m in turn if m.role == "assistant" for c in m.tool_calls if c.id in results)


def is_answered(call: ToolCall, answered: frozenset[str]) -> bool:
    """Whether ``call`` repeats a call already answered in this turn."""
    return _key(call) in answered
