"""The end of an agent's turn: when tool results are in, stop calling and answer.

After a tool result, Hammer answers ``[]`` when it needs no more calls, and its own client then
asks the model for a plain-language answer. Every agent loop (LangGraph's, LlamaIndex's
FunctionAgent and AgentWorkflow, LangChain's ``create_agent``) needs the same rules, so they live
here, used by the engine:

* ``[]`` after tool results means "done": the answer comes from a tool-free pass, not a refusal;
* a call that repeats one already answered in this turn (same name and arguments, its result in
  the conversation) is dropped; when nothing else remains, the turn ends with the answer;
* after ``max_tool_rounds`` rounds of calls since the last user message, the model answers
  without being offered the tools again; under ``tool_choice="required"`` (an agent that must end
  by calling a tool, such as LangChain's ``ToolStrategy``) it must call a tool it has not called yet
  in this turn;
* rounds are counted per agent: only calls to the tools the model is offered now count, and never
  a hand-off (:func:`is_handoff`), so the agent handed to gets its own rounds.

Measured on the stand-in default model: after a result it never writes ``[]``; it re-issues the
call it has just seen answered, or chains new calls on the result, so an agent without these
rules loops to its iteration limit.

Example:
    >>> from hammer_plugins import Message, ToolCall
    >>> from hammer_plugins.values.agent_loop import answered_calls, call_key, tool_rounds
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
from collections.abc import Collection, Sequence

from hammer_plugins.values.calls import ToolCall
from hammer_plugins.values.messages import Message


def call_key(call: ToolCall) -> str:
    """Identity of a call by name and arguments (ids differ between attempts)."""
    return json.dumps([call.name, call.arguments], sort_keys=True, ensure_ascii=False, default=str)


def _this_turn(messages: Sequence[Message]) -> Sequence[Message]:
    start = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1) + 1
    return messages[start:]


HANDOFF_PREFIXES = ("transfer_to_", "transfer_back_to_")
"""Names of the hand-off tools of LangGraph's supervisor and swarm (and the OpenAI Agents SDK)."""


def is_handoff(name: str) -> bool:
    """Whether a tool hands the conversation to another agent (LlamaIndex's ``handoff``, LangGraph's
    ``transfer_to_<agent>``): such a call is the previous agent's last act, not a round of work."""
    return name == "handoff" or name.startswith(HANDOFF_PREFIXES)


TOOL_SEARCH_NAMES = frozenset({"tool_search", "ToolSearch"})
"""Names of the tools that load other tools: OpenAI's client-executed ``tool_search`` and Claude Code's
``ToolSearch``. A search readies the call it was made for, so the first round of searches in a turn is not one of its
rounds of work."""


def tool_rounds(messages: Sequence[Message], tool_names: Collection[str] | None = None) -> int:
    """Rounds of tool calls since the last user message made by the agent that holds ``tool_names``.

    A round is an assistant message with at least one call to one of ``tool_names`` (any tool when
    None) that is not a hand-off: in a multi-agent conversation the calls of the agent that handed
    over (to tools the current agent does not have) and the hand-off itself are not this agent's. The
    first round made only of tool searches (:data:`TOOL_SEARCH_NAMES`) is not counted either: with one round
    a turn, a search would otherwise leave the tool it loaded no round to be called in.
    """
    def counts(call: ToolCall) -> bool:
        return not is_handoff(call.name) and (tool_names is None or call.name in tool_names)

    rounds = [m for m in _this_turn(messages) if m.role == "assistant" and any(counts(c) for c in m.tool_calls)]
    searches = sum(1 for m in rounds if all(c.name in TOOL_SEARCH_NAMES for c in m.tool_calls if counts(c)))
    return len(rounds) - min(searches, 1)


def called_tools(messages: Sequence[Message]) -> frozenset[str]:
    """Names of the tools called since the last user message."""
    return frozenset(c.name for m in _this_turn(messages) if m.role == "assistant" for c in m.tool_calls)


def answered_calls(messages: Sequence[Message]) -> frozenset[str]:
    """Keys of the calls made since the last user message whose results are in the conversation."""
    turn = _this_turn(messages)
    results = {m.tool_call_id for m in turn if m.role == "tool" and m.tool_call_id}
    return frozenset(call_key(c) for m in turn if m.role == "assistant" for c in m.tool_calls if c.id in results)


def after_tool_results(messages: Sequence[Message]) -> bool:
    """Whether the conversation ends with tool results (the model is to continue the turn)."""
    return bool(messages) and messages[-1].role == "tool"
