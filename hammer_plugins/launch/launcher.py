"""Start an inference server on loopback: llama.cpp's C++ ``llama-server`` or llama-cpp-python's.

For development, tests, benchmarks and ``hammer serve``. Both listen on 127.0.0.1 only, on a free
port unless given one, stop with :meth:`stop` (or the ``with`` block), and on Linux also stop when
the process that started them dies. The child gets a minimal environment (none of this process's
secrets), its output is kept in a bounded in-memory ring (:meth:`log_tail`), and with
``supervise=True`` a child that dies is started again (:meth:`health_problem` says so meanwhile).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from hammer_plugins.launch.child import ENV_PREFIXES, LogRing, env_passes, free_port, start_child
from hammer_plugins.models.source import check_gguf
from hammer_plugins.support.cpu_threads import physical_cores
from hammer_plugins.support.http_client import import_httpx
from hammer_plugins.values.errors import ServerUnavailableError

log = logging.getLogger("hammer_plugins.server")


class _LoopbackServer:
    """What both launchers share: the process, its log, readiness polling, stopping, and (``supervise=True``)
    restarting a child that dies.

    Supervision: a child that exits without :meth:`stop` is started again on the same port with the same
    key after a back-off that doubles from ``restart_backoff[0]`` to ``restart_backoff[1]`` seconds; the
    count resets once a child has stayed up ``stable_after`` seconds. After ``max_restarts`` children in a
    row that died soon after starting (or never became ready) it gives up and says so in the log and in
    :meth:`health_problem`. The output of every child goes to one in-memory ring of ``log_limit`` bytes.
    """

    label: ClassVar[str] = "the server"
    ready_path: ClassVar[str] = "/v1/models"
    env_prefixes: ClassVar[tuple[str, ...]] = ENV_PREFIXES

    def __init__(self, model_path: str | os.PathLike[str], *, port: int | None, model_alias: str,
                 api_key: str | None, startup_timeout: float, supervise: bool = False, max_restarts: int = 5,
                 restart_backoff: tuple[float, float] = (0.5, 30.0), stable_after: float = 60.0,
                 log_limit: int = 1 << 20, env: Mapping[str, str] | None = None) -> None:
        self.model_path = str(model_path)
        self.port = port or free_port()
        self.model_alias = model_alias
        self.api_key = api_key
        self.startup_timeout = startup_timeout
        self.supervise = supervise
        self.max_restarts = max_restarts
        self.restart_backoff = restart_backoff
        self.stable_after = stable_after
        self.extra_env = dict(env or {})
        self.process: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        """How many times a dead child was started again (and became ready)."""
        self._log = LogRing(log_limit)
        self._lock = threading.Lock()  # process creation vs stop()
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None
        self._problem: str | None = None
        self._failures = 0
        self._ready_at: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:  # pragma: no cover - every launcher defines it
        raise NotImplementedError

    key_variable: ClassVar[str] = ""
    """The environment variable the server reads its API key from: a key on the command line would
    be visible to every user of the machine in the process list, so it never goes there."""

    def environment(self) -> dict[str, str]:
        """The server process's environment: only what a model server needs from this one (paths, locale,
        temporary folder, thread and device settings, ``LLAMA_ARG_*``), ``env``, and its API key. This
        process's secrets (``HAMMER_SERVER_API_KEY``, ``OPENAI_API_KEY``, ``AWS_*``, ...) never go there.

        Example:
            >>> os.environ["HAMMER_SERVER_API_KEY"] = "outer"
            >>> env = LlamaServer("model.gguf", api_key="inner", binary="/opt/llama-server").environment()
            >>> env["LLAMA_API_KEY"], "HAMMER_SERVER_API_KEY" in env, "PATH" in env
            ('inner', False, True)
            >>> del os.environ["HAMMER_SERVER_API_KEY"]
        """
        env = {name: value for name, value in os.environ.items() if env_passes(name, self.env_prefixes)}
        env.update(self.extra_env)
        if self.api_key:
            env[self.key_variable] = self.api_key
        return env

    def _launch(self, note: str = "") -> subprocess.Popen[bytes]:
        """Start a child (the caller holds ``_lock`` or is the only thread); its output goes to the log ring."""
        if note:
            self._log.write(f"\n--- {note} ---\n".encode())
        # A supervised child gets a session of its own: a terminal's Ctrl-C reaches only its parent, which
        # stops it (stop()), rather than killing it too and racing the supervisor into restarting it.
        process = start_child(self.command(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, env=self.environment(),
                              start_new_session=self.supervise and os.name == "posix")
        threading.Thread(target=self._log.pump, args=(process.stdout,), name=f"{self.label} log", daemon=True).start()
        self.process = process
        return process

    def _await_ready(self, process: subprocess.Popen[bytes], timeout: float) -> str | None:
        """None once the child answers its readiness check; else why not (it exited, stayed silent, stop())."""
        httpx = import_httpx()
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return f"exited with code {process.returncode} while starting"
            if self._stopping.is_set():
                return "stopped while starting"
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}{self.ready_path}", headers=headers, timeout=2.0,
                             trust_env=False).status_code == 200:
                    return None
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        return f"did not answer within {timeout:g} s"

    def start(self) -> Any:
        """Start the server and wait until it answers (raises with its log if it dies or stays silent)."""
        if self.process is not None and self.process.poll() is None:
            return self
        check_gguf(Path(self.model_path))  # a missing or non-GGUF file is named before a server dies on it
        self._stopping.clear()
        with self._lock:
            process = self._launch("started" if self.process is None else "started again")
        reason = self._await_ready(process, self.startup_timeout)
        if reason is not None:
            tail = self.log_tail()
            self.stop()
            raise ServerUnavailableError(f"{self.label} {reason}:\n{tail}", url=self.base_url)
        self._ready_at, self._problem, self._failures = time.monotonic(), None, 0
        if self.supervise and (self._supervisor is None or not self._supervisor.is_alive()):
            self._supervisor = threading.Thread(target=self._supervise, name=f"{self.label} supervisor", daemon=True)
            self._supervisor.start()
        return self

    def _backoff(self, failures: int) -> float:
        first, cap = self.restart_backoff
        return float(min(cap, first * 2 ** (failures - 1)))

    def _supervise(self) -> None:
        """Restart the child whenever it exits, until stop() or too many fast failures in a row."""
        while not self._stopping.is_set():
            process = self.process
            assert process is not None
            code = process.wait()
            if self._stopping.is_set():
                return
            if self._ready_at is not None and time.monotonic() - self._ready_at >= self.stable_after:
                self._failures = 0  # it had stayed up: a new incident, not a crash loop
            self._failures += 1
            self._ready_at = None
            if self._failures > self.max_restarts:
                self._problem = (f"{self.label} child exited with code {code} after {self.max_restarts} restarts in a "
                                 "row that did not stay up; gave up restarting it. Fix: read its output in this "
                                 "server's log, then restart this server")
                log.error("%s. Its last output:\n%s", self._problem, self.log_tail())
                return
            delay = self._backoff(self._failures)
            self._problem = f"{self.label} child exited with code {code}; restarting (attempt {self._failures})"
            log.warning("%s exited with code %s; starting it again in %.1f s (attempt %d of %d). Its last output:\n%s",
                        self.label, code, delay, self._failures, self.max_restarts, self.log_tail(2000))
            if self._stopping.wait(delay):
                return
            with self._lock:
                if self._stopping.is_set():
                    return
                process = self._launch(f"restart, attempt {self._failures}")
            reason = self._await_ready(process, self.startup_timeout)
            if reason is None:
                self._ready_at, self._problem = time.monotonic(), None
                self.restarts += 1
                log.warning("%s is serving again on 127.0.0.1:%d (restart %d)", self.label, self.port, self.restarts)
            elif process.poll() is None:
                _terminate(process)  # silent or stop(): the next turn counts it (or returns)

    def health_problem(self) -> str | None:
        """None while the child runs; else what is wrong, for a /health check (no address in it).

        Example:
            >>> LlamaServer("model.gguf", binary="/opt/llama-server").health_problem()
            'llama-server child is not running (not started)'
        """
        process = self.process
        if process is None:
            return f"{self.label} child is not running (not started)"
        code = process.poll()
        if self._problem is not None:
            return self._problem
        if code is not None:
            if self._stopping.is_set():
                return f"{self.label} child was stopped"
            if self.supervise:
                return f"{self.label} child exited with code {code}; restarting"
            return f"{self.label} child exited with code {code}"
        return None

    def log_tail(self, n: int = 4000) -> str:
        """The end of the server's output (of its last children, when it was restarted)."""
        return self._log.tail(n)

    def kill(self) -> None:
        """Stop the server abruptly (SIGKILL), as a crash would (a supervised server restarts it)."""
        process = self.process
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=30)

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s), and its supervision: nothing restarts it."""
        self._stopping.set()
        with self._lock:
            process = self.process
        if process is not None and process.poll() is None:
            _terminate(process)
        supervisor = self._supervisor
        if supervisor is not None and supervisor is not threading.current_thread():
            supervisor.join(timeout=30)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _terminate(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=30)


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
    env_prefixes = (*ENV_PREFIXES, "PYTHON", "VIRTUAL_ENV", "CONDA_PREFIX")

    def __init__(self, model_path: str | os.PathLike[str], *, port: int | None = None, n_ctx: int = 4096,
                 model_alias: str = "hammer", api_key: str | None = None, interrupt_requests: bool = False,
                 n_threads: int | None = None, extra_args: tuple[str, ...] = (), startup_timeout: float = 180.0,
                 python: str = sys.executable, **supervision: Any) -> None:
        super().__init__(model_path, port=port, model_alias=model_alias, api_key=api_key,
                         startup_timeout=startup_timeout, **supervision)
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
    can start from another slot's tools prefix instead of evaluating it again. ``n_threads`` defaults to
    the physical cores this process may run on (as the in-process backend counts them), not llama-server's
    count of the machine's cores.

    ``supervise=True`` starts a child that dies again, on the same port with the same key (back-off
    ``restart_backoff``, at most ``max_restarts`` fast failures in a row, ``stable_after``); ``env`` adds
    variables to the child's minimal environment; ``log_limit`` caps the output kept (bytes).

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
                 startup_timeout: float = 180.0, **supervision: Any) -> None:
        super().__init__(model_path, port=port, model_alias=model_alias, api_key=api_key,
                         startup_timeout=startup_timeout, **supervision)
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
        from hammer_plugins.launch.llama_server_binary import find_llama_server

        binary = self.binary or str(find_llama_server())
        cmd = [binary, "--model", self.model_path, "--host", self.host, "--port", str(self.port),
               "--ctx-size", str(self.n_ctx * self.parallel), "--parallel", str(self.parallel),
               "--alias", self.model_alias, "--no-webui"]
        # llama-server's own default counts every physical core of the machine; a process confined to some of
        # them (a container's cpuset, taskset) would then run more threads than cores, and its threads spin.
        threads = self.n_threads or physical_cores()
        cmd += ["--threads", str(threads), "--threads-batch", str(threads)]
        if self.cache_ram_mib is not None:
            cmd += ["--cache-ram", str(self.cache_ram_mib)]
        return cmd + list(self.extra_args)
