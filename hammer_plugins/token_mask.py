"""Grammar-constrained decoding through llguidance: one allowed-token mask per step, for every local backend.

Both local backends decode with the same grammar (the Lark notation of ``hammer_plugins.grammar``,
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
ends with a run that repeats one unit at least three times and is at least 32 bytes long (units of
1 to 128 bytes), only tokens that close the string (that start with ``"``) stay allowed, so the
answer ends well-formed. Unlike a repeat penalty it touches nothing outside a looping string
(function names repeated across parallel calls, JSON punctuation). It also closes a call list
that repeats its calls (``LoopGuard.list_looping``: after a call that repeats an earlier,
non-adjacent one, after the third identical call with arguments in a row, or after the eighth
identical argument-free call in a row), or, when a token has already opened the next call, ends
the generation (``TokenMask.loop_stopped``; the engine keeps the calls made so far).

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
from functools import lru_cache
from typing import Any

from .errors import BackendNotInstalledError
from .grammar import Grammar


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
def _compiled(lark: str) -> str:
    """Lark notation to llguidance's grammar; a tool set reuses its grammar across calls."""
    llguidance = import_llguidance()
    return str(llguidance.grammar_from("lark", lark))


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


class LoopGuard:
    """Follows the answer being written and tells when it has fallen into a repetition loop.

    Two loops, two ways out:

    * **inside a string** (:attr:`looping`): the value ends with one unit repeated (module
      docstring for the bounds); only tokens that close the string stay allowed;
    * **in the call list** (:attr:`list_looping`): a call just completed repeats an earlier call
      that is not right before it, or is the :attr:`MAX_SAME_CALLS`-th (3) identical call in a row,
      or for an argument-free call (``"arguments": {}``) the :attr:`MAX_SAME_BARE_CALLS`-th (8)
      (greedy decoding of a small model that has nothing to call may list ``{"input": 10},
      {"input": 5}, ...`` over and over until ``max_tokens``); only tokens that close the list
      (``]``) stay allowed, so the answer keeps that call and ends there. Up to three identical
      calls with arguments ("roll the die twice") and up to eight identical argument-free calls
      ("give me 5 random facts": Tool-Alpaca's gold answer calls ``api_v2_facts_random_get`` five
      times) fit; a runaway run of argument-free calls ends after eight (14 to 19 Qwen2.5 tokens a
      call, well inside a 256-token budget).

    Example:
        >>> guard = LoopGuard()
        >>> guard.feed(b'{"a": "' + b"ab" * 15)
        >>> guard.looping
        False
        >>> guard.feed(b"ab")   # 32 bytes of one repeated unit
        >>> guard.looping
        True
        >>> guard = LoopGuard()
        >>> guard.feed(b'[{"n": 1}, {"n": 2}, {"n": 1}')
        >>> guard.list_looping
        True
    """

    MIN_RUN = 32
    MIN_REPEATS = 3
    MAX_UNIT = 128
    MAX_SAME_CALLS = 3  # identical calls with arguments in a row: the list closes after the third
    MAX_SAME_BARE_CALLS = 8  # identical argument-free calls in a row: the list closes after the eighth

    def __init__(self) -> None:
        self.in_string = False
        self._escaped = False
        self._content = bytearray()
        self._depth = 0
        self._call = bytearray()  # the call (top-level list element) being written, whitespace dropped
        self._calls: list[bytes] = []
        self._in_list = False
        self.list_looping = False
        self.list_continued = False  # a "," came after the looping call: the loop cannot be cut there

    def feed(self, data: bytes) -> None:
        """Follow the bytes the model emitted."""
        for byte in data:
            if self._depth >= 2:
                self._call.append(byte)
            if not self.in_string:
                if byte == 0x22:
                    self.in_string, self._content = True, bytearray()
                elif byte in b"[{":
                    self._depth += 1
                    if self._depth == 1:
                        self._in_list = byte == 0x5B  # only a call list's elements are calls
                    elif self._depth == 2:
                        self._call = bytearray(bytes([byte]))
                elif byte in b"]}":
                    self._depth -= 1
                    if self._depth == 1 and self._in_list:
                        self._end_call(bytes(self._call))
                    elif self._depth <= 0:
                        self.list_looping = False
                elif byte == 0x2C and self._depth == 1 and self.list_looping:
                    self.list_continued = True
                elif byte in b" \t\r\n" and self._depth >= 2:
                    self._call.pop()
            elif self._escaped:
                self._escaped = False
                self._content.append(byte)
            elif byte == 0x5C:
                self._escaped = True
                self._content.append(byte)
            elif byte == 0x22:
                self.in_string = False
            else:
                self._content.append(byte)

    def _end_call(self, call: bytes) -> None:
        calls = self._calls
        before = 0  # identical calls right before this one
        while before < len(calls) and calls[-1 - before] == call:
            before += 1
        limit = self.MAX_SAME_BARE_CALLS if call.endswith(b'"arguments":{}}') else self.MAX_SAME_CALLS
        if call in calls[:len(calls) - before] or before + 1 >= limit:
            self.list_looping = True
        calls.append(call)

    @property
    def looping(self) -> bool:
        """Inside a string that ends with one unit repeated (see the module docstring for the bounds)."""
        text = self._content
        if not self.in_string or len(text) < self.MIN_RUN:
            return False
        for unit in range(1, min(self.MAX_UNIT, len(text) // self.MIN_REPEATS) + 1):
            run = max(self.MIN_RUN, self.MIN_REPEATS * unit)
            if run <= len(text) and text[len(text) - run + unit:] == text[len(text) - run:len(text) - unit]:
                return True
        return False


class TokenMask:
    """Follows one generation under a grammar: which tokens may come next.

    ``tokenizer`` is an ``llguidance.LLTokenizer`` built once per loaded model; ``grammar`` a
    :class:`~hammer_plugins.grammar.Grammar` or Lark text. Feed every token the model emits to
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

    def timings(self) -> dict[str, float]:
        """What the loop guard did, for the response's timings."""
        return {"loop_guard_cuts": float(self.loops_cut), **({"loop_guard_stop": 1.0} if self.loop_stopped else {})}


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
