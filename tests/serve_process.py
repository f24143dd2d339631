"""``hammer serve`` as users start it, in its own process until Ctrl-C: shared by the OpenAI-server
and vLLM tests."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
from child_signals import default_signals

from hammer_plugins.launch import free_port


class ServeProcess:
    """A running ``hammer serve`` and, once it stopped, its exit code and output."""

    def __init__(self, process: subprocess.Popen[str], port: int) -> None:
        self.process = process
        self.port = port
        self.code: int | None = None
        self.output = ""

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@contextlib.contextmanager
def hammer_serve(args: list[str], env: dict[str, str], startup: float = 180.0,
                 command: str = "serve", program: list[str] | None = None) -> Iterator[ServeProcess]:
    """``hammer serve <args> --port P`` (or another ``command`` that serves, ``playground``) until its ``/health``
    says loaded; SIGINT (Ctrl-C) when the block ends. ``program``: what stands for ``hammer`` (default
    ``python -m hammer_plugins.cli``), e.g. ``python -c <script>`` that runs the real command on a scripted engine."""
    port = free_port()
    hammer = program if program is not None else [sys.executable, "-m", "hammer_plugins.cli"]
    process = subprocess.Popen([*hammer, command, *args, "--port", str(port)],
                               env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               preexec_fn=default_signals)
    running = ServeProcess(process, port)
    try:
        deadline = time.monotonic() + startup
        while True:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).json()["loaded"]:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the server did not come up"
            time.sleep(0.3)
        yield running
    finally:
        process.send_signal(signal.SIGINT)
        try:
            running.code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        running.output = process.stdout.read() if process.stdout else ""
