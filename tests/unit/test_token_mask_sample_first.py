"""``TokenMask.allows`` and ``may_force`` (issue 33: sample first, check after) agree with the full mask.

The decoding loops pick the unconstrained argmax when ``allows`` says the grammar takes it, and skip
the mask when ``may_force`` is False; both are checked against :meth:`TokenMask.allowed` itself, for
every token of the real Qwen2.5 vocabulary at every step of real answers (the tool-call grammar, the
loop guard cutting a string and a call list, the end of the answer).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from installed import require

from hammer_plugins import Tool
from hammer_plugins.grammar.builder import build_grammar
from hammer_plugins.grammar.token_mask import TokenMask

WEATHER = Tool(name="get_weather", description="Weather", parameters={
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]})

ANSWERS = [
    '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}]',
    '[]',
    '[\n  {"name": "get_weather", "arguments": {"city": "Rome"}},\n  {"name": "get_weather", "arguments": {"city": "Oslo"}}\n]',
    # a string the loop guard closes, then a call list it closes after a repeat
    '[{"name": "get_weather", "arguments": {"city": "' + "AI-powered " * 3 + 'AI-powered"}}]',
    '[{"name": "get_weather", "arguments": {"city": "A"}}, {"name": "get_weather", "arguments": {"city": "B"}}, '
    '{"name": "get_weather", "arguments": {"city": "A"}}]',
]


def _steps(tokenizer: Any, text: str) -> Any:
    """The mask before each token of ``text`` and after the last (where the grammar still goes on)."""
    mask = TokenMask(tokenizer, build_grammar([WEATHER], "auto"))
    tokens = tokenizer.tokenize_str(text)
    for token in tokens:
        yield mask
        allowed = mask.allowed(tokenizer.vocab_size)
        if not allowed[token]:
            return  # the guard cut here (the answer goes on differently): the steps so far were checked
        mask.consume([token])
        if mask.stopped:
            return
    yield mask


@pytest.mark.parametrize("text", ANSWERS)
def test_allows_is_the_mask_for_every_token(qwen_lltokenizer: Any, text: str) -> None:
    n = qwen_lltokenizer.vocab_size
    checked = guarded = 0
    for mask in _steps(qwen_lltokenizer, text):
        allowed = mask.allowed(n)
        guarded += mask.guarding
        # Every allowed token, and a spread of refused ones (all 152k per step would take minutes).
        refused = np.flatnonzero(~allowed)
        sample = [*np.flatnonzero(allowed)[:400].tolist(), *refused[:: max(1, len(refused) // 400)].tolist()]
        assert all(mask.allows(t) == bool(allowed[t]) for t in sample), text
        assert not mask.allows(n) and not mask.allows(-1)
        if np.count_nonzero(allowed) == 1:
            assert mask.may_force()  # never skip the mask where it would save a model run
        checked += 1
    assert checked > 0
    if "AI-powered" in text or '"city": "A"}}]' in text:
        assert guarded  # the guard's restriction was among the states checked


def test_allows_takes_the_end_token_only_where_the_answer_is_complete() -> None:
    import llguidance

    tokenizer = llguidance.LLTokenizer("byte")
    mask = TokenMask(tokenizer, 'start: "a" "b"?')
    end = tokenizer.eos_tokens[0]
    assert not mask.allows(end) and mask.allows(ord("a")) and not mask.allows(ord("b"))
    assert mask.may_force()  # "a" is the only way on
    mask.consume([ord("a")])
    assert mask.allows(end) and mask.allows(ord("b")) and not mask.may_force()
    assert not mask.matcher.is_error()  # asking about a refused token changed nothing


def test_transformers_pick_is_the_masked_choice() -> None:
    """The transformers backend's sample-first pick, against the mask applied first (no model needed)."""
    torch = require("torch")
    import llguidance

    from hammer_plugins.backends.base import GenerationSettings
    from hammer_plugins.backends.transformers import TransformersBackend

    tokenizer = llguidance.LLTokenizer("byte")
    backend = TransformersBackend.__new__(TransformersBackend)  # _pick reads no loaded state
    generator = torch.Generator().manual_seed(0)
    greedy = GenerationSettings(temperature=0.0)
    for seed in range(50):
        mask = TokenMask(tokenizer, 'start: /[a-f]+/')
        logits = torch.randn(tokenizer.vocab_size, generator=torch.Generator().manual_seed(seed))
        allowed = torch.from_numpy(mask.allowed(tokenizer.vocab_size))
        expected = int(torch.argmax(logits.masked_fill(~allowed, float("-inf"))))
        assert backend._pick(torch, logits, greedy, generator, mask) == expected
    # Temperature sampling by rejection: each allowed token keeps its masked probability.
    mask = TokenMask(tokenizer, 'start: "a" | "b" | "c"')
    logits = torch.zeros(tokenizer.vocab_size)
    logits[ord("a")], logits[ord("b")] = 3.0, 2.0  # the raw distribution is mostly elsewhere (259 others)
    hot = GenerationSettings(temperature=1.0)
    counts = {c: 0 for c in "abc"}
    for _ in range(3000):
        counts[chr(backend._pick(torch, logits, hot, generator, mask))] += 1
    z = sum(torch.exp(torch.tensor(v)).item() for v in (3.0, 2.0, 0.0))
    for c, v in zip("abc", (3.0, 2.0, 0.0), strict=True):
        assert abs(counts[c] / 3000 - torch.exp(torch.tensor(v)).item() / z) < 0.03, counts
