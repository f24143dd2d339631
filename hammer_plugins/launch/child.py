"""What a launched server's process is given and kept from: a free loopback port, a parent-death
signal (Linux) so that it dies with the process that started it, whichever thread started it
(:func:`start_child`, :func:`guarded_command`), only the environment variables it needs (none of this
process's secrets), and a bounded ring for its output.

Example:
    >>> [name for name in ("PATH", "OPENAI_API_KEY", "OMP_NUM_THREADS") if env_passes(name, ENV_PREFIXES)]
    ['PATH', 'OMP_NUM_THREADS']
"""

from __future__ import annotations

import concurrent.futures
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any


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


def pdeathsig() -> Any:
    """libc's ``prctl`` (Linux), looked up in this process: a forked child must not load libraries. Call it
    just before starting a child with :func:`die_with_parent`: it also notes this process as the parent."""
    global _PRCTL, _PARENT
    _PARENT = os.getpid()
    if _PRCTL is None:
        try:
            import ctypes

            _PRCTL = ctypes.CDLL("libc.so.6", use_errno=True).prctl
        except (OSError, AttributeError):
            _PRCTL = False
    return _PRCTL


_PRCTL: Any = None
_PARENT: int | None = None


def start_child(argv: list[str], **popen: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, **popen)`` whose process dies with this one (Linux), whichever thread asks.

    The parent-death signal follows the *thread* that forked the child, not the process: a child forked by
    a thread that ends (a worker, a restart's thread) would be killed then, and one forked where no signal
    was set would outlive a killed parent. So every child is forked by one thread that lives as long as
    this process, and gets SIGKILL when this process dies, however it dies.

    Example:
        >>> child = start_child(["true"])
        >>> child.wait()
        0
    """
    if os.name != "posix" or not pdeathsig():
        return subprocess.Popen(argv, **popen)

    def fork() -> subprocess.Popen[bytes]:
        pdeathsig()  # notes this process as the parent the child checks for
        return subprocess.Popen(argv, preexec_fn=die_with_parent, **popen)

    return _forking_thread().run(fork)


class _ForkingThread:
    """One daemon thread per process that runs the forks handed to it (see :func:`start_child`)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="hammer-child-starter", daemon=True).start()

    def _serve(self) -> None:
        while True:
            job, future = self._jobs.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(job())
                except BaseException as exc:  # noqa: BLE001 - handed to the caller, who raises it
                    future.set_exception(exc)

    def run(self, job: Callable[[], Any]) -> Any:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._jobs.put((job, future))
        return future.result()


_FORKER: _ForkingThread | None = None
_FORKER_LOCK = threading.Lock()


def _forking_thread() -> _ForkingThread:
    global _FORKER
    with _FORKER_LOCK:
        if _FORKER is None or _FORKER.pid != os.getpid():  # a forked copy of this process has no such thread
            _FORKER = _ForkingThread()
        return _FORKER


# A command line run through this program first sets its own parent-death signal, then becomes the command
# (the signal survives exec). For children another library forks (the MCP SDK's stdio servers), where no
# ``preexec_fn`` can be passed. Run with ``python -I -S -c``: no site, no environment, a few milliseconds.
_GUARD = """import ctypes, os, sys
ctypes.CDLL(None, use_errno=True).prctl(1, 9)
if os.getppid() != int(sys.argv[1]):
    os._exit(1)
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as exc:
    sys.stderr.write(f"cannot run {sys.argv[2]!r}: {exc.strerror}\\n")
    os._exit(127)
"""


def guarded_command(argv: list[str]) -> list[str]:
    """``argv`` run so that it dies with this process (Linux; elsewhere ``argv`` as it is), for a child that
    another library starts (from its own thread: the parent-death signal is then that thread's, which must
    live as long as the child, as an MCP session's loop thread does).

    Example:
        >>> guarded_command(["mcp-server-time"])[-1]
        'mcp-server-time'
    """
    if not sys.platform.startswith("linux") or not pdeathsig():
        return list(argv)
    return [sys.executable, "-I", "-S", "-c", _GUARD, str(os.getpid()), *argv]


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # Linux: the server is killed when the process that started it dies, so a crashed or killed parent
    # leaves no model server behind (gigabytes and a port). SIGKILL, not SIGTERM: nobody waits for a graceful
    # shutdown once the parent is gone, and a llama-server busy with a long prompt can put one off for
    # minutes. The signal follows the *thread* that started the child: a restarted child's is the supervisor
    # thread, which outlives it. A parent that died between fork and this call would never send it: the
    # child then exits at once.
    if _PRCTL:
        _PRCTL(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        if _PARENT is not None and os.getppid() != _PARENT:
            os._exit(1)


_ENV_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP",
    "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "DYLD_FALLBACK_LIBRARY_PATH",
    "SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT",  # Windows processes need these
    "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ONEAPI_DEVICE_SELECTOR", "LLAMA_CACHE",
})
ENV_PREFIXES = ("LC_", "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "BLIS_", "GGML_", "LLAMA_ARG_", "CUDA_",
                 "HSA_", "GPU_")
_SECRET_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL")


def env_passes(name: str, prefixes: tuple[str, ...]) -> bool:
    upper = name.upper()
    if any(marker in upper for marker in _SECRET_MARKERS):
        return False  # e.g. LLAMA_ARG_API_KEY, LLAMA_ARG_HF_TOKEN: the launcher sets the key it means
    return upper in _ENV_NAMES or upper.startswith(prefixes)


class LogRing:
    """The child's output, the last ``limit`` bytes of it in memory (a thread reads the pipe)."""

    def __init__(self, limit: int) -> None:
        self.limit = max(1024, limit)
        self.dropped = 0  # bytes that fell off the front
        self._data = bytearray()
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock:
            self._data += data
            extra = len(self._data) - self.limit
            if extra > 0:
                del self._data[:extra]
                self.dropped += extra

    def __len__(self) -> int:
        return len(self._data)

    def tail(self, n: int) -> str:
        with self._lock:
            data = bytes(self._data[-4 * n:])  # n characters are at most 4n bytes
        return data.decode("utf-8", errors="replace")[-n:]

    def pump(self, stream: Any) -> None:
        """Copy ``stream`` (the child's stdout and stderr) here until the child closes it."""
        try:
            fd = stream.fileno()
            while data := os.read(fd, 65536):
                self.write(data)
        except (OSError, ValueError):
            pass
        finally:
            stream.close()
