"""The server backend: serve Hammer from an OpenAI-compatible inference server: vLLM, llama.cpp's ``llama-server``, or
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
    >>> from hammer_plugins.backends.remote import OpenAICompatibleBackend
    >>> backend = OpenAICompatibleBackend("http://127.0.0.1:8080/v1", model="hammer")  # nothing contacted yet
    >>> backend.base_url, backend.name, backend.model_name
    ('http://127.0.0.1:8080', 'server', 'hammer')
"""


from __future__ import annotations

import json
import os
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

from hammer_plugins.backends.base import BackendInterface, GenerationChunk, GenerationSettings
from hammer_plugins.backends.remote.connection import ServerConnection
from hammer_plugins.backends.remote.discovery import ServerDiscovery
from hammer_plugins.backends.remote.facts import ServerFacts
from hammer_plugins.backends.remote.grammar_probe import ServerGrammarProbe, grammar_fields
from hammer_plugins.backends.remote.loop_cut import ListLoopCut, acut_list_loops, cut_list_loops
from hammer_plugins.backends.remote.prefill import ServerPrefill
from hammer_plugins.backends.remote.sansio import _Core, _Lines, _Read, _Setup
from hammer_plugins.backends.remote.settings import (
    ASSUMED_CONTEXT_WINDOW,
    GrammarProtocol,
    ServerBackendSettings,
    ServerKind,
    ServerStats,
)
from hammer_plugins.backends.remote.token_counting import ServerTokenCounter
from hammer_plugins.backends.remote.wire import (
    _CompletionReader,
    _context_error,
    _error_details,
    _http_error,
    _is_event_stream,
    _SSEDecoder,
    wire_text,
)
from hammer_plugins.grammar.builder import Grammar
from hammer_plugins.support.http_client import import_httpx
from hammer_plugins.values.errors import (
    ContextWindowExceededError,
    HammerError,
    ServerError,
    ServerStreamError,
)


# -------------------------------------------------------------------------------------- backend
class OpenAICompatibleBackend(BackendInterface):
    """Hammer on an OpenAI-compatible server (vLLM, llama-server, llama-cpp-python), over ``/v1/completions``.

    Args:
        base_url: the server root or its ``/v1`` URL (default ``$HAMMER_SERVER_URL``).
        settings: a :class:`ServerBackendSettings`; or pass its fields as keywords: ``model``,
            ``api_key``, ``timeout``, ``connect_timeout``, ``max_retries``, ``retry_backoff``,
            ``grammar_protocol`` (``"auto"``, ``"llama_cpp"``, ``"vllm"``, ``"vllm_guided"``, ``"none"``),
            ``server_kind``, ``context_window``, ``token_counting``, ``extra_body``, ...

    Nothing is contacted until the first call (or :meth:`load`), which checks the model name against
    ``/v1/models`` and learns the server's kind and context window.

    The completions, the connection (``_connection``) and the settings live here; what was learned about the
    server is one :class:`~.facts.ServerFacts` (``facts``), shared with the components that read or set it:
    ``discovery`` (:class:`~.discovery.ServerDiscovery`), ``token_counter``
    (:class:`~.token_counting.ServerTokenCounter`) and ``grammar_probe`` (:class:`~.grammar_probe.ServerGrammarProbe`,
    which runs its probe through the backend's completion).

    Example:
        >>> from hammer_plugins import HammerEngine
        >>> backend = OpenAICompatibleBackend("http://127.0.0.1:8080", model="hammer", api_key="sk-local")
        >>> engine = HammerEngine(backend=backend)        # calls go to the server; no lock, real concurrency
        >>> backend.settings.grammar_protocol, backend.settings.max_retries
        ('auto', 2)
    """

    name = "server"
    native_async = True  # its async half runs on the event loop: concurrent calls overlap, no worker thread

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
        self._connection = ServerConnection(settings, self.stats, fail=self._fail)
        self.facts = ServerFacts.from_settings(settings)
        self.discovery = ServerDiscovery(settings, self.facts, self._connection)
        self.token_counter = ServerTokenCounter(settings, self.facts, self._connection, self.discovery.load)
        self.grammar_probe = ServerGrammarProbe(settings, self.facts, self._connection, self.discovery.load,
                                                self._complete)
        self.prefill = ServerPrefill(self.facts, self._connection)

    # ----------------------------------------------------------------------------- properties
    @property
    def base_url(self) -> str:
        return self.settings.base_url

    @property
    def model_name(self) -> str:
        # Never loads: frameworks read the name of models they construct thousands of times.
        return self.facts.model or f"server model at {self.base_url}"

    @property
    def server_kind(self) -> ServerKind:
        """What the server was detected to be (``"auto"`` until loaded)."""
        return self.facts.dialect.kind

    @property
    def grammar_protocol(self) -> GrammarProtocol | None:
        """The grammar protocol in use; ``None`` until the first constrained call resolves it."""
        return self.facts.protocol

    @property
    def is_loaded(self) -> bool:
        """Whether the server has been checked (``context_window`` then needs no request)."""
        return self.facts.loaded

    @property
    def context_window(self) -> int:
        self.load()
        return self.facts.window or ASSUMED_CONTEXT_WINDOW

    # ------------------------------------------------------------------ the components' jobs
    def load(self) -> None:
        """Check the server once: the model it serves, its kind and context window (``discovery``)."""
        self.discovery.load()

    async def aload(self) -> None:
        """Async :meth:`load` (a one-off handful of small requests, run in a worker thread)."""
        await self.discovery.aload()

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` from the server's tokenizer (cached), or an estimate where it has none."""
        return self.token_counter.count_tokens(text)

    async def acount_tokens(self, text: str) -> int:
        """Async :meth:`count_tokens`, on the event loop."""
        return await self.token_counter.acount_tokens(text)

    def resolve_grammar_protocol(self) -> GrammarProtocol:
        """Find (once) the grammar protocol the server applies, by a probe; raise if it applies none
        (``grammar_probe``)."""
        return self.grammar_probe.resolve()

    def info(self) -> dict[str, Any]:
        """Facts for ``hammer info``; does not contact the server."""
        return {
            **super().info(), "base_url": self.base_url, "server_kind": self.facts.dialect.kind,
            "grammar_protocol": self.facts.protocol or self.settings.grammar_protocol,
            "context_window": self.facts.window or ASSUMED_CONTEXT_WINDOW,
            "context_window_source": self.facts.window_source if self.facts.window else "assumed",
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
            clone.facts.adopt(self.facts, settings)
        return clone

    # ------------------------------------------------------------------------------ connection
    def close(self) -> None:
        """Close the sync connection pool (the backend reopens one if used again)."""
        self._connection.close()

    async def aclose(self) -> None:
        """Close this event loop's async connection pool, and the sync one."""
        await self._connection.aclose()

    def __enter__(self) -> OpenAICompatibleBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> OpenAICompatibleBackend:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _fail(self, status: int, body: str, path: str, max_tokens: int = 0) -> HammerError:
        message, code, error = _error_details(body)
        if status in (400, 413, 422):
            overflow = _context_error(message, code, error, max_tokens, self.facts.window or ASSUMED_CONTEXT_WINDOW)
            if overflow is not None:
                self.facts.learn_window(overflow.context_window)
                return overflow
        return _http_error(status, body, self.base_url, path, self.facts.model)

    # ----------------------------------------------------------------------------- completions
    def _completion_body(self, prompt: str, settings: GenerationSettings, grammar_fields: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "prompt": prompt, "max_tokens": settings.max_tokens, "temperature": settings.temperature,
            "top_p": settings.top_p, "stop": [*self.settings.stop, *settings.stop], "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.facts.model is not None:
            body["model"] = self.facts.model
        if settings.seed is not None:
            body["seed"] = self.facts.dialect.seed(settings.seed)
        body.update(self.facts.dialect.sampling_fields(settings))
        return {**body, **grammar_fields, **self.settings.extra_body}

    def stream(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None = None,
               cancel: threading.Event | None = None) -> Iterator[GenerationChunk]:
        """Stream the answer. No lock: the server schedules concurrent requests (threads share one pool).

        ``cancel``, once set, ends the stream at the next chunk with :class:`GenerationCancelled`; as when
        the caller closes the iterator, the response is closed, so the server stops generating. A
        constrained call list that starts repeating its calls is stopped there (:mod:`.loop_cut`).
        """
        chunks = self._connection.drive(self._generate(prompt, settings, grammar), cancel)
        cut = self._loop_cut(prompt, settings, grammar)
        return chunks if cut is None else cut_list_loops(chunks, cut)

    def astream(self, prompt: str, settings: GenerationSettings,
                grammar: Grammar | None = None) -> AsyncIterator[GenerationChunk]:
        """Native async :meth:`stream`: runs on the event loop, concurrently with other calls."""
        chunks = self._connection.adrive(self._generate(prompt, settings, grammar))
        cut = self._loop_cut(prompt, settings, grammar)
        return chunks if cut is None else acut_list_loops(chunks, cut)

    def _loop_cut(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None) -> ListLoopCut | None:
        """The loop guard an in-process backend runs while decoding, for a server that decodes the grammar itself."""
        if grammar is None or not settings.loop_guard:
            return None
        return ListLoopCut(self.token_counter.cached(wire_text(prompt)))

    def _generate(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None) -> _Core[None]:
        """The core of :meth:`stream` and :meth:`astream`: the one-off setup if still due, then the completion."""
        if not self.facts.loaded:
            yield _Setup(self.load)
        protocol: GrammarProtocol | None = None
        if grammar is not None:
            protocol = self.facts.protocol
            if protocol is None:
                protocol = yield _Setup(self.resolve_grammar_protocol)
        for head in settings.prefill:
            yield from self.prefill.core(wire_text(head))
        # Servers read llama.cpp's grammar notation (llama-server natively, vLLM through xgrammar).
        # The prompt goes as text; a special token typed in the user's text is broken up (wire_text).
        yield from self._complete(wire_text(prompt), settings, grammar_fields(protocol, grammar.gbnf if grammar else None))

    def _complete(self, prompt: str, settings: GenerationSettings, fields: dict[str, Any]) -> _Core[None]:
        """One completion of ``prompt``, sent as it is (the grammar probe's completion, too)."""
        yield from self._completion(self._completion_body(prompt, settings, fields), prompt, settings)

    def _completion(self, body: dict[str, Any], prompt: str, settings: GenerationSettings) -> _Core[None]:
        """One completion: its text as it streams, then a closing chunk with usage and finish reason."""
        httpx = import_httpx()
        path = "/v1/completions"
        reader = _CompletionReader(self.base_url)
        decoder = _SSEDecoder()
        self._connection.count("in_flight")
        try:
            response = yield from self._connection.send("POST", path, body, max_tokens=settings.max_tokens)
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
            self._connection.count("errors")
            raise self._connection.timed_out(path, exc, reader.text) from exc
        except httpx.TransportError as exc:
            self._connection.count("errors")
            raise self._stream_broke(exc, reader) from exc
        except HammerError:
            self._connection.count("errors")
            raise
        finally:
            self._connection.count("in_flight", -1)
        if reader.events == 0:
            yield from self._diagnose(body, settings.max_tokens)
        usage = reader.usage or {}
        prompt_tokens = None if isinstance(usage.get("prompt_tokens"), int) else (yield from self.token_counter.count(prompt))
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
            yield from self._connection.json("POST", "/v1/completions", self._diagnostic_body(body))
        except ContextWindowExceededError as exc:
            self._connection.count("errors")
            raise self._with_max_tokens(exc, max_tokens) from None
        except ServerError:
            self._connection.count("errors")
            raise

    def _final(self, reader: _CompletionReader, prompt_tokens: int | None, max_tokens: int) -> GenerationChunk:
        try:
            chunk = reader.final(prompt_tokens, max_tokens)
        except ServerStreamError:
            self._connection.count("errors")
            raise
        self._connection.count("completions")
        return chunk

    def _stream_broke(self, exc: Exception, reader: _CompletionReader) -> ServerStreamError:
        cause = self.facts.dialect.stream_break_cause
        return ServerStreamError(
            f"the connection to the server at {self.base_url} broke mid-stream ({type(exc).__name__}: {exc}) after "
            f"{len(reader.text)} characters: the answer is incomplete (.partial_text holds it). {cause}; not "
            "retried, as the text had already streamed. Fix: check the server, then retry the call.",
            url=self.base_url, partial_text=reader.text)


