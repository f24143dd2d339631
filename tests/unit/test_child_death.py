"""A launched server dies with the process that started it, however that process dies and whichever thread
started it (a llama-server was found running 55 minutes after its ``hammer serve`` was killed). The stand-in
child ignores SIGTERM, as a llama-server busy with a long prompt effectively does.

The parent-death signal follows the *thread* that forked a child: :func:`start_child` forks every child in
one thread that lives as long as the process, so a child started by a thread that then ends is neither
killed with that thread nor left behind when the process dies. Children another library forks (the MCP
SDK's stdio servers) set their own signal before they become the command (:func:`guarded_command`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from child_signals import default_signals

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")

STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"

PARENT = r"""
import subprocess, sys, threading, time
from hammer_plugins.launch.child import start_child

STUBBORN = {stubborn!r}

def start():
    child = start_child([sys.executable, "-c", STUBBORN], start_new_session=True)
    print(child.pid, flush=True)

how = sys.argv[1]
if how == "main":
    start()
elif how == "a living thread":  # a restart, from a thread that lives on, as the launcher's supervisor does
    threading.Thread(target=lambda: (start(), time.sleep(300)), daemon=True).start()
else:  # a thread that ends once the child is started (a worker, a lazy start in a request)
    starter = threading.Thread(target=start)
    starter.start()
    starter.join()
time.sleep(300)
""".replace("{stubborn!r}", repr(STUBBORN))

MCP_PARENT = r"""
import sys, time
from hammer_plugins.mcp.client import MCPServer

server = MCPServer([sys.executable, sys.argv[1], sys.argv[2]], timeout=30).start()
print(len(server.tools), flush=True)
time.sleep(300)
"""

# An MCP server that outlives the end of its input and ignores SIGTERM: only the parent-death signal stops it.
STUBBORN_MCP = r"""
import os, signal, sys, time
from mcp.server.fastmcp import FastMCP

signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[1], "w") as out:
    out.write(str(os.getpid()))
server = FastMCP("stubborn")

@server.tool()
def ping() -> str:
    "Answers pong."
    return "pong"

server.run()
time.sleep(300)
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")  # a zombie no reaper collected is dead too


def _dies_with(parent: subprocess.Popen[str], child: int) -> None:
    parent.kill()
    parent.wait(10)
    deadline = time.monotonic() + 10
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(child), f"the child {child} outlived its killed parent"


@pytest.mark.parametrize("started_by", ["main", "a living thread", "a thread that ends"])
def test_a_child_that_ignores_sigterm_dies_when_its_parent_is_killed(started_by: str) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, started_by], stdout=subprocess.PIPE, text=True,
                              preexec_fn=default_signals)
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        time.sleep(0.5)  # the child runs, its SIGTERM ignored, and its starting thread may have ended
        assert not _gone(child), f"the child started by {started_by} died with no reason"
        _dies_with(parent, child)
    finally:
        parent.kill()
        if child and not _gone(child):
            os.kill(child, signal.SIGKILL)


def test_an_mcp_server_that_outlives_its_input_dies_when_hammer_is_killed(tmp_path: Path) -> None:
    server, pid_file = tmp_path / "stubborn_mcp.py", tmp_path / "pid"
    server.write_text(STUBBORN_MCP)
    parent = subprocess.Popen([sys.executable, "-c", MCP_PARENT, str(server), str(pid_file)], stdout=subprocess.PIPE,
                              text=True, preexec_fn=default_signals)
    child = 0
    try:
        assert parent.stdout is not None
        assert parent.stdout.readline().strip() == "1"  # the session is up: ping is listed
        child = int(pid_file.read_text())
        assert not _gone(child)
        _dies_with(parent, child)
    finally:
        parent.kill()
        if child and not _gone(child):
            os.kill(child, signal.SIGKILL)


def test_a_guarded_command_that_cannot_run_says_so() -> None:
    from hammer_plugins.launch.child import guarded_command

    result = subprocess.run(guarded_command(["hammer-no-such-command", "x"]), capture_output=True, text=True,
                            timeout=30)
    assert result.returncode in (1, 127)  # 1: its parent (this test's subprocess.run) is not the one noted
    ran = subprocess.run([sys.executable, "-c", "import subprocess, sys\n"
                          "from hammer_plugins.launch.child import guarded_command\n"
                          "r = subprocess.run(guarded_command(['hammer-no-such-command']), capture_output=True, text=True)\n"
                          "print(r.returncode, r.stderr.strip())"], capture_output=True, text=True, timeout=30)
    assert ran.stdout.strip() == "127 cannot run 'hammer-no-such-command': No such file or directory", ran
