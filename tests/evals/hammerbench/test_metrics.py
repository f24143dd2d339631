"""The official HammerBench rules, case by case, with values computed by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hammer_evals.hammerbench import (
    BenchRecord,
    BenchTurn,
    LabelCall,
    Prediction,
    aggregate,
    arguments_correct,
    available_files,
    evaluate,
    key_errors,
    label_calls,
    labels_as_predictions,
    load_file,
    rouge_l,
    score_record,
)

LABEL = {"city": "Guangzhou", "plate_number": "Yue B88888", "time": "March 15, 2023"}


# ------------------------------------------------------------------ ROUGE-L and the argument rule
def test_rouge_l_normalizes_like_the_official_evaluator() -> None:
    assert rouge_l("Guangzhou.", "guangzhou") == 1.0            # strip('.?! ') and lower()
    assert rouge_l("", "") == 1.0 and rouge_l("x", "") == 0.0 and rouge_l("", "x") == 0.0
    # LCS 3 of 3 reference tokens, 3 of 5 predicted: P 0.6, R 1.0, F 0.75.
    assert rouge_l("March 15, 2023", "March 15, 2023 at 2pm") == pytest.approx(0.75)
    # Identical punctuation-only values score 1 (rouge-score's tokenizer would see no token).
    assert rouge_l("-", "-") == 1.0


def test_rouge_l_chinese_splits_characters() -> None:
    assert rouge_l("广州市", "广州", language="zh") == pytest.approx(0.8)   # P 1, R 2/3
    assert rouge_l("广州", "广州", language="zh") == 1.0


@pytest.mark.parametrize(("predicted", "expected"), [
    (LABEL, True),
    ({**LABEL, "time": "March 15, 2023 at 2pm"}, True),             # F 0.75 >= 0.7
    ({**LABEL, "city": "guangzhou "}, True),                          # case and spaces
    ({**LABEL, "plate_number": "Yue B88889"}, False),                 # F 0.5
    ({**LABEL, "extra": "x"}, False),                                 # extra key is wrong
    ({**LABEL, "extra": ""}, True),                                   # ... unless its value is empty
    ({"city": "Guangzhou", "plate_number": "Yue B88888"}, False),     # missing key scores 0
    ({}, False),
    (None, False),
])
def test_argument_rule(predicted: dict[str, Any] | None, expected: bool) -> None:
    assert arguments_correct(LABEL, predicted) is expected


def test_argument_rule_edges() -> None:
    assert arguments_correct({}, {})                                  # first snapshot of an imperfect query
    assert arguments_correct({}, {"city": ""})
    assert not arguments_correct({}, {"city": "Paris"})
    assert arguments_correct({"n": 3}, {"n": "3"})                    # compared as str(value)
    assert arguments_correct({"flag": True}, {"flag": "true"})
    assert not arguments_correct({"n": 3}, {"n": 3.0})                # "3" vs "3.0": F 0.67, as officially
    assert key_errors(LABEL, {"city": "x", "date": "y"}) == (["date"], ["plate_number", "time"])


# ------------------------------------------------------------------ reading answers
@pytest.mark.parametrize(("answer", "output", "name"), [
    ('```\n[{"name": "f", "arguments": {"a": "1"}}]\n```', "call", "f"),            # Hammer's fenced list
    ('[{"name": "f", "arguments": {"a": "1"}}]', "call", "f"),
    ('Sure.\n```json\n{"name": "f", "parameters": {"a": "1"}}\n```', "call", "f"),  # Qwen's object in prose
    ("[]", "no_call", None),
    ("```\n[]\n```", "no_call", None),
    ("Sorry, no tool is suitable for your request.", "no_call", None),
    ('[{"name": "f", "arguments": {"a": ', "invalid", None),
    ({"name": "f", "arguments": '{"a": "1"}'}, "call", "f"),
    ({"name": "f", "arguments": "{broken"}, "invalid", "f"),
    ([{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}], "call", "f"),
    ([], "no_call", None),
    (None, "no_call", None),
    ({"invalid": "cut off"}, "invalid", None),
])
def test_answers_are_read_like_the_engine_reads_them(answer: Any, output: str, name: str | None) -> None:
    prediction = Prediction.from_any(answer)
    assert prediction.output == output
    assert prediction.name == name


# ------------------------------------------------------------------ hand-built conversations
def conversation(labels: list[dict[str, Any] | None], scored: list[int] | None = None, kind: str = "call",
                 name: str = "pay") -> BenchRecord:
    turns = [BenchTurn(index=i, history=[{"role": "user", "content": f"u{i}"}], tools=[],
                       label=LabelCall(name=name, arguments=a) if a is not None else LabelCall(name=None))
             for i, a in enumerate(labels)]
    return BenchRecord(file="test", index=0, data_type="sQsA", kind=kind, turns=turns,  # type: ignore[arg-type]
                       scored=list(range(len(labels))) if scored is None else scored)


def call(arguments: dict[str, Any], name: str = "pay") -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


LONG = [{}, {"city": "Guangzhou"}, {"city": "Guangzhou", "plate_number": "Yue B88888"},
        {"city": "Guangzhou", "plate_number": "Yue B88888", "time": "March 15, 2023"}]


def test_perfect_conversation() -> None:
    score = score_record(conversation(LONG), [call(a) for a in LONG])
    assert score.func_ok and score.success and score.progress == 1.0 and score.correct_scored == 4


def test_early_error_in_a_long_conversation() -> None:
    # Snapshot 1 invents a plate number: wrong (extra key) and a hallucination; the rest right.
    answers = [call(LONG[0]), call({"city": "Guangzhou", "plate_number": "ABC"}), call(LONG[2]), call(LONG[3])]
    score = score_record(conversation(LONG), answers)
    assert [s.correct for s in score.snapshots] == [True, False, True, True]
    assert score.progress == pytest.approx(1 / 4)          # first wrong snapshot at index 1, of 4
    assert not score.success and score.correct_scored == 3
    assert score.snapshots[1].hallucinated == ["plate_number"] and score.snapshots[1].missing == []


def test_missing_key_and_wrong_value() -> None:
    answers = [call(LONG[0]), call(LONG[1]), call({"city": "Guangzhou"}),
               call({**LONG[3], "time": "April 1"})]
    score = score_record(conversation(LONG), answers)
    assert [s.correct for s in score.snapshots] == [True, True, False, False]
    assert score.progress == pytest.approx(2 / 4)
    assert score.snapshots[2].missing == ["plate_number"]
    assert score.snapshots[3].missing == [] and score.snapshots[3].hallucinated == []


def test_wrong_function_at_the_first_snapshot_zeroes_the_conversation() -> None:
    answers = [call({}, name="other"), call(LONG[1]), call(LONG[2]), call(LONG[3])]
    score = score_record(conversation(LONG), answers)
    assert not score.func_ok
    assert score.progress == 0.0 and not score.success and score.correct_scored == 0   # official: PR 0, Acc 0
    assert [s.correct for s in score.snapshots] == [False, True, True, True]


def test_refusal_mid_conversation_misses_every_label_key() -> None:
    answers = [call(LONG[0]), call(LONG[1]), "[]", call(LONG[3])]
    score = score_record(conversation(LONG), answers)
    assert score.snapshots[2].output == "no_call" and score.snapshots[2].missing == ["city", "plate_number"]
    assert score.progress == pytest.approx(2 / 4)


def test_scoring_only_listed_snapshots() -> None:
    answers = [call({"x": "1"}), call(LONG[1]), call({"city": "Hangzhou"}), call(LONG[3])]
    # Snapshot 0 has a wrong argument but the right name: Func.Acc holds; only 1 and 3 are scored.
    score = score_record(conversation(LONG, scored=[1, 3]), answers)
    assert score.func_ok and score.success and score.progress == 1.0 and score.correct_scored == 2


def test_intent_shift_needs_the_first_name_and_a_final_refusal() -> None:
    labels: list[dict[str, Any] | None] = [{}, {"city": "Guangzhou"}, None]
    record = conversation(labels, scored=[2], kind="intent_shift")
    assert score_record(record, [call({}), call({"city": "x"}), "[]"]).success
    kept_calling = score_record(record, [call({}), call({}), call({"city": "Guangzhou"})])
    assert kept_calling.func_ok and not kept_calling.success and kept_calling.correct_scored == 0
    wrong_start = score_record(record, [call({}, name="other"), call({}), "[]"])
    assert not wrong_start.success and wrong_start.snapshots[2].correct   # detected, but Acc needs Func.Acc


def test_aggregate_by_hand() -> None:
    record = conversation(LONG)
    scores = [
        score_record(record, [call(a) for a in LONG]),                                            # all right
        score_record(record, [call(LONG[0]), call({"city": "Guangzhou", "time": "x"}), call(LONG[2]), "[]"]),
        score_record(record, [call({}, name="other"), call(LONG[1]), call(LONG[2]), call(LONG[3])]),  # wrong name
    ]
    m = aggregate(scores)
    assert m.records == 3 and m.snapshots == 12
    assert m.func_acc == pytest.approx(2 / 3)
    assert m.acc == pytest.approx((4 + 2 + 0) / 12)
    assert m.pr == pytest.approx((1.0 + 0.25 + 0.0) / 3)
    assert m.sr == pytest.approx(1 / 3)
    # PHR/PMR over the 8 snapshots of the two conversations whose first name is right: one snapshot
    # with a hallucinated key (the 2nd's snapshot 1: "time") and one with missing keys (its snapshot 3,
    # "[]", misses all 3) -> PHR 1/8, PMR 1/8; the third conversation is left out (wrong first name).
    assert m.phr == pytest.approx(1 / 8)
    assert m.pmr == pytest.approx(1 / 8)
    assert m.phr_first == 0.0 and m.pmr_last == pytest.approx(1 / 2)
    assert m.headline == m.acc


def test_irrelevance_counts_refusals() -> None:
    record = conversation([None], kind="irrelevance")
    scores = [score_record(record, ["[]"]), score_record(record, ["I cannot help with that."]),
              score_record(record, [call({"a": "1"}, name="close_tool")]), score_record(record, ['[{"name": "f", '])]
    m = aggregate(scores)
    assert m.no_call_acc == pytest.approx(2 / 4) and m.headline == m.no_call_acc
    assert m.func_acc is None and m.acc is None


# ------------------------------------------------------------------ every file, labels fed back
def test_labels_fed_back_score_100_percent_everywhere(hb_data: Path, tmp_path: Path) -> None:
    records = [r for stem in available_files(hb_data) for r in load_file(hb_data, stem)]
    preds = {(p.file, p.index): p for p in labels_as_predictions(records)}
    result = evaluate(hb_data, predictions=preds, output_dir=tmp_path)
    assert len(result.per_type) == 12 and not result.missing_predictions
    for data_type, m in result.per_type.items():
        assert m.headline == 1.0, data_type
        if data_type != "Irrelevant":
            assert (m.func_acc, m.acc, m.pr, m.sr) == (1.0, 1.0, 1.0, 1.0), data_type
            assert m.phr in (0.0, None) and m.pmr in (0.0, None) and m.phr_first == 0.0 and m.pmr_first == 0.0
    assert result.per_type["Irrelevant"].no_call_acc == 1.0 and result.per_type["IS"].no_call_acc == 1.0
    assert result.overall == 1.0


def test_labels_as_hammer_would_print_them_also_score_100(hb_data: Path, tmp_path: Path) -> None:
    """Fenced JSON lists and ``[]``, written to a predictions file, read back and scored."""
    stems = ["HammerBench_IS", "HammerBench_SO_case2", "ir_ST_Imperfect", "ST_External"]
    lines = []
    for stem in stems:
        for record in load_file(hb_data, stem):
            answers = ["```\n" + json.dumps([c], ensure_ascii=False) + "\n```" if c else "[]" for c in label_calls(record)]
            lines.append(json.dumps({"file": stem, "index": record.index, "predictions": answers}, ensure_ascii=False))
    path = tmp_path / "hammer.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = evaluate(hb_data, predictions=path, files=stems)
    assert {t: m.headline for t, m in result.per_type.items()} == {
        "External (ST)": 1.0, "Irrelevant": 1.0, "SO": 1.0, "IS": 1.0}
