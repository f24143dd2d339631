"""The built-in tool selectors: by meaning (the default) and by words.

:class:`MeaningSelector` scores every tool by the meaning of the question: sentence embeddings
(:mod:`~hammer_plugins.tools.embedding`, Universal Sentence Encoder Multilingual) fused with BM25
(:mod:`~hammer_plugins.tools.ranking`): ``0.5 * meaning + 0.5 * words``, the meaning scaled to 0..1 over the tool
set and BM25 divided by the larger of its best score and a strong match's.
BM25 still wins where the question names the tool's own words (literal questions, identifiers); the embedding
wins for other words and other languages.

A question that asks for several things ("the area of a circle, and also the population of France") gets
candidates for each part: the question is split at sentence ends and at the words that join requests
(", and", "also", "then", "además", "ensuite", "außerdem", "然后", ...), and the best tool of each part joins
the best tools of the whole question. The engine then keeps what fits the tool budget.

Measured on BFCL v4's questions among 1,000 pooled functions, and on paraphrased questions in six languages
(``benchmarks/tool_selection_recall.py``; the tables are in docs/tools.md).

Example:
    >>> from hammer_plugins.tools import to_tool
    >>> from hammer_plugins.tools.selector import SelectionQuery
    >>> tools = [to_tool({"name": f"tool_{i}", "description": f"Does thing number {i} with files."}) for i in range(30)]
    >>> tools.append(to_tool({"name": "get_weather", "description": "Get the current weather for a city."}))
    >>> "get_weather" in MeaningSelector().select(SelectionQuery("上海明天会下雨吗？"), tools).offered
    True
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hammer_plugins.support.sized_cache import SizedCache
from hammer_plugins.tools.definition import Tool
from hammer_plugins.tools.embedding import (
    MAX_QUERY_CHARS,
    Embedder,
    EmbedderMissingError,
    ToolVectors,
    VectorStore,
    default_embedder,
)
from hammer_plugins.tools.look_alikes import LookAlikes
from hammer_plugins.tools.ranking import ToolRanking
from hammer_plugins.tools.selector import FunctionSelector, Selection, SelectionQuery, ToolSelector

log = logging.getLogger(__name__)
_WARNED = False

MEANING_WEIGHT = 0.5
"""The embedding's share of the fused score (BM25 has the rest)."""
STRONG_MATCH = 10.0
"""The BM25 score that counts as a full match: BM25 scores are divided by the larger of their best and this, so a
question sharing one common word with a few tools ("Paris") does not outweigh the meaning, and one that names a
tool's own rare words does. Tuned with the weight on the tune halves only; docs/tools.md has the sweep."""
BEST_OF_QUESTION = 4
"""Candidates taken from the whole question's ranking."""
MIN_SHARE_OF_BEST = 0.7
"""A candidate of the whole question beyond its best is offered only when it scores at least this share of the
best: a question one tool clearly fits ("What's the weather in Paris?": 0.84 against 0.21 for the next) gets that
tool alone, an unclear one several. On the tune halves (docs/tools.md): 3.5 tools offered instead of 4.6, for
1 point of BFCL's questions and 3 of the paraphrases; the stand-in model refused that question over four tools."""
LEXICAL_MIN_SHARE = 0.4
"""The words-only selector's share rule: a tool beyond the best is offered only when its BM25 score is at least this
share of the best. A description stuffed with every topic's words matches many questions weakly (about a third of the
best): on the red team's tool set it joined 12 of 24 offers with no rule, 1 with this one; on BFCL's tune half
among 1,000 functions the recall is the same as with no rule (0.781), and 0.5 costs 2 points."""
BEST_OF_PART = 1
"""Candidates taken from each part's ranking, when the question has several parts."""
RESERVE = 4
"""Candidates kept back for one widening when Hammer answers ``[]``."""
MAX_PARTS = 6

# Where one request ends and the next begins, in the languages measured (and their punctuation).
_PART_BREAK = re.compile(
    r"(?<=[.?!;])\s+|[。？！；\n]|\s*[,，]\s*(?:and|y|et|und|e)\s+"
    r"|[\s,]+(?:and then|and also|also|then|as well as|additionally|after that|in addition|y también|además|y luego|"
    r"et aussi|puis|ensuite|und dann|und auch|außerdem|anschließend)[\s,]+|并且|然后|以及|还有|同时|另外", re.IGNORECASE)
_MIN_PART_CHARS = 6


def question_parts(text: str) -> list[str]:
    """The parts of a question that may each need their own tool (at most ``MAX_PARTS``; one part: none).

    Example:
        >>> question_parts("Find the area of a circle with radius 5. Also, what is the population of France?")
        ['Find the area of a circle with radius 5.', 'Also, what is the population of France?']
        >>> question_parts("Weather in Paris?")
        []
    """
    # The user's text, bounded before the regex: a run of spaces with no joining word after it costs the
    # splitter time quadratic in its length (Python's engine; RE2 has no lookbehind).
    parts = [p.strip(" ,，、") for p in _PART_BREAK.split(text[:MAX_QUERY_CHARS]) if p]
    parts = [p for p in parts if len(p) >= _MIN_PART_CHARS]
    return parts[:MAX_PARTS] if len(parts) > 1 else []


def tool_text(tool: Tool) -> str:
    """What the embedder reads of a tool: its name's words and its description."""
    name = re.sub(r"[_.\-]+", " ", re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", tool.name))
    return f"{name}: {tool.description}"


class _Index:
    """One tool set's vectors and BM25 index (built once per tool set, shared by the process)."""

    def __init__(self, tools: Sequence[Tool], vectors: ToolVectors) -> None:
        self.lexical = ToolRanking(tools)
        self.look_alikes = LookAlikes(tools)
        self.matrix = vectors.of([tool_text(t) for t in tools])


# The tool sets indexed recently, shared by every selector of the process (bounded by their vectors' bytes).
_RANKINGS: SizedCache[tuple[str, ...], _Index] = SizedCache(32, 64_000_000)


def _scaled(values: np.ndarray) -> np.ndarray:
    low, high = float(values.min()), float(values.max())
    return (values - low) / (high - low) if high > low else np.zeros_like(values)


class MeaningSelector:
    """The default selector: meaning and words fused, candidates per part of the question (see the module).

    ``embedder``: any :class:`~hammer_plugins.tools.embedding.Embedder` (default: USE Multilingual);
    ``store``: where tool vectors are kept (default: the cache folder; ``None``: memory only).

    Example:
        >>> from hammer_plugins.tools import to_tool
        >>> tools = [to_tool({"name": "send_email", "description": "Send an email."}),
        ...          to_tool({"name": "get_weather", "description": "Current weather in a city."})]
        >>> MeaningSelector().scores("¿Hace frío en Madrid hoy?", tools).argmax()
        np.int64(1)
    """

    def __init__(self, embedder: Embedder | None = None, store: VectorStore | None | bool = True) -> None:
        self._embedder = embedder
        self._store = VectorStore() if store is True else (store or None)
        self._vectors: ToolVectors | None = None
        # The tool sets asked about last, by identity: the engine passes its bound tool set's own tuple on every
        # call, and fingerprinting 1,000 tools again would cost more than the whole selection (the references
        # held here keep those ids from being reused).
        # (In the process's one memory total: the tool sets and their indexes are counted.)
        self._recent: SizedCache[int, tuple[Sequence[Tool], _Index]] = SizedCache(8, 64 * 2**20)

    def _index(self, tools: Sequence[Tool]) -> _Index:
        recent = self._recent.get(id(tools))
        if recent is not None and recent[0] is tools and isinstance(tools, tuple):
            return recent[1]
        if self._vectors is None:
            self._vectors = ToolVectors(self._embedder or default_embedder(), self._store)
        key = (self._vectors.embedder.identity, *(t.fingerprint() for t in tools))
        vectors = self._vectors
        found = _RANKINGS.get_or_make(key, lambda: _Index(tools, vectors),
                                      lambda index: index.matrix.nbytes + sum(map(len, key)))
        if isinstance(tools, tuple):  # immutable: the same object is the same tool set
            self._recent.put(id(tools), (tools, found))
        return found

    def scores(self, text: str, tools: Sequence[Tool]) -> np.ndarray:
        """The fused score of each tool for ``text``, in the tools' order (0..1)."""
        return self._scores(self._index(tools), text)

    def _scores(self, index: _Index, text: str) -> np.ndarray:
        assert self._vectors is not None
        meaning = index.matrix @ self._vectors.embedder.query(text)
        words = np.asarray(index.lexical.scores(text), dtype=np.float32)
        strength = max(float(words.max(initial=0.0)), STRONG_MATCH)
        return MEANING_WEIGHT * _scaled(meaning) + (1 - MEANING_WEIGHT) * words / strength

    def select(self, query: SelectionQuery, tools: Sequence[Tool]) -> Selection:
        if not tools:
            return Selection(offered=())
        try:
            return self._select(query, tools)
        except EmbedderMissingError as exc:
            if self._embedder is not None:
                raise
            # A default that works without the embedder's package (removed by hand): words only, said once.
            global _WARNED
            if not _WARNED:
                log.warning("%s Tool selection falls back to BM25 (words only).", exc)
                _WARNED = True
            return LexicalSelector().select(query, tools)

    def _select(self, query: SelectionQuery, tools: Sequence[Tool]) -> Selection:
        index = self._index(tools)
        scores = self._scores(index, query.text)
        # The ranking without the copies of an earlier tool's description (tools/look_alikes.py): a look-alike
        # never takes a place from the tool it copies, nor from any other.
        ranked, copies = index.look_alikes.skip(np.argsort(-scores, kind="stable").tolist(), BEST_OF_QUESTION + RESERVE)
        # The best match of the whole question first, then the best of each part (a question of several requests
        # needs one tool for each, and the budget may not reach the whole question's fourth), then the rest.
        chosen = [ranked[0]]
        # Each part of the user's last turn brings its own best tool (the earlier turns joined to a short one only
        # give it a topic: "And in Oslo?" is one request, not two).
        for part in question_parts(query.question or query.text):
            best_of_part, _ = index.look_alikes.skip(np.argsort(-self._scores(index, part), kind="stable").tolist(),
                                                     BEST_OF_PART)
            chosen += [i for i in best_of_part if i not in chosen]
        needed = tuple(tools[i].name for i in chosen)
        best = float(scores[ranked[0]])
        chosen += [i for i in ranked[1:BEST_OF_QUESTION] if i not in chosen and float(scores[i]) >= MIN_SHARE_OF_BEST * best]
        reserve = [i for i in ranked[1:] if i not in chosen][:RESERVE] + copies[:RESERVE]
        return Selection(offered=tuple(tools[i].name for i in chosen), reserve=tuple(tools[i].name for i in reserve),
                         needed=needed)


class LexicalSelector:
    """Selection by words alone (BM25): no embedder needed; a question must share a word with a description.

    Example:
        >>> from hammer_plugins.tools import to_tool
        >>> tools = [to_tool({"name": "send_email", "description": "Send an email."}),
        ...          to_tool({"name": "get_weather", "description": "Current weather in a city."})]
        >>> LexicalSelector().select(SelectionQuery("weather in Paris"), tools).offered
        ('get_weather',)
    """

    def select(self, query: SelectionQuery, tools: Sequence[Tool]) -> Selection:
        key = tuple(t.fingerprint() for t in tools)
        ranking, look_alikes = _LEXICAL.get_or_make(key, lambda: (ToolRanking(tools), LookAlikes(tools)),
                                                    lambda _: sum(map(len, key)) // 4)
        scores = ranking.scores(query.text)
        order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: (-scores[i], i))
        if not order:
            return Selection(offered=())
        # A share rule, as the meaning selector has: a tool that matches many words weakly (a description stuffed
        # with every topic's words) does not join one that matches the question well.
        ranked, copies = look_alikes.skip(order, BEST_OF_QUESTION + RESERVE)
        if not ranked:  # every tool that matched copies another one
            return Selection(offered=(), reserve=tuple(tools[i].name for i in copies[:RESERVE]))
        best = scores[ranked[0]]
        chosen = [ranked[0], *(i for i in ranked[1:BEST_OF_QUESTION] if scores[i] >= LEXICAL_MIN_SHARE * best)]
        reserve = [i for i in ranked[1:] if i not in chosen][:RESERVE] + copies[:RESERVE]
        return Selection(offered=tuple(tools[i].name for i in chosen),
                         reserve=tuple(tools[i].name for i in reserve), needed=(tools[ranked[0]].name,))


_LEXICAL: SizedCache[tuple[str, ...], tuple[ToolRanking, LookAlikes]] = SizedCache(32, 16 * 2**20)


SELECTOR_NAMES = ("meaning", "bm25")


def as_selector(value: str | ToolSelector | Callable[..., Any]) -> ToolSelector:
    """A :class:`ToolSelector` from a built-in name (``"meaning"``, ``"bm25"``), a selector, or a function.

    Example:
        >>> type(as_selector("bm25")).__name__
        'LexicalSelector'
    """
    if isinstance(value, str):
        if value == "meaning":
            return MeaningSelector()
        if value == "bm25":
            return LexicalSelector()
        raise ValueError(f"unknown tool_selector {value!r}: use one of {SELECTOR_NAMES}, an object with "
                         "select(query, tools), or a function (query_text, tools) -> tool names")
    if isinstance(value, ToolSelector):
        return value
    if callable(value):
        return FunctionSelector(value)
    raise TypeError(f"tool_selector must be {SELECTOR_NAMES}, a ToolSelector or a function, got "
                    f"{type(value).__name__}")
