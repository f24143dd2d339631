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
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hammer_plugins.errors import HammerError
from hammer_plugins.mcp import MCPServer, MCPTimeoutError, parse_env_options, tool_result_text

mcp_types = pytest.importorskip("mcp.types")
ROOT = Path(__file__).resolve().parents[2]
PROBE = [sys.executable, str(Path(__file__).with_name("probe_server.py"))]
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
        with pytest.raises(MCPTimeoutError, match=r"'hang' of server .*probe_server.py' did not answer within "
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
def test_hammer_call_mcp_leaves_no_server_behind(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    result = hammer("call", "What time is it?", "--mcp", probe_command(report), "--max-tokens", "40")
    assert result.returncode == 0, result.stderr
    assert not alive(json.loads(report.read_text())["pid"])


def test_hammer_chat_mcp_leaves_no_server_behind_on_a_normal_end(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    result = hammer("chat", "--mcp", probe_command(report), stdin="\n", timeout=120)
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
                               cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
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
