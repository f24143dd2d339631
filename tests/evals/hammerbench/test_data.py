"""Loading HammerBench: snapshots, labels, tools per turn, scored ids, schema fixes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hammer_evals.datasets import read_json
from hammer_evals.hammerbench import (
    DATA_TYPES,
    FILE_SPECS,
    available_files,
    expand_names,
    fix_tool_schema,
    load_file,
    to_bench_tools,
)


def test_every_file_is_found_and_typed(hb_data: Path) -> None:
    stems = available_files(hb_data)
    assert stems == list(FILE_SPECS)
    assert DATA_TYPES == ("Perfect", "Imperfect", "External (ST)", "Irrelevant", "sQsA", "mQmA", "mQsA", "sQmA",
                          "SO", "mSv", "External (MT)", "IS")


def test_multi_turn_snapshots_follow_the_authors_inference(hb_data: Path) -> None:
    record = load_file(hb_data, "HammerBench_Based", limit=4)[3]
    assert record.n_snapshots == 4 and record.scored == [0, 1, 2, 3]
    first, second, last = record.turns[0], record.turns[1], record.turns[3]
    assert len(first.tools) == 5 and [t["name"] for t in second.tools] == ["Navigation.TrafficViolations.payViolations"]
    assert first.history == [{"role": "user", "content": "How to pay traffic violation fines online?"}]
    # History: user and assistant turns so far, never the earlier labels.
    assert [h["role"] for h in second.history] == ["user", "assistant", "user"]
    assert second.history[1]["content"] == "What city is the violation located in?"
    assert first.label.arguments == {} and second.label.arguments == {"city": "Guangzhou"}
    assert last.label.arguments == {"city": "Guangzhou", "plate_number": "Yue B88888", "time": "March 15, 2023"}


def test_intent_shift_last_turn_expects_no_call_and_only_it_is_scored(hb_data: Path) -> None:
    for record in load_file(hb_data, "HammerBench_IS"):
        assert not record.turns[-1].label.expects_call
        assert record.turns[-1].history[-1]["content"].startswith("Oh no")
        assert all(t.label.expects_call for t in record.turns[:-1])
        assert record.scored == [record.n_snapshots - 1]


def test_irrelevance_records_expect_no_call_and_lack_the_gold_tool(hb_data: Path) -> None:

    raw = read_json(hb_data / "single-turn" / "ir_ST_Perfect.json")
    for record, original in zip(load_file(hb_data, "ir_ST_Perfect"), raw, strict=True):
        assert record.kind == "irrelevance" and not record.turns[0].label.expects_call
        gold = original["messages"][1]["content"]["name"]
        assert gold not in {t["name"] for t in record.turns[0].tools}


def test_listed_snapshot_ids(hb_data: Path) -> None:
    case1 = load_file(hb_data, "HammerBench_SO_case1", limit=3)
    assert [r.scored for r in case1] == [[2], [2], [1]]
    # Case 2 (the override is its own turn): the override turn and the one after, as evaluate.py does.
    case2 = load_file(hb_data, "HammerBench_SO_case2", limit=3)
    assert [r.scored for r in case2] == [[2, 3], [2, 3], [3, 4]]
    assert "wrong before" in case2[0].turns[2].history[-1]["content"]
    external = load_file(hb_data, "HammerBench_External", limit=2)
    assert all("<EK>" in external[0].turns[i].history[-1]["content"] for i in external[0].scored)
    assert load_file(hb_data, "HammerBench_SO_case1", limit=1, mode="all")[0].scored == [0, 1, 2]


def test_float_types_become_json_schema_numbers(hb_data: Path) -> None:
    fixed = fix_tool_schema({"name": "f", "parameters": {"type": "object", "properties": {
        "amount": {"type": "float"}, "tags": {"type": "array", "items": {"type": "int"}}}}})
    assert fixed["parameters"]["properties"]["amount"]["type"] == "number"
    assert fixed["parameters"]["properties"]["tags"]["items"]["type"] == "integer"
    # Every tool of every file converts to an engine Tool.
    for stem in FILE_SPECS:
        for record in load_file(hb_data, stem):
            for turn in record.turns:
                assert len(to_bench_tools(turn.tools)) == len(turn.tools)


def test_names_and_errors(hb_data: Path, tmp_path: Path) -> None:
    assert expand_names(["Based", "SO", "Irrelevant"]) == [
        "HammerBench_Based", "HammerBench_SO_case1", "HammerBench_SO_case2",
        "ir_ST_Perfect", "ir_ST_Imperfect", "ir_ST_External"]
    assert expand_names(["External"]) == ["HammerBench_External"]
    assert expand_names(["multi-turn/HammerBench_mSv.json"]) == ["HammerBench_mSv"]
    with pytest.raises(ValueError, match="unknown HammerBench file or data type 'Nope'"):
        expand_names(["Nope"])
    with pytest.raises(FileNotFoundError, match="pass --data"):
        available_files(tmp_path)
    # A folder with the files but without snapshot_id/: the listed-ids mode says what is missing.
    (tmp_path / "multi-turn").mkdir()
    (tmp_path / "multi-turn" / "HammerBench_External.json").write_text(
        json.dumps(read_json(hb_data / "multi-turn" / "HammerBench_External.json")))
    with pytest.raises(FileNotFoundError, match="snapshot_id"):
        load_file(tmp_path, "HammerBench_External")
    assert load_file(tmp_path, "HammerBench_External", limit=1, mode="all")[0].n_snapshots >= 1
