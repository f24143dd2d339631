"""The launcher as a supervisor: a dead child is started again (back-off, give-up), stop() restarts nothing,
the child's environment holds none of this process's secrets, and its log stays under its cap.

Most tests run a stand-in binary (fake_llama_server.py, no model: they take seconds); the environment is
also checked on the real llama-server, through /proc/<pid>/environ.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from hammer_plugins.launch import LlamaServer

FAKE = Path(__file__).with_name("fake_llama_server.py")
SECRETS = {"HAMMER_SERVER_API_KEY": "sk-outer-secret", "HAMMER_UPSTREAM_API_KEY": "sk-upstream-secret",
           "OPENAI_API_KEY": "sk-openai-secret", "AWS_SECRET_ACCESS_KEY": "aws-secret", "AWS_ACCESS_KEY_ID": "AKIA1",
           "LLAMA_ARG_HF_TOKEN": "hf-secret", "GITHUB_TOKEN": "ghp-secret", "DATABASE_URL": "postgres://u:pw@db/x"}


@pytest.fixture
def fake_binary(tmp_path: Path) -> str:
    script = tmp_path / "llama-server"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    script.chmod(0o755)
    return str(script)


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + bytes(64))
    return path


@pytest.fixture
def servers() -> Iterator[list[LlamaServer]]:
    started: list[LlamaServer] = []
    yield started
    for server in started:
        server.stop()


def wait_for(condition: Callable[[], object], within: float, what: str) -> float:
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < within, f"not within {within} s: {what}"
        time.sleep(0.02)
    return time.monotonic() - start


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def environ_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def test_a_killed_child_is_restarted_on_the_same_port_and_health_says_why_meanwhile(
        fake_binary: str, gguf: Path, servers: list[LlamaServer]) -> None:
    server = LlamaServer(gguf, binary=fake_binary, api_key="inner", supervise=True, restart_backoff=(0.5, 30.0))
    servers.append(server)
    server.start()
    assert server.health_problem() is None
    first = server.process
    assert first is not None
    os.kill(first.pid, signal.SIGKILL)
    wait_for(lambda: server.health_problem() is not None, 1.0, "/health's check reports the dead child")
    problem = server.health_problem()
    assert problem is not None and "exited with code -9" in problem and "restarting (attempt 1)" in problem
    assert "127.0.0.1" not in problem
    wait_for(lambda: server.health_problem() is None, 15.0, "a restarted child")
    assert server.process is not first and server.restarts == 1
    assert httpx.get(f"http://127.0.0.1:{server.port}/health", trust_env=False).status_code == 200  # same port
    assert "restart, attempt 1" in server.log_tail()


def test_a_child_that_keeps_dying_is_restarted_with_backoff_then_given_up(
        fake_binary: str, gguf: Path, servers: list[LlamaServer], caplog: pytest.LogCaptureFixture) -> None:
    server = LlamaServer(gguf, binary=fake_binary, supervise=True, max_restarts=3, restart_backoff=(0.1, 0.4),
                         extra_args=("--exit-after", "0.3"))
    servers.append(server)
    assert [server._backoff(n) for n in (1, 2, 3, 4, 9)] == [0.1, 0.2, 0.4, 0.4, 0.4]
    with caplog.at_level(logging.WARNING, logger="hammer_plugins.server"):
        server.start()
        wait_for(lambda: "gave up" in (server.health_problem() or ""), 30.0, "giving up")
    assert "exited with code 3" in str(server.health_problem())
    assert server._failures == 4 and server.restarts <= 3
    assert any(r.levelno == logging.ERROR and "gave up" in r.getMessage() for r in caplog.records)
    assert server.process is not None and server.process.poll() is not None  # nothing left running
    # The supervisor returned: nothing can start a child any more, so /health keeps answering 503.
    assert server._supervisor is not None
    server._supervisor.join(timeout=10)
    assert not server._supervisor.is_alive() and "gave up" in str(server.health_problem())


def test_stop_restarts_nothing_and_leaves_no_child(fake_binary: str, gguf: Path) -> None:
    server = LlamaServer(gguf, binary=fake_binary, supervise=True, restart_backoff=(0.05, 0.1))
    with server:
        pid = server.process.pid if server.process else 0
        assert alive(pid) and server._supervisor is not None and server._supervisor.is_alive()
    # stop() returned only once the supervisor had: no thread is left that could start a child, now or later.
    assert not server._supervisor.is_alive()
    assert server.process is not None and server.process.pid == pid and not alive(pid)
    assert server.restarts == 0
    assert "stopped" in str(server.health_problem())


def test_the_child_environment_holds_no_secrets_of_this_process(
        fake_binary: str, gguf: Path, servers: list[LlamaServer], monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LLAMA_ARG_N_GPU_LAYERS", "0")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    server = LlamaServer(gguf, binary=fake_binary, api_key="inner-key")
    servers.append(server)
    server.start()
    assert server.process is not None
    # /bin/sh exec's python: the environment read is the running child's own.
    env = environ_of(server.process.pid)
    leaked = {name for name, value in env.items() if name in SECRETS or value in SECRETS.values()}
    assert not leaked
    assert env["LLAMA_API_KEY"] == "inner-key" and env["PATH"] == os.environ["PATH"]
    assert env["LLAMA_ARG_N_GPU_LAYERS"] == "0" and env["OMP_NUM_THREADS"] == "2"


@pytest.mark.real_model
def test_the_real_llama_server_gets_no_secrets_either(default_model_path: str, servers: list[LlamaServer],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    server = LlamaServer(default_model_path, n_ctx=512, api_key="inner-key", supervise=True)
    servers.append(server)
    server.start()
    assert server.process is not None
    env = environ_of(server.process.pid)
    assert not {name for name, value in env.items() if name in SECRETS or value in SECRETS.values()}
    assert env["LLAMA_API_KEY"] == "inner-key"
    refused = httpx.get(f"http://127.0.0.1:{server.port}/v1/models", trust_env=False)
    assert refused.status_code == 401  # the key it got is the key it checks


def test_a_chatty_child_keeps_its_log_under_the_cap_and_its_tail_readable(
        fake_binary: str, gguf: Path, servers: list[LlamaServer]) -> None:
    limit = 256 * 1024
    server = LlamaServer(gguf, binary=fake_binary, log_limit=limit, extra_args=("--spam", "3000000"))
    servers.append(server)
    server.start()
    wait_for(lambda: server._log.dropped > 5_000_000, 30.0, "8 MB of output")
    assert len(server._log) <= limit
    tail = server.log_tail(1000)
    assert len(tail) == 1000 and tail.endswith("x\n")

