"""HammerBench evaluation: data loading, snapshot inference, the official metrics, reports.

Python API::

    from hammer_plugins import HammerEngine
    from hammer_evals.hammerbench import evaluate

    result = evaluate("/data/hammerbench/en", engine=HammerEngine(), files=["Based", "IS"], limit=3,
                      output_dir="hb-out")              # results.json, table.md, scores.jsonl, PNGs
    result.per_type["sQsA"].acc, result.overall

    evaluate("/data/hammerbench/en", predictions="my_system.jsonl")   # any system's answers

Command line: ``hammer eval hammerbench --data /data/hammerbench/en --limit 3 --files Based IS``.

Example:
    >>> from hammer_evals.hammerbench import arguments_correct
    >>> arguments_correct({"plate_number": "Yue B88888"}, {"plate_number": "Yue B88888", "city": ""})
    True
"""

from __future__ import annotations

from .cli import add_hammerbench_parser, run_hammerbench
from .data import (
    DATA_TYPES,
    FILE_SPECS,
    TERMINATION_TEXT,
    BenchRecord,
    BenchTurn,
    FileSpec,
    LabelCall,
    available_files,
    expand_names,
    fix_tool_schema,
    label_calls,
    load_file,
    to_bench_tools,
)
from .evaluation import EvalResult, Timing, evaluate, write_results
from .metrics import (
    ROUGE_THRESHOLD,
    Metrics,
    Prediction,
    RecordScore,
    SnapshotScore,
    aggregate,
    arguments_correct,
    key_errors,
    rouge_l,
    score_record,
    score_snapshot,
)
from .report import markdown_table, overall, write_charts
from .runner import (
    RecordPrediction,
    RunnerConfig,
    SnapshotPrediction,
    labels_as_predictions,
    load_predictions,
    predict_record,
    predict_turn,
)

__all__ = [
    "DATA_TYPES",
    "FILE_SPECS",
    "ROUGE_THRESHOLD",
    "TERMINATION_TEXT",
    "BenchRecord",
    "BenchTurn",
    "EvalResult",
    "FileSpec",
    "LabelCall",
    "Metrics",
    "Prediction",
    "RecordPrediction",
    "RecordScore",
    "RunnerConfig",
    "SnapshotPrediction",
    "SnapshotScore",
    "Timing",
    "add_hammerbench_parser",
    "aggregate",
    "arguments_correct",
    "available_files",
    "evaluate",
    "expand_names",
    "fix_tool_schema",
    "key_errors",
    "label_calls",
    "labels_as_predictions",
    "load_file",
    "load_predictions",
    "markdown_table",
    "overall",
    "predict_record",
    "predict_turn",
    "rouge_l",
    "run_hammerbench",
    "score_record",
    "score_snapshot",
    "to_bench_tools",
    "write_charts",
    "write_results",
]
