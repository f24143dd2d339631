"""What every route of the API server reads: :class:`ServerSettings` (how it was started) and
:class:`ServerContext` (the engine, the worker, the pools, what it counts), kept on ``app.state.server``.

Routes take the context from the request (:func:`server_of`) instead of a closure over ``create_app``'s
locals, so an API door is a module of its own that the app registers.

Example:
    >>> ServerSettings(parallel=2).queue_depth
    16
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request

from hammer_plugins.engine import HammerEngine
from hammer_plugins.http_api.defaults import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_QUEUE_DEPTH,
    DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_TIME_LIMIT,
)
from hammer_plugins.http_api.worker import EngineWorker

REQUEST_WORK_THREADS = 2
"""Threads of the server's own pool for request work off the event loop (parsing large bodies, counting
tokens): not asyncio's default executor, which other libraries share; every such request also holds a place
in the queue while it works, so the queue's bound is its bound."""

HEALTH_CHECK_THREADS = 2
"""Threads for /health's checks alone: they never wait behind request work."""


@dataclass(frozen=True)
class ServerSettings:
    """How the API server was started (``create_app``'s keywords).

    ``allowed_origins`` / ``allowed_hosts``: web origins (``*`` wildcards; ``"*"`` alone: any) and host names
    allowed besides the local defaults (:class:`~hammer_plugins.http_api.guard.Guard`). ``parallel``:
    requests the backend decodes at once (1 in process; llama-server's ``--parallel``); ``queue_depth`` more may
    wait for each, then 429. ``time_limit``: seconds a request may take from arrival (None: no limit), then 504.
    ``shutdown_grace``: seconds running requests get once shutdown begins. ``health_checks``: each returns None
    when fine or the reason it is not. ``playground_tools``: OpenAI function tools the playground offers besides
    the demo tools; ``playground_runners``: the callables (MCP servers' tools) the page may run, by name, once the
    person approves a call; ``playground_errors``: what the page says went wrong before it opened;
    ``playground_token``: the secret the page's helpers need (random per start: the page's address carries it),
    never shown in a ``repr``.
    """

    model_name: str = "hammer"
    api_key: str | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    allowed_origins: Sequence[str] = ()
    allowed_hosts: Sequence[str] = ()
    parallel: int = 1
    queue_depth: int = DEFAULT_QUEUE_DEPTH
    time_limit: float | None = DEFAULT_TIME_LIMIT
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE
    health_checks: Sequence[Callable[[], str | None]] = ()
    playground_tools: Sequence[dict[str, Any]] = ()
    playground_runners: dict[str, Callable[..., Any]] | None = None
    playground_errors: Sequence[str] = ()
    playground_token: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)


@dataclass
class ServerContext:
    """One running server: its engine and settings, the worker that runs engine calls, the thread pools for
    request work and health checks, and what /health counts beyond the worker."""

    engine: HammerEngine
    settings: ServerSettings
    worker: EngineWorker
    started: int = field(default_factory=lambda: int(time.time()))
    request_work: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(REQUEST_WORK_THREADS, thread_name_prefix="hammer-request"))
    health_work: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(HEALTH_CHECK_THREADS, thread_name_prefix="hammer-health"))
    counting: int = 0  # count_tokens requests in flight (shown by /health)

    @classmethod
    def start(cls, engine: HammerEngine, settings: ServerSettings) -> ServerContext:
        worker = EngineWorker(engine, parallel=settings.parallel, queue_depth=settings.queue_depth,
                              time_limit=settings.time_limit, shutdown_grace=settings.shutdown_grace)
        return cls(engine=engine, settings=settings, worker=worker)

    @property
    def model_name(self) -> str:
        return self.settings.model_name

    @property
    def served(self) -> list[str]:
        """The names a request may give the model."""
        return [self.settings.model_name]

    def close(self) -> None:
        self.worker.close()
        self.request_work.shutdown(wait=False, cancel_futures=True)
        self.health_work.shutdown(wait=False, cancel_futures=True)


def server_of(request: Request) -> ServerContext:
    """The context of the server ``request`` came to."""
    context: ServerContext = request.app.state.server
    return context
