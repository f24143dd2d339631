"""No agent turn ends empty (issue 24, item 3): a call list cut at ``max_tokens`` keeps its complete
calls and drops the cut tail; output with no valid call says what failed in ``text``.

The scripted answers are the shape the stand-in model wrote for "What time is it now in Tokyo?"
with mcp-server-time's tools: ``convert_time`` calls counting up until ``max_tokens``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from hammer_plugins import HammerEngine, Message
from hammer_plugins.backends.scripted import ScriptedBackend

TOOLS = [
    {"name": "get_current_time", "description": "Get current time in a specific timezone",
     "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}},
    {"name": "convert_time", "description": "Convert time between timezones",
     "parameters": {"type": "object", "properties": {"source_timezone": {"type": "string"}, "time": {"type": "string"},
                                                     "target_timezone": {"type": "string"}},
                    "required": ["source_timezone", "time", "target_timezone"]}},
]
QUESTION = "What time is it now in Tokyo?"


def counting_list(n: int = 12) -> str:
    calls = [json.dumps({"name": "convert_time", "arguments": {"source_timezone": "UTC", "time": f"{14 + i}:30",
                                                               "target_timezone": "Asia/Tokyo"}}) for i in range(n)]
    return "```json\n[\n    " + ",\n    ".join(calls) + "\n]\n```"


CUT = 30  # scripted "tokens" are words: a call is 10 of them, so 30 cut the list inside its third call
# The stand-in's calls invent their times (nobody said 14:30 or UTC): these tests are about cut lists, so the
# ask-or-call rule, which would hold such calls (tests/unit/test_ask_or_call.py), is off here.
RULE_OFF = {"on_missing": "call"}


def test_a_cut_call_list_keeps_its_complete_calls() -> None:
    engine = HammerEngine(backend=ScriptedBackend([counting_list()]), **RULE_OFF)
    out = engine.generate([Message.user(QUESTION)], tools=TOOLS, max_tokens=CUT)
    assert out.kind == "tool_calls" and out.finish_reason == "length"
    assert [c.arguments["time"] for c in out.tool_calls] == ["14:30", "15:30"]
    assert out.invalid_tool_calls == [] and out.timings["length_stop"] == 1


def test_a_call_cut_before_its_end_says_so_in_the_text() -> None:
    engine = HammerEngine(backend=ScriptedBackend([counting_list()]))
    out = engine.generate([Message.user(QUESTION)], tools=TOOLS, max_tokens=6)
    assert out.kind == "invalid" and not out.tool_calls and out.finish_reason == "length"
    assert "convert_time" in out.text and "max_tokens=6" in out.text


def test_an_invalid_call_says_why_in_the_text() -> None:
    engine = HammerEngine(backend=ScriptedBackend(['[{"name": "get_time", "arguments": {}}]']))
    out = engine.generate([Message.user(QUESTION)], tools=TOOLS, constrained=False)
    assert out.kind == "invalid" and "get_time" in out.text and "not a bound tool" in out.text


def test_a_complete_list_is_parsed_as_before() -> None:
    engine = HammerEngine(backend=ScriptedBackend([counting_list(2)]), **RULE_OFF)
    out = engine.generate([Message.user(QUESTION)], tools=TOOLS)
    assert out.kind == "tool_calls" and len(out.tool_calls) == 2 and "length_stop" not in out.timings


def _time_tools(executed: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    def get_current_time(timezone: str) -> str:
        """Get current time in a specific timezone.

        Args:
            timezone: IANA timezone name.
        """
        executed.append(("get_current_time", {"timezone": timezone}))
        return '{"datetime": "2026-11-25T23:30:00+09:00"}'

    def convert_time(source_timezone: str, time: str, target_timezone: str) -> str:
        """Convert time between timezones.

        Args:
            source_timezone: Source IANA timezone name.
            time: Time in 24-hour format (HH:MM).
            target_timezone: Target IANA timezone name.
        """
        executed.append(("convert_time", {"time": time}))
        return f'{{"target": "{time} UTC is later in {target_timezone}"}}'

    return [get_current_time, convert_time]


@pytest.mark.parametrize(("max_tokens", "ran"), [(CUT, ["14:30", "15:30"]), (6, [])])
def test_langchain_create_agent_runs_the_kept_calls_or_ends_with_the_failure(max_tokens: int, ran: list[str]) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_hammer import ChatHammer

    executed: list[tuple[str, dict[str, Any]]] = []
    llm = ChatHammer(backend=ScriptedBackend([counting_list(), "In Tokyo it is 23:30."]), max_tokens=max_tokens,
                     **RULE_OFF)
    messages = create_agent(llm, _time_tools(executed)).invoke({"messages": [("user", QUESTION)]})["messages"]
    last = messages[-1]
    assert isinstance(last, AIMessage) and last.content and not last.tool_calls
    # LangGraph's ToolNode runs a turn's calls on a thread pool, so they may run in either order; the
    # transcript keeps the calls' order in its tool messages.
    assert sorted(args["time"] for _, args in executed) == ran
    results = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert [r.split('"target": "')[1].split(" ")[0] for r in results] == ran
    if not ran:
        assert "cut off at max_tokens" in last.content


@pytest.mark.parametrize(("max_tokens", "ran"), [(CUT, ["14:30", "15:30"]), (6, [])])
async def test_llama_index_function_agent_runs_the_kept_calls_or_ends_with_the_failure(
        max_tokens: int, ran: list[str]) -> None:
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.llms.hammer import HammerLLM

    executed: list[tuple[str, dict[str, Any]]] = []
    llm = HammerLLM(backend=ScriptedBackend([counting_list(), "In Tokyo it is 23:30."]), max_tokens=max_tokens,
                    **RULE_OFF)
    answer = await FunctionAgent(tools=_time_tools(executed), llm=llm).run(user_msg=QUESTION)
    assert str(answer).strip()
    assert [args["time"] for _, args in executed] == ran
    if not ran:
        assert "cut off at max_tokens" in str(answer)
