"""The end of an agent's turn: when tool results are in, stop calling and answer.

After a tool result, Hammer answers ``[]`` when it needs no more calls, and its own client then
asks the model for a plain-language answer. Every agent loop (LangGraph's, LlamaIndex's
FunctionAgent, ``hammer chat``) needs the same rules, so they live here, used by the engine:

* ``[]`` after tool results means "done": the answer comes from a tool-free pass, not a refusal;
* a call that repeats one already answered in this turn (same name and arguments, its result in
  the conversation) is dropped; when nothing else remains, the turn ends with the answer;
* after ``max_tool_rounds`` rounds of calls since the last user message, the model answers
  without being offered the tools again.

Measured on the stand-in default model: after a result it never writes ``[]``; it re-issues the
call it has just seen answered, or chains new calls on the result, so an agent without these
rules loops to its iteration limit.

Example:
    >>> from hammer_plugins import Message, ToolCall
    >>> from hammer_plugins.agent_turn import answered_calls, call_key, tool_rounds
    >>> call = ToolCall(name="get_weather", arguments={"city": "Paris"})
    >>> history = [Message.user("Weather in Paris?"), Message.assistant(tool_calls=[call]),
    ...            Message.tool("sunny", tool_call_id=call.id)]
    >>> call_key(ToolCall(name="get_weather", arguments={"city": "Paris"})) in answered_calls(history)
    True
    >>> tool_rounds(history)
    1
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .calls import ToolCall
from .messages import Message


def call_key(call: ToolCall) -> str:
    """Identity of a call by name and arguments (ids differ between attempts)."""
    return json.dumps([call.name, call.arguments], sort_keys=True, ensure_ascii=False, default=str)


def _this_turn(messages: Sequence[Message]) -> Sequence[Message]:
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1) + 1
    return messages[start:]


def tool_rounds(messages: Sequence[Message]) -> int:
    """Rounds of tool calls since the last user message (assistant messages that made calls)."""
    return sum(1 for m in _this_turn(messages) if m.role == "assistant" and m.tool_calls)


def answered_calls(messages: Sequence[Message]) -> frozenset[str]:
    """Keys of the calls made since the last user message whose results are in the conversation."""
    turn = _this_turn(messages)
    results = {m.tool_call_id for m in turn if m.role == "tool" and m.tool_call_id}
    return frozenset(call_key(c) for m in turn if m.role == "assistant" for c in m.tool_calls if c.id in results)


def after_tool_results(messages: Sequence[Message]) -> bool:
    """Whether the conversation ends with tool results (the model is to continue the turn)."""
    return bool(messages) and messages[-1].role == "tool"
