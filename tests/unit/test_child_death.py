"""A launched server dies with the process that started it, however that process dies and whichever thread
started it (issue 47, class 8: a llama-server was found running 55 minutes after its ``hammer serve`` was
killed). The stand-in child ignores SIGTERM, as a llama-server busy with a long prompt effectively does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from child_signals import default_signals

PARENT = r"""
import subprocess, sys, threading, time
from hammer_plugins.launch.child import die_with_parent, pdeathsig

CHILD = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"

def start():
    pdeathsig()
    child = subprocess.Popen([sys.executable, "-c", CHILD], preexec_fn=die_with_parent, start_new_session=True)
    print(child.pid, flush=True)

if sys.argv[1] == "main":
    start()
else:  # a restart: from a thread that lives on, as the launcher's supervisor does
    threading.Thread(target=lambda: (start(), time.sleep(300)), daemon=True).start()
time.sleep(300)
"""


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")  # a zombie no reaper collected is dead too


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's")
@pytest.mark.parametrize("started_by", ["main", "thread"])
def test_a_child_that_ignores_sigterm_dies_when_its_parent_is_killed(started_by: str) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, started_by], stdout=subprocess.PIPE, text=True,
                              preexec_fn=default_signals)
    child = 0
    try:
        child = int(parent.stdout.readline())
        time.sleep(0.5)  # the child is running, its SIGTERM ignored
        assert not _gone(child)
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 10
        while not _gone(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(child), f"the child {child} outlived its killed parent"
    finally:
        parent.kill()
        if child and not _gone(child):
            os.kill(child, signal.SIGKILL)
