"""``hammer eval academic`` scores every variant by one path, the authors' (issue 32).

Masking off or on, the metric reads the model's text (masked names mapped back), so a call list cut
at ``max_tokens`` is a format error either way; the engine's parsed calls are a separate, labelled
*engine answer* score, for every variant alike. The recorded tables in ``docs/benchmarks/academic/``
are what their journals score.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from shared_data import REPO, academic_dir

from hammer_evals.academic import (
    SETS,
    Variant,
    evaluate_entries,
    gold_answer_text,
    load_set,
    parse_answer,
    score_answers,
)
from hammer_evals.academic.evaluation import (
    answer_text,
    inference_mask,
    load_answers,
    markdown_table,
    results_json,
)
from hammer_plugins import HammerEngine, ScriptedBackend, ToolCall

RECORDS = REPO / "docs" / "benchmarks" / "academic"
OFF, ON = Variant(), Variant(mask_names=True)


@pytest.fixture(scope="module")
def data() -> dict[str, list[Any]]:
    return {name: load_set(academic_dir(), name) for name in SETS}


def test_the_inference_mask_is_the_one_the_engine_shows(data: dict[str, list[Any]]) -> None:
    """Answers are read back without the engine: its mask must be a pure function of the tools."""
    engine = HammerEngine(backend=ScriptedBackend([]))
    for rows in data.values():
        for entry in rows[:30]:
            shown = engine.bind(entry.tools, mask_names=True).mask
            assert shown is not None
            ours = inference_mask(entry)
            assert (ours.function_names, ours.parameter_names) == (shown.function_names, shown.parameter_names)


def _masked_text(calls: list[dict[str, Any]], entry: Any) -> str:
    mask = inference_mask(entry)
    masked = [mask.mask_call(ToolCall(name=c["name"], arguments=c["arguments"])) for c in calls]
    return gold_answer_text([{"name": c.name, "arguments": c.arguments} for c in masked])


def test_masked_names_map_back_exactly_and_unparsed_text_stays(data: dict[str, list[Any]]) -> None:
    for rows in data.values():
        for entry in rows:
            text = answer_text(_masked_text(entry.gold, entry), inference_mask(entry))
            assert parse_answer(text) == entry.gold  # gold calls to tools the entry lacks stay as written
    entry = data["sealtool"][0]
    cut = _masked_text(entry.gold, entry)[:-12]
    assert answer_text(cut, inference_mask(entry)) == cut  # a format error, as the authors count it


def _reply(entry: Any, kind: str, masked: bool) -> str:
    """One answer in real names (masking off) or masked ones (on): a complete call list, the list twice
    over (which ``max_tokens`` cuts inside its last call), or prose."""
    if kind == "prose":
        return "I would call a tool here."
    calls = entry.gold if kind == "complete" else entry.gold + entry.gold
    return _masked_text(calls, entry) if masked else gold_answer_text(calls)


def test_masking_off_and_on_are_scored_by_one_path(data: dict[str, list[Any]]) -> None:
    """The model writes the same answers, in real names (masking off) or masked ones (on): every score
    must be equal. Scoring one variant from the engine's parsed calls and the other from the text (the
    bug of issue 32) makes the cut answers differ."""
    entries = [e for e in data["sealtool"][:12] if e.gold and all(c["arguments"] for c in e.gold)][:4]
    assert len(entries) == 4
    kinds = ["complete", "cut", "prose"]
    scores: dict[tuple[str, str, str], Any] = {}
    for variant in (OFF, ON):
        for kind in kinds:
            for entry in entries:
                reply = _reply(entry, kind, variant.mask_names)
                # The scripted backend spends a token a word: cut two words before the end, in the last call.
                budget = len(reply.split(" ")) - 2 if kind == "cut" else 256
                engine = HammerEngine(backend=ScriptedBackend([reply]), max_tokens=budget)
                result = evaluate_entries({"sealtool": [entry]}, engine=engine, variants=[variant], progress=False)
                scores[(variant.label, kind, entry.key)] = (result.scores[variant.label]["sealtool"],
                                                            result.engine_scores[variant.label]["sealtool"])
    for kind in kinds:
        for entry in entries:
            assert scores[(OFF.label, kind, entry.key)] == scores[(ON.label, kind, entry.key)], (kind, entry.key)
    for entry in entries:
        text, engine = scores[(ON.label, "cut", entry.key)]
        # The cut list: one format error for the authors' scorer; the engine keeps its complete calls.
        assert (text.format_errors, text.correct_calls) == (1, 0)
        assert engine.format_errors == 0 and engine.correct_calls >= len(entry.gold)
        text, engine = scores[(ON.label, "complete", entry.key)]
        assert text.f1_api == engine.f1_api == 1.0


@pytest.mark.parametrize("name", ["default", "smollm2"])
def test_the_recorded_tables_are_what_their_journals_score(name: str, data: dict[str, list[Any]]) -> None:
    """docs/benchmarks/academic holds the journals: the tables and results.json must follow from them."""
    recorded = results_json(RECORDS / f"{name}_results.json")
    variants = [Variant(names=n, mask_names=m) for n in ("original", "masked") for m in (False, True)]
    result = evaluate_entries({s: rows[:10] for s, rows in data.items()},
                              answers=load_answers(RECORDS / f"{name}_answers.jsonl"),
                              variants=variants, name=recorded["name"], progress=False)
    assert result.model_dump(mode="json")["scores"] == recorded["scores"]
    assert result.model_dump(mode="json")["engine_scores"] == recorded["engine_scores"]
    table = Path(RECORDS / f"{name}_table.md").read_text(encoding="utf-8")
    assert table == f"# {recorded['name']}\n\n{markdown_table(result)}"


def test_the_gold_answer_record_is_what_the_gold_answers_score(data: dict[str, list[Any]]) -> None:
    """docs/benchmarks/academic/gold/ (cited by docs/benchmarks.md: F1 Func.+Args above 100 for the gold
    answers themselves) from ``hammer eval academic --predictions`` on every entry's gold answer."""
    recorded = results_json(RECORDS / "gold" / "results.json")["scores"]["original, inference masking off"]
    for name, rows in data.items():
        score = score_answers((gold_answer_text(e.gold), e.gold) for e in rows)
        assert score.model_dump(mode="json") == recorded[name]
        assert score.f1_api == 1.0 and score.f1_args is not None and score.f1_args > 1.0
