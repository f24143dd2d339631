"""The inference runner on a scripted backend: prompts, tools per turn, snapshot grammar, masking, files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from grammar_oracles import lark_accepts

from hammer_evals.hammerbench import (
    BenchRecord,
    RunnerConfig,
    evaluate,
    label_calls,
    load_file,
    load_predictions,
    predict_record,
    to_bench_tools,
)
from hammer_plugins import HammerEngine, ToolCall
from hammer_plugins.backends.scripted import ScriptedBackend
from hammer_plugins.slot_filling.snapshots import SNAPSHOT_HINT

GOLD = "Navigation.TrafficViolations.payViolations"


def fenced(call: dict[str, Any] | None) -> str:
    return "```\n" + json.dumps([call], ensure_ascii=False) + "\n```" if call else "[]"


def label_answers(records: list[BenchRecord], mask: bool = False) -> list[str]:
    """What a perfect Hammer would print, turn by turn (masked names when the engine masks)."""
    answers = []
    for record in records:
        for turn, call in zip(record.turns, label_calls(record), strict=True):
            if call is not None and mask:
                binding = HammerEngine(backend=ScriptedBackend()).bind(to_bench_tools(turn.tools), mask_names=True)
                assert binding.mask is not None
                masked = binding.mask.mask_call(ToolCall(name=call["name"], arguments=call["arguments"]))
                call = {"name": masked.name, "arguments": masked.arguments}
            answers.append(fenced(call))
    return answers


def tools_block(prompt: str) -> list[dict[str, Any]]:
    start = prompt.index("[BEGIN OF AVAILABLE TOOLS]\n") + len("[BEGIN OF AVAILABLE TOOLS]\n")
    return list(json.loads(prompt[start:prompt.index("\n[END OF AVAILABLE TOOLS]")]))


accepts = lark_accepts


def test_prompts_follow_the_authors_layout_and_tools(hb_data: Path) -> None:
    record = load_file(hb_data, "HammerBench_Based", limit=4)[3]
    backend = ScriptedBackend(label_answers([record]))
    prediction = predict_record(HammerEngine(backend=backend), record)
    assert prediction.predictions == label_calls(record)
    assert [d.output for d in prediction.details] == ["call"] * 4
    first, second = backend.prompts[0], backend.prompts[1]
    # Turn 0 shows the five candidates, later turns only the gold tool.
    assert [t["name"] for t in tools_block(first)] == [t["name"] for t in record.turns[0].tools]
    assert [t["name"] for t in tools_block(second)] == [GOLD]
    # The history is one user turn of role:content lines, earlier labels never shown.
    assert ("<|im_start|>user\nuser:How to pay traffic violation fines online?\nassistant:What city is the violation "
            "located in?\nuser:The violation occurred in Guangzhou.<|im_end|>\n<|im_start|>assistant\n") in second
    assert '"city": "Guangzhou"' not in second
    assert SNAPSHOT_HINT not in second


def test_chat_layout_and_hint(hb_data: Path) -> None:
    record = load_file(hb_data, "HammerBench_Based", limit=4)[3]
    backend = ScriptedBackend(label_answers([record]))
    predict_record(HammerEngine(backend=backend), record, RunnerConfig(layout="chat", hint=SNAPSHOT_HINT))
    assert ("<|im_start|>user\nThe violation occurred in Guangzhou.<|im_end|>\n<|im_start|>assistant\n") in backend.prompts[1]
    assert "<|im_start|>assistant\nWhat city is the violation located in?<|im_end|>" in backend.prompts[1]
    assert SNAPSHOT_HINT in backend.prompts[1]


def test_snapshot_grammar_allows_partial_calls_and_one_call_only(hb_data: Path, qwen_lltokenizer: Any) -> None:
    record = load_file(hb_data, "HammerBench_Based", limit=4)[3]
    backend = ScriptedBackend(label_answers([record]) + label_answers([record]))
    predict_record(HammerEngine(backend=backend), record)
    predict_record(HammerEngine(backend=backend), record, RunnerConfig(relax_required=False))
    relaxed, full = backend.grammars[1], backend.grammars[5]
    assert relaxed is not None and full is not None
    partial = '```\n[{"name": "' + GOLD + '", "arguments": {"city": "Guangzhou"}}]\n```'
    complete = '[{"name": "' + GOLD + '", "arguments": {"plate_number": "Yue B88888", "city": "Guangzhou", "time": "x"}}]'
    two = complete[:-1] + ", " + complete[1:]
    assert accepts(qwen_lltokenizer, relaxed, partial) and accepts(qwen_lltokenizer, relaxed, complete)
    assert accepts(qwen_lltokenizer, relaxed, "[]")
    assert not accepts(qwen_lltokenizer, relaxed, two)
    assert not accepts(qwen_lltokenizer, full, partial) and accepts(qwen_lltokenizer, full, complete)


def test_masked_names_are_mapped_back(hb_data: Path, tmp_path: Path) -> None:
    # evaluate() runs files in the paper's order: single-turn first.
    records = load_file(hb_data, "ST_Imperfect", limit=3) + load_file(hb_data, "HammerBench_Based", limit=3)
    backend = ScriptedBackend(label_answers(records, mask=True))
    engine = HammerEngine(backend=backend, mask_names=True)
    result = evaluate(hb_data, engine=engine, files=["ST_Imperfect", "Based"], limit=3, progress=False,
                      runner=RunnerConfig(order="data"))  # the scripted answers are in data order
    assert result.per_type["sQsA"].acc == 1.0 and result.per_type["Imperfect"].acc == 1.0
    assert all(GOLD not in p for p in backend.prompts) and result.config["mask_names"] is True


def test_evaluate_with_an_engine_writes_everything_and_resumes(hb_data: Path, tmp_path: Path) -> None:
    records = load_file(hb_data, "ir_ST_External", limit=2) + load_file(hb_data, "HammerBench_IS", limit=2)
    answers = label_answers(records)
    answers[1] = '[{"name": "Finance.Funds.purchaseFund", "arguments": {}}]'   # one wrong irrelevance answer
    result = evaluate(hb_data, engine=HammerEngine(backend=ScriptedBackend(answers)), files=["IS", "ir_ST_External"],
                      limit=2, output_dir=tmp_path, progress=False, name="scripted",
                      runner=RunnerConfig(order="data"))  # the scripted answers are in data order
    assert result.per_type["IS"].acc == 1.0 and result.per_type["Irrelevant"].no_call_acc == 0.5
    assert {p.name for p in tmp_path.iterdir()} >= {"predictions.jsonl", "results.json", "scores.jsonl", "table.md",
                                                     "accuracy.png", "progress.png", "snapshots.png"}
    saved = load_predictions(tmp_path / "predictions.jsonl")
    assert len(saved) == 4 and saved[("HammerBench_IS", 0)].details[0].raw.startswith("```")
    summary = json.loads((tmp_path / "results.json").read_text())
    timing = summary["timing"]
    assert timing["snapshots"] == sum(r.n_snapshots for r in records)
    assert timing["full_snapshots"] == 251 + 100 and timing["estimated_full_seconds"] >= 0
    assert summary["per_type"]["Irrelevant"]["headline"] == 0.5 and summary["name"] == "scripted"
    # Resume: everything is in predictions.jsonl already, so the (empty) backend is never asked.
    again = evaluate(hb_data, engine=HammerEngine(backend=ScriptedBackend([])), files=["IS", "ir_ST_External"],
                     limit=2, output_dir=tmp_path, progress=False, resume=True)
    assert again.per_type == result.per_type
    # Re-scoring the written predictions file gives the same numbers without any model.
    rescored = evaluate(hb_data, predictions=tmp_path / "predictions.jsonl", files=["IS", "ir_ST_External"], limit=2)
    assert rescored.per_type == result.per_type


def test_missing_predictions_are_reported_not_scored(hb_data: Path, tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"file": "ST_Perfect", "index": 1, "predictions": ["[]"]}) + "\n")
    result = evaluate(hb_data, predictions=path, files=["ST_Perfect"], limit=3)
    assert result.missing_predictions == ["ST_Perfect#0", "ST_Perfect#2"]
    assert result.per_type["Perfect"].records == 1 and result.per_type["Perfect"].acc == 0.0
    with pytest.raises(ValueError, match="needs an engine or a predictions file"):
        evaluate(hb_data)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"file": "ST_Perfect"}\n')
    with pytest.raises(ValueError, match="'file', 'index' and 'predictions'"):
        load_predictions(bad)


def test_ground_values_drops_what_the_user_never_said(hb_data: Path) -> None:
    record = load_file(hb_data, "HammerBench_Based", limit=4)[3]
    invented = [fenced({"name": c["name"], "arguments": {**c["arguments"], "time": "2021-07-09"}}) if c else "[]"
                for c in label_calls(record)]
    # The post-hoc filter alone: the engine's ask-or-call rule, which would hold the invented time, is off.
    raw = predict_record(HammerEngine(backend=ScriptedBackend(list(invented)), on_missing="call"), record)
    grounded = predict_record(HammerEngine(backend=ScriptedBackend(list(invented)), on_missing="call"), record,
                              RunnerConfig(ground_values=True))
    assert [p["arguments"].get("time") for p in raw.predictions] == ["2021-07-09"] * 4
    # The label's own time ("March 15, 2023", said at the last turn) would survive; the invented one does not.
    assert grounded.predictions[:3] == label_calls(record)[:3]
    assert "time" not in grounded.predictions[3]["arguments"] and '"2021-07-09"' in grounded.details[3].raw
