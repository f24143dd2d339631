"""Reports (Markdown table, JSON, PNG charts) and the ``hammer eval hammerbench`` command line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from hammer_evals import datasets
from hammer_evals.cli import add_eval_parser
from hammer_evals.datasets import data_dir_from_args
from hammer_evals.hammerbench import Metrics, label_calls, load_file, markdown_table, write_charts
from hammer_evals.hammerbench.__main__ import main


def test_markdown_table_is_laid_out_like_table_9() -> None:
    per_type = {"Perfect": Metrics(acc=0.5, headline=0.5, func_acc=1.0, records=2, snapshots=2),
                "Irrelevant": Metrics(no_call_acc=1.0, headline=1.0, records=3, snapshots=3),
                "sQsA": Metrics(acc=0.25, headline=0.25, pr=0.125, sr=0.0, records=1, snapshots=4),
                "IS": Metrics(acc=0.0, headline=0.0, records=1, snapshots=1)}
    text = markdown_table("my-model", per_type, {"ST_Perfect": per_type["Perfect"]})
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| Model"))
    assert header == "| Model | Overall | ST Perfect | ST Irrelevant | MT sQsA | MT IS |"
    row = lines[lines.index(header) + 2]
    assert row == "| my-model | 43.75 | 50.00 | 100.00 | 25.00 | 0.00 |"      # overall = mean of the 4 columns
    assert "| sQsA | 1 | 4 | - | 25.00 | - | - | 12.50 | 0.00 |" in text
    assert "| ST_Perfect | 2 | 2 | 100.00 | 50.00 |" in text


def test_charts_are_real_pngs(tmp_path: Path) -> None:
    import matplotlib.image

    per_type = {"Perfect": Metrics(acc=0.9, headline=0.9, phr_first=0.1, pmr_first=0.2, phr_last=0.1, pmr_last=0.2),
                "sQsA": Metrics(acc=0.5, headline=0.5, pr=0.4, sr=0.3, phr_first=0.3, pmr_first=0.1, phr_last=0.6,
                                pmr_last=0.2),
                "IS": Metrics(acc=0.7, headline=0.7, pr=0.7, sr=0.7)}
    paths = write_charts(per_type, tmp_path, title="t")
    assert [p.name for p in paths] == ["accuracy.png", "progress.png", "snapshots.png"]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        height, width, _ = matplotlib.image.imread(path).shape
        assert width >= 600 and height >= 400


def test_add_eval_parser_wires_into_the_owners_parser() -> None:
    parser = argparse.ArgumentParser(prog="hammer")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("call")                                      # the owner's other commands coexist
    add_eval_parser(sub)
    args = parser.parse_args(["eval", "hammerbench", "--data", "d", "--mask-names", "--files", "SO", "IS",
                              "--limit", "2", "--predictions", "p.jsonl", "--output", "o"])
    assert (args.command, args.benchmark, args.mask_names, args.files, args.limit) == ("eval", "hammerbench", True,
                                                                                        ["SO", "IS"], 2)
    assert args.max_tokens == 256 and args.layout == "transcript" and args.mode == "official" and callable(args.func)
    shipped = parser.parse_args(["eval", "hammerbench"])          # no --data: the shipped copy
    assert data_dir_from_args(shipped, "hammerbench") == datasets.hammerbench_dir()
    assert data_dir_from_args(args, "hammerbench") == Path("d")
    with pytest.raises(SystemExit):
        parser.parse_args(["eval", "hammerbench", "--data", "d", "--download"])  # one source of data


def test_command_line_scores_a_predictions_file(hb_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = []
    for record in load_file(hb_data, "HammerBench_IS", limit=4):
        answers = [json.dumps([c]) if c else "[]" for c in label_calls(record)]
        if record.index == 3:
            answers[-1] = json.dumps(label_calls(record)[0])    # kept calling after "Oh no, ...": wrong
        lines.append(json.dumps({"file": "HammerBench_IS", "index": record.index, "predictions": answers}))
    predictions = tmp_path / "p.jsonl"
    predictions.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    code = main(["--data", str(hb_data), "--files", "IS", "--limit", "4", "--predictions", str(predictions),
                 "--output", str(out), "--name", "sys", "--no-progress"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "| sys | 75.00 | 75.00 |" in printed
    summary = json.loads((out / "results.json").read_text())
    assert summary["per_type"]["IS"]["acc"] == 0.75 and summary["per_type"]["IS"]["no_call_acc"] == 0.75
    assert summary["config"]["predictions"] == str(predictions) and summary["timing"] is None
    scores = [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]
    assert [s["success"] for s in scores] == [True, True, True, False]


def test_command_line_errors_are_exit_code_2(hb_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--data", str(hb_data), "--files", "Nope", "--predictions", "x", "--output", str(tmp_path)]) == 2
    assert "unknown HammerBench file or data type 'Nope'" in capsys.readouterr().err
    assert main(["--data", str(tmp_path), "--predictions", "x", "--output", str(tmp_path)]) == 2
