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

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from ...errors import (
    ContextWindowExceededError,
    GrammarNotSupportedError,
    HammerError,
    ServerError,
    ServerHTTPError,
    ServerModelNotFoundError,
    ServerStreamError,
)
from ...grammar import Grammar
from ...sized_cache import SizedCache
from ..base import GenerationChunk, GenerationSettings, Runtime

if TYPE_CHECKING:
    pass

from .connection import ServerConnection
from .dialects import ServerDialect, dialect_for
from .loop_cut import ListLoopCut, acut_list_loops, cut_list_loops
from .sansio import _Core, _Lines, _Read, _Setup
from .settings import ASSUMED_CONTEXT_WINDOW, GrammarProtocol, ServerBackendSettings, ServerKind, ServerStats
from .wire import (
    _CompletionReader,
    _context_error,
    _error_details,
    _http_error,
    _is_event_stream,
    _SSEDecoder,
    estimate_tokens,
    import_httpx,
    wire_text,
)

_PROBE_TEXT = "hammer grammar probe"
_PROBE_GRAMMAR = f'root ::= "{_PROBE_TEXT}"'
_PROBE_PROMPT = "<|im_start|>user\nSay hello.<|im_end|>\n<|im_start|>assistant\n"


# -------------------------------------------------------------------------------------- backend
class OpenAICompatibleBackend(Runtime):
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
        self._setup_lock = threading.RLock()  # discovery and the grammar probe: slow, network-bound
        self._connection = ServerConnection(settings, self.stats, fail=self._fail)
        self._loaded = False
        self._model: str | None = settings.model
        self._dialect: ServerDialect = dialect_for(settings.server_kind)
        self._window: int | None = settings.context_window
        self._window_source = "setting" if settings.context_window else "unknown"
        self._protocol: GrammarProtocol | None = (
            settings.grammar_protocol if settings.grammar_protocol == "none"
            or (settings.grammar_protocol != "auto" and not settings.verify_grammar) else None)
        self._tokenize_path: str | None = None
        # Token counts of recent texts (whole prompts): bounded by entries and by characters.
        self._token_cache: SizedCache[str, int] = SizedCache(256, 16_000_000)

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
        return self._dialect.kind

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
            **super().info(), "base_url": self.base_url, "server_kind": self._dialect.kind,
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
                clone._loaded, clone._model, clone._dialect = self._loaded, self._model, self._dialect
                clone._tokenize_path = self._tokenize_path
                if settings.context_window is None:
                    clone._window, clone._window_source = self._window, self._window_source
                if settings.grammar_protocol in ("auto", self._protocol):
                    clone._protocol = clone._protocol or self._protocol
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
            overflow = _context_error(message, code, error, max_tokens, self._window or ASSUMED_CONTEXT_WINDOW)
            if overflow is not None:
                self._learn_window(overflow.context_window)
                return overflow
        return _http_error(status, body, self.base_url, path, self._model)

    # ------------------------------------------------------------------------------ discovery
    def load(self) -> None:
        """Check the server once: the model it serves, its kind and context window."""
        if self._loaded:
            return
        with self._setup_lock:
            if not self._loaded:
                self._connection.call(self._discover())
                self._loaded = True

    async def aload(self) -> None:
        """Async :meth:`load` (a one-off handful of small requests, run in a worker thread)."""
        if not self._loaded:
            await asyncio.to_thread(self.load)

    def _discover(self) -> _Core[None]:
        """The core of :meth:`load`."""
        status, payload = yield from self._connection.json("GET", "/v1/models", allow=(404, 405))
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
        if self._dialect.kind == "auto":
            owner = entry.get("owned_by")
            if owner == "vllm":
                kind: ServerKind = "vllm"
            elif owner == "llamacpp":
                kind = "llama_server"
            else:
                props = yield from self._props()
                if props is not None:
                    kind = "llama_server"
                else:
                    count_status, _ = yield from self._connection.json("POST", "/extras/tokenize/count", {"input": "x"},
                                                            allow=(404, 405, 422))
                    kind = "llama_cpp_python" if count_status == 200 else "openai"
            self._dialect = dialect_for(kind)
        if self._window is None:
            if self._dialect.needs_props and props is None:
                props = yield from self._props()
            window = self._dialect.context_window(entry, props)
            if window is not None:
                self._window, self._window_source = window, "server"
        self._tokenize_path = self._dialect.tokenize_path

    def _props(self) -> _Core[dict[str, Any] | None]:
        status, payload = yield from self._connection.json("GET", "/props", allow=(404, 405))
        return payload if status == 200 and isinstance(payload, dict) else None

    def _learn_window(self, window: int) -> None:
        if window > 0 and self._window_source != "setting":
            self._window, self._window_source = window, "learned"

    # ---------------------------------------------------------------------------- tokenizing
    def _cached_count(self, text: str) -> int | None:
        return self._token_cache.get(text)

    def _remember_count(self, text: str, n: int) -> int:
        self._token_cache.put(text, n, len(text))
        return n

    def _tokenize_request(self) -> tuple[str, dict[str, Any]] | None:
        if self.settings.token_counting == "estimate" or self._tokenize_path is None:
            return None
        return self._tokenize_path, self._dialect.tokenize_extra(self._model)

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
        return {**extra, self._dialect.tokenize_text_key: text}

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` from the server's tokenizer (cached), or an estimate where it has none."""
        return self._connection.call(self._count_tokens(text))

    async def acount_tokens(self, text: str) -> int:
        """Async :meth:`count_tokens`, on the event loop."""
        return await self._connection.acall(self._count_tokens(text))

    def _count_tokens(self, text: str) -> _Core[int]:
        """The core of :meth:`count_tokens` and :meth:`acount_tokens`."""
        text = wire_text(text)  # as it will be sent: text that looks like a special token is counted as text
        cached = self._cached_count(text)
        if cached is not None:
            return cached
        if not self._loaded:
            yield _Setup(self.load)
        route = self._tokenize_request()
        if route is None:
            return estimate_tokens(text)
        path, extra = route
        status, payload = yield from self._connection.json("POST", path, self._tokenize_body(extra, text), allow=(404, 405, 422))
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
        return list(self._dialect.grammar_protocols)

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
                f"the server at {self.base_url} ({self._dialect.kind}) did not apply a grammar under any protocol tried "
                f"({'; '.join(tried)}). Fix: set grammar_protocol to what the server supports ('llama_cpp' for "
                "llama-server and llama-cpp-python, 'vllm' for vLLM >= 0.10.2, 'vllm_guided' for older vLLM), or "
                "run unconstrained with HammerEngine(constrained=False) (the parser still reads lenient output).",
                url=self.base_url)

    def _probe(self, protocol: GrammarProtocol) -> str | None:
        """None if the server applied the probe grammar under ``protocol``, else what happened."""
        settings = GenerationSettings(max_tokens=32, temperature=0.0)
        body = self._completion_body(_PROBE_PROMPT, settings, self._grammar_fields(protocol, _PROBE_GRAMMAR))
        try:
            text = "".join(chunk.text for chunk in self._connection.drive(self._completion(body, _PROBE_PROMPT, settings)))
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
        body.update(self._dialect.sampling_fields(settings))
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
        """The loop guard a local runtime runs while decoding, for a server that decodes the grammar itself."""
        if grammar is None or not settings.loop_guard:
            return None
        return ListLoopCut(self._cached_count(wire_text(prompt)))

    def _generate(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None) -> _Core[None]:
        """The core of :meth:`stream` and :meth:`astream`: the one-off setup if still due, then the completion."""
        if not self._loaded:
            yield _Setup(self.load)
        protocol: GrammarProtocol | None = None
        if grammar is not None:
            protocol = self._protocol if self._protocol is not None else (yield _Setup(self.resolve_grammar_protocol))
        # Servers read llama.cpp's grammar notation (llama-server natively, vLLM through xgrammar).
        # The prompt goes as text; a special token typed in the user's text is broken up (wire_text).
        text = wire_text(prompt)
        body = self._completion_body(text, settings, self._grammar_fields(protocol, grammar.gbnf if grammar else None))
        yield from self._completion(body, text, settings)

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
        cause = self._dialect.stream_break_cause
        return ServerStreamError(
            f"the connection to the server at {self.base_url} broke mid-stream ({type(exc).__name__}: {exc}) after "
            f"{len(reader.text)} characters: the answer is incomplete (.partial_text holds it). {cause}; not "
            "retried, as the text had already streamed. Fix: check the server, then retry the call.",
            url=self.base_url, partial_text=reader.text)


