"""Running the server: ``hammer serve --openai`` in the foreground, or a background thread for tests.

Example:
    >>> from hammer_plugins import HammerEngine, ScriptedBackend
    >>> import httpx
    >>> with BackgroundServer(create_app(HammerEngine(backend=ScriptedBackend([])))) as server:
    ...     httpx.get(server.url + "/health").json()["status"]
    'ok'
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from types import TracebackType
from typing import Any

import uvicorn

from ..backends.server.launcher import exposure_warning, free_port
from ..engine import HammerEngine
from .app import DEFAULT_MAX_BODY_BYTES, create_app


class BackgroundServer:
    """uvicorn serving ``app`` on a thread of this process, on a free loopback port; ``with`` stops it."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int | None = None, log_level: str = "warning") -> None:
        self.host = host
        self.port = port or free_port(host)
        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=self.port, log_level=log_level,
                                                    access_log=False, lifespan="on"))
        self._thread = threading.Thread(target=self.server.run, name="hammer-openai-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What the openai SDK takes as ``base_url``."""
        return self.url + "/v1"

    def start(self, timeout: float = 30.0) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the OpenAI-compatible server did not start on {self.url}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def serve_openai(args: argparse.Namespace) -> int:
    """``hammer serve --openai``: load the model, serve it until Ctrl-C; 0 when stopped."""
    api_key = getattr(args, "api_key", None) or os.environ.get("HAMMER_SERVER_API_KEY") or None  # also when called from Python
    warning = exposure_warning(args.host, api_key)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    engine = HammerEngine(model_path=args.model_path, model=args.model, n_ctx=args.n_ctx, n_threads=args.threads)
    started = time.perf_counter()
    engine.load()
    max_body = int(getattr(args, "max_body_mb", None) or DEFAULT_MAX_BODY_BYTES / 2**20) * 2**20
    app = create_app(engine, model_name=args.alias, api_key=api_key, max_body_bytes=max_body)
    shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
    url = f"http://{shown}:{args.port}/v1"
    key = "os.environ['HAMMER_SERVER_API_KEY']" if api_key else "'none'"
    print(f"Hammer's OpenAI-compatible server: {engine.model_name} (loaded in {time.perf_counter() - started:.1f} s) as "
          f"{args.alias!r} at {url}, one request at a time. Connect with:\n"
          f"  OpenAI(base_url={url!r}, api_key={key}).chat.completions.create(model={args.alias!r}, ...)\n"
          "Ctrl-C stops it.", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info", access_log=False)
    return 0
