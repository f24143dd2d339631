"""Both greedy loops' picks on the same logits, at each step of one decode (issue 33's differential).

The llama.cpp backend's loop samples first and checks after: it takes the unconstrained argmax and asks
the grammar about that one token, computing the whole mask only when it is refused. The old loop
computed the mask at every step and took the masked argmax. :class:`StepCheck` watches one decode by
the new loop and, at every step, computes what the old loop would have picked from the very logits the
new loop used, with a grammar mask of its own fed the same tokens (a shadow :class:`TokenMask`): the two
picks must be equal, exactly. No near-tie margin is needed, since both picks read the same numbers;
two decodes compared token for token would see different batches, hence slightly different logits.

Used by tests/real/test_decode_differential.py (a dozen BFCL questions) and
benchmarks/decode_differential.py (fifty). Test-only instrumentation: decoding itself is untouched;
it wraps, on one backend instance, ``_token_mask`` and (for the duration of :meth:`watching`) the
decoding module's ``last_logits``, through which every logits row of the loop comes when ``draft_tokens=0``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hammer_plugins.backends.llama_cpp import LlamaCppBackend
from hammer_plugins.backends.llama_cpp import decoding as llama_cpp_decoding

Question = tuple[str, list[dict[str, Any]], list[dict[str, Any]]]


def bfcl_questions(sample: tuple[tuple[str, int], ...]) -> list[Question]:
    """``(id, messages, tool specs)`` of BFCL questions: ``(category, how many)`` each, drawn with a fixed seed."""
    from hammer_evals.bfcl.bfcl import load_category, to_tool_spec

    out = []
    for category, n in sample:
        entries, _ = load_category(category, sample=n, seed=33)
        out.extend((e.id, list(e.question), [to_tool_spec(f) for f in e.functions]) for e in entries)
    return out


@dataclass
class Steps:
    """What one decode's steps showed."""

    picks: int = 0            # steps compared (every token chosen, the final end-of-answer token included)
    free: int = 0             # of which the grammar allowed more than one token: picked from the logits
    forced: int = 0           # of which the grammar allowed one token
    full_masks: int = 0       # whole masks the new loop computed (the old one computes one a step)
    differences: list[str] = field(default_factory=list)


class StepCheck:
    """Instrument ``backend`` (``draft_tokens=0``): every call's steps are checked against the old loop's pick."""

    def __init__(self, backend: LlamaCppBackend) -> None:
        if backend.decoder.draft_tokens:
            raise ValueError("StepCheck reads the logits of one-token evaluations: use draft_tokens=0")
        self.backend = backend
        self.steps = Steps()
        self._row: Any = None
        self._fresh = False  # the row holds the logits after the last consumed token
        self._shadow: Any = None
        self.calls = 0  # backend calls (one grammar mask each)
        make_mask = backend.vocabulary.token_mask

        def instrumented(grammar: Any, loop_guard: bool) -> Any:
            mask = make_mask(grammar, loop_guard)
            self._shadow, self._fresh = make_mask(grammar, loop_guard), False
            self.calls += 1
            consume, allowed = mask.consume, mask.allowed

            def checked_consume(tokens: Any) -> None:
                for token in tokens:
                    self._check(int(token))
                    self._shadow.consume([int(token)])
                    self._fresh = False
                consume(tokens)

            def counted_allowed(n_vocab: int) -> Any:
                self.steps.full_masks += 1
                return allowed(n_vocab)

            mask.consume, mask.allowed = checked_consume, counted_allowed
            return mask

        backend.vocabulary.token_mask = instrumented  # type: ignore[method-assign]

    @contextlib.contextmanager
    def watching(self) -> Iterator[Steps]:
        """Record the loop's logits rows while the block runs; yields the running :class:`Steps`."""
        original = llama_cpp_decoding.last_logits

        def recorded(llama: Any, n_vocab: int) -> Any:
            self._row, self._fresh = original(llama, n_vocab), True
            return self._row

        llama_cpp_decoding.last_logits = recorded
        try:
            yield self.steps
        finally:
            llama_cpp_decoding.last_logits = original

    def old_pick(self) -> int | None:
        """The old loop's pick at this step: the only allowed token, or the masked argmax of the current row."""
        n_vocab = self.backend.llama.n_vocab()
        allowed = self._shadow.allowed(n_vocab)
        if np.count_nonzero(allowed) == 1:
            self.steps.forced += 1
            return int(np.flatnonzero(allowed)[0])
        self.steps.free += 1
        if not self._fresh:
            return None  # the new loop chose freely without evaluating the last token: a bug in itself
        return int(np.argmax(np.where(allowed, self._row, -np.inf)))

    def _check(self, token: int) -> None:
        self.steps.picks += 1
        old = self.old_pick()
        if old != token:
            text = self.backend.llama.detokenize
            self.steps.differences.append(
                f"step {self.steps.picks}: the old loop picks {old} {text([old]) if old is not None else b'(no logits)'!r}, "
                f"the new one {token} {text([token])!r}")

    def check_end(self, ends: frozenset[int]) -> None:
        """After a call that ended on an end-of-answer token (not cut, not stopped by the grammar): the old loop
        picks an end token there too."""
        if self._shadow is None or self._shadow.stopped:
            return  # the grammar allowed nothing but the end: neither loop asks the model
        self.steps.picks += 1
        old = self.old_pick()
        if old not in ends:
            self.steps.differences.append(f"step {self.steps.picks} (the end): the old loop picks {old}, not an end token")
