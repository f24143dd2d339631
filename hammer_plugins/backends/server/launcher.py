"""Start an inference server on loopback: llama.cpp's C++ ``llama-server`` or llama-cpp-python's.

For development, tests, benchmarks and ``hammer serve``. Both listen on 127.0.0.1 only, on a free
port unless given one, stop with :meth:`stop` (or the ``with`` block), and on Linux also stop when
the process that started them dies.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

from ...errors import ServerUnavailableError
from ...model_source import check_gguf
from .wire import _import_httpx


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on at ``host`` now (IPv4 or IPv6)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def exposure_warning(host: str, api_key: str | None) -> str | None:
    """The warning for a server bound beyond loopback without a key (None when there is nothing to say)."""
    if api_key or host in ("127.0.0.1", "localhost", "::1"):
        return None
    return (f"warning: serving on {host} without an API key: anyone who can reach this port can use the model. "
            "Set HAMMER_SERVER_API_KEY.")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # Linux: the server gets SIGTERM when the process that started it dies, so a crashed test run
    # leaves no model server behind. Best effort elsewhere.
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class _LoopbackServer:
    """What both launchers share: the process, its log, readiness polling and stopping."""

    label: ClassVar[str] = "the server"
    ready_path: ClassVar[str] = "/v1/models"

    def __init__(self, model_path: str | os.PathLike[str], *, port: int | None, model_alias: str,
                 api_key: str | None, startup_timeout: float) -> None:
        self.model_path = str(model_path)
        self.port = port or free_port()
        self.model_alias = model_alias
        self.api_key = api_key
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:  # pragma: no cover - every launcher defines it
        raise NotImplementedError

    key_variable: ClassVar[str] = ""
    """The environment variable the server reads its API key from: a key on the command line would
    be visible to every user of the machine in the process list, so it never goes there."""

    def environment(self) -> dict[str, str]:
        """The server process's environment: this process's, plus the API key (if any)."""
        env = dict(os.environ)
        if self.api_key:
            env[self.key_variable] = self.api_key
        return env

    def start(self) -> Any:
        """Start the server and wait until it answers (raises with its log if it dies or stays silent)."""
        if self.process is not None and self.process.poll() is None:
            return self
        check_gguf(Path(self.model_path))  # a missing or non-GGUF file is named before a server dies on it
        httpx = _import_httpx()
        self._log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(self.command(), stdout=self._log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL, env=self.environment(),
                                        preexec_fn=_die_with_parent if os.name == "posix" else None)
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ServerUnavailableError(f"{self.label} exited with code {self.process.returncode} "
                                             f"while starting:\n{self.log_tail()}", url=self.base_url)
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}{self.ready_path}", headers=headers, timeout=2.0,
                             trust_env=False).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        tail = self.log_tail()
        self.stop()
        raise ServerUnavailableError(f"{self.label} did not answer within {self.startup_timeout:g} s:\n{tail}",
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

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LlamaCppPythonServer(_LoopbackServer):
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

    label = "llama-cpp-python's server"
    key_variable = "API_KEY"  # its settings are pydantic-settings fields, read from the environment

    def __init__(self, model_path: str | os.PathLike[str], *, port: int | None = None, n_ctx: int = 4096,
                 model_alias: str = "hammer", api_key: str | None = None, interrupt_requests: bool = False,
                 n_threads: int | None = None, extra_args: tuple[str, ...] = (), startup_timeout: float = 180.0,
                 python: str = sys.executable) -> None:
        super().__init__(model_path, port=port, model_alias=model_alias, api_key=api_key,
                         startup_timeout=startup_timeout)
        self.n_ctx = n_ctx
        self.interrupt_requests = interrupt_requests
        self.n_threads = n_threads
        self.extra_args = tuple(extra_args)
        self.python = python

    def command(self) -> list[str]:
        """The command line that starts the server."""
        cmd = [self.python, "-m", "llama_cpp.server", "--model", self.model_path, "--host", "127.0.0.1",
               "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--model_alias", self.model_alias,
               "--interrupt_requests", str(self.interrupt_requests), "--verbose", "False"]
        if self.n_threads:
            cmd += ["--n_threads", str(self.n_threads)]
        return cmd + list(self.extra_args)


class LlamaServer(_LoopbackServer):
    """Runs llama.cpp's C++ ``llama-server`` on loopback: continuous batching over ``parallel`` slots.

    ``n_ctx`` is the context window of each slot (the server gets ``n_ctx * parallel`` in all, in
    one KV cache the slots share). The binary is :func:`~.llama_server_binary.find_llama_server`'s
    unless given. Every slot reuses the longest prefix it already holds (``cache_prompt``, on by
    default), and the server keeps evaluated prompts in host memory (``cache_ram_mib``) so a slot
    can start from another slot's tools prefix instead of evaluating it again.

    Example:
        >>> server = LlamaServer("model.gguf", parallel=4, n_ctx=4096, binary="/opt/llama-server")  # not started
        >>> cmd = server.command()
        >>> cmd[0], cmd[cmd.index("--parallel") + 1], cmd[cmd.index("--ctx-size") + 1]
        ('/opt/llama-server', '4', '16384')
        >>> # with server: OpenAICompatibleBackend(server.base_url, model="hammer")
    """

    label = "llama-server"
    ready_path = "/health"
    key_variable = "LLAMA_API_KEY"  # what llama-server's --help names for --api-key ("env: LLAMA_API_KEY")

    def __init__(self, model_path: str | os.PathLike[str], *, port: int | None = None, n_ctx: int = 4096,
                 parallel: int = 1, model_alias: str = "hammer", api_key: str | None = None,
                 n_threads: int | None = None, cache_ram_mib: int | None = None, host: str = "127.0.0.1",
                 binary: str | os.PathLike[str] | None = None, extra_args: tuple[str, ...] = (),
                 startup_timeout: float = 180.0) -> None:
        super().__init__(model_path, port=port, model_alias=model_alias, api_key=api_key,
                         startup_timeout=startup_timeout)
        if parallel < 1:
            raise ValueError(f"parallel={parallel}: a server needs at least one slot")
        self.n_ctx = n_ctx
        self.parallel = parallel
        self.n_threads = n_threads
        self.cache_ram_mib = cache_ram_mib
        self.host = host
        self.binary = str(binary) if binary else None
        self.extra_args = tuple(extra_args)

    def command(self) -> list[str]:
        """The command line that starts the server."""
        from .llama_server_binary import find_llama_server

        binary = self.binary or str(find_llama_server())
        cmd = [binary, "--model", self.model_path, "--host", self.host, "--port", str(self.port),
               "--ctx-size", str(self.n_ctx * self.parallel), "--parallel", str(self.parallel),
               "--alias", self.model_alias, "--no-webui"]
        if self.n_threads:
            cmd += ["--threads", str(self.n_threads), "--threads-batch", str(self.n_threads)]
        if self.cache_ram_mib is not None:
            cmd += ["--cache-ram", str(self.cache_ram_mib)]
        return cmd + list(self.extra_args)
