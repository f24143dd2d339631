"""Ranking tools by how well their descriptions match a conversation: BM25 over what a tool says.

Hammer was trained to choose a tool by its description rather than its name (function masking), so
the ranking reads what a person reads: the description, every parameter's name and description (nested
ones too), enum values, and the name split into words (``get_weather`` and ``getWeather`` read
``get weather``). The scores are Okapi BM25 (Lucene's variant) from ``bm25s``, over lower-case
words with English stop words removed and a light plural folding, so "cities" meets "city".
Measured against embeddings on BFCL's functions: ``benchmarks/tool_ranking_recall.py``.

Example:
    >>> from hammer_plugins.tools import to_tool
    >>> tools = [to_tool({"name": "send_email", "description": "Send an email to someone."}),
    ...          to_tool({"name": "get_weather", "description": "Current weather in a city."})]
    >>> ranking = ToolRanking(tools)
    >>> scores = ranking.scores("What's the weather like in Paris?")
    >>> scores[1] > scores[0] == 0.0
    True
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from hammer_plugins.tools.definition import Tool

# Word pieces: runs of letters or of digits, split at camelCase humps ("getHTTPResponse" ->
# get, HTTP, Response); underscores, dots and dashes separate like spaces.
_PIECES = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+|[^\W\d_A-Za-z]+")
# Beyond this many characters of a description, more text adds nothing to the ranking but time.
_MAX_TEXT = 4000
_MAX_WORDS_PER_TOOL = 600
MAX_TERM_REPEATS = 2
"""Times one word of a tool counts (its name and its description): a description that repeats its words (keyword
stuffing, a look-alike of another tool) gains nothing from the repeats, and its length grows with them."""


# Words of asking rather than of a topic, beyond bm25s's English stop words.
_ASKING = ("what", "which", "who", "whom", "whose", "how", "when", "where", "why", "please", "can", "could", "would",
           "should", "me", "my", "you", "your", "i", "we", "our", "us", "let", "want", "need", "like", "tell")


def _stop_words() -> frozenset[str]:
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN) | frozenset(_ASKING)


_STOP: frozenset[str] | None = None


def words(text: str) -> list[str]:
    """The ranking's words of ``text``: lower-case pieces, stop words and one-character pieces dropped, a
    plural ``-s``/``-es``/``-ies`` folded.

    Example:
        >>> words("getWeatherForecast for the next 30 cities")
        ['get', 'weather', 'forecast', 'next', '30', 'city']
    """
    global _STOP
    if _STOP is None:
        _STOP = _stop_words()
    out = []
    for piece in _PIECES.findall(text[:_MAX_TEXT]):
        word = piece.lower()
        if word in _STOP or len(word) < 2:  # one letter or digit ("r0r", "v2 of 3") says nothing of a topic
            continue
        out.append(_fold(word))
    return out


def _fold(word: str) -> str:
    """A light plural folding (no stemmer dependency): cities -> city, boxes -> box, tools -> tool."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "xes", "sses")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _schema_text(schema: Any, depth: int = 0) -> Iterator[str]:
    """Parameter names, descriptions and enum values of a JSON Schema, nested ones included."""
    if not isinstance(schema, Mapping) or depth > 8:
        return
    if isinstance(schema.get("description"), str):
        yield schema["description"]
    if isinstance(schema.get("enum"), list):
        yield " ".join(str(v) for v in schema["enum"][:50])
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for name, sub in properties.items():
            yield str(name)
            yield from _schema_text(sub, depth + 1)
    for key in ("items", "additionalProperties"):
        yield from _schema_text(schema.get(key), depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in schema.get(key) or [] if isinstance(schema.get(key), list) else []:
            yield from _schema_text(sub, depth + 1)


def tool_words(tool: Tool) -> list[str]:
    """What the ranking reads of a tool: its name's words, description, parameters (see the module).

    Example:
        >>> from hammer_plugins.tools import to_tool
        >>> tool_words(to_tool({"name": "getWeather", "description": "Weather now.", "parameters": {
        ...     "type": "object", "properties": {"city": {"type": "string", "description": "A city."}}}}))
        ['get', 'weather', 'weather', 'now', 'city', 'city']
    """
    parts = [tool.name, tool.description, *_schema_text({"properties": tool.parameters.get("properties")})]
    found: list[str] = []
    seen: dict[str, int] = {}
    for part in parts:
        for word in words(part):
            seen[word] = seen.get(word, 0) + 1
            if seen[word] <= MAX_TERM_REPEATS:
                found.append(word)
        if len(found) >= _MAX_WORDS_PER_TOOL:
            break
    return found[:_MAX_WORDS_PER_TOOL]


class ToolRanking:
    """BM25 scores of a tool set against a query: built once per tool set, asked once per call.

    Example:
        >>> from hammer_plugins.tools import to_tool
        >>> ranking = ToolRanking([to_tool({"name": "ping", "description": "Ping a host."})])
        >>> ranking.scores("ping example.com")[0] > 0, ranking.scores("hello")
        (True, [0.0])
    """

    def __init__(self, tools: Sequence[Tool]) -> None:
        import bm25s

        self.size = len(tools)
        corpus = [tool_words(t) or ["\x00"] for t in tools]  # an empty document must still count
        self._retriever = bm25s.BM25()
        self._retriever.index(corpus, show_progress=False)

    def scores(self, query: str) -> list[float]:
        """One BM25 score per tool, in the tools' order (0.0: no word in common)."""
        vocabulary = self._retriever.vocab_dict
        terms = [w for w in dict.fromkeys(words(query)) if w in vocabulary]
        if not terms:
            return [0.0] * self.size
        return [float(s) for s in self._retriever.get_scores(terms)]
