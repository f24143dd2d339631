"""What several OpenAI-server test modules do alike: run ``hammer serve --openai`` as a process until
Ctrl-C, and ask one arithmetic question per client from many clients at once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
from child_signals import default_signals
from openai import OpenAI

from hammer_plugins.backends.server.launcher import free_port


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
def hammer_serve(args: list[str], env: dict[str, str], startup: float = 180.0) -> Iterator[ServeProcess]:
    """``hammer serve <args> --port P`` until its ``/health`` says loaded; SIGINT (Ctrl-C) when the block ends."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "hammer_plugins.cli", "serve", *args, "--port", str(port)],
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


def ask_at_once(base_url: str, key: str, numbers: list[int], tools: list[dict[str, Any]]) -> dict[int, Any]:
    """Each number asked ``What is <n> * 7?`` by its own client, all at once; the calls each got back."""
    answers: dict[int, Any] = {}

    def ask(number: int) -> None:
        client = OpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=600)
        reply = client.chat.completions.create(model="hammer", messages=[{"role": "user", "content": f"What is {number} * 7?"}],
                                               tools=tools)
        answers[number] = reply.choices[0].message.tool_calls

    threads = [threading.Thread(target=ask, args=(n,)) for n in numbers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    return answers


def assert_each_got_its_own_answer(answers: dict[int, Any], numbers: list[int]) -> None:
    """Every client answered, with a ``calculate`` call of its own number, and no call id twice."""
    assert sorted(answers) == sorted(numbers)
    for number, calls in answers.items():
        assert calls[0].function.name == "calculate"
        assert json.loads(calls[0].function.arguments)["expression"].replace(" ", "") == f"{number}*7"
    ids = [c.id for calls in answers.values() for c in calls]
    assert len(set(ids)) == len(ids)
