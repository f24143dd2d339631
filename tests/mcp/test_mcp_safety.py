"""What MCP servers get and how they end (issue 29), with a real stdio server (``probe_server.py``).

* A server gets the SDK's safe default environment plus the variables named (``pass_env``/``env``,
  ``--mcp-env``): API keys and cloud secrets of ``hammer``'s environment never reach it.
* A call that outlasts its timeout is cancelled with a message naming the tool, the server and the
  fix; the server is restarted, so the next call answers at once.
* No server process outlives ``hammer call --mcp`` or ``hammer chat --mcp`` (normal end, an error,
  Ctrl-C), even one that does not exit when its stdin closes.
* An MCP result reaches a model as its text, not ``str(CallToolResult)``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from child_signals import default_signals
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples
from installed import require

from hammer_plugins.mcp.client import MCPServer, MCPTimeoutError, _split_result_str, parse_env_options, tool_result_text
from hammer_plugins.values.errors import HammerError

mcp_types = require("mcp.types", "mcp")
ROOT = Path(__file__).resolve().parents[2]
# --test-pid: the probe ends once this test process is gone, however its client fared (a killed pytest leaves
# no probe lingering); while the tests run, ending it is its client's job.
PROBE = [sys.executable, str(Path(__file__).with_name("probe_server.py")), "--test-pid", str(os.getpid())]
SECRETS = {"OPENAI_API_KEY": "sk-test-secret", "AWS_SECRET_ACCESS_KEY": "aws-test-secret",
           "HAMMER_SERVER_API_KEY": "hammer-test-secret"}


def probe_command(report: Path, linger: float = 30.0) -> str:
    """The probe server's command line: it writes its pid and environment to ``report`` and, once its
    stdin closes, lingers ``linger`` seconds (a server that a client must end itself)."""
    return " ".join([*PROBE, "--report", str(report), "--linger", str(linger)])


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process (a zombie counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def hammer(*args: str, stdin: str = "", env: dict[str, str] | None = None,
           timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hammer_plugins.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})


def unloadable_model(tmp_path: Path) -> dict[str, str]:
    """A model file that passes the checks made before loading and fails any load: the chat that ends before its
    first question must not have loaded it."""
    fake = tmp_path / "never-loaded.gguf"
    fake.write_bytes(b"GGUF" + bytes(64))
    return {"HAMMER_MODEL_PATH": str(fake)}


# ------------------------------------------------------------------------------ environment
def test_server_gets_the_safe_default_and_the_named_variables_only(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**SECRETS, "PROBE_PASSED": "from-here"}.items():
        monkeypatch.setenv(name, value)
    with MCPServer(PROBE, pass_env=["PROBE_PASSED"], env={"PROBE_SET": "1"}, timeout=30) as server:
        names = json.loads(server.call("environment_names"))
    assert not set(SECRETS) & set(names), names
    assert {"PROBE_PASSED", "PROBE_SET", "PATH"} <= set(names)


def test_a_variable_to_pass_that_is_not_set_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROBE_MISSING", raising=False)
    with pytest.raises(HammerError, match="'PROBE_MISSING' to pass to the MCP server is not set here. Fix"):
        MCPServer(PROBE, pass_env=["PROBE_MISSING"]).start()
    assert parse_env_options(["A", "B=x=y"]) == (["A"], {"B": "x=y"})
    with pytest.raises(ValueError, match="NAME or NAME=VALUE"):
        parse_env_options(["=x"])


def test_hammer_call_mcp_env_passes_named_variables_and_no_secret(tmp_path: Path) -> None:
    """``--mcp-env NAME`` and ``--mcp-env NAME=VALUE``; the call fails on a missing model after the
    server started (no model needed), which is also an error path that must close the server."""
    report = tmp_path / "report.json"
    result = hammer("call", "hi", "--mcp", probe_command(report), "--mcp-env", "PROBE_PASSED",
                    "--mcp-env", "PROBE_SET=2", "--model-path", str(tmp_path / "missing.gguf"),
                    env={**SECRETS, "PROBE_PASSED": "from-here"}, timeout=120)
    assert result.returncode == 2 and "missing.gguf" in result.stderr, result.stderr
    server = json.loads(report.read_text())
    assert not set(SECRETS) & set(server["env"]), server["env"]
    assert {"PROBE_PASSED", "PROBE_SET"} <= set(server["env"])
    assert not alive(server["pid"])


# ------------------------------------------------------------------------------ timeouts
def test_a_hung_call_is_cancelled_and_the_next_call_answers_at_once() -> None:
    with MCPServer(PROBE, timeout=3) as server:
        first_pid = int(server.call("process_id"))
        started = time.perf_counter()
        with pytest.raises(MCPTimeoutError, match=r"'hang' of server .*probe_server.py[^']*' did not answer within "
                                                  r"3 s; the call was cancelled and the server restarted. Fix"):
            server.call("hang")
        hung = time.perf_counter() - started
        started = time.perf_counter()
        assert server.call("echo", {"text": "hi"}) == "echo: hi"
        after = time.perf_counter() - started
        second_pid = int(server.call("process_id"))
    print(f"\nhung call failed after {hung:.2f} s; the next call answered {after:.2f} s later (restart included)")
    assert hung < 4 and after < 8
    assert second_pid != first_pid and not alive(first_pid) and server.restarts == 1


# ------------------------------------------------------------------------------ shutdown
@pytest.mark.real_model  # the hammer process loads the default model
def test_hammer_call_mcp_leaves_no_server_behind(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    result = hammer("call", "What time is it?", "--mcp", probe_command(report), "--max-tokens", "40")
    assert result.returncode == 0, result.stderr
    assert not alive(json.loads(report.read_text())["pid"])


def test_hammer_chat_mcp_leaves_no_server_behind_on_a_normal_end(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    result = hammer("chat", "--mcp", probe_command(report), stdin="\n", timeout=120, env=unloadable_model(tmp_path))
    assert result.returncode == 0, result.stderr
    assert not alive(json.loads(report.read_text())["pid"])


@pytest.mark.parametrize("command", ["call", "chat"])
def test_a_server_is_closed_when_another_fails_to_start(command: str, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    args = ["What time is it?"] if command == "call" else []
    result = hammer(command, *args, "--mcp", probe_command(report), "--mcp", "hammer-no-such-mcp-server",
                    "--mcp-timeout", "20", timeout=120)
    assert result.returncode == 2 and "'hammer-no-such-mcp-server' did not start" in result.stderr, result.stderr
    assert not alive(json.loads(report.read_text())["pid"])


def test_ctrl_c_in_hammer_chat_closes_the_server(tmp_path: Path) -> None:
    """Ctrl-C in a terminal signals the whole foreground process group, so the test does too."""
    report = tmp_path / "report.json"
    process = subprocess.Popen([sys.executable, "-m", "hammer_plugins.cli", "chat", "--mcp", probe_command(report)],
                               cwd=ROOT, env={**os.environ, **unloadable_model(tmp_path)}, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True, preexec_fn=default_signals)
    started = time.perf_counter()
    while not report.exists():
        assert process.poll() is None, process.communicate()
        assert time.perf_counter() - started < 60, "the server never started"
        time.sleep(0.1)
    time.sleep(1.0)  # the chat waits for a line
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert err.strip().endswith("hammer: interrupted"), err
    assert not alive(json.loads(report.read_text())["pid"])


# ------------------------------------------------------------------------------ results as text
def test_tool_result_text_reads_a_call_tool_result_and_its_str() -> None:
    text = 'line one\nit\'s "quoted" — 08:30'
    result = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)],
                                      structuredContent={"result": text}, isError=False)
    assert tool_result_text(result) == (text, False)
    assert tool_result_text(str(result)) == (text, False)
    only_structured = mcp_types.CallToolResult(content=[], structuredContent={"time": "08:30", "dst": None},
                                               isError=True)
    assert tool_result_text(str(only_structured)) == ('{"time": "08:30", "dst": null}', True)
    assert tool_result_text("meta=None is what I said") is None


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list("aT\\'\"\n\t\x00\x7fé中 ][")), max_size=12), min_size=1, max_size=3))
def test_any_printed_text_result_reads_back_as_its_text(texts: list[str]) -> None:
    """The oracle is the SDK's own printing: whatever the text blocks hold (backslashes, quotes of both kinds, control
    characters, brackets), their printed result reads back as the blocks' text joined."""
    result = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=t) for t in texts], isError=False)
    assert tool_result_text(str(result)) == ("\n".join(t for t in texts if t), False)


def test_a_text_field_python_never_prints_is_not_a_result_and_warns_nothing() -> None:
    """A backslash pair no repr holds (``\\T``) means the text was not printed by Python: no result, and no warning
    (ast.literal_eval would warn once per field: 62,500 warnings for test_a_crafted_result_costs_linear_time's 2 MB)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tool_result_text("content=[TextContent(type='text', text='C:\\Temp')] isError=False") is None
        assert tool_result_text("content=[TextContent(type='text', text='C:\\\\Temp')] isError=False") == ("C:\\Temp", False)
    assert caught == []


# The one regex tool_result_text used to split a printed result with (issue 37: cubic in crafted text).
OLD_RESULT_STR = re.compile(r"(?:meta=.*? )?content=\[(?P<content>.*)\](?: structuredContent=(?P<structured>.*))?"
                            r" isError=(?P<error>True|False)", re.S)
PIECES = ["meta=", "None", " ", "content=[", "[", "]", "] structuredContent=", " structuredContent=", " isError=True",
          " isError=False", "TextContent(type='text', text='a')", "x", "{'k': 1}"]


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=8).map("".join))
def test_the_result_is_split_as_the_old_regex_split_it(text: str) -> None:
    old = OLD_RESULT_STR.fullmatch(text)
    expected = None if old is None else (old["content"], old["structured"], old["error"] == "True")
    assert _split_result_str(text) == expected


@pytest.mark.parametrize("unit", ["meta= content=[] structuredContent=", "content=[]] structuredContent= isError=Tru",
                                  "TextContent(type='text', text=\"\\", "] structuredContent=[] isError=True "])
def test_a_crafted_result_costs_linear_time(unit: str) -> None:
    """Crafted results of 4.5 / 9 / 18 kB took 0.28 / 2.06 / 14.5 s with the old regex; 2 MB now takes a
    fraction of a second (the backstop is many times that)."""
    crafted = unit * (2_000_000 // len(unit))
    started = time.process_time()
    tool_result_text(crafted)
    tool_result_text(f"content=[{crafted}] isError=False")
    tool_result_text(f"meta=None content=[{crafted}] structuredContent={crafted} isError=True")
    assert time.process_time() - started < 20.0


async def test_langchain_mcp_results_reach_the_prompt_as_text() -> None:
    """langchain-mcp-adapters gives text blocks (kept) and structured content only as the artifact,
    which the model would not see: it gets the JSON."""
    from langchain_hammer.chat_models import to_engine_messages
    from langchain_mcp_adapters.client import MultiServerMCPClient

    client = MultiServerMCPClient({"p": {"command": PROBE[0], "args": PROBE[1:], "transport": "stdio"}})
    tools = {t.name: t for t in await client.get_tools()}
    echoed = await tools["echo"].ainvoke({"type": "tool_call", "name": "echo", "args": {"text": "hi"}, "id": "1"})
    moon = await tools["moon_phase"].ainvoke({"type": "tool_call", "name": "moon_phase",
                                              "args": {"date": "2026-11-25"}, "id": "2"})
    contents = [m.content for m in to_engine_messages([echoed, moon])]
    assert contents == ["echo: hi", '{"date": "2026-11-25", "phase": "waxing crescent"}']


async def test_llama_index_mcp_results_reach_the_prompt_as_text() -> None:
    """llama-index-tools-mcp's FunctionTools return the CallToolResult, which LlamaIndex turns into
    ``str(CallToolResult)``; the message a FunctionAgent builds from it reaches Hammer as the text."""
    from llama_index.core.llms import ChatMessage
    from llama_index.llms.hammer.base import to_engine_message
    from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

    tools = {t.metadata.name: t for t in await McpToolSpec(client=BasicMCPClient(PROBE[0], args=PROBE[1:]))
             .to_tool_list_async()}
    outputs = [await tools["echo"].acall(text="hi"), await tools["moon_phase"].acall(date="2026-11-25")]
    assert outputs[0].content.startswith("meta=None content=[TextContent(")  # what LlamaIndex makes of it
    messages = [ChatMessage(role="tool", blocks=o.blocks, additional_kwargs={"tool_call_id": str(i)})
                for i, o in enumerate(outputs)]  # as FunctionAgent builds them
    contents = [to_engine_message(m).content for m in messages]
    assert contents == ["echo: hi", '{"date": "2026-11-25", "phase": "waxing crescent"}']


@pytest.mark.real_model
async def test_llama_index_function_agent_prompt_holds_the_mcp_result_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real FunctionAgent on the default model with mcp-server-time: the prompt of the turn after
    the call holds the server's text, not ``meta=None content=[``."""
    require("mcp_server_time", "mcp-server-time")
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.llms.hammer import HammerLLM
    from llama_index.tools.mcp import BasicMCPClient, McpToolSpec

    client = BasicMCPClient(sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"])
    tools = await McpToolSpec(client=client).to_tool_list_async()
    from hammer_plugins.engine import api

    llm = HammerLLM()
    prompts: list[str] = []
    plan = api.make_plan

    def recording_plan(*args: Any, **kwargs: Any) -> Any:
        planned = plan(*args, **kwargs)
        prompts.append(planned.prompt)
        return planned

    monkeypatch.setattr(api, "make_plan", recording_plan)  # every call the engine plans
    agent = FunctionAgent(tools=tools, llm=llm, system_prompt="You answer with the tools' results.")
    answer = await agent.run(user_msg="Convert 14:30 in Paris (Europe/Paris) to New York time (America/New_York).")
    after_call = [p for p in prompts if "08:30" in p]
    assert after_call, prompts
    assert all("content=[" not in p and "TextContent(" not in p for p in prompts)
    assert '"datetime": "' in after_call[0]  # the server's JSON text itself
    assert "8:30" in str(answer)


# ------------------------------------------------------------------------------ names shown to a person
def hostile_chat(kind: str) -> subprocess.CompletedProcess[str]:
    """``hammer chat --mcp`` on the probe server with hostile tool names; the chat ends at once (empty
    stdin), and no model is needed: the server backend connects only when asked for an answer."""
    server = " ".join([*PROBE, "--hostile", kind])
    return subprocess.run([sys.executable, "-m", "hammer_plugins.cli", "chat", "--mcp", server, "--backend", "server",
                           "--base-url", "http://127.0.0.1:9/v1"], input="\n", capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_hammer_chat_shows_an_mcp_tools_escape_sequences_instead_of_running_them() -> None:
    result = hostile_chat("escape")
    assert result.returncode == 0, result.stderr
    assert "hang, time\\x1b]0;pwned\\x07\\x1b[2J\\x1b[1;1Hnow); empty line" in result.stderr
    # nor does the server's own stderr (FastMCP warns about the name, quoting it) reach the terminal raw
    assert "\x1b" not in result.stderr + result.stdout and "\x07" not in result.stderr + result.stdout


def test_hammer_chat_refuses_an_mcp_servers_look_alike_tool_names() -> None:
    result = hostile_chat("lookalike")
    assert result.returncode == 2 and "you>" not in result.stdout
    assert ("the names 'get_current_time' and 'get_current_time\\u200b' differ only by invisible or look-alike "
            "characters") in result.stderr, result.stderr
    assert "\u200b" not in result.stderr


def test_hammer_chat_refuses_an_mcp_tool_name_with_a_letter_of_another_script() -> None:
    result = hostile_chat("cyrillic")
    assert result.returncode == 2 and "you>" not in result.stdout
    assert "U+0435 CYRILLIC SMALL LETTER IE looks like the ASCII 'e'" in result.stderr, result.stderr


# ------------------------------------------------------------------------------ one name, one tool, across servers
# Issue 60, item 2: two --mcp servers offering one tool name. The last one silently won in the playground (its
# /run reached the second server); every door now refuses the second server, naming both (MCPToolbox).
def two_probes(tmp_path: Path) -> tuple[str, str, Path, Path]:
    """Two real probe servers, told apart by their report files: the same tools (``echo``, ``save_note``...)."""
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    return probe_command(first, linger=0), probe_command(second, linger=0), first, second


@pytest.mark.parametrize("command", ["call", "chat"])
def test_hammer_call_and_chat_refuse_one_tool_name_across_two_servers(command: str, tmp_path: Path) -> None:
    first, second, first_report, second_report = two_probes(tmp_path)
    args = ["What time is it?"] if command == "call" else []
    result = hammer(command, *args, "--mcp", first, "--mcp", second, "--mcp-timeout", "20", timeout=120,
                    env=unloadable_model(tmp_path))
    assert result.returncode == 2, result.stderr
    said = re.search(r"the tool name '(\w+)' of the MCP server '([^']*)' is already taken by the MCP server '([^']*)'",
                     result.stderr)
    assert said is not None, result.stderr
    assert str(second_report) in said[2] and str(first_report) in said[3] and "Fix: keep only one" in result.stderr
    assert not alive(json.loads(first_report.read_text())["pid"])
    assert not alive(json.loads(second_report.read_text())["pid"])


def test_hammer_playground_refuses_the_second_server_of_a_tool_name(tmp_path: Path) -> None:
    """The playground's door: the first server's tools run, the second is refused (named in the page with the
    fix) and closed at once, and the page's own check of the tool set passes (no name twice)."""
    import argparse
    import contextlib

    import httpx

    from hammer_plugins import HammerEngine, ScriptedBackend
    from hammer_plugins.http_api import BackgroundServer, create_app
    from hammer_plugins.http_api.playground.approvals import TOKEN_HEADER
    from hammer_plugins.http_api.runner import playground_mcp

    first, second, first_report, second_report = two_probes(tmp_path)
    args = argparse.Namespace(mcp=[first, second], mcp_env=[], mcp_timeout=20.0, playground_tools=[])
    with contextlib.ExitStack() as stack:
        tools, runners, errors = playground_mcp(args, stack)
        [error] = errors
        assert "is already taken by the MCP server" in error and str(first_report) in error
        assert str(second_report) in error.split("is already taken")[0]
        assert not alive(json.loads(second_report.read_text())["pid"])  # refused: closed at once
        names = [t["function"]["name"] for t in tools]
        assert len(names) == len(set(names)) and "echo" in runners
        assert runners["echo"](text="hi") == "echo: hi"  # the first server's
        app = create_app(HammerEngine(backend=ScriptedBackend([])), playground_tools=tools,
                         playground_runners=runners, playground_errors=errors, playground_token="t")
        with BackgroundServer(app) as server:
            page = {TOKEN_HEADER: "t"}
            config = httpx.get(server.url + "/playground/api/config", headers=page).json()
            assert config["runnable"] == sorted(names) and config["errors"] == errors
            checked = httpx.post(server.url + "/playground/api/tools", headers=page, json={"tools": config["tools"]})
            assert checked.status_code == 200, checked.text
    # A --tools file's name counts too: the server offering it is refused.
    file_tool = {"type": "function", "function": {"name": "echo", "parameters": {"type": "object", "properties": {}}}}
    args = argparse.Namespace(mcp=[first], mcp_env=[], mcp_timeout=20.0, playground_tools=[file_tool])
    with contextlib.ExitStack() as stack:
        tools, runners, errors = playground_mcp(args, stack)
    assert tools == [file_tool] and runners == {} and "is already taken by the --tools file" in errors[0]


def test_look_alike_names_across_servers_are_refused_naming_both() -> None:
    from hammer_plugins.mcp.client import MCPNameClashError, MCPToolbox

    box = MCPToolbox()
    box.claim("server-a", ["read_note"])
    with pytest.raises(MCPNameClashError, match=r"'read_note\\u200b' of the MCP server 'server-b' looks like "
                                                r"'read_note' of the MCP server 'server-a'"):
        box.claim("server-b", ["read_note\u200b", "other"])
    box.claim("server-b", ["other"])  # a refused claim took nothing


# ------------------------------------------------------------------------------ confirmation
NOTE = "Save the note 'buy milk'."


def probe_chat(notes: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "hammer_plugins.cli", "chat", "--mcp", " ".join(PROBE),
            "--mcp-env", "PROBE_NOTES_FILE", "--max-tokens", "60", *extra]


@pytest.mark.real_model
def test_hammer_chat_without_a_terminal_or_yes_runs_no_tool(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    result = subprocess.run(probe_chat(notes), input=NOTE + "\n", capture_output=True, text=True, timeout=300,
                            cwd=ROOT, env={**os.environ, "PROBE_NOTES_FILE": str(notes)})
    assert result.returncode == 0, result.stderr
    assert "stdin is not a terminal, so tool calls cannot be confirmed" in result.stderr
    assert "call save_note(" in result.stdout, result.stdout
    assert "not run: save_note needs confirmation and stdin is not a terminal. Fix: pass --yes" in result.stderr
    assert "-> The user declined to run this tool call" in result.stdout
    assert not notes.exists()


@pytest.mark.real_model
@pytest.mark.timeout(1200)  # four generations in a process of its own, 900 s allowed
def test_hammer_chat_asks_in_a_terminal_and_runs_only_what_the_user_accepts(tmp_path: Path) -> None:
    """stdin is a pseudo-terminal: the first call is refused (n), the second accepted (y)."""
    import pty

    notes = tmp_path / "notes.txt"
    main, terminal = pty.openpty()
    process = subprocess.Popen(probe_chat(notes), stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=ROOT, env={**os.environ, "PROBE_NOTES_FILE": str(notes)})
    os.close(terminal)
    try:
        os.write(main, f"{NOTE}\nn\nSave the note 'call mom'.\ny\n\n".encode())  # typed ahead: read line by line
        out, err = process.communicate(timeout=900)  # four generations on a busy machine
    finally:
        os.close(main)
    assert process.returncode == 0, err
    assert out.count("run save_note? [y/N]") == 2, out
    assert "-> The user declined to run this tool call" in out and "-> saved note: call mom" in out
    assert notes.read_text().splitlines() == ["call mom"]
