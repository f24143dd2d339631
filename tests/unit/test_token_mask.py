"""The llguidance token mask both local backends decode with (a byte-level tokenizer: no model)."""

from __future__ import annotations

import llguidance
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hammer_plugins.grammar.loop_guard import LoopGuard
from hammer_plugins.grammar.token_mask import LogitsMask, TokenMask

BYTES = llguidance.LLTokenizer("byte")


def allowed_chars(mask: TokenMask) -> list[str]:
    allowed = mask.allowed(BYTES.vocab_size)
    return [chr(i) for i in range(256) if allowed[i]]


def test_mask_follows_the_grammar_token_by_token() -> None:
    mask = TokenMask(BYTES, 'start: "[" ("a" | "b") "]"')
    assert allowed_chars(mask) == ["["]
    mask.consume([ord("[")])
    assert allowed_chars(mask) == ["a", "b"]
    mask.consume([ord("b"), ord("]")])
    assert mask.accepting and mask.stopped


def test_a_forbidden_token_raises_instead_of_being_skipped() -> None:
    mask = TokenMask(BYTES, 'start: "ok"')
    with pytest.raises(ValueError, match="breaks the grammar"):
        mask.consume([ord("x")])


def test_an_unparsable_grammar_is_an_error_naming_llguidance() -> None:
    with pytest.raises(Exception, match="(?i)grammar|parse|expected"):
        TokenMask(BYTES, "start: (")


def test_logits_mask_consumes_only_what_follows_the_prompt() -> None:
    processor = LogitsMask(TokenMask(BYTES, 'start: "hi"'), prompt_tokens=3)
    scores = processor(np.array([7, 8, 9]), np.zeros(BYTES.vocab_size, dtype=np.float32))
    assert int(np.argmax(scores)) == ord("h") and np.isinf(scores[ord("i")])
    scores = processor(np.array([7, 8, 9, ord("h")]), np.zeros(BYTES.vocab_size, dtype=np.float32))
    assert int(np.argmax(scores)) == ord("i") and np.isinf(scores[ord("h")])
    processor.check()  # nothing went wrong


def test_logits_mask_keeps_a_failure_for_the_backend_and_allows_nothing() -> None:
    # Inside llama-cpp-python's C callback an exception would only be printed; the processor keeps it.
    processor = LogitsMask(TokenMask(BYTES, 'start: "hi"'), prompt_tokens=0)
    scores = processor(np.array([ord("x")]), np.zeros(BYTES.vocab_size, dtype=np.float32))
    assert np.all(np.isinf(scores))
    with pytest.raises(RuntimeError, match="constrained decoding failed"):
        processor.check()


def feed_text(mask: TokenMask, text: str) -> None:
    mask.consume(list(text.encode()))


GUARDED = 'start: "{\\"a\\": " STRING "}"\nSTRING: /"[^"]*"/'


def test_loop_guard_closes_a_string_that_repeats_a_unit() -> None:
    mask = TokenMask(BYTES, GUARDED)
    feed_text(mask, '{"a": "' + "wrong before. " * 2)
    assert len(allowed_chars(mask)) > 100  # 28 bytes of a unit: not yet a loop
    feed_text(mask, "wrong before. ")  # three repeats, 42 bytes
    assert allowed_chars(mask) == ['"'] and mask.loops_cut == 1
    feed_text(mask, '"}')
    assert mask.accepting


@pytest.mark.parametrize("text", [
    "1234567890" * 3,  # 30 bytes: under the 32-byte floor
    "The quick brown fox jumps over the lazy dog, then naps. " * 2,  # two repeats of a long unit
    "aaaa bbbb cccc dddd eeee ffff gggg hhhh iiii",  # varied
])
def test_loop_guard_leaves_ordinary_strings_alone(text: str) -> None:
    mask = TokenMask(BYTES, GUARDED)
    feed_text(mask, '{"a": "' + text)
    assert len(allowed_chars(mask)) > 100 and mask.loops_cut == 0


def test_loop_guard_is_off_when_asked_and_outside_strings() -> None:
    off = TokenMask(BYTES, GUARDED, loop_guard=False)
    feed_text(off, '{"a": "' + "ab" * 40)
    assert len(allowed_chars(off)) > 100
    repeated_structure = TokenMask(BYTES, 'start: "[" ("1," )* "1]"')
    feed_text(repeated_structure, "[" + "1," * 40)  # repetition outside any string is never cut
    assert allowed_chars(repeated_structure) == ["1"]


def test_loop_guard_follows_escapes() -> None:
    guard = LoopGuard()
    guard.feed(b'{"a": "say \\"' + b"ha" * 64)  # short units are data up to 128 characters
    assert guard.in_string and not guard.looping
    guard.feed(b"ha")  # 130 characters of "ha"
    assert guard.looping
    guard.feed(b'"')
    assert not guard.in_string and not guard.looping


CALL_LIST = ('start: "[" call ("," call)* "]"\n'
             'call: "{\\"n\\": " NUMBER "}"\n'
             'NUMBER: /[0-9]+/')


def test_a_call_list_that_repeats_an_earlier_call_is_closed_after_it() -> None:
    mask = TokenMask(BYTES, CALL_LIST)
    feed_text(mask, '[{"n": 10},{"n": 5},{"n": 10}')  # a repeat of a call that is not the one before
    assert allowed_chars(mask) == ["]"] and mask.loops_cut == 1
    feed_text(mask, "]")
    assert mask.accepting and not mask.decoding()["loop_guard_stopped"]


def test_a_repeating_list_past_its_close_stops_with_the_end_token() -> None:
    """A token like ``},`` can end the repeat and open the next call at once; then the list cannot be
    closed, so the generation stops and the engine keeps the calls made (parse_stopped_list)."""
    tokenizer = llguidance.LLTokenizer("byte")
    mask = TokenMask(tokenizer, CALL_LIST)
    feed_text(mask, '[{"n": 1},{"n": 2},{"n": 1},')
    assert mask.stopped and mask.decoding()["loop_guard_stopped"]
    allowed = mask.allowed(tokenizer.vocab_size)
    assert set(np.flatnonzero(allowed)) == set(tokenizer.eos_tokens)


def counts(values: list[int], j: int) -> bool:
    """``values[j]`` ends five values in a row that step by the same nonzero amount."""
    return j >= 4 and values[j] != values[j - 1] and len({values[k] - values[k - 1] for k in range(j - 3, j + 1)}) == 1


@given(st.lists(st.integers(min_value=0, max_value=30), min_size=1, max_size=12)
       | st.builds(lambda a, d, n, tail: [a + d * k for k in range(n)] + tail, st.integers(0, 30),
                   st.integers(-5, 5), st.integers(3, 8), st.lists(st.integers(0, 30), max_size=3)))
def test_the_list_guard_flags_exactly_the_repeats(values: list[int]) -> None:
    """Oracle: a call list loops from the first call that repeats an earlier, non-adjacent call, or
    that is the third identical call in a row (two are allowed), or the fifth of calls that count
    (the same step between each; four are allowed)."""
    guard = LoopGuard()
    guard.feed(b"[")
    for i, value in enumerate(values):
        guard.feed((b", " if i else b"") + b'{"name": "f", "arguments": {"n": %d}}' % value)
        expected = any(values[j] in values[:max(j - 1, 0)] or (j >= 2 and values[j - 2] == values[j - 1] == values[j])
                       or counts(values, j) for j in range(i + 1))
        assert guard.list_looping == expected, values[:i + 1]


def test_the_list_guard_ignores_objects_inside_an_answer_object() -> None:
    guard = LoopGuard()
    guard.feed(b'{"items": [{"a": 1}, {"a": 2}, {"a": 1}], "b": {"a": 1}}')
    assert not guard.list_looping
