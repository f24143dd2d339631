"""PromptLookup against a brute-force search: the draft follows the latest earlier occurrence of the last n-gram."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_profiles import examples

from hammer_plugins.backends.prompt_lookup import PromptLookup


def brute_force(tokens: list[int], ngram: int, k: int) -> list[int]:
    if len(tokens) < ngram:
        return []
    tail = tokens[-ngram:]
    for start in range(len(tokens) - ngram - 1, -1, -1):  # latest first, never the tail itself
        if tokens[start:start + ngram] == tail:
            return tokens[start + ngram:start + ngram + k]
    return []


@settings(max_examples=examples(300), deadline=None)
@given(prompt=st.lists(st.integers(0, 4), max_size=40), generated=st.lists(st.integers(0, 4), max_size=20),
       ngram=st.integers(1, 4), k=st.integers(0, 6))
def test_drafts_match_a_brute_force_search(prompt: list[int], generated: list[int], ngram: int, k: int) -> None:
    lookup = PromptLookup(prompt, ngram=ngram)
    assert lookup.draft(k) == brute_force(prompt, ngram, k)
    for i, token in enumerate(generated):  # kept up to date one accepted token at a time
        lookup.extend([token])
        assert lookup.draft(k) == brute_force(prompt + generated[: i + 1], ngram, k)
