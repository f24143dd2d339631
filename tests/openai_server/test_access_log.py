"""The server's log, as a person running an agent against ``hammer serve --openai`` reads it: one line per
request at the default level, and the tool selector's choice with ``--log-level debug``.

The server is the real command in its own process (its parser, its logging setup, uvicorn), on a scripted
engine: the point is the log, not the model. The real model's lines are checked in test_openai_server_cli.py.
"""

from __future__ import annotations

import re
import sys

import httpx
import pytest
from openai_server_helpers import hammer_serve

SCRIPTED_HAMMER = '''
import re
import sys
from hammer_plugins import HammerEngine, ScriptedBackend
from hammer_plugins.cli.main import console_main
from hammer_plugins.http_api import runner


def call_an_offered_tool(prompt: str) -> str:  # the first tool the prompt shows: one the selector offered
    name = re.search(r"tool_[0-9][0-9]", prompt).group(0)
    return '[{"name": "%s", "arguments": {"city": "Paris"}}]' % name


# The real command, with only the engine swapped: a scripted backend under the settings the flags give.
runner._engine = lambda args, stack: (HammerEngine(backend=ScriptedBackend(responder=call_an_offered_tool),
                                                   **runner._selection(args)), "scripted", [])
sys.argv = ["hammer", *sys.argv[1:]]
console_main()
'''

TOOLS = [{"type": "function", "function": {
    "name": f"tool_{i:02d}", "description": f"Look up the {topic} of a city, as reported by service number {i}.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    for i, topic in enumerate(["weather", "population", "time zone", "mayor", "altitude", "currency"] * 5)]
"""30 tools, about 40 tokens each: more than the 200-token budget the test sets, so the selector narrows them."""


def _ask(base_url: str) -> None:
    question = {"role": "user", "content": "What is the weather in Paris?"}
    reply = httpx.post(f"{base_url}/chat/completions", timeout=60,
                       json={"model": "hammer", "messages": [question], "tools": TOOLS})
    assert reply.status_code == 200, reply.text
    with httpx.stream("POST", f"{base_url}/chat/completions", timeout=60,
                      json={"model": "hammer", "messages": [question], "tools": TOOLS, "stream": True}) as streamed:
        streamed.read()
    assert httpx.post(f"{base_url}/chat/completions", json={"model": "hammer"}, timeout=60).status_code == 400
    assert httpx.get(base_url.removesuffix("/v1") + "/api/tags", timeout=60).status_code == 200


def _lines(output: str, marker: str) -> list[str]:
    return [line for line in output.splitlines() if marker in line]


def test_hammer_serve_logs_one_line_per_request_at_its_default_level() -> None:
    program = [sys.executable, "-c", SCRIPTED_HAMMER]
    with hammer_serve(["--openai", "--tool-budget", "200"], {}, startup=60, program=program) as served:
        _ask(served.base_url)
    assert served.code == 0, served.output
    lines = _lines(served.output, "hammer_plugins.http_api.access_log")
    chat = [line for line in lines if "POST /v1/chat/completions" in line]
    assert len(chat) == 3, served.output  # the call, the streamed call, the bad request; /health polls come first
    for line in chat[:2]:  # both answered: the door, the status, the time, the tokens, how many tools were offered
        assert re.search(r"INFO hammer_plugins\.http_api\.access_log: POST /v1/chat/completions door=chat_completions "
                         r"status=200 time=\d+\.\d{3}s ttft=\d+\.\d{3}s prompt=[1-9]\d* cached=\d+ completion=[1-9]\d* "
                         r"answer=tool_calls offered=([1-9]|1\d)/30$", line), line
    assert re.search(r"door=chat_completions status=400 time=\d+\.\d{3}s$", chat[2]), chat[2]
    assert any("GET /api/tags door=ollama status=200" in line for line in lines), lines
    assert "tool_selection" not in served.output  # the selector's line is debug: not at the default level


def test_log_level_debug_shows_the_selectors_choice_and_warning_hides_the_access_lines() -> None:
    program = [sys.executable, "-c", SCRIPTED_HAMMER]
    with hammer_serve(["--openai", "--tool-budget", "200", "--log-level", "debug"], {}, startup=60,
                      program=program) as served:
        _ask(served.base_url)
    selections = _lines(served.output, "DEBUG hammer_plugins.engine.tool_selection: offered ")
    assert len(selections) >= 2 and re.search(r"offered \d+ of 30 tools \(\d+ of [\d,]+ estimated tokens\): tool_",
                                              selections[0]), served.output
    assert len(_lines(served.output, "POST /v1/chat/completions door=")) == 3
    with hammer_serve(["--openai", "--log-level", "warning"], {}, startup=60, program=program) as quiet:
        _ask(quiet.base_url)
    assert quiet.code == 0 and "hammer_plugins.http_api.access_log" not in quiet.output, quiet.output


@pytest.mark.parametrize("command", ["call", "chat", "info", "serve", "playground", "pull", "models", "eval hammerbench",
                                     "bench multi-turn", "bench accuracy"])
def test_every_command_takes_log_level(command: str) -> None:
    """After the command's own name, as the docs write it (``hammer bench multi-turn --log-level debug``)."""
    from hammer_plugins.cli.main import build_parser

    words = command.split()
    args, unknown = build_parser(words).parse_known_args([*words, *(["q"] if words == ["call"] else []),
                                                           *(["x"] if words == ["pull"] else []),
                                                           "--log-level", "DEBUG"])
    assert unknown == [] and args.log_level == "debug"
