"""Interim: the end of an agent turn, until the engine does it (requested from the engine owner).

After a tool result, Hammer answers ``[]`` when it needs no more calls, and its own client then
asks the model for a plain-language answer. Two things the engine does not do yet, which every
agent loop needs (LlamaIndex's FunctionAgent here, LangGraph's loop in the LangChain adapter):

* treat a call that repeats one already answered in this turn (same name and arguments, its
  result in the conversation) as "no more calls": measured on the stand-in default model, it
  re-issues the call it has just seen answered instead of writing ``[]``, so an agent never ends;
* answer from a history where earlier calls and results are written as plain sentences: with the
  engine's tool-free prompt (calls as fenced JSON, results as ``tool`` turns) the stand-in imitates
  the fenced call instead of answering (measured on weather, arithmetic and email questions).

The code is framework-free (engine types only) so it can move into ``hammer_plugins`` verbatim.

Example:
    >>> from hammer_plugins import Message, ToolCall
    >>> call = ToolCall(name="get_weather", arguments={"city": "Paris"})
    >>> history = [Message.user("Weather in Paris?"), Message.assistant(tool_calls=[call]),
    ...            Message.tool("sunny", tool_call_id=call.id)]
    >>> is_answered(ToolCall(name="get_weather", arguments={"city": "Paris"}), answered_calls(history))
    True
    >>> report_history(history)[-1].content
    'The result of get_weather: sunny\\nNow answer my question in plain language.'
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from hammer_plugins import Message, ToolCall

ANSWER_REQUEST = "Now answer my question in plain language."


def _key(call: ToolCall) -> str:
    return json.dumps([call.name, call.arguments], sort_keys=True, ensure_ascii=False, default=str)


def answered_calls(messages: Sequence[Message]) -> frozenset[str]:
    """Calls made since the last user turn whose results are already in the conversation."""
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1) + 1
    turn = messages[start:]
    results = {m.tool_call_id for m in turn if m.role == "tool" and m.tool_call_id}
    return frozenset(_key(c) for m in turn if m.role == "assistant" for c in m.tool_calls if c.id in results)


def is_answered(call: ToolCall, answered: frozenset[str]) -> bool:
    """Whether ``call`` repeats a call already answered in this turn."""
    return _key(call) in answered


def report_history(messages: Sequence[Message]) -> list[Message]:
    """The conversation with tool calls and results as plain sentences, for the tool-free answer."""
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    out: list[Message] = []
    for message in messages:
        if message.role == "assistant" and message.tool_calls:
            said = "; ".join(f"{c.name} with {json.dumps(c.arguments, ensure_ascii=False, default=str)}"
                             for c in message.tool_calls)
            out.append(Message.assistant(f"{message.content.strip()}\nI called {said}.".strip()))
        elif message.role == "tool":
            name = names.get(message.tool_call_id or "", "the tool")
            said = f"The call to {name} failed" if message.is_error else f"The result of {name}"
            out.append(Message.user(f"{said}: {message.content}"))
        else:
            out.append(message)
    last = out[-1]
    if last.role == "user":
        out[-1] = Message.user(f"{last.content}\n{ANSWER_REQUEST}")
    else:
        out.append(Message.user(ANSWER_REQUEST))
    return out
