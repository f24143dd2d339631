"""llama.cpp backend (llama-cpp-python): a local GGUF file, grammars through llguidance, KV prefix reuse.

llama-cpp-python keeps the tokens of the previous call and re-evaluates only what differs, so
consecutive turns of one conversation (same tools block, longer history) skip the shared prefix.
With ``prefix_cache`` set, the state of that prefix (the system turn and the tools block) is also
kept on disk (``hammer_plugins.backends.prefix_cache``), so a new process with the same model and tools
loads it instead of evaluating it again. With ``cache_ram`` (MiB, on by default), the KV states of recent
prompts are kept in memory, and a request restores the one sharing its longest prefix
(``hammer_plugins.backends.prompt_states``): a new session, an answer pass or a side request with other
instructions no longer throws away what the context held.
One ``Llama`` instance is not re-entrant: calls are serialized by the backend lock. Grammars are
applied as an llguidance token mask (``token_mask``), not llama.cpp's own grammar sampler, which
is slower by about 15 ms a token on Qwen2.5's vocabulary.

Example:
    >>> from hammer_plugins.backends.llama_cpp import LlamaCppBackend
    >>> backend = LlamaCppBackend(n_ctx=4096)   # nothing is loaded yet
    >>> backend.name
    'llama_cpp'
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hammer_plugins.backends.base import BACKEND_DEFAULTS, Backend, GenerationChunk, GenerationSettings, tokenize_prompt
from hammer_plugins.backends.llama_cpp.decoding import LlamaCppDecoder
from hammer_plugins.backends.llama_cpp.native import abort_callback, import_llama_cpp, set_abort_callback
from hammer_plugins.backends.llama_cpp.prefix import LlamaCppPrefix
from hammer_plugins.backends.llama_cpp.vocabulary import LlamaCppVocabulary
from hammer_plugins.backends.prefix_cache import PrefixCache
from hammer_plugins.backends.prompt_states import MIB, PromptStates
from hammer_plugins.grammar.builder import Grammar
from hammer_plugins.models.source import ModelSource, local_gguf, resolve_model
from hammer_plugins.support.cpu_threads import physical_cores
from hammer_plugins.values.errors import InvalidModelFileError


class LlamaCppBackend(Backend):
    """Runs a GGUF model with llama-cpp-python.

    The model, its settings and tokenizing live here; the other jobs are components it holds:
    ``decoder`` (:class:`~.decoding.LlamaCppDecoder`, the decoding loops), ``vocabulary``
    (:class:`~.vocabulary.LlamaCppVocabulary`, llguidance's tokenizer and the token masks) and ``prefix``
    (:class:`~.prefix.LlamaCppPrefix`, the tools prefix's KV state on disk, and the states of recent prompts
    it keeps in ``prompt_states``, a :class:`~hammer_plugins.backends.prompt_states.PromptStates`).

    Args:
        model_path: a ``.gguf`` file; ``None`` resolves ``model`` or the default (see ``model_source``).
        model: a preset (``"hammer2.1-1.5b"``), ``"owner/repo:Q4_K_M"``, ``"owner/repo/file.gguf"`` or a path;
            a hub file is downloaded into the Hugging Face cache on first load (never at construction).
        n_ctx: context window in tokens.
        n_threads: CPU threads for decoding (``None``: one per physical core, llama.cpp's own default;
            llama-cpp-python's, half the logical CPUs, decodes 1.8x slower on a 2-core VM).
        n_gpu_layers: layers offloaded to a GPU build (0 on CPU).
        prefix_cache: keep the KV state of the tools prefix on disk across processes: ``True`` for the
            default folder, a path or a :class:`~hammer_plugins.backends.prefix_cache.PrefixCache`; ``None`` off.
        cache_ram: MiB of memory for the KV states of recent prompts: a request restores the one sharing its
            longest prefix (:mod:`~hammer_plugins.backends.prompt_states`; ``prompt_states`` here). 0: off.
        fast_forward: in greedy constrained decoding, take the tokens the grammar forces without
            running the model for each (plain greedy's output but at near ties; ``_greedy_masked``). ``False``: llama-cpp-python's
            own loop for every call. (Then ``backend.decoder.fast_forward``.)
        draft_tokens: with ``fast_forward``, also verify up to this many prompt-lookup draft tokens per
            model run (likewise; :mod:`~hammer_plugins.backends.prompt_lookup`). 0: off.
        **llama_kwargs: any other ``llama_cpp.Llama`` argument, passed through.
    """

    name = "llama_cpp"

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model: str | None = None,
        n_ctx: int = BACKEND_DEFAULTS.n_ctx,
        n_threads: int | None = None,
        n_gpu_layers: int = BACKEND_DEFAULTS.n_gpu_layers,
        source: ModelSource | None = None,
        prefix_cache: bool | str | Path | PrefixCache | None = None,
        cache_ram: int = BACKEND_DEFAULTS.cache_ram,
        fast_forward: bool = True,
        draft_tokens: int = 0,
        **llama_kwargs: Any,
    ) -> None:
        super().__init__()
        self._source = source or resolve_model(model_path, model, gguf=True)
        if self._source.kind not in ("gguf", "hub_gguf"):
            raise InvalidModelFileError(
                f"the llama.cpp backend loads .gguf files, got {self._source.location!r}. Fix: pass a "
                ".gguf path, or use backend='transformers' for a checkpoint directory or hub id."
            )
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.n_gpu_layers = n_gpu_layers
        self.llama_kwargs = llama_kwargs
        self._llama: Any = None
        self._gguf: Path | None = None
        self.load_seconds: float | None = None
        self.prefix_cache: PrefixCache | None = None
        if isinstance(prefix_cache, PrefixCache):
            self.prefix_cache = prefix_cache
        elif prefix_cache is not None and prefix_cache is not False:
            self.prefix_cache = PrefixCache(None if prefix_cache is True else prefix_cache)
        if cache_ram < 0:
            raise ValueError(f"cache_ram is MiB of memory (0: off), got {cache_ram}")
        self.prompt_states = PromptStates(cache_ram * MIB) if cache_ram else None
        self.vocabulary = LlamaCppVocabulary(self)
        self.prefix = LlamaCppPrefix(self)
        self.decoder = LlamaCppDecoder(self, self.vocabulary, self.prefix, fast_forward=fast_forward,
                                       draft_tokens=draft_tokens)

    @property
    def model_name(self) -> str:
        return self._source.display_name if self._source.is_default else self._source.short_name

    @property
    def source(self) -> ModelSource:
        """Where the model comes from (a path, a preset, a hub file), resolved but not downloaded."""
        return self._source

    @property
    def model_path(self) -> str:
        return self._source.location

    @property
    def context_window(self) -> int:
        return int(self.llama.n_ctx())

    @property
    def llama(self) -> Any:
        """The loaded ``llama_cpp.Llama`` (loads on first access)."""
        if self._llama is None:
            self.load()
        return self._llama

    @property
    def is_loaded(self) -> bool:
        return self._llama is not None

    def load(self) -> None:
        if self._llama is not None:
            return
        llama_cpp = import_llama_cpp()
        hub = self._source.kind == "hub_gguf"
        path = self.gguf_path()
        started = time.perf_counter()
        try:
            self._llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads or physical_cores(),
                n_gpu_layers=self.n_gpu_layers,
                verbose=self.llama_kwargs.pop("verbose", False),
                **self.llama_kwargs,
            )
        except ValueError as exc:
            raise InvalidModelFileError(
                f"llama.cpp could not load {str(path)!r} ({exc}). The file is a GGUF but may be truncated, "
                "corrupt, or of an architecture this llama-cpp-python does not know. Fix: re-download "
                "the file" + (f" (`hammer pull {self._source.pull_name} --force`)" if hub else "")
                + ", or upgrade llama-cpp-python."
            ) from exc
        self.load_seconds = time.perf_counter() - started
        # Free the native model before interpreter shutdown: llama-cpp-python's own destructor
        # runs too late then and prints a TypeError traceback.
        weakref.finalize(self, self._llama.close)

    def gguf_path(self) -> Path:
        """The model's GGUF file (a hub file is downloaded here, once)."""
        if self._gguf is None:
            self._gguf = local_gguf(self._source)
        return self._gguf

    def file_id(self) -> list[Any]:
        """The model file, by content (its SHA-256, read once and remembered by the prefix cache), and the llama.cpp
        runtime's version: a model written over the same path, size and time is another model here."""
        path = self.gguf_path().resolve()
        assert self.prefix_cache is not None  # only the prefix cache's keys need it
        return [self.prefix_cache.file_digest(path), path.stat().st_size, getattr(import_llama_cpp(), "__version__", "?")]

    def prepare_grammar(self) -> None:
        """Start building llguidance's tokenizer now, in a worker thread (:meth:`.LlamaCppVocabulary.prepare`)."""
        self.vocabulary.prepare()

    def _stream(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None) -> Iterator[GenerationChunk]:
        return self.decoder._stream(prompt, settings, grammar)

    def evaluate(self, tokens: list[int]) -> None:
        """``llama.eval(tokens)``, one ``n_batch`` batch at a time (the batches ``eval`` itself makes, so the
        same state), stopped by a cancel between batches and inside one: a prompt's batch takes
        seconds on a small CPU, so llama.cpp's abort callback (checked between graph nodes) is set
        for the prompt, and the aborted batch is dropped from the KV cache."""
        llama = self.llama
        step = max(1, int(llama.n_batch))
        cancel = self._cancel
        abort = abort_callback(cancel) if cancel is not None and len(tokens) > 1 else None
        if abort is not None:
            set_abort_callback(llama._ctx.ctx, abort)
        try:
            for at in range(0, len(tokens), step):
                self._check_cancel()
                try:
                    llama.eval(tokens[at:at + step])
                except RuntimeError:  # llama_decode returned non-zero: 2 is "aborted"
                    if cancel is None or not cancel.is_set():
                        raise
                    # eval counts a batch only once it is decoded: n_tokens is still where it began
                    llama._ctx.kv_cache_seq_rm(-1, llama.n_tokens, -1)
                    self._check_cancel()
        finally:
            if abort is not None:
                set_abort_callback(llama._ctx.ctx, None)


    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text))

    def tokenize(self, text: str) -> list[int]:
        """Ids of ``text``: only the renderer's markers as special tokens (:func:`tokenize_prompt`)."""
        llama = self.llama
        return tokenize_prompt(text, lambda piece, special: list(
            llama.tokenize(piece.encode("utf-8"), add_bos=False, special=special)))

    def cache_stats(self) -> dict[str, Any] | None:
        """The memory prompt cache's size and hit rates (:meth:`.PromptStates.stats`); ``None`` when it is off."""
        return self.prompt_states.stats() if self.prompt_states is not None else None

    def info(self) -> dict[str, Any]:
        llama_cpp = import_llama_cpp()
        return {
            **super().info(),
            "model_path": self.model_path,
            "n_ctx": self.n_ctx,
            "n_gpu_layers": self.n_gpu_layers,
            "llama_cpp_python": getattr(llama_cpp, "__version__", "?"),
        }
