"""Serve Hammer from an OpenAI-compatible inference server: vLLM, llama.cpp's ``llama-server``, or
llama-cpp-python's ``python -m llama_cpp.server``.

The engine renders Hammer's prompt itself and sends it as raw text to ``/v1/completions`` (the
server's chat template is never used), then parses the answer with its own parser: neither vLLM
nor llama.cpp parses Hammer's output. Constrained decoding sends the engine's GBNF grammar in the
field the server understands (``grammar_protocol``), and a one-off probe checks that the server
really applies it rather than silently ignoring an unknown field.

Concurrency is the server's business: unlike the in-process backends there is no lock. Sync calls
share one pooled ``httpx.Client`` across threads; async calls (:meth:`OpenAICompatibleBackend.astream`)
use an ``httpx.AsyncClient`` per event loop, on the loop, with no worker thread.

Retry policy (``max_retries``, exponential backoff with jitter, ``Retry-After`` honoured): a
connection that fails or is closed before one byte of answer arrives, and HTTP 429/502/503/504.
Never retried: a timeout (an overloaded server may still be working on the request: retrying only
adds load), a stream that breaks after it started (its text has already reached the caller and
cannot be taken back), and any other HTTP error (the same request would fail the same way).
Completions have no side effects, so the worst a retry of a request the server did receive can
cost is duplicated compute.

Example:
    >>> from hammer_plugins.backends.server import OpenAICompatibleBackend
    >>> backend = OpenAICompatibleBackend("http://127.0.0.1:8080/v1", model="hammer")  # nothing contacted yet
    >>> backend.base_url, backend.name, backend.model_name
    ('http://127.0.0.1:8080', 'server', 'hammer')
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from ..errors import (
    BackendNotInstalledError,
    ContextWindowExceededError,
    GrammarNotSupportedError,
    HammerError,
    ServerAuthenticationError,
    ServerError,
    ServerHTTPError,
    ServerModelNotFoundError,
    ServerStreamError,
    ServerTimeoutError,
    ServerUnavailableError,
)
from ..grammar import Grammar
from ..prompt import STOP_SEQUENCES
from .base import Backend, GenerationChunk, GenerationSettings, Usage

if TYPE_CHECKING:
    import httpx

ServerKind = Literal["auto", "llama_cpp_python", "llama_server", "vllm", "openai"]
GrammarProtocol = Literal["auto", "llama_cpp", "vllm", "vllm_guided", "none"]
TokenCounting = Literal["server", "estimate"]

# Hammer is a Qwen2.5 fine-tune speaking ChatML: these end an assistant turn.
DEFAULT_STOP = list(STOP_SEQUENCES)
# Hammer 2.1's (Qwen2.5's) trained context; used only when the server does not say (llama-cpp-python).
ASSUMED_CONTEXT_WINDOW = 32768
_RETRY_STATUSES = frozenset({429, 502, 503, 504})
_PROBE_TEXT = "hammer grammar probe"
_PROBE_GRAMMAR = f'root ::= "{_PROBE_TEXT}"'
_PROBE_PROMPT = "<|im_start|>user\nSay hello.<|im_end|>\n<|im_start|>assistant\n"


# --------------------------------------------------------------------------------------- settings
class ServerBackendSettings(BaseModel):
    """Settings of :class:`OpenAICompatibleBackend`; every field can be passed to its constructor.

    Example:
        >>> ServerBackendSettings(base_url="http://127.0.0.1:8000/v1/").base_url
        'http://127.0.0.1:8000'
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str = Field(description="Server root or its /v1 URL; default $HAMMER_SERVER_URL.")
    model: str | None = Field(None, description="Model name the server serves; None: the only one it lists.")
    api_key: SecretStr | None = Field(None, description="Bearer token; default $HAMMER_SERVER_API_KEY.")
    timeout: float = Field(120.0, gt=0, description="Longest silence allowed (seconds): queueing and time to first token.")
    connect_timeout: float = Field(5.0, gt=0)
    max_retries: int = Field(2, ge=0, le=10, description="Retries of connection failures and 429/502/503/504.")
    retry_backoff: float = Field(0.5, ge=0, description="First retry delay; doubles each retry, with jitter.")
    max_backoff: float = Field(8.0, ge=0, description="Cap on one retry delay, Retry-After included.")
    server_kind: ServerKind = "auto"
    grammar_protocol: GrammarProtocol = "auto"
    verify_grammar: bool = Field(True, description="Probe once that the server applies grammars.")
    context_window: int | None = Field(None, gt=0, description="Overrides what the server reports.")
    token_counting: TokenCounting = "server"
    max_connections: int = Field(64, ge=1)
    stop: list[str] = Field(default_factory=lambda: list(DEFAULT_STOP))
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Merged into every completion request.")
    headers: dict[str, str] = Field(default_factory=dict)
    trust_env: bool = Field(True, description="Honour HTTP(S)_PROXY / NO_PROXY and SSL_CERT_FILE.")

    @field_validator("base_url")
    @classmethod
    def _normalize_url(cls, value: str) -> str:
        url = value.strip().rstrip("/")
        if not re.match(r"^https?://[^/]+", url):
            raise ValueError(f"base_url must start with http:// or https://, got {value!r} (e.g. 'http://127.0.0.1:8080')")
        # Users copy either the server root or the OpenAI-style ".../v1" URL; endpoints hang off the root.
        return url[: -len("/v1")] if url.endswith("/v1") else url


@dataclass
class ServerStats:
    """Counters of one backend: HTTP requests sent (retries included), retries, finished completions,
    failed ones, and completions in flight now and at most at once (how much concurrency was real)."""

    requests: int = 0
    retries: int = 0
    completions: int = 0
    errors: int = 0
    in_flight: int = 0
    peak_in_flight: int = 0


# ------------------------------------------------------------------------------ pure helpers
def _import_httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:
        raise BackendNotInstalledError(
            "the server backend needs httpx. Fix: pip install 'hammer-plugins[server]'"
        ) from exc
    return httpx


def estimate_tokens(text: str) -> int:
    """A deliberately high token estimate (3 characters a token) for servers without a tokenize endpoint."""
    return max(1, math.ceil(len(text) / 3))


class _SSEDecoder:
    """Server-sent events from lines: ``data:`` lines are joined until a blank line dispatches them."""

    def __init__(self) -> None:
        self._data: list[str] = []
        self._kind = "message"

    def feed(self, line: str) -> tuple[str, str] | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment: sse-starlette's keep-alive pings while a request queues
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._kind = value or "message"
        elif field == "error":
            # llama-server reports an error inside a stream as an "error: {...}" line.
            self._kind = "error"
            self._data.append(value)
        return None

    def flush(self) -> tuple[str, str] | None:
        return self._dispatch()

    def _dispatch(self) -> tuple[str, str] | None:
        if not self._data:
            self._kind = "message"
            return None
        event = (self._kind, "\n".join(self._data))
        self._data, self._kind = [], "message"
        return event


def _error_details(text: str) -> tuple[str, str | None, dict[str, Any]]:
    """(message, code, raw error object) from the error bodies of OpenAI, vLLM, llama.cpp and FastAPI."""
    try:
        payload = json.loads(text)
    except ValueError:
        return text.strip()[:500] or "(empty body)", None, {}
    if not isinstance(payload, dict):
        return str(payload)[:500], None, {}
    error = payload.get("error", payload)
    if isinstance(error, str):
        return error, None, payload
    if not isinstance(error, dict):
        return str(error)[:500], None, payload
    message = error.get("message") or error.get("detail") or payload.get("message") or payload.get("detail")
    if isinstance(message, list):  # FastAPI validation errors
        message = "; ".join(f"{'.'.join(map(str, m.get('loc', [])))}: {m.get('msg')}" if isinstance(m, dict) else str(m)
                            for m in message)
    code = error.get("code") if isinstance(error.get("code"), str) else error.get("type")
    return str(message or text)[:1000], code if isinstance(code, str) else None, error


def _first_int(pattern: str, text: str) -> int | None:
    match = re.search(pattern, text, flags=re.IGNORECASE)
    return int(match.group(1)) if match else None


def _context_error(message: str, code: str | None, error: Mapping[str, Any], max_tokens: int,
                   known_window: int) -> ContextWindowExceededError | None:
    """The server's "prompt too long" (each server words it differently) as the engine's error."""
    lowered = message.lower()
    window = _first_int(r"maximum context length is (\d+)", message)
    if window is None and isinstance(error.get("n_ctx"), int):
        window = error["n_ctx"]  # llama-server's exceed_context_size_error
    is_context = (code in ("context_length_exceeded", "exceed_context_size_error") or window is not None
                  or "context size" in lowered or "context window" in lowered or "context length" in lowered)
    if not is_context:
        return None
    prompt = _first_int(r"(\d+) (?:in your prompt|in the messages|input tokens)", message)
    if prompt is None and isinstance(error.get("n_prompt_tokens"), int):
        prompt = error["n_prompt_tokens"]
    completion = _first_int(r"(\d+) (?:for|in) the completion", message)
    return ContextWindowExceededError(prompt or 0, completion if completion is not None else max_tokens,
                                      window or known_window)


def _http_error(status: int, body: str, url: str, path: str, model: str | None) -> ServerError:
    """A clear error for an HTTP error answer (context overflows are handled before this)."""
    message, _code, _error = _error_details(body)
    where = f"{url}{path}"
    if status in (401, 403):
        return ServerAuthenticationError(
            f"the server at {url} refused the request (HTTP {status}: {message}). Fix: pass api_key=... "
            "(or set $HAMMER_SERVER_API_KEY) matching the server's --api-key / --api_key.",
            url=url, status_code=status, detail=message)
    lowered = message.lower()
    if status == 404 and "model" in lowered and ("exist" in lowered or "not found" in lowered):
        return ServerModelNotFoundError(
            f"the server at {url} does not serve model {model!r} ({message}). Fix: pass the name the server "
            "lists at /v1/models (vLLM: --served-model-name; llama-cpp-python: --model_alias).",
            url=url, model=model)
    if status == 404:
        return ServerHTTPError(
            f"{where} does not exist (HTTP 404: {message}). Fix: base_url must be the server root or its /v1 "
            "URL (e.g. http://127.0.0.1:8080/v1), of a server with an OpenAI-compatible /v1/completions.",
            url=url, status_code=status, detail=message)
    if status in (502, 503, 504):
        return ServerUnavailableError(
            f"the server at {url} is unavailable (HTTP {status} on {path}: {message}), still after the retries. "
            "Fix: wait until it has loaded its model, or check the proxy in front of it; raise max_retries to "
            "wait longer.", url=url, status_code=status)
    if status == 429:
        return ServerHTTPError(
            f"the server at {url} is rate limiting (HTTP 429 on {path}: {message}), still after the retries. "
            "Fix: send fewer concurrent requests, or raise max_retries / max_backoff.",
            url=url, status_code=status, detail=message)
    return ServerHTTPError(f"the server at {url} answered HTTP {status} on {path}: {message}",
                           url=url, status_code=status, detail=message)


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare for inference servers; fall back to our own backoff


def _is_event_stream(response: httpx.Response) -> bool:
    return "text/event-stream" in response.headers.get("content-type", "")


class _CompletionReader:
    """Accumulates one streamed completion: text, finish reason, the server's usage if it sends one."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.parts: list[str] = []
        self.pieces = 0
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False
        self.events = 0
        self.started = time.perf_counter()
        self.first: float | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def on_event(self, kind: str, data: str) -> str:
        """The text an event adds ("" for none); raises for an error event."""
        self.events += 1
        if kind == "error":
            raise self._error(data)
        if data.strip() == "[DONE]":
            self.done = True
            return ""
        try:
            payload = json.loads(data)
        except ValueError as exc:
            raise ServerStreamError(
                f"the server at {self.url} sent a malformed stream event ({data[:200]!r}). Fix: check that "
                "base_url points at an OpenAI-compatible server.", url=self.url, partial_text=self.text) from exc
        return self.on_payload(payload)

    def on_payload(self, payload: Any) -> str:
        if not isinstance(payload, dict):
            raise ServerStreamError(f"the server at {self.url} sent an unexpected event: {str(payload)[:200]!r}",
                                    url=self.url, partial_text=self.text)
        if "error" in payload:  # vLLM reports errors inside the stream as a data event
            raise self._error(json.dumps(payload))
        if isinstance(payload.get("usage"), dict):
            self.usage = payload["usage"]
        added = []
        for choice in payload.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            piece = choice.get("text") or ""
            if piece:
                added.append(piece)
            if choice.get("finish_reason"):
                self.finish = str(choice["finish_reason"])
        text = "".join(added)
        if text:
            self.first = self.first or time.perf_counter()
            self.parts.append(text)
            self.pieces += 1
        return text

    def _error(self, data: str) -> ServerError:
        message, _code, _error = _error_details(data)
        return ServerStreamError(f"the server at {self.url} reported an error mid-stream: {message}",
                                 url=self.url, partial_text=self.text)

    def final(self, prompt_tokens: int | None, max_tokens: int) -> GenerationChunk:
        """The closing chunk (usage, finish reason, timings); raises if the answer never finished."""
        if self.finish is None or self.finish == "abort":
            how = ("closed the stream with [DONE] but no finish_reason" if self.done
                   else "aborted the request" if self.finish == "abort" else "ended the stream without a finish_reason")
            raise ServerStreamError(
                f"the server at {self.url} {how}, after {len(self.text)} characters: the answer is incomplete "
                "(.partial_text holds it). llama-cpp-python's server does this to a streaming request whenever "
                "another request arrives, unless started with --interrupt_requests False. Fix: start it so, "
                "or retry the call.", url=self.url, partial_text=self.text)
        done = time.perf_counter()
        finish: Literal["stop", "length"] = "length" if self.finish == "length" else "stop"
        usage = self.usage or {}
        # Servers without usage in streams (llama-cpp-python) send one token per event; +1 for the end token.
        completion = usage.get("completion_tokens")
        if not isinstance(completion, int):
            completion = max_tokens if finish == "length" else self.pieces + 1
        prompt = usage.get("prompt_tokens") if isinstance(usage.get("prompt_tokens"), int) else prompt_tokens
        return GenerationChunk(
            text="", finish_reason=finish, usage=Usage(prompt_tokens=prompt or 0, completion_tokens=completion),
            timings={"time_to_first_token": (self.first or done) - self.started, "total": done - self.started},
        )


# ------------------------------------------------------------------------- sans-I/O requests
# Each server operation is written once, as a generator free of I/O (a "core", like HammerEngine._run):
# it yields the requests below and GenerationChunks for the caller, and gets each request's result back
# from send(), or its exception from throw(), so that the core's own except clauses map httpx errors.
# OpenAICompatibleBackend._drive carries the requests out with httpx.Client and time.sleep, _adrive with
# the loop's httpx.AsyncClient and asyncio.sleep: retries, error mapping and stream decoding exist once.
_T = TypeVar("_T")
_Core = Generator[Any, Any, _T]


@dataclass(frozen=True)
class _Send:
    """Send a request; the reply is the response, its body not read yet.

    The driver closes every response it opened once the core has ended or been abandoned.
    """

    method: str
    path: str
    body: Any = None


@dataclass(frozen=True)
class _Read:
    """Read the whole body (the reply, bytes), then close the response."""

    response: httpx.Response


@dataclass
class _Lines:
    """The next line of the body (the reply), or None after the last one, the response then closed.

    The core yields the same object for every line of a response: it holds the driver's line iterator.
    """

    response: httpx.Response
    iterator: Any = None


@dataclass(frozen=True)
class _Sleep:
    """Wait before a retry."""

    seconds: float


@dataclass(frozen=True)
class _Setup:
    """A one-off blocking step (discovery, the grammar probe) run under the setup lock that sync callers share.

    The async driver runs it in a worker thread: held across awaits, that threading lock could block the
    event loop, or deadlock it if sync code on the loop's thread asked for it.
    """

    step: Callable[[], Any]


_DONE = object()  # _advance's answer once a core has returned


def _advance(core: _Core[Any], reply: Any, failure: Exception | None) -> Any:
    """The core's next request or chunk, given the last request's result (or exception); _DONE at its end."""
    try:
        return core.throw(failure) if failure is not None else core.send(reply)
    except StopIteration:
        return _DONE


def _keep_result(core: _Core[_T], result: list[_T]) -> _Core[None]:
    """``core``, storing what it returns (async generators, hence the drivers, cannot return a value)."""
    result.append((yield from core))


# -------------------------------------------------------------------------------------- backend
class OpenAICompatibleBackend(Backend):
    """Hammer on an OpenAI-compatible server (vLLM, llama-server, llama-cpp-python), over ``/v1/completions``.

    Args:
        base_url: the server root or its ``/v1`` URL (default ``$HAMMER_SERVER_URL``).
        settings: a :class:`ServerBackendSettings`; or pass its fields as keywords: ``model``,
            ``api_key``, ``timeout``, ``connect_timeout``, ``max_retries``, ``retry_backoff``,
            ``grammar_protocol`` (``"auto"``, ``"llama_cpp"``, ``"vllm"``, ``"vllm_guided"``, ``"none"``),
            ``server_kind``, ``context_window``, ``token_counting``, ``extra_body``, ...

    Nothing is contacted until the first call (or :meth:`load`), which checks the model name against
    ``/v1/models`` and learns the server's kind and context window.

    Example:
        >>> from hammer_plugins import HammerEngine
        >>> backend = OpenAICompatibleBackend("http://127.0.0.1:8080", model="hammer", api_key="sk-local")
        >>> engine = HammerEngine(backend=backend)        # calls go to the server; no lock, real concurrency
        >>> backend.settings.grammar_protocol, backend.settings.max_retries
        ('auto', 2)
    """

    name = "server"
    native_async = True  # the engine may call astream/acount_tokens/aload instead of a worker thread

    def __init__(self, base_url: str | None = None, *, settings: ServerBackendSettings | None = None, **options: Any) -> None:
        super().__init__()
        if settings is None:
            url = base_url or os.environ.get("HAMMER_SERVER_URL")
            if not url:
                raise ValueError("the server backend needs base_url (e.g. 'http://127.0.0.1:8080/v1'). Fix: pass "
                                 "base_url=..., or set $HAMMER_SERVER_URL")
            if options.get("api_key") is None and os.environ.get("HAMMER_SERVER_API_KEY"):
                options["api_key"] = os.environ["HAMMER_SERVER_API_KEY"]
            settings = ServerBackendSettings(base_url=url, **options)
        elif base_url is not None or options:
            raise ValueError("pass either settings= or base_url/keyword options, not both")
        self.settings = settings
        self.stats = ServerStats()
        self._stats_lock = threading.Lock()
        self._state_lock = threading.Lock()  # quick bookkeeping only: the event loop may take it
        self._setup_lock = threading.RLock()  # discovery and the grammar probe: slow, network-bound
        self._client: httpx.Client | None = None
        self._async_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary())
        self._loaded = False
        self._model: str | None = settings.model
        self._kind: ServerKind = settings.server_kind
        self._window: int | None = settings.context_window
        self._window_source = "setting" if settings.context_window else "unknown"
        self._protocol: GrammarProtocol | None = (
            settings.grammar_protocol if settings.grammar_protocol == "none"
            or (settings.grammar_protocol != "auto" and not settings.verify_grammar) else None)
        self._tokenize_path: str | None = None
        self._token_cache: OrderedDict[str, int] = OrderedDict()

    # ----------------------------------------------------------------------------- properties
    @property
    def base_url(self) -> str:
        return self.settings.base_url

    @property
    def model_name(self) -> str:
        # Never loads: frameworks read the name of models they construct thousands of times.
        return self._model or f"server model at {self.base_url}"

    @property
    def server_kind(self) -> ServerKind:
        """What the server was detected to be (``"auto"`` until loaded)."""
        return self._kind

    @property
    def grammar_protocol(self) -> GrammarProtocol | None:
        """The grammar protocol in use; ``None`` until the first constrained call resolves it."""
        return self._protocol

    @property
    def is_loaded(self) -> bool:
        """Whether the server has been checked (``context_window`` then needs no request)."""
        return self._loaded

    @property
    def context_window(self) -> int:
        self.load()
        return self._window or ASSUMED_CONTEXT_WINDOW

    def info(self) -> dict[str, Any]:
        """Facts for ``hammer info``; does not contact the server."""
        return {
            **super().info(), "base_url": self.base_url, "server_kind": self._kind,
            "grammar_protocol": self._protocol or self.settings.grammar_protocol,
            "context_window": self._window or ASSUMED_CONTEXT_WINDOW,
            "context_window_source": self._window_source if self._window else "assumed",
            "token_counting": self.settings.token_counting, "stats": vars(self.stats).copy(),
        }

    def with_options(self, **changes: Any) -> OpenAICompatibleBackend:
        """A new backend with some settings changed, keeping what was learned about the same server.

        Example:
            >>> OpenAICompatibleBackend("http://127.0.0.1:8080").with_options(timeout=5).settings.timeout
            5.0
        """
        settings = ServerBackendSettings.model_validate({**self.settings.model_dump(), **changes})
        clone = OpenAICompatibleBackend(settings=settings)
        if (settings.base_url, settings.model, settings.server_kind) == (
                self.settings.base_url, self.settings.model, self.settings.server_kind):
            with self._setup_lock:
                clone._loaded, clone._model, clone._kind = self._loaded, self._model, self._kind
                clone._tokenize_path = self._tokenize_path
                if settings.context_window is None:
                    clone._window, clone._window_source = self._window, self._window_source
                if settings.grammar_protocol in ("auto", self._protocol):
                    clone._protocol = clone._protocol or self._protocol
        return clone

    # -------------------------------------------------------------------------------- clients
    def _client_options(self) -> dict[str, Any]:
        httpx = _import_httpx()
        headers = {"User-Agent": "hammer-plugins", **self.settings.headers}
        if self.settings.api_key is not None:
            headers["Authorization"] = f"Bearer {self.settings.api_key.get_secret_value()}"
        n = self.settings.max_connections
        return {
            "headers": headers, "trust_env": self.settings.trust_env,
            "timeout": httpx.Timeout(self.settings.timeout, connect=self.settings.connect_timeout),
            "limits": httpx.Limits(max_connections=n, max_keepalive_connections=n),
        }

    def _sync_client(self) -> httpx.Client:
        client = self._client
        if client is None or client.is_closed:
            with self._state_lock:
                if self._client is None or self._client.is_closed:
                    self._client = _import_httpx().Client(**self._client_options())
                client = self._client
        return client

    def _async_client(self) -> httpx.AsyncClient:
        # An AsyncClient's pooled connections belong to the loop that opened them: one client per loop.
        loop = asyncio.get_running_loop()
        with self._state_lock:
            client = self._async_clients.get(loop)
            if client is None or client.is_closed:
                client = _import_httpx().AsyncClient(**self._client_options())
                self._async_clients[loop] = client
        return client

    def close(self) -> None:
        """Close the sync connection pool (the backend reopens one if used again)."""
        with self._state_lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    async def aclose(self) -> None:
        """Close this event loop's async connection pool, and the sync one."""
        with self._state_lock:
            client = self._async_clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()
        self.close()

    def __enter__(self) -> OpenAICompatibleBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> OpenAICompatibleBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _count(self, field: str, n: int = 1) -> None:
        with self._stats_lock:
            setattr(self.stats, field, getattr(self.stats, field) + n)
            if field == "in_flight":
                self.stats.peak_in_flight = max(self.stats.peak_in_flight, self.stats.in_flight)

    # ---------------------------------------------------------------------------------- drivers
    def _drive(self, core: _Core[Any]) -> Iterator[GenerationChunk]:
        """Run a core on the sync client, in the calling thread; pass its chunks on."""
        opened: list[httpx.Response] = []
        reply: Any = None
        failure: Exception | None = None
        try:
            while (item := _advance(core, reply, failure)) is not _DONE:
                reply, failure = None, None
                if isinstance(item, GenerationChunk):
                    yield item
                    continue
                try:
                    reply = self._execute(item, opened)
                except Exception as exc:  # thrown into the core: its except clauses map or retry it
                    failure = exc
        finally:
            core.close()
            for response in opened:
                response.close()  # a caller that stopped reading drops the connection: the server cancels

    async def _adrive(self, core: _Core[Any]) -> AsyncIterator[GenerationChunk]:
        """Run a core on the event loop's async client, with no worker thread; pass its chunks on."""
        opened: list[httpx.Response] = []
        reply: Any = None
        failure: Exception | None = None
        try:
            while (item := _advance(core, reply, failure)) is not _DONE:
                reply, failure = None, None
                if isinstance(item, GenerationChunk):
                    yield item
                    continue
                try:
                    reply = await self._aexecute(item, opened)
                except Exception as exc:  # thrown into the core: its except clauses map or retry it
                    failure = exc
        finally:
            core.close()
            for response in opened:
                await response.aclose()  # a caller that stopped reading drops the connection: the server cancels

    def _execute(self, item: object, opened: list[httpx.Response]) -> Any:
        """Carry out one request of a core, blocking."""
        match item:
            case _Send(method, path, body):
                client = self._sync_client()
                response = client.send(client.build_request(method, self.base_url + path, json=body), stream=True)
                opened.append(response)
                return response
            case _Read(response):
                try:
                    return response.read()
                finally:
                    response.close()
            case _Lines() as lines:
                lines.iterator = lines.iterator or lines.response.iter_lines()
                if (line := next(lines.iterator, None)) is None:
                    lines.response.close()
                return line
            case _Sleep(seconds):
                time.sleep(seconds)
            case _Setup(step):
                return step()
            case _:
                raise TypeError(f"not a request: {item!r}")
        return None

    async def _aexecute(self, item: object, opened: list[httpx.Response]) -> Any:
        """Carry out one request of a core, on the event loop."""
        match item:
            case _Send(method, path, body):
                client = self._async_client()
                response = await client.send(client.build_request(method, self.base_url + path, json=body), stream=True)
                opened.append(response)
                return response
            case _Read(response):
                try:
                    return await response.aread()
                finally:
                    await response.aclose()
            case _Lines() as lines:
                lines.iterator = lines.iterator or lines.response.aiter_lines()
                if (line := await anext(lines.iterator, None)) is None:
                    await lines.response.aclose()
                return line
            case _Sleep(seconds):
                await asyncio.sleep(seconds)
            case _Setup(step):
                return await asyncio.to_thread(step)
            case _:
                raise TypeError(f"not a request: {item!r}")
        return None

    def _call(self, core: _Core[_T]) -> _T:
        """Run a core that streams nothing (a JSON request, a token count); return its result."""
        result: list[_T] = []
        for _ in self._drive(_keep_result(core, result)):
            pass
        return result[0]

    async def _acall(self, core: _Core[_T]) -> _T:
        """Async :meth:`_call`, on the event loop."""
        result: list[_T] = []
        async for _ in self._adrive(_keep_result(core, result)):
            pass
        return result[0]

    # ---------------------------------------------------------------------- sending, retries
    def _backoff(self, attempt: int, retry_after: str | None) -> float:
        told = _retry_after(retry_after)
        base = self.settings.retry_backoff * (2 ** attempt) * (1 + 0.25 * random.random())
        return min(self.settings.max_backoff, max(base, told or 0.0))

    def _unreachable(self, path: str, exc: Exception, attempts: int) -> ServerUnavailableError:
        return ServerUnavailableError(
            f"could not connect to the inference server at {self.base_url} ({path}: {type(exc).__name__}: "
            f"{exc or 'connection failed'}) after {attempts} attempt(s). Fix: start the server (see docs/server.md) "
            "or correct base_url.", url=self.base_url)

    def _timed_out(self, path: str, exc: Exception, partial: str = "") -> ServerTimeoutError:
        return ServerTimeoutError(
            f"the server at {self.base_url} sent nothing for {self.settings.timeout:g} s ({path}: "
            f"{type(exc).__name__}); not retried, as it may still be working on the request. Fix: raise timeout= "
            "(it covers queueing and time to first token), or lower the load on the server.",
            url=self.base_url, partial_text=partial)

    def _broken(self, path: str, exc: Exception, attempts: int = 1) -> ServerUnavailableError:
        return ServerUnavailableError(
            f"the server at {self.base_url} closed the connection before answering ({path}: {type(exc).__name__}: "
            f"{exc}) after {attempts} attempt(s). Fix: check the server's log.", url=self.base_url)

    def _fail(self, status: int, body: str, path: str, max_tokens: int = 0) -> HammerError:
        message, code, error = _error_details(body)
        if status in (400, 413, 422):
            overflow = _context_error(message, code, error, max_tokens, self._window or ASSUMED_CONTEXT_WINDOW)
            if overflow is not None:
                self._learn_window(overflow.context_window)
                return overflow
        return _http_error(status, body, self.base_url, path, self._model)

    def _send(self, method: str, path: str, body: Any = None, *, allow: tuple[int, ...] = (),
              max_tokens: int = 0) -> _Core[httpx.Response]:
        """Send with the retry policy; return the response (2xx or ``allow``ed), its body still to read."""
        httpx = _import_httpx()
        attempt = 0
        while True:
            self._count("requests")
            retry_after: str | None = None
            try:
                response = yield _Send(method, path, body)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if attempt >= self.settings.max_retries:
                    raise self._unreachable(path, exc, attempt + 1) from exc
            except httpx.TimeoutException as exc:
                raise self._timed_out(path, exc) from exc
            except httpx.TransportError as exc:
                # Closed before one byte of answer: most often a pooled keep-alive connection the server
                # had already dropped. Completions have no side effects, so sending again is safe.
                if attempt >= self.settings.max_retries:
                    raise self._broken(path, exc, attempt + 1) from exc
            else:
                if response.status_code < 400 or response.status_code in allow:
                    return response
                try:
                    text = (yield _Read(response)).decode("utf-8", errors="replace")
                except httpx.HTTPError:
                    text = ""
                if response.status_code not in _RETRY_STATUSES or attempt >= self.settings.max_retries:
                    raise self._fail(response.status_code, text, path, max_tokens)
                retry_after = response.headers.get("retry-after")
            # Here only when a retry is due (every other way raised or returned above).
            self._count("retries")
            yield _Sleep(self._backoff(attempt, retry_after))
            attempt += 1

    def _json(self, method: str, path: str, body: Any = None, *, allow: tuple[int, ...] = ()) -> _Core[tuple[int, Any]]:
        """Send and read the whole answer: its status and JSON (None if it has none)."""
        httpx = _import_httpx()
        response = yield from self._send(method, path, body, allow=allow)
        try:
            content = yield _Read(response)
        except httpx.TimeoutException as exc:
            raise self._timed_out(path, exc) from exc
        except httpx.TransportError as exc:
            raise self._broken(path, exc) from exc
        try:
            return response.status_code, json.loads(content) if content else None
        except ValueError:
            return response.status_code, None

    # ------------------------------------------------------------------------------ discovery
    def load(self) -> None:
        """Check the server once: the model it serves, its kind and context window."""
        if self._loaded:
            return
        with self._setup_lock:
            if not self._loaded:
                self._call(self._discover())
                self._loaded = True

    async def aload(self) -> None:
        """Async :meth:`load` (a one-off handful of small requests, run in a worker thread)."""
        if not self._loaded:
            await asyncio.to_thread(self.load)

    def _discover(self) -> _Core[None]:
        """The core of :meth:`load`."""
        status, payload = yield from self._json("GET", "/v1/models", allow=(404, 405))
        entries = [e for e in payload.get("data", []) if isinstance(e, dict)] if isinstance(payload, dict) else []
        ids = [str(e.get("id")) for e in entries]
        wanted = self.settings.model
        if status != 200 or not entries:
            if wanted is None:
                raise ServerModelNotFoundError(
                    f"the server at {self.base_url} lists no models at /v1/models. Fix: pass model=<name>.",
                    url=self.base_url)
        elif wanted is None:
            if len(ids) != 1:
                raise ServerModelNotFoundError(
                    f"the server at {self.base_url} serves several models {ids}. Fix: pass model=<one of them>.",
                    url=self.base_url, available=ids)
            self._model = ids[0]
        elif wanted not in ids:
            # llama-cpp-python silently answers an unknown name with its default model: check here.
            raise ServerModelNotFoundError(
                f"the server at {self.base_url} does not serve model {wanted!r}; it serves {ids}. Fix: pass "
                f"model={ids[0]!r}, or start the server under that name (vLLM: --served-model-name; "
                "llama-cpp-python: --model_alias; llama-server: --alias).",
                url=self.base_url, model=wanted, available=ids)
        entry = next((e for e in entries if e.get("id") == self._model), {})
        props: dict[str, Any] | None = None
        if self._kind == "auto":
            owner = entry.get("owned_by")
            if owner == "vllm":
                self._kind = "vllm"
            elif owner == "llamacpp":
                self._kind = "llama_server"
            else:
                props = yield from self._props()
                if props is not None:
                    self._kind = "llama_server"
                else:
                    count_status, _ = yield from self._json("POST", "/extras/tokenize/count", {"input": "x"},
                                                            allow=(404, 405, 422))
                    self._kind = "llama_cpp_python" if count_status == 200 else "openai"
        if self._window is None:
            window: Any = None
            if self._kind == "vllm":
                window = entry.get("max_model_len")
            elif self._kind == "llama_server":
                props = props if props is not None else (yield from self._props())
                settings = (props or {}).get("default_generation_settings") or {}
                window = settings.get("n_ctx") or (props or {}).get("n_ctx")
            if isinstance(window, int) and window > 0:
                self._window, self._window_source = window, "server"
        self._tokenize_path = {"vllm": "/tokenize", "llama_server": "/tokenize",
                               "llama_cpp_python": "/extras/tokenize/count"}.get(self._kind)

    def _props(self) -> _Core[dict[str, Any] | None]:
        status, payload = yield from self._json("GET", "/props", allow=(404, 405))
        return payload if status == 200 and isinstance(payload, dict) else None

    def _learn_window(self, window: int) -> None:
        if window > 0 and self._window_source != "setting":
            self._window, self._window_source = window, "learned"

    # ---------------------------------------------------------------------------- tokenizing
    def _cached_count(self, text: str) -> int | None:
        with self._state_lock:
            n = self._token_cache.get(text)
            if n is not None:
                self._token_cache.move_to_end(text)
            return n

    def _remember_count(self, text: str, n: int) -> int:
        with self._state_lock:
            self._token_cache[text] = n
            while len(self._token_cache) > 256:
                self._token_cache.popitem(last=False)
        return n

    def _tokenize_request(self) -> tuple[str, dict[str, Any]] | None:
        if self.settings.token_counting == "estimate" or self._tokenize_path is None:
            return None
        if self._kind == "vllm":
            return self._tokenize_path, {"model": self._model, "add_special_tokens": False}
        if self._kind == "llama_server":
            return self._tokenize_path, {"add_special": False, "parse_special": True}
        return self._tokenize_path, {"model": self._model}

    def _read_count(self, status: int, payload: Any, text: str) -> int:
        if status != 200 or not isinstance(payload, dict):
            self._tokenize_path = None  # no such endpoint after all: estimate from now on
            return estimate_tokens(text)
        if isinstance(payload.get("count"), int):
            return self._remember_count(text, payload["count"])
        if isinstance(payload.get("tokens"), list):
            return self._remember_count(text, len(payload["tokens"]))
        self._tokenize_path = None
        return estimate_tokens(text)

    def _tokenize_body(self, extra: dict[str, Any], text: str) -> dict[str, Any]:
        key = {"vllm": "prompt", "llama_server": "content"}.get(self._kind, "input")
        return {**extra, key: text}

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` from the server's tokenizer (cached), or an estimate where it has none."""
        return self._call(self._count_tokens(text))

    async def acount_tokens(self, text: str) -> int:
        """Async :meth:`count_tokens`, on the event loop."""
        return await self._acall(self._count_tokens(text))

    def _count_tokens(self, text: str) -> _Core[int]:
        """The core of :meth:`count_tokens` and :meth:`acount_tokens`."""
        cached = self._cached_count(text)
        if cached is not None:
            return cached
        if not self._loaded:
            yield _Setup(self.load)
        route = self._tokenize_request()
        if route is None:
            return estimate_tokens(text)
        path, extra = route
        status, payload = yield from self._json("POST", path, self._tokenize_body(extra, text), allow=(404, 405, 422))
        return self._read_count(status, payload, text)

    # ------------------------------------------------------------------------------- grammars
    @staticmethod
    def _grammar_fields(protocol: GrammarProtocol | None, grammar: str | None) -> dict[str, Any]:
        if grammar is None or protocol in (None, "none", "auto"):
            return {}
        if protocol == "llama_cpp":
            return {"grammar": grammar}
        if protocol == "vllm":
            return {"structured_outputs": {"grammar": grammar}}
        return {"guided_grammar": grammar}

    def _candidates(self) -> list[GrammarProtocol]:
        wanted = self.settings.grammar_protocol
        if wanted != "auto":
            return [wanted]
        if self._kind in ("llama_cpp_python", "llama_server"):
            return ["llama_cpp"]
        if self._kind == "vllm":
            return ["vllm", "vllm_guided"]  # structured_outputs since vLLM 0.10.2; guided_grammar before
        return ["llama_cpp", "vllm", "vllm_guided"]

    def resolve_grammar_protocol(self) -> GrammarProtocol:
        """Find (once) the grammar protocol the server applies, by a probe; raise if it applies none.

        The probe asks for a short completion under a grammar that allows one fixed sentence: a server
        that ignores the grammar field answers something else.
        """
        if self._protocol is not None:
            return self._protocol
        with self._setup_lock:
            if self._protocol is not None:
                return self._protocol
            self.load()
            tried: list[str] = []
            for candidate in self._candidates():
                outcome = self._probe(candidate)
                if outcome is None:
                    self._protocol = candidate
                    return candidate
                tried.append(f"{candidate}: {outcome}")
            raise GrammarNotSupportedError(
                f"the server at {self.base_url} ({self._kind}) did not apply a grammar under any protocol tried "
                f"({'; '.join(tried)}). Fix: set grammar_protocol to what the server supports ('llama_cpp' for "
                "llama-server and llama-cpp-python, 'vllm' for vLLM >= 0.10.2, 'vllm_guided' for older vLLM), or "
                "run unconstrained with HammerEngine(constrained=False) (the parser still reads lenient output).",
                url=self.base_url)

    def _probe(self, protocol: GrammarProtocol) -> str | None:
        """None if the server applied the probe grammar under ``protocol``, else what happened."""
        settings = GenerationSettings(max_tokens=32, temperature=0.0)
        body = self._completion_body(_PROBE_PROMPT, settings, self._grammar_fields(protocol, _PROBE_GRAMMAR))
        try:
            text = "".join(chunk.text for chunk in self._drive(self._completion(body, _PROBE_PROMPT, settings)))
        except ServerHTTPError as exc:
            return f"HTTP {exc.status_code}: {exc.detail[:200]}"
        return None if text.strip() == _PROBE_TEXT else f"answered {text[:60]!r}, ignoring the grammar"

    # ----------------------------------------------------------------------------- completions
    def _completion_body(self, prompt: str, settings: GenerationSettings, grammar_fields: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "prompt": prompt, "max_tokens": settings.max_tokens, "temperature": settings.temperature,
            "top_p": settings.top_p, "stop": [*self.settings.stop, *settings.stop], "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self._model is not None:
            body["model"] = self._model
        if settings.seed is not None:
            body["seed"] = settings.seed
        if self._kind in ("llama_cpp_python", "llama_server"):
            body["top_k"] = settings.top_k
            body["repeat_penalty"] = settings.repeat_penalty
            if self._kind == "llama_server":  # llama-cpp-python's server fixes the window at start-up (64)
                body["repeat_last_n"] = getattr(settings, "repeat_last_n", 64)
        elif self._kind == "vllm":
            body["top_k"] = settings.top_k if settings.top_k > 0 else -1  # vLLM spells "disabled" -1
            # Not repeat_penalty: vLLM's repetition_penalty covers the whole prompt, Hammer's tools block
            # included, not llama.cpp's last-64-token window, so it would push the model away from the
            # names and values it must copy from the prompt. Opt in with extra_body={"repetition_penalty": x}.
        return {**body, **grammar_fields, **self.settings.extra_body}

    def stream(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None = None) -> Iterator[GenerationChunk]:
        """Stream the answer. No lock: the server schedules concurrent requests (threads share one pool)."""
        return self._stream(prompt, settings, grammar)

    def _stream(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None) -> Iterator[GenerationChunk]:
        return self._drive(self._generate(prompt, settings, grammar))

    def astream(self, prompt: str, settings: GenerationSettings,
                grammar: Grammar | None = None) -> AsyncIterator[GenerationChunk]:
        """Native async :meth:`stream`: runs on the event loop, concurrently with other calls."""
        return self._adrive(self._generate(prompt, settings, grammar))

    def _generate(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None) -> _Core[None]:
        """The core of :meth:`stream` and :meth:`astream`: the one-off setup if still due, then the completion."""
        if not self._loaded:
            yield _Setup(self.load)
        protocol: GrammarProtocol | None = None
        if grammar is not None:
            protocol = self._protocol if self._protocol is not None else (yield _Setup(self.resolve_grammar_protocol))
        # Servers read llama.cpp's grammar notation (llama-server natively, vLLM through xgrammar).
        body = self._completion_body(prompt, settings, self._grammar_fields(protocol, grammar.gbnf if grammar else None))
        yield from self._completion(body, prompt, settings)

    def _completion(self, body: dict[str, Any], prompt: str, settings: GenerationSettings) -> _Core[None]:
        """One completion: its text as it streams, then a closing chunk with usage and finish reason."""
        httpx = _import_httpx()
        path = "/v1/completions"
        reader = _CompletionReader(self.base_url)
        decoder = _SSEDecoder()
        self._count("in_flight")
        try:
            response = yield from self._send("POST", path, body, max_tokens=settings.max_tokens)
            if not _is_event_stream(response):
                reader.on_payload(json.loads((yield _Read(response)) or b"null"))
                if reader.text:
                    yield GenerationChunk(text=reader.text)
            else:
                lines = _Lines(response)
                while (line := (yield lines)) is not None:
                    event = decoder.feed(line)
                    text = reader.on_event(*event) if event else ""
                    if text:
                        yield GenerationChunk(text=text)
                event = decoder.flush()
                if event:
                    text = reader.on_event(*event)
                    if text:
                        yield GenerationChunk(text=text)
        except httpx.TimeoutException as exc:
            self._count("errors")
            raise self._timed_out(path, exc, reader.text) from exc
        except httpx.TransportError as exc:
            self._count("errors")
            raise self._stream_broke(exc, reader) from exc
        except HammerError:
            self._count("errors")
            raise
        finally:
            self._count("in_flight", -1)
        if reader.events == 0:
            yield from self._diagnose(body, settings.max_tokens)
        usage = reader.usage or {}
        prompt_tokens = None if isinstance(usage.get("prompt_tokens"), int) else (yield from self._count_tokens(prompt))
        yield self._final(reader, prompt_tokens, settings.max_tokens)

    # An empty stream (200, then not one event) means the server failed after it had started streaming:
    # llama-cpp-python checks the context and compiles the grammar only then, so the error never reaches
    # the client. Asking again without streaming and for one token makes the server say what is wrong
    # (it fails before generating, so this costs nothing); nothing had streamed, so nothing is repeated.
    @staticmethod
    def _diagnostic_body(body: dict[str, Any]) -> dict[str, Any]:
        return {**{k: v for k, v in body.items() if k != "stream_options"}, "stream": False, "max_tokens": 1}

    @staticmethod
    def _with_max_tokens(error: ContextWindowExceededError, max_tokens: int) -> ContextWindowExceededError:
        return ContextWindowExceededError(error.prompt_tokens, max_tokens, error.context_window)

    def _diagnose(self, body: dict[str, Any], max_tokens: int) -> _Core[None]:
        try:
            yield from self._json("POST", "/v1/completions", self._diagnostic_body(body))
        except ContextWindowExceededError as exc:
            self._count("errors")
            raise self._with_max_tokens(exc, max_tokens) from None
        except ServerError:
            self._count("errors")
            raise

    def _final(self, reader: _CompletionReader, prompt_tokens: int | None, max_tokens: int) -> GenerationChunk:
        try:
            chunk = reader.final(prompt_tokens, max_tokens)
        except ServerStreamError:
            self._count("errors")
            raise
        self._count("completions")
        return chunk

    def _stream_broke(self, exc: Exception, reader: _CompletionReader) -> ServerStreamError:
        cause = ("The server stopped, a proxy cut the connection, or (llama-cpp-python) another request arrived: "
                 "its server cuts a running stream then unless started with --interrupt_requests False"
                 if self._kind in ("llama_cpp_python", "auto") else "The server stopped or a proxy cut the connection")
        return ServerStreamError(
            f"the connection to the server at {self.base_url} broke mid-stream ({type(exc).__name__}: {exc}) after "
            f"{len(reader.text)} characters: the answer is incomplete (.partial_text holds it). {cause}; not "
            "retried, as the text had already streamed. Fix: check the server, then retry the call.",
            url=self.base_url, partial_text=reader.text)


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


__all__ = [
    "ASSUMED_CONTEXT_WINDOW",
    "DEFAULT_STOP",
    "GrammarNotSupportedError",
    "GrammarProtocol",
    "LlamaCppPythonServer",
    "OpenAICompatibleBackend",
    "ServerAuthenticationError",
    "ServerBackendSettings",
    "ServerError",
    "ServerHTTPError",
    "ServerKind",
    "ServerModelNotFoundError",
    "ServerStats",
    "ServerStreamError",
    "ServerTimeoutError",
    "ServerUnavailableError",
    "TokenCounting",
    "estimate_tokens",
]
