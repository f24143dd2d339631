"""Prompt-lookup drafts: guess the next tokens by finding the latest tokens earlier in the context.

A tool call copies a lot from its prompt: function and parameter names from the tools block,
argument values from the question. When the last ``ngram`` tokens occurred before, the tokens that
followed them then are a cheap guess of what follows now. The guess is only a draft: the backend
evaluates it in one batch and keeps the longest part greedy decoding would have produced anyway,
so the output is unchanged (``LlamaCppBackend(draft_tokens=...)``).

Example:
    >>> lookup = PromptLookup([5, 6, 7, 8, 9, 5, 6], ngram=2)
    >>> lookup.draft(3)
    [7, 8, 9]
    >>> lookup.extend([7]); lookup.draft(3)
    [8, 9, 5]
"""

from __future__ import annotations

from collections.abc import Sequence


class PromptLookup:
    """An index of the context's n-grams: where each last occurred, kept up to date as tokens come.

    Example:
        >>> PromptLookup([1, 2, 3], ngram=2).draft(4)
        []
    """

    def __init__(self, context: Sequence[int], ngram: int = 3) -> None:
        if ngram < 1:
            raise ValueError(f"ngram={ngram}: at least one token must match")
        self.ngram = ngram
        self.tokens: list[int] = []
        self._latest: dict[tuple[int, ...], int] = {}  # n-gram -> index just after its latest earlier occurrence
        self.extend(context)

    def extend(self, tokens: Sequence[int]) -> None:
        """Add tokens to the context (each generated token, as it is accepted)."""
        for token in tokens:
            n = len(self.tokens)
            if n >= self.ngram:
                # Index the n-gram that ends before this token: the newest key is never its own match.
                self._latest[tuple(self.tokens[n - self.ngram:])] = n
            self.tokens.append(int(token))

    def draft(self, k: int) -> list[int]:
        """Up to ``k`` tokens that followed the latest earlier occurrence of the last n-gram ([] if none)."""
        if k <= 0 or len(self.tokens) < self.ngram:
            return []
        start = self._latest.get(tuple(self.tokens[-self.ngram:]))
        if start is None:
            return []
        return self.tokens[start:start + k]
