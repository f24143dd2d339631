"""Start llama-cpp-python's server on loopback: for development, tests and benchmarks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any

from ...errors import (
    ServerUnavailableError,
)
from .wire import _import_httpx

if TYPE_CHECKING:
    pass

# ------------------------------------------------------------------------------ local server
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # Linux: the server gets SIGTERM when the process that started it dies, so a crashed test run
    # leaves no model server behind. Best effort elsewhere.
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class LlamaCppPythonServer:
    """Runs llama-cpp-python's OpenAI-compatible server on loopback: for development, tests, benchmarks.

    It listens on 127.0.0.1 only, on a free port, and is stopped by :meth:`stop` (or the ``with``
    block); on Linux it also stops when the starting process dies. ``interrupt_requests=False`` is
    the default because the server otherwise cuts a running stream whenever another request arrives.

    Example:
        >>> server = LlamaCppPythonServer("model.gguf", n_ctx=4096, model_alias="hammer")  # not started
        >>> server.base_url.startswith("http://127.0.0.1:"), server.model_alias
        (True, 'hammer')
        >>> # with server: OpenAICompatibleBackend(server.base_url, model="hammer")
    """

    def __init__(self, model_path: str | os.PathLike[str], *, port: int | None = None, n_ctx: int = 4096,
                 model_alias: str = "hammer", api_key: str | None = None, interrupt_requests: bool = False,
                 n_threads: int | None = None, extra_args: tuple[str, ...] = (), startup_timeout: float = 180.0,
                 python: str = sys.executable) -> None:
        self.model_path = str(model_path)
        self.port = port or _free_port()
        self.n_ctx = n_ctx
        self.model_alias = model_alias
        self.api_key = api_key
        self.interrupt_requests = interrupt_requests
        self.n_threads = n_threads
        self.extra_args = tuple(extra_args)
        self.startup_timeout = startup_timeout
        self.python = python
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        """The command line that starts the server."""
        cmd = [self.python, "-m", "llama_cpp.server", "--model", self.model_path, "--host", "127.0.0.1",
               "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--model_alias", self.model_alias,
               "--interrupt_requests", str(self.interrupt_requests), "--verbose", "False"]
        if self.api_key:
            cmd += ["--api_key", self.api_key]
        if self.n_threads:
            cmd += ["--n_threads", str(self.n_threads)]
        return cmd + list(self.extra_args)

    def start(self) -> LlamaCppPythonServer:
        """Start the server and wait until it answers /v1/models (raises with its log if it dies)."""
        if self.process is not None and self.process.poll() is None:
            return self
        httpx = _import_httpx()
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent if os.name == "posix" else None)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerUnavailableError(f"llama-cpp-python's server exited with code {self.process.returncode} "
                                             f"while starting:\n{self.log_tail()}", url=self.base_url)
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/v1/models", headers=headers, timeout=2.0,
                             trust_env=False).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise ServerUnavailableError(f"llama-cpp-python's server did not answer within {self.startup_timeout:g} s",
                                     url=self.base_url)

    def log_tail(self, n: int = 4000) -> str:
        """The end of the server's output."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode("utf-8", errors="replace")[-n:]

    def kill(self) -> None:
        """Stop the server abruptly (SIGKILL), as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s)."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LlamaCppPythonServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
