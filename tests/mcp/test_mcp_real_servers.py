"""examples/mcp_agent.py and ``hammer call/chat --mcp`` with a real stdio MCP server (mcp-server-time
from PyPI, no network) on the embedded default model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from installed import require
from shared_data import load_example

require("mcp_server_time", "mcp-server-time")

# Longer than the suite's 300 s: `hammer` processes of their own with a 300 s limit each.
pytestmark = [pytest.mark.real_model, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = load_example("mcp_agent.py")
# The real time server with its clock fixed, so that its answers (and the model's) do not change with the day.
TIME_COMMAND = [sys.executable, str(Path(__file__).with_name("fixed_clock_time_server.py")), "--local-timezone", "UTC"]
TIME_SERVER = " ".join(TIME_COMMAND)


def _text(content: Any) -> str:
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content if isinstance(b, dict))


async def test_langchain_create_agent_runs_the_time_server() -> None:
    messages = await EXAMPLE.run_langchain(command=TIME_COMMAND)
    calls = [c for m in messages for c in getattr(m, "tool_calls", None) or []]
    assert calls and calls[0]["name"] == "convert_time"
    assert calls[0]["args"] == {"source_timezone": "Europe/Paris", "time": "14:30", "target_timezone": "America/New_York"}
    results = [_text(m.content) for m in messages if type(m).__name__ == "ToolMessage"]
    assert results and "08:30" in results[0]  # the server converted it
    answer = _text(messages[-1].content)
    assert type(messages[-1]).__name__ == "AIMessage" and answer.strip() and "8:30" in answer


async def test_llama_index_function_agent_runs_the_time_server() -> None:
    answer, calls = await EXAMPLE.run_llama_index(command=TIME_COMMAND)
    assert calls and calls[0][0] == "convert_time" and calls[0][1]["time"] == "14:30"
    assert "08:30" in calls[0][2] and "8:30" in answer


async def test_create_agent_turn_never_ends_empty_when_the_call_list_is_cut() -> None:
    """Issue 24: a call list cut at max_tokens used to end create_agent's turn with an empty message."""
    for max_tokens in (30, 55):
        messages = await EXAMPLE.run_langchain("What time is it right now in Tokyo, Japan?", command=TIME_COMMAND,
                                                max_tokens=max_tokens)
        last = messages[-1]
        assert type(last).__name__ == "AIMessage" and _text(last.content).strip() and not last.tool_calls


def hammer(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hammer_plugins.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


def test_hammer_call_offers_the_mcp_servers_tools() -> None:
    result = hammer("call", "Convert 14:30 Paris time (Europe/Paris) to New York time (America/New_York).",
                    "--mcp", TIME_SERVER)
    assert result.returncode == 0, result.stderr
    calls = json.loads(result.stdout)
    assert calls[0]["name"] == "convert_time" and calls[0]["arguments"]["time"] == "14:30"


def test_hammer_chat_runs_the_calls_through_the_mcp_server() -> None:
    result = hammer("chat", "--mcp", TIME_SERVER, "--yes",
                    stdin="Convert 14:30 Paris time (Europe/Paris) to New York time (America/New_York).\n")
    assert result.returncode == 0, result.stderr
    assert "2 tools (get_current_time, convert_time)" in result.stderr
    assert "call convert_time(" in result.stdout and "08:30" in result.stdout  # the server's answer
    assert "hammer> " in result.stdout
