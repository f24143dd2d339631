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
import contextlib
import os
import secrets
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

import uvicorn

from hammer_plugins.engine import HammerEngine
from hammer_plugins.engine.fields import DEFAULTS
from hammer_plugins.engine.settings import EngineSettings
from hammer_plugins.http_api.app import create_app
from hammer_plugins.http_api.defaults import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_QUEUE_DEPTH,
    DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_TIME_LIMIT,
)
from hammer_plugins.http_api.listener import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    dual_stack_socket,
    listener_config,
)
from hammer_plugins.launch.child import exposure_warning, free_port
from hammer_plugins.values.errors import ServerAuthenticationError


class BackgroundServer:
    """uvicorn serving ``app`` on a thread of this process, on a free loopback port; ``with`` stops it."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int | None = None, log_level: str = "warning",
                 **listener: Any) -> None:
        self.host = host
        self.port = port or free_port(host)
        # ``listener``: listener_config's timeouts and connection cap
        self.server = GracefulServer(listener_config(app, host, self.port, log_level=log_level, lifespan="on",
                                                     timeout_graceful_shutdown=SHUTDOWN_DEADLINE, **listener))
        sockets = [sock] if (sock := dual_stack_socket(host, self.port)) else None
        self._thread = threading.Thread(target=self.server.run, args=(sockets,), name="hammer-openai-server",
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://[{self.host}]:{self.port}" if ":" in self.host else f"http://{self.host}:{self.port}"

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


UPSTREAM_KEY_VARIABLE = "HAMMER_UPSTREAM_API_KEY"
"""Where ``--backend server`` reads the key of the server it forwards to."""


def _selection(args: argparse.Namespace) -> dict[str, Any]:
    """``--tool-budget``, ``--tool-selector``, ``--relevance-gate``, ``--on-missing`` and ``--max-tokens`` (a
    namespace built in Python may lack them: the declared defaults)."""
    return {"tool_budget": int(getattr(args, "tool_budget", DEFAULTS.tool_budget)),
            "relevance_gate": bool(getattr(args, "relevance_gate", DEFAULTS.relevance_gate)),
            "tool_selector": str(getattr(args, "tool_selector", DEFAULTS.tool_selector)),
            "on_missing": str(getattr(args, "on_missing", DEFAULTS.on_missing)),
            "max_tokens": int(getattr(args, "max_tokens", DEFAULTS.max_tokens))}


def _built(settings: EngineSettings) -> HammerEngine:
    """The engine of ``settings``, the server's own (not shared with other engines of the process, as
    :meth:`EngineSettings.build_engine`'s are: the server owns its backend and closes it)."""
    return HammerEngine(**settings.engine_options())


def _engine(args: argparse.Namespace, stack: contextlib.ExitStack) -> tuple[HammerEngine, str, list[Callable[[], str | None]]]:
    """The engine ``--backend`` asks for, how it runs requests (for the banner), and /health's checks.

    With ``llama-server`` the server is started here, on a free loopback port, with a random key of
    its own: the only way in is this API (and its key). It is supervised: a child that dies is started
    again (same port and key) with a growing back-off, and /health answers 503 while it is down.
    """
    backend = args.backend or "llama_cpp"
    if backend == "server":
        if not args.base_url:
            raise SystemExit("hammer serve --openai --backend server needs the server's URL. Fix: add "
                             "--base-url http://HOST:PORT/v1 (or use --backend llama-server to start one)")
        from hammer_plugins.backends.remote import OpenAICompatibleBackend, ServerBackendSettings

        # The upstream server's key is not this API's key ($HAMMER_SERVER_API_KEY): a variable of its own.
        upstream_key = os.environ.get(UPSTREAM_KEY_VARIABLE) or None
        upstream = OpenAICompatibleBackend(settings=ServerBackendSettings(base_url=args.base_url, api_key=upstream_key))
        try:
            upstream.resolve_grammar_protocol()  # now, not in the first request: a server that ignores grammars fails here
        except ServerAuthenticationError as exc:
            raise ServerAuthenticationError(
                f"the server at {args.base_url} refused this API's requests (HTTP {exc.status_code}: {exc.detail}). Fix: set "
                f"${UPSTREAM_KEY_VARIABLE} to that server's key ($HAMMER_SERVER_API_KEY is the key of this API, "
                "for its own clients)", status_code=exc.status_code, detail=exc.detail, url=args.base_url) from None
        engine = _built(EngineSettings(backend=upstream, **_selection(args)))
        return engine, f"requests go to {args.base_url} as they come", []
    if args.base_url:
        raise SystemExit("hammer serve --openai: --base-url goes with --backend server. Fix: add --backend server")
    if backend == "llama-server":
        from hammer_plugins.backends.remote import OpenAICompatibleBackend
        from hammer_plugins.engine.shared_backends import model_prompt_format
        from hammer_plugins.launch import LlamaServer
        from hammer_plugins.launch.llama_server_binary import find_or_build_llama_server
        from hammer_plugins.models.source import local_gguf, resolve_model

        binary = find_or_build_llama_server(build=not args.no_build)
        gguf = local_gguf(resolve_model(args.model_path, args.model, gguf=True))
        inner_key = secrets.token_urlsafe(24)
        extra = tuple(a for a in getattr(args, "extra", None) or () if a != "--")  # `-- --metrics`: llama-server's own
        server = LlamaServer(gguf, parallel=args.parallel, n_ctx=args.n_ctx, n_threads=args.threads,
                             model_alias=args.alias, api_key=inner_key, binary=binary, startup_timeout=600.0,
                             supervise=True, extra_args=extra)
        stack.callback(server.stop)
        server.start()
        upstream = OpenAICompatibleBackend(server.base_url, model=args.alias, api_key=inner_key)
        upstream.resolve_grammar_protocol()  # the one-off probe, before the first request
        engine = _built(EngineSettings(backend=upstream, **_selection(args),
                                       prompt_format=model_prompt_format(args.model_path, args.model, "llama_cpp")))
        return engine, (f"{args.parallel} requests decoded together (llama-server's slots, {args.n_ctx} tokens "
                        f"each), more queued"), [server.health_problem]
    engine = _built(EngineSettings(model_path=args.model_path, model=args.model, backend=backend, n_ctx=args.n_ctx,
                                   n_threads=args.threads, **_selection(args),
                                   prefix_cache=getattr(args, "prefix_cache", DEFAULTS.prefix_cache),
                                   cache_ram=getattr(args, "cache_ram", DEFAULTS.cache_ram)))
    return engine, "one request at a time, more queued", []


def playground_mcp(args: argparse.Namespace, stack: contextlib.ExitStack
                   ) -> tuple[list[dict[str, Any]], dict[str, Callable[..., Any]], list[str]]:
    """``hammer playground --tools FILE --mcp ...``: the page's tools, the MCP tools it may run, and what went wrong.

    The servers start one at a time into one :class:`~hammer_plugins.mcp.client.MCPToolbox`, the rule ``hammer
    call`` and ``chat`` follow: a server whose tool name is taken (by an earlier server or the file) is refused
    and closed. A server refused, or that did not start, is named in the page (and here) with the reason; the
    page opens with the tools that did.
    """
    page_tools = list(getattr(args, "playground_tools", None) or [])
    commands = getattr(args, "mcp", None) or []
    if not commands:
        return page_tools, {}, []
    from hammer_plugins.mcp.client import MCPToolbox, parse_env_options
    from hammer_plugins.values.errors import HammerError

    names, values = parse_env_options(args.mcp_env or [])
    box = MCPToolbox(given=[tool["function"]["name"] for tool in page_tools], given_by="the --tools file",
                     stack=stack, env=values, pass_env=names, timeout=args.mcp_timeout)
    errors = []
    for command in commands:
        try:
            server = box.add(command)
        except HammerError as exc:  # the page opens anyway and says which server failed, and why
            print(f"hammer playground: {exc}", file=sys.stderr, flush=True)
            errors.append(str(exc))
            continue
        page_tools += [tool.to_openai() for tool in server.tools]
    return page_tools, box.functions, errors


def serve_openai(args: argparse.Namespace) -> int:
    """``hammer serve --openai``: load the model, serve it until Ctrl-C; 0 when stopped."""
    api_key = getattr(args, "api_key", None) or os.environ.get("HAMMER_SERVER_API_KEY") or None  # also when called from Python
    warning = exposure_warning(args.host, api_key)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    with contextlib.ExitStack() as stack:
        started = time.perf_counter()
        engine, how, health_checks = _engine(args, stack)
        engine.load()
        max_body = int(getattr(args, "max_body_mb", None) or DEFAULT_MAX_BODY_BYTES / 2**20) * 2**20
        page_tools, runners, page_errors = playground_mcp(args, stack)
        app = create_app(engine, model_name=args.alias, api_key=api_key, max_body_bytes=max_body,
                         health_checks=health_checks, playground_tools=page_tools, playground_runners=runners,
                         playground_errors=page_errors,
                         **_bounds(args, engine))
        # The page's helpers (they run --mcp tools) need this per-start token: whoever reads this terminal has it,
        # in a fragment, which a browser never sends on (no access log, no Referer shows it).
        token = app.state.server.settings.playground_token
        shown = "127.0.0.1" if args.host in ("0.0.0.0", "::") else args.host
        url = f"http://{shown}:{args.port}/v1"
        key = "os.environ['HAMMER_SERVER_API_KEY']" if api_key else "'none'"
        print(f"Hammer's OpenAI-compatible server: {engine.model_name} (ready in {time.perf_counter() - started:.1f} s) "
              f"as {args.alias!r} at {url}, {how}. Connect with:\n"
              f"  OpenAI(base_url={url!r}, api_key={key}).chat.completions.create(model={args.alias!r}, ...)\n"
              f"  Ollama's clients: ollama.Client(host={url.removesuffix('/v1')!r}), "
              f"ChatOllama(model={args.alias!r}, base_url={url.removesuffix('/v1')!r})\n"
              f"  The playground, in a browser: {url.removesuffix('/v1')}/#token={token}\n"
              "Ctrl-C stops it.", file=sys.stderr, flush=True)
        with _signals_end_the_server():
            sockets = [sock] if (sock := dual_stack_socket(args.host, args.port)) else None
            GracefulServer(listener_config(app, args.host, args.port, timeout_graceful_shutdown=SHUTDOWN_DEADLINE,
                                           log_level=getattr(args, "log_level", None) or "info",
                                           **_listener(args))).run(sockets)
        stopped = _wait_idle(app.state.worker, 2.0)
    if not stopped:  # a call that ignores its stop (a model stuck in C): its thread would keep the process alive
        print("hammer serve: a call did not stop within the shutdown deadline; exiting anyway", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(0)
    return 0


ORIGINS_VARIABLE = "HAMMER_ORIGINS"
"""More web origins allowed to use the API (comma-separated, ``*`` wildcards), like Ollama's OLLAMA_ORIGINS."""

HOSTS_VARIABLE = "HAMMER_HOSTS"
"""More Host names accepted on a loopback connection (comma-separated), e.g. a local reverse proxy's name."""

SHUTDOWN_DEADLINE = 10.0
"""Seconds uvicorn waits for open requests once shutdown begins; then it cancels them."""


def _listed(values: list[str] | None, variable: str) -> list[str]:
    listed = [v.strip() for v in os.environ.get(variable, "").strip("\"'").split(",") if v.strip()]
    return [*(values or []), *listed]


def _bounds(args: argparse.Namespace, engine: HammerEngine) -> dict[str, Any]:
    """create_app's security and resource options from ``hammer serve --openai``'s flags and environment."""
    time_limit = getattr(args, "time_limit", DEFAULT_TIME_LIMIT)
    return {"allowed_origins": _listed(getattr(args, "allow_origin", None), ORIGINS_VARIABLE),
            "allowed_hosts": _listed(getattr(args, "allow_host", None), HOSTS_VARIABLE),
            "parallel": max(1, int(getattr(args, "parallel", 1) or 1)) if engine.backend.native_async else 1,
            "queue_depth": getattr(args, "queue_depth", DEFAULT_QUEUE_DEPTH),
            "time_limit": time_limit if time_limit and time_limit > 0 else None,
            "shutdown_grace": min(getattr(args, "shutdown_grace", DEFAULT_SHUTDOWN_GRACE), SHUTDOWN_DEADLINE)}


def _listener(args: argparse.Namespace) -> dict[str, Any]:
    """listener_config's timeouts and connection cap from ``hammer serve --openai``'s flags."""
    return {"header_timeout": getattr(args, "header_timeout", DEFAULT_HEADER_TIMEOUT),
            "body_timeout": getattr(args, "body_timeout", DEFAULT_BODY_TIMEOUT),
            "idle_timeout": getattr(args, "idle_timeout", DEFAULT_IDLE_TIMEOUT),
            "max_connections": getattr(args, "max_connections", DEFAULT_MAX_CONNECTIONS)}


class _Stopped(BaseException):
    """SIGTERM / SIGINT, once uvicorn has shut down gracefully and raised the signal again."""


@contextlib.contextmanager
def _signals_end_the_server() -> Any:
    """Let the signal uvicorn raises again after its graceful shutdown end ``run()`` with an exception
    caught here, instead of killing the process (SIGTERM's default) before the ExitStack stops the
    children (llama-server) and reaps them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(sig: int, frame: Any) -> None:
        raise _Stopped

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    except _Stopped:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait_idle(worker: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not worker.idle():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class GracefulServer(uvicorn.Server):
    """uvicorn, which on SIGTERM / Ctrl-C first tells the worker: queued requests are answered 503 at
    once, running ones get the grace period and are then stopped, so the server exits within
    :data:`SHUTDOWN_DEADLINE` even with a full queue (plain uvicorn waits for every request)."""

    async def shutdown(self, sockets: Any = None) -> None:
        worker = getattr(getattr(self.config.app, "state", None), "worker", None)
        if worker is not None:
            worker.shut_down()
        await super().shutdown(sockets=sockets)
