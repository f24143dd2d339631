"""Grammar-constrained decoding through llguidance: one allowed-token mask per step, for every local backend.

Both local backends decode with the same GBNF text (``hammer_plugins.grammar``) through the same
llguidance matcher, so a grammar behaves identically on llama.cpp and transformers. llguidance
rather than llama.cpp's native grammar sampler because the native sampler tests every vocabulary
entry against the grammar at every step. Measured on this project's 2-core CPU with the default
model (Qwen2.5's 152k-token vocabulary), 15 HammerBench snapshots: median 40.6 ms a token with
llama.cpp's sampler, 23.7 ms with llguidance (about the speed of unconstrained decoding), identical
greedy output on all 15 (``benchmarks/grammar_speed.py --records 3 --threads 2``).

Example:
    >>> import llguidance
    >>> tokenizer = llguidance.LLTokenizer("byte")   # one token per byte, enough for a demo
    >>> mask = TokenMask(tokenizer, 'root ::= "ok"')
    >>> allowed = mask.allowed(tokenizer.vocab_size)
    >>> [i for i in range(256) if allowed[i]] == [ord("o")]
    True
    >>> mask.consume([ord("o"), ord("k")]); mask.accepting
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from ..errors import BackendNotInstalledError


def import_llguidance() -> Any:
    """``llguidance`` (with its numpy helpers), or an error naming the package to install."""
    try:
        import llguidance
        import llguidance.numpy  # noqa: F401  (loaded here so a missing numpy fails early)
    except ImportError as exc:
        raise BackendNotInstalledError(
            "constrained decoding needs llguidance (in the llama-cpp and transformers extras). Fix: pip install "
            "'hammer-plugins[llama-cpp]' or pip install llguidance, or pass constrained=False"
        ) from exc
    return llguidance


@lru_cache(maxsize=256)
def _compiled(grammar: str) -> str:
    """GBNF to llguidance's own grammar text; a tool set reuses its grammar across calls."""
    llguidance = import_llguidance()
    return str(llguidance.grammar_from("gbnf", grammar))


class TokenMask:
    """Follows one generation under a GBNF grammar: which tokens may come next.

    ``tokenizer`` is an ``llguidance.LLTokenizer`` built once per loaded model. Feed every token
    the model emits to :meth:`consume`; :meth:`allowed` gives a boolean array over the vocabulary.

    Example:
        >>> import llguidance
        >>> mask = TokenMask(llguidance.LLTokenizer("byte"), 'root ::= "a" | "b"')
        >>> sorted(chr(i) for i in range(256) if mask.allowed(256)[i])
        ['a', 'b']
    """

    def __init__(self, tokenizer: Any, grammar: str) -> None:
        llguidance = import_llguidance()
        self._numpy = llguidance.numpy
        self.matcher = llguidance.LLMatcher(tokenizer, _compiled(grammar))
        if self.matcher.is_error():
            raise ValueError(f"llguidance rejected the grammar: {self.matcher.get_error()}")
        self._bitmask = self._numpy.allocate_token_bitmask(1, tokenizer.vocab_size)

    def allowed(self, n_vocab: int) -> Any:
        """A boolean numpy array of length ``n_vocab``: True where the token keeps the grammar."""
        import numpy as np

        self._numpy.fill_next_token_bitmask(self.matcher, self._bitmask, 0)
        # One bit per token, least significant first; numpy unpacks 150k bits in microseconds.
        bits = np.unpackbits(self._bitmask[0].view(np.uint8), bitorder="little")
        out = np.zeros(n_vocab, dtype=bool)
        n = min(n_vocab, bits.shape[0])
        out[:n] = bits[:n].astype(bool)
        return out

    def consume(self, tokens: Sequence[int]) -> None:
        """Advance past tokens the model emitted; a token the grammar forbids raises ``ValueError``."""
        for token in tokens:
            if not self.matcher.consume_token(int(token)):
                reason = (self.matcher.get_error() or "rejected").splitlines()[0]  # the rest is a parser state dump
                raise ValueError(f"token {int(token)} breaks the grammar ({reason})")

    @property
    def accepting(self) -> bool:
        """The text so far is a complete answer."""
        return bool(self.matcher.is_accepting())

    @property
    def stopped(self) -> bool:
        """Nothing but the end of the answer may come next."""
        return bool(self.matcher.is_stopped())


class LogitsMask:
    """A llama-cpp-python logits processor applying a :class:`TokenMask` (``-inf`` where disallowed).

    llama-cpp-python hands the processor every token so far (prompt included) and the logits of
    the next one, so the processor consumes the tokens added since its last call. It runs inside a
    ctypes callback, where an exception would only be printed and the step sampled unmasked, so a
    failure is kept in :attr:`error` for the backend to raise (:meth:`check`).

    Example:
        >>> import llguidance, numpy as np
        >>> processor = LogitsMask(TokenMask(llguidance.LLTokenizer("byte"), 'root ::= "hi"'), prompt_tokens=2)
        >>> scores = processor(np.array([1, 2]), np.zeros(256, dtype=np.float32))
        >>> int(np.argmax(scores)) == ord("h"), bool(np.isinf(scores[ord("i")]))
        (True, True)
    """

    def __init__(self, mask: TokenMask, prompt_tokens: int) -> None:
        self.mask = mask
        self._seen = prompt_tokens
        self.error: Exception | None = None

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        try:
            new = input_ids[self._seen:]
            if len(new):
                self._seen += len(new)
                self.mask.consume(new.tolist() if hasattr(new, "tolist") else list(new))
            scores[~self.mask.allowed(scores.shape[0])] = -float("inf")
        except Exception as exc:  # noqa: BLE001 - kept and raised by check(), outside the C callback
            self.error = self.error or exc
            scores[:] = -float("inf")  # nothing is allowed: the generation ends at once
        return scores

    def check(self) -> None:
        """Raise what went wrong inside the callback, if anything."""
        if self.error is not None:
            raise RuntimeError(f"constrained decoding failed: {self.error}") from self.error
