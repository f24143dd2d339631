"""llama.cpp backend (llama-cpp-python): a local GGUF file, grammars through llguidance, KV prefix reuse.

llama-cpp-python keeps the tokens of the previous call and re-evaluates only what differs, so
consecutive turns of one conversation (same tools block, longer history) skip the shared prefix.
With ``prefix_cache`` set, the state of that prefix (the system turn and the tools block) is also
kept on disk (``hammer_plugins.prefix_cache``), so a new process with the same model and tools
loads it instead of evaluating it again.
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

import codecs
import ctypes
import json
import time
import weakref
from array import array
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._cpu_threads import physical_cores
from ..errors import BackendNotInstalledError, InvalidModelFileError
from ..grammar import Grammar
from ..model_source import ModelSource, local_gguf, resolve_model
from ..prefix_cache import PrefixCache
from ..prompt import STOP_SEQUENCES, Prompt
from ..token_mask import LogitsMask, TokenMask, import_llguidance
from .base import RUNTIME_DEFAULTS, Backend, GenerationChunk, GenerationSettings, Usage, tokenize_prompt
from .prompt_lookup import PromptLookup


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise BackendNotInstalledError(
            "the llama.cpp backend needs llama-cpp-python. Fix: pip install 'hammer-plugins[llama-cpp]'"
        ) from exc
    return llama_cpp


def _pack_vocabulary(tokens: list[bytes], ends: list[int]) -> bytes:
    head = array("I", [len(tokens), len(ends), *ends, *(len(t) for t in tokens)])
    return head.tobytes() + b"".join(tokens)


def _unpack_vocabulary(blob: bytes) -> tuple[list[bytes], list[int]]:
    counts = array("I", blob[:8])
    n_tokens, n_ends = counts
    head = array("I", blob[8:8 + 4 * (n_ends + n_tokens)])
    ends, lengths = list(head[:n_ends]), head[n_ends:]
    tokens, at = [], 8 + 4 * (n_ends + n_tokens)
    for length in lengths:
        tokens.append(blob[at:at + length])
        at += length
    return tokens, ends


@dataclass
class _Run:
    """What one generation reports at its end."""

    first: float | None = None
    finish: str | None = None
    completion_tokens: int = 0
    forced: int = 0
    drafted: int = 0


class LlamaCppBackend(Backend):
    """Runs a GGUF model with llama-cpp-python.

    Args:
        model_path: a ``.gguf`` file; ``None`` resolves ``model`` or the default (see ``model_source``).
        model: a preset (``"hammer2.1-1.5b"``), ``"owner/repo:Q4_K_M"``, ``"owner/repo/file.gguf"`` or a path;
            a hub file is downloaded into the Hugging Face cache on first load (never at construction).
        n_ctx: context window in tokens.
        n_threads: CPU threads for decoding (``None``: one per physical core, llama.cpp's own default;
            llama-cpp-python's, half the logical CPUs, decodes 1.8x slower on a 2-core VM).
        n_gpu_layers: layers offloaded to a GPU build (0 on CPU).
        prefix_cache: keep the KV state of the tools prefix on disk across processes: ``True`` for the
            default folder, a path or a :class:`~hammer_plugins.prefix_cache.PrefixCache`; ``None`` off.
        fast_forward: in greedy constrained decoding, take the tokens the grammar forces without
            running the model for each (plain greedy's output but at near ties; ``_greedy_masked``). ``False``: llama-cpp-python's
            own loop for every call.
        draft_tokens: with ``fast_forward``, also verify up to this many prompt-lookup draft tokens per
            model run (likewise; :mod:`~hammer_plugins.backends.prompt_lookup`). 0: off.
        **llama_kwargs: any other ``llama_cpp.Llama`` argument, passed through.
    """

    name = "llama_cpp"
    # The full mask at every step, as before issue 33: kept reachable for the differential test
    # (tests/real/test_decode_differential.py) and the benchmark, which compare it with sample-first.
    _full_mask_decoding = False

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        model: str | None = None,
        n_ctx: int = RUNTIME_DEFAULTS.n_ctx,
        n_threads: int | None = None,
        n_gpu_layers: int = RUNTIME_DEFAULTS.n_gpu_layers,
        source: ModelSource | None = None,
        prefix_cache: bool | str | Path | PrefixCache | None = None,
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
        self._ll_tokenizer: Any = None
        self._tokenizer_job: Future[Any] | None = None
        self._gguf: Path | None = None
        self.load_seconds: float | None = None
        self.prefix_cache: PrefixCache | None = None
        if isinstance(prefix_cache, PrefixCache):
            self.prefix_cache = prefix_cache
        elif prefix_cache is not None and prefix_cache is not False:
            self.prefix_cache = PrefixCache(None if prefix_cache is True else prefix_cache)
        self._runtime: str | None = None
        self.fast_forward = fast_forward
        self.draft_tokens = draft_tokens

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
        llama_cpp = _import_llama_cpp()
        hub = self._source.kind == "hub_gguf"
        path = self._gguf_path()
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

    def _gguf_path(self) -> Path:
        """The model's GGUF file (a hub file is downloaded here, once)."""
        if self._gguf is None:
            self._gguf = local_gguf(self._source)
        return self._gguf

    def prepare_grammar(self) -> None:
        """Start building llguidance's tokenizer now, in a worker thread (once per loaded model).

        Called before the model is loaded, the worker reads the vocabulary from the GGUF file itself
        (a vocabulary-only llama.cpp model) while the main thread loads the weights: the build
        (about 0.6 s of CPU for a 152k vocabulary) then runs mostly on the core that loading
        leaves idle instead of competing with prompt evaluation, which uses every core.
        """
        if self._ll_tokenizer is not None or self._tokenizer_job is not None:
            return
        if self._llama is None:
            _import_llama_cpp()  # a missing llama-cpp-python is named here, as load() would
            self._gguf_path()  # resolve (and download) in the caller's thread, not twice
            # The worker's llama.cpp load logs as the model's own load will (llama-cpp-python's
            # Llama() sets this too, but only once it is called).
            from llama_cpp._logger import set_verbose

            set_verbose(bool(self.llama_kwargs.get("verbose", False)))
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hammer-tokenizer")
        self._tokenizer_job = pool.submit(self._build_tokenizer)
        pool.shutdown(wait=False)  # the job runs on; no other is taken

    def _build_tokenizer(self) -> Any:
        """The worker's job: the tokenizer, from the loaded model or else the file; ``None`` if the file's
        vocabulary cannot be loaded alone."""
        llama_cpp = _import_llama_cpp()
        loaded = self._llama
        vocab = llama_cpp.llama_model_get_vocab(loaded.model) if loaded is not None \
            else self._vocabulary_only_model(llama_cpp)
        return self._tokenizer_for(vocab) if vocab is not None else None

    def _tokenizer_for(self, vocab: Any) -> Any:
        import_llguidance()
        from llguidance import LLTokenizer

        llama_cpp = _import_llama_cpp()
        tokens, ends = self._vocabulary(llama_cpp, vocab)
        tokenize = ctypes.cast(llama_cpp.llama_cpp._lib.llama_tokenize, ctypes.c_void_p).value
        # No slices: llguidance's slicer precomputes token classes (0.2 s of a 0.4 s build for a
        # 152k vocabulary, paid by every new process) to save about 0.03 ms a token afterwards.
        return LLTokenizer.from_llamacpp(tokens=tokens, vocab_ptr=vocab, tokenize_fptr=tokenize,
                                         eos_token=ends or None, slices=[])

    def _vocabulary_only_model(self, llama_cpp: Any) -> Any:
        """The vocabulary of the GGUF file, loaded without the weights; ``None`` if llama.cpp cannot.

        It lives as long as this backend: llguidance's tokenizer calls ``llama_tokenize`` on it.
        """
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        model = llama_cpp.llama_model_load_from_file(str(self._gguf_path()).encode(), params)
        if not model:
            return None  # the weights' own load reports what is wrong with the file
        weakref.finalize(self, llama_cpp.llama_model_free, model)
        return llama_cpp.llama_model_get_vocab(model)

    def _token_mask(self, grammar: Grammar, loop_guard: bool) -> TokenMask:
        if self._ll_tokenizer is None:
            self.prepare_grammar()
            assert self._tokenizer_job is not None
            try:
                tokenizer = self._tokenizer_job.result()
            finally:
                self._tokenizer_job = None  # built, or failed: a later call tries again
            # The file's vocabulary could not be read alone: the loaded model's (in this thread, so
            # that the weights are never loaded twice at once).
            self._ll_tokenizer = tokenizer if tokenizer is not None else self._tokenizer_for(
                _import_llama_cpp().llama_model_get_vocab(self.llama.model))
        return TokenMask(self._ll_tokenizer, grammar, loop_guard=loop_guard)

    def _vocabulary(self, llama_cpp: Any, vocab: Any) -> tuple[list[bytes], list[int]]:
        """Every token's bytes as llguidance reads them, and the end-of-generation tokens.

        Reading 152k tokens through ctypes takes about 0.3 s, so with a prefix cache the result is
        kept in its vocabulary store (keyed by model file and runtime version), which a new tool set
        on the same model finds too. The reading gives what
        ``llguidance.llamacpp.lltokenizer_from_vocab`` reads, which returns only the finished
        tokenizer (nothing to store); a test checks every token against it.
        """
        cache = self.prefix_cache.vocabularies() if self.prefix_cache is not None else None
        key = json.dumps([*self._file_id(), "vocabulary"]) if cache is not None else ""
        blob = cache.load(key, [0]) if cache is not None else None
        if blob is not None:
            return _unpack_vocabulary(blob)
        n_tokens = llama_cpp.llama_vocab_n_tokens(vocab)
        buffer = ctypes.create_string_buffer(16 * 1024 + 1)
        address = ctypes.addressof(buffer)
        tokens: list[bytes] = []
        to_piece, get_attr, string_at = llama_cpp.llama_token_to_piece, llama_cpp.llama_vocab_get_attr, ctypes.string_at
        control, user_defined = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL, llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
        for token in range(n_tokens):
            # Without `special`, llama.cpp renders a control (or unknown) token as nothing and every
            # other token as with it; so only empty and <...> pieces need their attributes read,
            # which halves the native calls of this loop.
            size = to_piece(vocab, token, buffer, 16 * 1024, 0, False)
            piece = string_at(address, size) if size > 0 else b""
            if size <= 0 or (piece[:1] == b"<" and piece[-1:] == b">"):
                attr = get_attr(vocab, token)
                if size <= 0:
                    size = to_piece(vocab, token, buffer, 16 * 1024, 0, True)
                    piece = string_at(address, size) if size > 0 else b""
                # llguidance marks special tokens with a leading 0xff so that text can never produce them.
                if attr & control or (attr & user_defined and piece.startswith(b"<") and piece.endswith(b">")):
                    piece = b"\xff" + piece
            tokens.append(piece)
        # Every end-of-generation token may end a complete answer (as with llama.cpp's own grammar
        # sampler), not only the GGUF's EOS: a base-model GGUF's EOS is <|endoftext|>.
        ends = [t for t in range(n_tokens) if llama_cpp.llama_vocab_is_eog(vocab, t)]
        if cache is not None:
            cache.store(key, [0], _pack_vocabulary(tokens, ends))
        return tokens, ends

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text))

    def tokenize(self, text: str) -> list[int]:
        """Ids of ``text``: only the renderer's markers as special tokens (:func:`tokenize_prompt`)."""
        llama = self.llama
        return tokenize_prompt(text, lambda piece, special: list(
            llama.tokenize(piece.encode("utf-8"), add_bos=False, special=special)))

    def _stream(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None) -> Iterator[GenerationChunk]:
        prompt_tokens = self.tokenize(prompt)  # user text stays text: only our markers are special
        # llama-cpp-python re-evaluates only what differs from the previous call's tokens.
        started = time.perf_counter()
        cached = self._common_prefix(prompt_tokens)
        fast = (grammar is not None and self.fast_forward and settings.temperature <= 0
                and settings.repeat_penalty == 1.0)
        mask_job: Future[TokenMask] | None = None
        if grammar is not None and self._ll_tokenizer is None:
            # The first call waits for llguidance's tokenizer (prepare_grammar) and compiles the
            # grammar beside prompt evaluation, whose native calls release the GIL.
            self.prepare_grammar()
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hammer-grammar")
            mask_job = pool.submit(self._token_mask, grammar, settings.loop_guard)
            pool.shutdown(wait=False)  # the job runs on; no other is taken
        from_disk = 0
        if self.prefix_cache is not None and settings.shared_prefix_chars:
            shared = self._shared_tokens(prompt, prompt_tokens, settings.shared_prefix_chars)
            if cached < len(shared):
                from_disk = self._restore_or_store(shared)
                cached = len(shared)
        # Only the fast path waits for the mask after prompt evaluation; the sampled one needs it first.
        mask: TokenMask | Future[TokenMask] | None = mask_job
        if grammar is not None and mask_job is None:
            mask = self._token_mask(grammar, settings.loop_guard)
        elif mask_job is not None and not fast:
            mask = mask_job.result()
        run = _Run()
        pieces = self._greedy_masked(prompt_tokens, settings, mask, run) if fast and mask is not None \
            else self._sampled(prompt_tokens, settings, mask, run)
        try:
            for piece in pieces:
                if run.first is None:
                    run.first = time.perf_counter()
                yield GenerationChunk(text=piece)
        finally:
            pieces.close()  # stopped early: the decoding loop's cleanup runs now, while the lock is held
        if isinstance(mask, Future):
            mask = mask.result()
        done = time.perf_counter()
        yield GenerationChunk(
            text="",
            finish_reason="length" if run.finish == "length" else "stop",
            usage=Usage(prompt_tokens=len(prompt_tokens), completion_tokens=run.completion_tokens),
            timings={
                "time_to_first_token": (run.first or done) - started,
                "total": done - started,
                "cached_prompt_tokens": float(min(cached, len(prompt_tokens) - 1)),
                **({"disk_cached_prompt_tokens": float(from_disk)} if self.prefix_cache is not None else {}),
                **(mask.timings() if mask is not None else {}),
                **({"forced_tokens": float(run.forced)} if fast else {}),
                **({"drafted_tokens": float(run.drafted)} if fast and self.draft_tokens else {}),
            },
        )

    def _sampled(self, prompt_tokens: list[int], settings: GenerationSettings, mask: TokenMask | None,
                 run: _Run) -> Generator[str, None, None]:
        """llama-cpp-python's own generation loop and samplers, the mask as a logits processor."""
        llama = self.llama
        kwargs: dict[str, Any] = {
            "max_tokens": settings.max_tokens,
            "temperature": settings.temperature,
            "top_p": settings.top_p,
            "top_k": settings.top_k,
            "repeat_penalty": settings.repeat_penalty,
            "stop": [*STOP_SEQUENCES, *settings.stop],
            "stream": True,
        }
        if settings.seed is not None:
            kwargs["seed"] = settings.seed
        processor: LogitsMask | None = None
        if mask is not None:
            processor = LogitsMask(mask, len(prompt_tokens))
            kwargs["logits_processor"] = _import_llama_cpp().LogitsProcessorList([processor])
        pieces: list[str] = []
        completion = llama.create_completion(prompt_tokens, **kwargs)
        # llama-cpp-python evaluates the prompt inside its loop: the abort callback stops a cancelled
        # prompt batch there too, and goes once the first piece shows the prompt is done.
        cancel = self._cancel
        abort = _abort_callback(cancel) if cancel is not None else None
        if abort is not None:
            _set_abort_callback(llama._ctx.ctx, abort)
        try:
            for chunk in completion:
                if abort is not None:
                    _set_abort_callback(llama._ctx.ctx, None)
                    abort = None
                self._check_cancel()  # between tokens: a cancelled call stops here
                if processor is not None:
                    processor.check()
                choice = chunk["choices"][0]
                text = choice.get("text") or ""
                if text:
                    pieces.append(text)
                    yield text
                if choice.get("finish_reason"):
                    run.finish = choice["finish_reason"]
        except RuntimeError:  # llama_decode returned 2 (aborted): the batch is not counted, eval drops it next time
            if cancel is None or not cancel.is_set():
                raise
            self._check_cancel()
        finally:
            if abort is not None:
                _set_abort_callback(llama._ctx.ctx, None)
            completion.close()  # stopped early (cancelled, or the caller closed the stream): end llama-cpp-python's loop now
        if processor is not None:
            processor.check()
        answer = "".join(pieces)
        run.completion_tokens = settings.max_tokens if run.finish == "length" else len(
            llama.tokenize(answer.encode("utf-8"), add_bos=False, special=True)
        ) + (1 if run.finish == "stop" else 0)

    def _greedy_masked(self, prompt_tokens: list[int], settings: GenerationSettings,
                       mask_or_job: TokenMask | Future[TokenMask], run: _Run) -> Generator[str, None, None]:
        """Greedy decoding under the grammar: forced tokens fast-forwarded, prompt-lookup drafts verified.

        When the mask allows exactly one token, that token is what greedy decoding would pick, so
        it is taken without asking the model; tokens taken so are evaluated later in one batch.
        With ``draft_tokens``, each batch also carries a draft (:class:`PromptLookup`: what followed
        the latest earlier occurrence of the last tokens); the logits of every position come back,
        and a draft token is kept only while it is the masked argmax at its position, i.e. what one
        token per step would have chosen. The output is one token per step's, except where that
        step's two best allowed tokens are a near tie: a batch's logits are not bit-identical to
        one token's (llama.cpp's kernels differ), so such a tie may fall the other way
        (``tests/real/test_fast_forward.py`` checks the margin is below 0.5 logits wherever they
        differ); what changes is how many times the model runs.

        Sample first, check after (issue 33): where the model has to run anyway, the unconstrained
        argmax is taken and only that token is checked against the grammar (``TokenMask.allows``);
        the full mask is computed only when it is refused, and the pick is then the masked argmax.
        Either way the token is the masked argmax (an allowed raw argmax is the best allowed token,
        and the first such index, as ``np.argmax`` picks). The mask is computed up front only when
        tokens wait to be evaluated and the grammar forces bytes (``TokenMask.may_force``): then one
        allowed token means no model run, as before.
        """
        import numpy as np

        llama = self.llama
        n_vocab = llama.n_vocab()
        # Keep what the context holds in common with the prompt; evaluate the rest (at least one token).
        reuse = min(self._common_prefix(prompt_tokens), len(prompt_tokens) - 1)
        llama.n_tokens = reuse
        self._eval(prompt_tokens[reuse:])
        mask = mask_or_job.result() if isinstance(mask_or_job, Future) else mask_or_job
        ends = set(self._ll_tokenizer.eos_tokens)
        row: Any = _last_logits(llama, n_vocab)
        full_mask = self._full_mask_decoding
        lookup = PromptLookup(prompt_tokens) if self.draft_tokens > 0 else None
        unevaluated: list[int] = []  # accepted tokens not in the KV cache yet (forced, or after a miss)
        spec: list[int] = []         # draft tokens in the KV cache beyond the accepted ones
        spec_rows: list[Any] = []    # the logits after each of them
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = ""
        produced = 0
        try:
            while True:
                self._check_cancel()  # between tokens: a cancelled call stops here
                forced = False
                # The mask is computed up front only where it can save a model run: pending tokens and a
                # token the grammar may force. Otherwise: sample first, check after (the class docstring).
                if full_mask or (unevaluated and mask.may_force()):
                    allowed = mask.allowed(n_vocab)
                    forced = np.count_nonzero(allowed) == 1
                    if forced:
                        token = int(np.flatnonzero(allowed)[0])  # no need to ask the model
                    else:
                        if unevaluated:
                            row = self._evaluate(unevaluated, lookup, spec, spec_rows, n_vocab)
                            unevaluated = []
                        token = int(np.argmax(np.where(allowed, row, -np.inf)))
                else:
                    if unevaluated:
                        row = self._evaluate(unevaluated, lookup, spec, spec_rows, n_vocab)
                        unevaluated = []
                    token = int(np.argmax(row))
                    if not mask.allows(token):
                        token = int(np.argmax(np.where(mask.allowed(n_vocab), row, -np.inf)))
                if token in ends or produced >= settings.max_tokens:
                    run.finish = "stop" if token in ends and produced < settings.max_tokens else "length"
                    break
                run.forced += forced
                mask.consume([token])
                produced += 1
                if lookup is not None:
                    lookup.extend([token])
                if spec and spec[0] == token:  # the draft guessed right: the token is evaluated already
                    spec.pop(0)
                    row = spec_rows.pop(0)
                    run.drafted += 1
                else:
                    if spec:  # a miss: drop the rest of the draft (the next evaluation overwrites it)
                        llama.n_tokens -= len(spec)
                        spec.clear()
                        spec_rows.clear()
                    unevaluated.append(token)
                piece = decoder.decode(llama.detokenize([token]))
                if piece:
                    text += piece
                    stop_at = min((text.find(s) for s in settings.stop if s and s in text), default=-1)
                    if stop_at >= 0:
                        yield piece[: max(0, len(piece) - (len(text) - stop_at))]
                        run.finish = "stop"
                        break
                    yield piece
                if mask.stopped:  # nothing but the end may follow: do not run the model for it
                    run.finish = "stop"
                    break
        finally:
            # Ended, cancelled or closed by the caller: the context keeps only accepted tokens (input_ids
            # and n_tokens match the KV cache), so the next call reuses exactly what is there.
            if spec:
                llama.n_tokens -= len(spec)
        run.completion_tokens = produced + (1 if run.finish == "stop" else 0)

    def _eval(self, tokens: list[int]) -> None:
        """``llama.eval(tokens)``, one ``n_batch`` batch at a time (the batches ``eval`` itself makes, so the
        same state), stopped by a cancel between batches and inside one: a prompt's batch takes
        seconds on a small CPU, so llama.cpp's abort callback (checked between graph nodes) is set
        for the prompt, and the aborted batch is dropped from the KV cache."""
        llama = self.llama
        step = max(1, int(llama.n_batch))
        cancel = self._cancel
        abort = _abort_callback(cancel) if cancel is not None and len(tokens) > 1 else None
        if abort is not None:
            _set_abort_callback(llama._ctx.ctx, abort)
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
                _set_abort_callback(llama._ctx.ctx, None)

    def _evaluate(self, tokens: list[int], lookup: PromptLookup | None, spec: list[int], spec_rows: list[Any],
                  n_vocab: int) -> Any:
        """Evaluate ``tokens`` (and a draft after them); the logits after the last of ``tokens``.

        Without a draft this is ``llama.eval``. With one, the batch asks for the logits of every
        position, and ``spec`` / ``spec_rows`` receive the draft and the logits after each token.
        """
        import numpy as np

        llama = self.llama
        draft = lookup.draft(self.draft_tokens) if lookup is not None else []
        batch = tokens + draft
        if not draft or len(batch) > llama.n_batch or llama.n_tokens + len(batch) > llama.n_ctx():
            llama.eval(tokens)
            return _last_logits(llama, n_vocab)
        llama._ctx.kv_cache_seq_rm(-1, llama.n_tokens, -1)
        llama._batch.set_batch(batch=batch, n_past=llama.n_tokens, logits_all=True)
        llama._ctx.decode(llama._batch)
        llama.input_ids[llama.n_tokens:llama.n_tokens + len(batch)] = batch
        llama.n_tokens += len(batch)
        rows = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(len(batch), n_vocab)).copy()
        spec[:] = draft
        spec_rows[:] = list(rows[len(tokens):])
        return rows[len(tokens) - 1]

    # ------------------------------------------------------------ prefix cache
    def _common_prefix(self, tokens: list[int]) -> int:
        """How many leading ``tokens`` the context already holds."""
        llama = self.llama
        previous = llama.input_ids[: llama.n_tokens].tolist()
        same = 0
        for a, b in zip(previous, tokens, strict=False):
            if a != b:
                break
            same += 1
        return same

    def _shared_tokens(self, prompt: str, prompt_tokens: list[int], chars: int) -> list[int]:
        """The prompt's leading tokens that stand for its first ``chars`` characters (the tools prefix).

        The prefix ends a ChatML turn, so its tokens are the prompt's own; should a tokenizer merge
        across that boundary, only the tokens both agree on are shared. One token is always left
        to evaluate, as llama-cpp-python needs logits for the first answer token.
        """
        own = self.tokenize(prompt.head(chars) if isinstance(prompt, Prompt) else prompt[:chars])
        n = 0
        for a, b in zip(own, prompt_tokens, strict=False):
            if a != b:
                break
            n += 1
        n = min(n, len(prompt_tokens) - 1)
        return prompt_tokens[:n] if n >= 16 else []

    def _runtime_id(self) -> str:
        """What the KV state depends on besides the tokens: a change makes every stored state miss."""
        if self._runtime is None:
            params = self.llama.context_params
            self._runtime = json.dumps([
                *self._file_id(),
                self.n_gpu_layers, int(params.n_ctx), int(params.n_batch), int(params.type_k), int(params.type_v),
                repr(getattr(params, "flash_attn", None)), repr(getattr(params, "flash_attn_type", None)),
            ])
        return self._runtime

    def _file_id(self) -> list[Any]:
        """The model file (path, size, modification time) and the llama.cpp runtime's version."""
        path = self._gguf_path().resolve()
        stat = path.stat()
        return [str(path), stat.st_size, stat.st_mtime_ns, getattr(_import_llama_cpp(), "__version__", "?")]

    def _restore_or_store(self, shared: list[int]) -> int:
        """Put the state of ``shared`` in the context, from disk when stored; the tokens it saved from evaluation.

        Without a stored state the prefix is evaluated on its own and stored, so a cold call and a
        later warm one decode from byte-identical KV state (and give identical answers).
        """
        assert self.prefix_cache is not None
        llama_cpp = _import_llama_cpp()
        llama = self.llama
        ctx = llama._ctx.ctx
        runtime = self._runtime_id()
        state = self.prefix_cache.load(runtime, shared)
        llama.reset()
        llama._ctx.kv_cache_clear()
        if state is not None:
            buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
            if llama_cpp.llama_state_seq_set_data(ctx, buffer, len(state), 0):
                llama.input_ids[: len(shared)] = shared
                llama.n_tokens = len(shared)
                return len(shared)
            llama._ctx.kv_cache_clear()  # a state this runtime cannot read: evaluate instead
        self._eval(shared)  # cancelled part-way: nothing is stored, and the next call evaluates it again
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
        if written:
            self.prefix_cache.store(runtime, shared, bytes(buffer)[:written])
        return 0

    def info(self) -> dict[str, Any]:
        llama_cpp = _import_llama_cpp()
        return {
            **super().info(),
            "model_path": self.model_path,
            "n_ctx": self.n_ctx,
            "n_gpu_layers": self.n_gpu_layers,
            "llama_cpp_python": getattr(llama_cpp, "__version__", "?"),
        }


def _last_logits(llama: Any, n_vocab: int) -> Any:
    """The logits after the last evaluated token: a view of llama.cpp's buffer, not a copy (0.1 ms a
    token saved), valid until the next evaluation, which the decoding loop does only after using it."""
    import numpy as np

    return np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(n_vocab,))


def _abort_callback(cancel: Any) -> Any:
    """A ggml abort callback that answers whether ``cancel`` (a ``threading.Event``) is set."""
    import llama_cpp

    return llama_cpp.ggml_abort_callback(lambda _data: cancel.is_set())


def _set_abort_callback(ctx: Any, callback: Any) -> None:
    """``llama_set_abort_callback`` (exported by libllama, not wrapped by llama-cpp-python); ``None``
    removes the callback, so decoding one token at a time never calls back into Python."""
    import llama_cpp

    setter = llama_cpp.llama_cpp._lib.llama_set_abort_callback
    setter.argtypes = [ctypes.c_void_p, llama_cpp.ggml_abort_callback, ctypes.c_void_p]
    setter.restype = None
    setter(ctx, callback if callback is not None else llama_cpp.ggml_abort_callback(), None)
