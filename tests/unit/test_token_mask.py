"""The llguidance token mask both local backends decode with (a byte-level tokenizer: no model)."""

from __future__ import annotations

import llguidance
import numpy as np
import pytest

from hammer_plugins.backends.token_mask import LogitsMask, TokenMask

BYTES = llguidance.LLTokenizer("byte")


def allowed_chars(mask: TokenMask) -> list[str]:
    return [chr(i) for i in range(256) if mask.allowed(BYTES.vocab_size)[i]]


def test_mask_follows_the_grammar_token_by_token() -> None:
    mask = TokenMask(BYTES, 'root ::= "[" ("a" | "b") "]"')
    assert allowed_chars(mask) == ["["]
    mask.consume([ord("[")])
    assert allowed_chars(mask) == ["a", "b"]
    mask.consume([ord("b"), ord("]")])
    assert mask.accepting and mask.stopped


def test_a_forbidden_token_raises_instead_of_being_skipped() -> None:
    mask = TokenMask(BYTES, 'root ::= "ok"')
    with pytest.raises(ValueError, match="breaks the grammar"):
        mask.consume([ord("x")])


def test_an_unparsable_grammar_is_an_error_naming_llguidance() -> None:
    with pytest.raises(Exception, match="(?i)grammar|parse|expected"):
        TokenMask(BYTES, "root ::= (")


def test_logits_mask_consumes_only_what_follows_the_prompt() -> None:
    processor = LogitsMask(TokenMask(BYTES, 'root ::= "hi"'), prompt_tokens=3)
    scores = processor(np.array([7, 8, 9]), np.zeros(BYTES.vocab_size, dtype=np.float32))
    assert int(np.argmax(scores)) == ord("h") and np.isinf(scores[ord("i")])
    scores = processor(np.array([7, 8, 9, ord("h")]), np.zeros(BYTES.vocab_size, dtype=np.float32))
    assert int(np.argmax(scores)) == ord("i") and np.isinf(scores[ord("h")])
    processor.check()  # nothing went wrong


def test_logits_mask_keeps_a_failure_for_the_backend_and_allows_nothing() -> None:
    # Inside llama-cpp-python's C callback an exception would only be printed; the processor keeps it.
    processor = LogitsMask(TokenMask(BYTES, 'root ::= "hi"'), prompt_tokens=0)
    scores = processor(np.array([ord("x")]), np.zeros(BYTES.vocab_size, dtype=np.float32))
    assert np.all(np.isinf(scores))
    with pytest.raises(RuntimeError, match="constrained decoding failed"):
        processor.check()
