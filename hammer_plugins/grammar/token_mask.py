"""Grammar-constrained decoding through llguidance: one allowed-token mask per step, for every local backend.

Both local backends decode with the same grammar (the Lark notation of ``hammer_plugins.grammar.builder``,
whose lexemes are chosen for llguidance) through the same llguidance matcher, so a grammar
behaves identically on llama.cpp and transformers. llguidance
rather than llama.cpp's native grammar sampler because the native sampler tests every vocabulary
entry against the grammar at every step. Measured on this project's 2-core CPU with the default
model (Qwen2.5's 152k-token vocabulary), 15 HammerBench snapshots: median 40.6 ms a token with
llama.cpp's sampler, 23.7 ms with llguidance (about the speed of unconstrained decoding), identical
greedy output on all 15 (``benchmarks/grammar_speed.py --records 3 --threads 2``).

The mask also carries the **loop guard**: greedy decoding of a small model sometimes repeats
itself inside a string value until ``max_tokens`` ("Food Name should be Apple, and it was wrong
before. Food Name should be Apple, ..."), and the answer is lost. When the string being written
(read decoded: escapes, surrogate pairs) ends with a phrase loop (a unit of 8 characters or more,
with a letter, not only hex digits, three times over 32 characters or more) or a runaway run (any
unit up to 128 characters, repeated over more than 128 characters), only tokens that close the
string (that start with ``"``) stay allowed, so the answer ends well-formed; realistic repetitive
values (``"=" * 80``, a hash of zeros, ``|---|---|``, ``ha ha ha``, emoji) are written whole. Unlike
a repeat penalty it touches nothing outside a looping string (function names repeated across
parallel calls, JSON punctuation). It also closes a call list that repeats its calls or counts
(``LoopGuard.list_looping``: after a call that repeats an earlier, non-adjacent one, after the
third identical call with arguments in a row, after the eighth identical argument-free call in a
row, or after the fifth call in a row that differs from the one before only in one number, by the
same step each time), or, when a token has already opened the next call, ends the generation
(``TokenMask.loop_stopped``; the engine keeps the calls made so far).

Example:
    >>> import llguidance
    >>> tokenizer = llguidance.LLTokenizer("byte")   # one token per byte, enough for a demo
    >>> mask = TokenMask(tokenizer, 'start: "ok"')
    >>> allowed = mask.allowed(tokenizer.vocab_size)
    >>> [i for i in range(256) if allowed[i]] == [ord("o")]
    True
    >>> mask.consume([ord("o"), ord("k")]); mask.accepting
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hammer_plugins.grammar.builder import Grammar
from hammer_plugins.grammar.loop_guard import LoopGuard
from hammer_plugins.support.sized_cache import SizedCache
from hammer_plugins.values.errors import BackendNotInstalledError


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


# Compiled grammars of recent tool sets: bounded by entries and by bytes (Lark text and compiled grammar
# together), so many large distinct grammars cannot fill the memory.
_COMPILED: SizedCache[str, str] = SizedCache(256, 64 * 2**20)


def _compiled(lark: str) -> str:
    """Lark notation to llguidance's grammar; a tool set reuses its grammar across calls."""
    found = _COMPILED.get(lark)
    if found is None:
        llguidance = import_llguidance()
        found = str(llguidance.grammar_from("lark", lark))
        _COMPILED.put(lark, found)
    return found


_FIRST_BYTES: dict[int, tuple[Any, Any]] = {}


def _tokens_starting_with(tokenizer: Any, first: bytes) -> Any:
    """A boolean array over the vocabulary: the tokens whose text starts with ``first`` (the first bytes
    are read once per tokenizer, about 35 ms for Qwen2.5's 152k tokens)."""
    import numpy as np

    cached = _FIRST_BYTES.get(id(tokenizer))
    if cached is None or cached[0] is not tokenizer:
        firsts = np.array([(tokenizer.decode_bytes([i])[:1] or b"\0")[0] for i in range(tokenizer.vocab_size)],
                          dtype=np.uint8)
        cached = _FIRST_BYTES[id(tokenizer)] = (tokenizer, firsts)  # keeps the tokenizer, so the id stays its own
    return cached[1] == first[0]


class TokenMask:
    """Follows one generation under a grammar: which tokens may come next.

    ``tokenizer`` is an ``llguidance.LLTokenizer`` built once per loaded model; ``grammar`` a
    :class:`~hammer_plugins.grammar.builder.Grammar` or Lark text. Feed every token the model emits to
    :meth:`consume`; :meth:`allowed` gives a boolean array over the vocabulary. ``loop_guard``
    closes a string value the model repeats itself in (module docstring).

    Example:
        >>> import llguidance
        >>> mask = TokenMask(llguidance.LLTokenizer("byte"), 'start: "a" | "b"')
        >>> sorted(chr(i) for i in range(256) if mask.allowed(256)[i])
        ['a', 'b']
    """

    def __init__(self, tokenizer: Any, grammar: Grammar | str, loop_guard: bool = True) -> None:
        llguidance = import_llguidance()
        self._numpy = llguidance.numpy
        self._tokenizer = tokenizer
        lark = grammar.lark if isinstance(grammar, Grammar) else grammar
        # Silent: a refused token raises ValueError from consume() with the reason.
        self.matcher = llguidance.LLMatcher(tokenizer, _compiled(lark), log_level=0)
        if self.matcher.is_error():
            raise ValueError(f"llguidance rejected the grammar: {self.matcher.get_error()}")
        self._bitmask = self._numpy.allocate_token_bitmask(1, tokenizer.vocab_size)
        self.guard = LoopGuard() if loop_guard else None
        self.loops_cut = 0
        self.loop_stopped = False  # a call list looped past the point where it could be closed

    def allowed(self, n_vocab: int) -> Any:
        """A boolean numpy array of length ``n_vocab``: True where the token keeps the grammar."""
        import numpy as np

        if self.loop_stopped:  # only the end of generation: the engine keeps the calls made so far
            out = np.zeros(n_vocab, dtype=bool)
            out[[t for t in self._tokenizer.eos_tokens if t < n_vocab]] = True
            return out
        self._numpy.fill_next_token_bitmask(self.matcher, self._bitmask, 0)
        # One bit per token, least significant first; numpy unpacks 150k bits in microseconds.
        bits = np.unpackbits(self._bitmask[0].view(np.uint8), bitorder="little")
        out = np.zeros(n_vocab, dtype=bool)
        n = min(n_vocab, bits.shape[0])
        out[:n] = bits[:n].astype(bool)
        if self.guard is not None and (self.guard.looping or self.guard.list_looping):
            closing = out.copy()
            closing[:n] &= _tokens_starting_with(self._tokenizer, b'"' if self.guard.in_string else b"]")[:n]
            closing[n:] = False
            if closing.any():  # never leave nothing allowed (e.g. in the middle of an escape)
                self.loops_cut += 1
                return closing
        return out

    @property
    def guarding(self) -> bool:
        """The loop guard restricts the next token (a looping string or call list): :meth:`allowed` is then
        narrower than the grammar."""
        return self.loop_stopped or (self.guard is not None and (self.guard.looping or self.guard.list_looping))

    def allows(self, token: int) -> bool:
        """``allowed(n)[token]``, without computing the whole mask (sample first, check after).

        llguidance walks one token's bytes through the grammar (about 1 µs) where the mask walks
        the whole vocabulary (0.1 to 0.7 ms for 152k tokens, and an unpack over it); while the loop
        guard restricts the choice, the mask is computed, as that restriction is defined on it.
        """
        if not 0 <= token < self._tokenizer.vocab_size:
            return False
        if self.guarding:
            return bool(self.allowed(self._tokenizer.vocab_size)[token])
        return self.matcher.validate_tokens([int(token)]) == 1

    def may_force(self) -> bool:
        """False when the next token is surely not the only one allowed, known without the mask.

        One allowed token means one allowed next byte (every byte is a token in a byte-level
        vocabulary), which llguidance reports as forced bytes; the loop guard's restriction is not
        in them, so it counts as a maybe. True does not mean forced: the mask says.
        """
        return self.guarding or bool(self.matcher.compute_ff_bytes())

    def consume(self, tokens: Sequence[int]) -> None:
        """Advance past tokens the model emitted; a token the grammar forbids raises ``ValueError``."""
        for token in tokens:
            if self.loop_stopped:
                return
            if not self.matcher.consume_token(int(token)):
                reason = (self.matcher.get_error() or "rejected").splitlines()[0]  # the rest is a parser state dump
                raise ValueError(f"token {int(token)} breaks the grammar ({reason})")
            if self.guard is not None:
                self.guard.feed(self._tokenizer.decode_bytes([int(token)]))
                self.loop_stopped = self.guard.list_looping and self.guard.list_continued

    @property
    def accepting(self) -> bool:
        """The text so far is a complete answer."""
        return bool(self.matcher.is_accepting())

    @property
    def stopped(self) -> bool:
        """Nothing but the end of the answer may come next."""
        return self.loop_stopped or bool(self.matcher.is_stopped())

    def decoding(self) -> dict[str, int | bool]:
        """What the loop guard did: the fields of the answer's
        :class:`~hammer_plugins.output.decoding.Decoding`."""
        return {"loop_guard_cuts": self.loops_cut, "loop_guard_stopped": self.loop_stopped}


class LogitsMask:
    """A llama-cpp-python logits processor applying a :class:`TokenMask` (``-inf`` where disallowed).

    llama-cpp-python hands the processor every token so far (prompt included) and the logits of
    the next one, so the processor consumes the tokens added since its last call. It runs inside a
    ctypes callback, where an exception would only be printed and the step sampled unmasked, so a
    failure is kept in :attr:`error` for the backend to raise (:meth:`check`).

    Example:
        >>> import llguidance, numpy as np
        >>> processor = LogitsMask(TokenMask(llguidance.LLTokenizer("byte"), 'start: "hi"'), prompt_tokens=2)
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
