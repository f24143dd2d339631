"""Children of the test process: default signal dispositions, and death with the test process.

A shell starts a background job (``bash scripts/test.sh ... &``) with SIGINT ignored, and a child
inherits an ignored signal across ``exec``: Python then installs no KeyboardInterrupt handler, and a
test that sends Ctrl-C to a ``hammer`` process sees it run to its end. Pass
``preexec_fn=default_signals`` to ``subprocess.Popen`` in every test that signals its child.

A test process killed mid-run (SIGKILL, an out-of-memory kill, a CI timeout) runs no teardown: its model
servers, ``hammer`` children and pytest-xdist workers would keep running, gigabytes each.
:func:`die_with_the_tests` makes every child the test process starts get SIGKILL when that process dies
(Linux's parent-death signal); a child's own children (llama-server under ``hammer serve``) have theirs
from the launcher.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import subprocess
import threading
from collections.abc import Callable
from typing import Any

import pytest

PR_SET_PDEATHSIG = 1


def default_signals() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Reset SIGINT and SIGTERM to their defaults in the child (before ``exec``)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def die_with_the_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``subprocess.Popen`` from the main thread gets SIGKILL when this process dies.

    The parent-death signal follows the *thread* that forked the child, so only the main thread's children
    get it: a child forked by a short-lived thread would be killed when that thread ends, mid-test.
    """
    prctl = _prctl()
    if prctl is None:
        return
    original = subprocess.Popen.__init__

    @functools.wraps(original)
    def popen(self: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> None:
        if threading.current_thread() is threading.main_thread():
            kwargs["preexec_fn"] = _then(prctl, kwargs.get("preexec_fn"))
        original(self, *args, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)


def _then(prctl: Any, preexec: Callable[[], object] | None) -> Callable[[], None]:
    def child() -> None:  # pragma: no cover - runs in the child between fork and exec
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if preexec is not None:
            preexec()

    return child


def kill_group_with_the_tests(group: int) -> subprocess.Popen[bytes]:
    """A watchdog that SIGKILLs process group ``group`` once this process is gone (or the group has ended).

    For a child that starts its own session and children (vLLM: the API server and its engine core): the
    parent-death signal reaches only the child itself. The watchdog is a shell of its own session without
    a parent-death signal (it must outlive this process), polling once a second.
    """
    # Alive: /proc/PID/stat exists and its state (after the command's name in parentheses) is not Z, a zombie
    # whose parent has not collected it yet.
    script = ('alive() { s=$(cat /proc/$1/stat 2>/dev/null) || return 1; s=${s##*) }; [ "${s%% *}" != Z ]; }; '
              f"while alive {os.getpid()} && kill -0 -{group} 2>/dev/null; do sleep 1; done; "
              f"kill -9 -{group} 2>/dev/null")
    prctl = _prctl()

    def outlive_the_tests() -> None:  # pragma: no cover - runs in the child between fork and exec
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, 0)  # undo die_with_the_tests for this one child

    return subprocess.Popen(["/bin/sh", "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, preexec_fn=outlive_the_tests,
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})


def _prctl() -> Any:
    """libc's ``prctl`` (Linux), looked up in this process: a forked child must not load libraries."""
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: best effort
        return None


def die_with_the_parent() -> None:
    """The first line of a ``multiprocessing`` child's target: that child gets SIGKILL when the test process dies
    (``multiprocessing`` forks without ``subprocess.Popen``, so :func:`die_with_the_tests` does not reach it)."""
    prctl = _prctl()
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
