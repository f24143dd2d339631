"""Decoding on llama.cpp: llama-cpp-python's own sampled loop with the grammar as a logits processor, and
the greedy constrained loop that samples first, takes the tokens the grammar forces without running the
model, and verifies prompt-lookup drafts.

Example:
    >>> _Run().completion_tokens
    0
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hammer_plugins.backends.base import GenerationChunk, GenerationSettings, Usage
from hammer_plugins.backends.llama_cpp.native import abort_callback, import_llama_cpp, last_logits, set_abort_callback
from hammer_plugins.backends.llama_cpp.prefix import LlamaCppPrefix
from hammer_plugins.backends.llama_cpp.vocabulary import LlamaCppVocabulary
from hammer_plugins.backends.prompt_lookup import PromptLookup
from hammer_plugins.backends.seeds import LLAMA_CPP_SEEDS, in_range
from hammer_plugins.grammar.builder import Grammar
from hammer_plugins.grammar.token_mask import LogitsMask, TokenMask
from hammer_plugins.output.decoding import Decoding
from hammer_plugins.output.timings import Timings
from hammer_plugins.prompt.render import STOP_SEQUENCES

if TYPE_CHECKING:
    import threading

    from hammer_plugins.backends.llama_cpp.model import LlamaCppModel


@dataclass
class _Run:
    """What one generation reports at its end."""

    first: float | None = None
    finish: str | None = None
    completion_tokens: int = 0
    forced: int = 0
    drafted: int = 0


class LlamaCppDecoder:
    """The decoding job of :class:`~hammer_plugins.backends.llama_cpp.LlamaCppBackend` (its ``decoder``): it
    runs the model under the token masks of its ``vocabulary``, with the tools prefix of its ``prefix``.

    Example:
        >>> from hammer_plugins.backends.llama_cpp import LlamaCppBackend
        >>> LlamaCppBackend(n_ctx=4096, draft_tokens=4).decoder.draft_tokens
        4
    """

    # The full mask at every step, as the first constrained loop did: kept reachable for the differential test
    # (tests/real/test_decode_differential.py) and the benchmark, which compare it with sample-first.
    full_mask = False

    def __init__(self, model: LlamaCppModel, vocabulary: LlamaCppVocabulary, prefix: LlamaCppPrefix, *,
                 fast_forward: bool, draft_tokens: int) -> None:
        self.model = model
        self.vocabulary = vocabulary
        self.prefix = prefix
        self.prefix_cache = model.prefix_cache
        self.fast_forward = fast_forward
        self.draft_tokens = draft_tokens

    @property
    def llama(self) -> Any:
        """The model's loaded ``llama_cpp.Llama``."""
        return self.model.llama

    @property
    def _cancel(self) -> threading.Event | None:
        return self.model._cancel

    def _check_cancel(self) -> None:
        self.model._check_cancel()

    def _stream(self, prompt: str, settings: GenerationSettings, grammar: Grammar | None) -> Iterator[GenerationChunk]:
        prompt_tokens = self.model.tokenize(prompt)  # user text stays text: only our markers are special
        # llama-cpp-python re-evaluates only what differs from the previous call's tokens.
        started = time.perf_counter()
        self.prefix.keep(prompt_tokens)  # before anything changes the context: its state, if this prompt displaces it
        for head in settings.prefill if self.prefix_cache is not None else ():
            self.prefix.prefill(head)  # before the context is read: a prefill replaces what it holds
        # The context, or the kept state sharing the longest prefix with the prompt, whichever holds more of it.
        cached, restored = self.prefix.restore_longest(prompt_tokens)
        fast = (grammar is not None and self.fast_forward and settings.temperature <= 0
                and settings.repeat_penalty == 1.0)
        mask_job: Future[TokenMask] | None = None
        if grammar is not None and self.vocabulary.tokenizer is None:
            # The first call waits for llguidance's tokenizer (prepare_grammar) and compiles the
            # grammar beside prompt evaluation, whose native calls release the GIL.
            self.vocabulary.prepare()
            pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hammer-grammar")
            mask_job = pool.submit(self.vocabulary.token_mask, grammar, settings.loop_guard)
            pool.shutdown(wait=False)  # the job runs on; no other is taken
        from_disk = 0
        if self.prefix_cache is not None:
            # A restarted server: the longest stored prompt that begins this one, if it gives more. Else what the
            # context or a kept state served paid off, and goes to disk for the next process.
            cached, from_disk = self.prefix.restore_stored(prompt_tokens, cached)
            if not from_disk:
                self.prefix.persist(prompt_tokens, cached)
        reused = cached  # what the usage reports: the prompt tokens not evaluated by this call
        if self.prefix_cache is not None and settings.shared_prefix_chars:
            shared = self.prefix.shared_tokens(prompt, prompt_tokens, settings.shared_prefix_chars)
            if cached < len(shared):
                from_disk = self.prefix.restore_or_store(shared)
                # The context was cleared: the prefix came from disk, or was evaluated now and stored.
                cached, reused = len(shared), from_disk
            elif shared:
                self.prefix.reused(shared)
        # Only the fast path waits for the mask after prompt evaluation; the sampled one needs it first.
        mask: TokenMask | Future[TokenMask] | None = mask_job
        if grammar is not None and mask_job is None:
            mask = self.vocabulary.token_mask(grammar, settings.loop_guard)
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
        if self.model.prompt_states is not None:
            self.model.prompt_states.record(len(prompt_tokens), min(reused, len(prompt_tokens) - 1), restored)
        yield GenerationChunk(
            text="",
            finish_reason="length" if run.finish == "length" else "stop",
            usage=Usage(prompt_tokens=len(prompt_tokens), completion_tokens=run.completion_tokens,
                        cached_prompt_tokens=min(reused, len(prompt_tokens) - 1),
                        disk_cached_prompt_tokens=from_disk if self.prefix_cache is not None else None),
            timings=Timings(time_to_first_token=(run.first or done) - started, total=done - started),
            decoding=Decoding(**(mask.decoding() if mask is not None else {}),
                              forced_tokens=run.forced if fast else None,
                              drafted_tokens=run.drafted if fast and self.draft_tokens else None),
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
        if settings.seed is not None:  # llama.cpp's seed is 32 bits: a larger one would keep its low bits alone
            kwargs["seed"] = in_range(settings.seed, LLAMA_CPP_SEEDS)
        processor: LogitsMask | None = None
        if mask is not None:
            processor = LogitsMask(mask, len(prompt_tokens))
            kwargs["logits_processor"] = import_llama_cpp().LogitsProcessorList([processor])
        pieces: list[str] = []
        completion = llama.create_completion(prompt_tokens, **kwargs)
        # llama-cpp-python evaluates the prompt inside its loop: the abort callback stops a cancelled
        # prompt batch there too, and goes once the first piece shows the prompt is done.
        cancel = self._cancel
        abort = abort_callback(cancel) if cancel is not None else None
        if abort is not None:
            set_abort_callback(llama._ctx.ctx, abort)
        try:
            for chunk in completion:
                if abort is not None:
                    set_abort_callback(llama._ctx.ctx, None)
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
                set_abort_callback(llama._ctx.ctx, None)
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

        Sample first, check after: where the model has to run anyway, the unconstrained
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
        reuse = min(self.prefix.common(prompt_tokens), len(prompt_tokens) - 1)
        llama.n_tokens = reuse
        self.model.evaluate(prompt_tokens[reuse:])
        mask = mask_or_job.result() if isinstance(mask_or_job, Future) else mask_or_job
        ends = set(self.vocabulary.tokenizer.eos_tokens)
        row: Any = last_logits(llama, n_vocab)
        full_mask = self.full_mask
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
            return last_logits(llama, n_vocab)
        llama._ctx.kv_cache_seq_rm(-1, llama.n_tokens, -1)
        llama._batch.set_batch(batch=batch, n_past=llama.n_tokens, logits_all=True)
        llama._ctx.decode(llama._batch)
        llama.input_ids[llama.n_tokens:llama.n_tokens + len(batch)] = batch
        llama.n_tokens += len(batch)
        rows = np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(len(batch), n_vocab)).copy()
        spec[:] = draft
        spec_rows[:] = list(rows[len(tokens):])
        return rows[len(tokens) - 1]
