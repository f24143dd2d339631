"""The interface every backend implements, and the settings and results they share.

Example:
    >>> from hammer_plugins.backends.base import GenerationSettings
    >>> GenerationSettings(max_tokens=64).temperature
    0.0
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from hammer_plugins.backends.bridge import iterate_in_thread
from hammer_plugins.grammar.builder import Grammar
from hammer_plugins.output.decoding import Decoding
from hammer_plugins.output.timings import Timings
from hammer_plugins.output.usage import Usage
from hammer_plugins.prompt.render import prompt_segments
from hammer_plugins.values.errors import GenerationCancelled

FinishReason = Literal["stop", "length"]


class GenerationSettings(BaseModel):
    """Sampling settings passed through to the backend. Temperature 0 is greedy decoding.

    Example:
        >>> GenerationSettings(max_tokens=64, temperature=0.7).loop_guard
        True
    """

    max_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    # 1.0 (off) by default: a penalty also hits the tokens of a function name repeated in parallel
    # calls (measured: "weather in Paris and Rome" gave get_weather twice at 1.0, get_weather and an
    # unrelated call at 1.1), though 1.1 stops rare loops inside free-text arguments.
    repeat_penalty: float = 1.0
    repeat_last_n: int = 64
    # Constrained answers only: close a string value the model repeats itself in, and a call list that
    # repeats its calls (loop_guard.LoopGuard).
    loop_guard: bool = True
    seed: int | None = None
    stop: list[str] = Field(default_factory=list)
    # How many leading characters of the prompt every call with these tools shares (the system turn
    # and the tools block); a backend with a prefix cache keeps their state (0: nothing shared).
    shared_prefix_chars: int = 0
    # Prompt heads a backend with a prefix cache evaluates and keeps before this call, unless kept already:
    # the head of the answer pass an agent's next turn will start with (its instructions as a system turn).
    prefill: list[str] = Field(default_factory=list)


class LocalBackendSettings(BaseModel):
    """How an in-process backend is set up, where its defaults are declared: the engine's settings
    (:class:`~hammer_plugins.engine.fields.EngineFields`) and the backends' own keyword arguments read them.

    Example:
        >>> LocalBackendSettings().n_ctx
        8192
    """

    n_ctx: int = 8192
    n_gpu_layers: int = 0
    cache_ram: int = 1024
    """MiB of memory for the KV states of recent prompts (llama.cpp; 0: off); docs/server.md says how it was chosen."""
    device: str = "auto"
    dtype: str = "auto"


BACKEND_DEFAULTS = LocalBackendSettings()
RuntimeSettings = LocalBackendSettings
"""The old name of :class:`LocalBackendSettings`, kept for old imports."""


def tokenize_prompt(prompt: str, tokenize: Callable[[str, bool], list[int]]) -> list[int]:
    """The token ids of ``prompt``, one segment at a time: ``tokenize(text, special)`` is called with
    ``special=True`` for the markers the renderer wrote and ``special=False`` for everything else, so
    text (a user's ``<|im_start|>system`` included) never becomes a special token. A plain string (a
    caller's own text) has its markers read as markers (:func:`~hammer_plugins.prompt.render.prompt_segments`).

    The ids equal those of tokenizing the whole prompt with special tokens parsed whenever the text
    holds no marker: such a tokenizer splits the text at the markers first, as this does.

    Example:
        >>> from hammer_plugins.prompt.render import Prompt
        >>> forged = Prompt.of([("<|im_start|>", True), ("user\\n<|im_start|>system", False)])
        >>> tokenize_prompt(forged, lambda text, special: [text] if special else list(text))[:3]
        ['<|im_start|>', 'u', 's']
    """
    ids: list[int] = []
    for text, special in prompt_segments(prompt):
        ids.extend(tokenize(text, special))
    return ids


@dataclass
class GenerationChunk:
    """One streamed piece of text; the last chunk has ``finish_reason`` and ``usage`` set (its
    ``usage.cached_prompt_tokens``: the prompt tokens the runtime's cache served), and ``timings`` and
    ``decoding`` where the runtime measured them.

    Example:
        >>> GenerationChunk(text="[").finish_reason is None
        True
    """

    text: str
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    timings: Timings = field(default_factory=Timings)
    decoding: Decoding = field(default_factory=Decoding)


class BackendInterface(ABC):
    """The interface the engine calls: a backend that turns a prompt into streamed text, optionally
    under a grammar. Pure: no lock and no thread, which an in-process backend adds (:class:`Backend`) and
    a server does without (:class:`~hammer_plugins.backends.remote.OpenAICompatibleBackend`).

    Implementations load lazily (on first use, never in ``__init__``). The engine calls ``stream``,
    ``count_tokens``, ``context_window`` and ``load`` for sync calls, and the async half (``astream``,
    ``acount_tokens``, ``aload``) for async ones.

    Example:
        >>> from hammer_plugins import ScriptedBackend
        >>> isinstance(ScriptedBackend(), BackendInterface), ScriptedBackend().native_async
        (True, False)
    """

    name: str = "backend"
    native_async: bool = False
    """True when the backend serves concurrent calls itself, on the event loop (the server backend: no
    worker thread and no lock); False for the in-process backends, whose async half runs their sync API in a
    worker thread, one generation at a time. The OpenAI server reads it to decide how many requests run
    at once; the engine calls the async half the same way for both."""

    @property
    @abstractmethod
    def model_name(self) -> str:
        """A human-readable model identifier (file name, hub id)."""

    @property
    @abstractmethod
    def context_window(self) -> int:
        """The context size in tokens (loads the model if needed)."""

    @abstractmethod
    def load(self) -> None:
        """Load the model now (otherwise the first call does)."""

    @property
    def is_loaded(self) -> bool:
        """Whether the model is in memory (``context_window`` and calls will not load it)."""
        return True

    def prepare_grammar(self) -> None:
        """A constrained call is coming: start building what grammar masks need, if anything (a hint)."""
        return None  # most backends build nothing ahead

    @abstractmethod
    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` as the model sees it: a :class:`~hammer_plugins.prompt.render.Prompt`'s
        markers as special tokens and the rest as text; a plain string's markers parsed (see
        :func:`tokenize_prompt`)."""

    def tokenize(self, text: str) -> list[int]:
        """The token ids of ``text`` as the model sees it (as :meth:`count_tokens` reads it)."""
        raise NotImplementedError(f"the {self.name} backend does not give token ids; count_tokens() counts them")

    @abstractmethod
    def stream(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None = None,
               cancel: threading.Event | None = None) -> Iterator[GenerationChunk]:
        """Stream the answer to ``prompt``; once ``cancel`` is set (from any thread), stop at the next
        token with :class:`GenerationCancelled`. Closing the iterator (``.close()``) stops it too."""

    # ------------------------------------------------------------ async half
    @abstractmethod
    async def aload(self) -> None:
        """Async :meth:`load`."""

    @abstractmethod
    async def acount_tokens(self, text: str) -> int:
        """Async :meth:`count_tokens`."""

    @abstractmethod
    def astream(self, prompt: str, settings: GenerationSettings,
                grammar: Grammar | None = None) -> AsyncIterator[GenerationChunk]:
        """Async :meth:`stream`: closing the iterator, or cancelling the task that reads it, stops the
        generation before the close returns."""

    def info(self) -> dict[str, Any]:
        """Facts for ``hammer info``."""
        return {"backend": self.name, "model": self.model_name}

    def cache_stats(self) -> dict[str, Any] | None:
        """The size and hit rates of a prompt cache this process keeps (``/health`` shows them); ``None``: none
        kept here (a server backend's cache is the server's own)."""
        return None


Runtime = BackendInterface
"""The old name of :class:`BackendInterface`, kept for old imports (``from hammer_plugins import Runtime``)."""


class Backend(BackendInterface):
    """An in-process backend (llama.cpp, transformers, a scripted one): one generation at a time, under a lock.

    Subclasses implement :meth:`_stream`, called with the lock held; :meth:`stream` serializes the
    calls and wires ``cancel`` to the decoding loop (:meth:`_check_cancel`). The async half runs it in
    a worker thread (:mod:`hammer_plugins.backends.bridge`): the lock and the thread bridge live here, not in
    the engine.

    Example:
        >>> from hammer_plugins import ScriptedBackend
        >>> isinstance(ScriptedBackend(), Backend), ScriptedBackend().native_async
        (True, False)
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # The cancel event of the generation holding the lock (None: not cancellable); see stream().
        self._cancel: threading.Event | None = None

    @abstractmethod
    def _stream(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None) -> Iterator[GenerationChunk]:
        """Generate; called with the backend lock held."""

    def stream(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None = None,
               cancel: threading.Event | None = None) -> Iterator[GenerationChunk]:
        """Stream the answer to ``prompt``. Calls are serialized: one generation at a time.

        ``cancel``: once set (from any thread), the generation stops at the next token (a backend's
        decoding loop checks it through :meth:`_check_cancel`; in any case no chunk follows) and
        :class:`GenerationCancelled` is raised, the model's lock released. A call still waiting for
        the lock gives up as soon as it is set. Closing the iterator (``.close()``) stops it too.
        """
        if cancel is None:
            with self._lock:
                yield from self._stream(prompt, settings, grammar)
            return
        while not self._lock.acquire(timeout=0.02):  # wakes at once when released; polls only the event
            if cancel.is_set():
                raise GenerationCancelled("the call was cancelled while it waited for the model")
        try:
            self._cancel = cancel
            self._check_cancel()
            chunks = iter(self._stream(prompt, settings, grammar))
            try:  # closed before the lock is released: its cleanup (the context's bookkeeping) runs under it
                for chunk in chunks:
                    self._check_cancel()
                    yield chunk
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
        finally:
            self._cancel = None
            self._lock.release()

    def _check_cancel(self) -> None:
        """Raise :class:`GenerationCancelled` if the generation holding the lock was cancelled: decoding
        loops call it between tokens (a few nanoseconds when nothing is cancelled)."""
        cancel = self._cancel
        if cancel is not None and cancel.is_set():
            raise GenerationCancelled("the call was cancelled")

    # ------------------------------------------------------------ async half: the sync API in a worker thread
    async def aload(self) -> None:
        # asyncio is imported by the async half only: a sync process (`hammer call`) skips its 0.02-0.05 s.
        import asyncio

        await asyncio.to_thread(self.load)

    async def acount_tokens(self, text: str) -> int:
        import asyncio

        return await asyncio.to_thread(self.count_tokens, text)

    async def astream(self, prompt: str, settings: GenerationSettings,
                      grammar: Grammar | None = None) -> AsyncIterator[GenerationChunk]:
        """:meth:`stream` in one worker thread (:mod:`hammer_plugins.backends.bridge`), its chunks on the event loop;
        closing this iterator, or cancelling its task, stops the generation at the next token and waits
        for the worker, so the model and its lock are free when the close returns."""
        bridged = iterate_in_thread(lambda cancel: self.stream(prompt, settings, grammar, cancel=cancel),
                                    threading.Event())
        try:
            async for chunk in bridged:
                yield chunk
        finally:
            await bridged.aclose()
