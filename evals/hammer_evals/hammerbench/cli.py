"""``hammer eval hammerbench``: the command line of the evaluator.

``hammer_evals.cli.add_eval_parser`` wires it under ``hammer eval``;
``python -m hammer_evals.hammerbench ...`` takes the same options.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="hammer")
    >>> add_hammerbench_parser(parser.add_subparsers(dest="benchmark"))
    >>> args = parser.parse_args(["hammerbench", "--data", "d", "--limit", "3", "--files", "Based", "IS"])
    >>> args.limit, args.files, args.order, args.func is run_hammerbench
    (3, ['Based', 'IS'], 'prefix', True)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hammer_plugins.engine.settings import EngineSettings, add_concurrency_argument, add_engine_arguments
from hammer_plugins.slot_filling.snapshots import SNAPSHOT_HINT

from ..datasets import add_data_arguments, data_dir_from_args


def add_hammerbench_parser(benchmarks: Any) -> None:
    """Add ``hammerbench`` to the subparsers of ``hammer eval`` (:func:`hammer_evals.cli.add_eval_parser`)."""
    hb = benchmarks.add_parser(
        "hammerbench", help="HammerBench: single- and multi-turn slot filling (Acc, Func.Acc, PHR, PMR, PR, SR)",
        description="Run a model (or read a predictions file) over HammerBench files and write results.json, "
                    "table.md, scores.jsonl and PNG charts.",
    )
    add_data_arguments(hb, "hammerbench")
    hb.add_argument("--files", nargs="+", metavar="NAME",
                    help="file stems, short names or data types (Based, SO, IS, ST_Perfect, Irrelevant ...); default: all")
    hb.add_argument("--limit", type=int, help="first N records of each file")
    hb.add_argument("--output", default="hammerbench-results", help="folder for the results (default: %(default)s)")
    hb.add_argument("--predictions", help="score this predictions file (JSON Lines) instead of running a model")
    hb.add_argument("--name", help="the row label in the table (default: the model name)")
    hb.add_argument("--mode", choices=["official", "all"], default="official",
                    help="official: each file's scoring mode (SO/External listed snapshots, IS last); all: every snapshot")
    hb.add_argument("--layout", choices=["transcript", "chat"], default="transcript",
                    help="history as role:content lines in one turn (the authors' layout) or one turn per message")
    hb.add_argument("--snapshot-hint", action="store_true",
                    help="show an instruction to leave unmentioned parameters out (not in the authors' Hammer prompt)")
    hb.add_argument("--full-grammar", action="store_true",
                    help="keep required parameters required in the grammar (default: all optional, so partial calls parse)")
    hb.add_argument("--ground-values", action="store_true",
                    help="drop argument values the user never said (the SlotFiller rule): scores model plus rules")
    hb.add_argument("--order", choices=["prefix", "data"], default="prefix",
                    help="run order of the snapshots. prefix (default): sorted by prompt text, so each prompt shares "
                         "a long prefix with the one before and llama.cpp reuses its KV cache instead of re-evaluating "
                         "it (several times less prompt text to evaluate over all files); data: file by file, record by "
                         "record. Each snapshot is still its own prompt: the order changes speed, not prompts")
    hb.add_argument("--language", choices=["en", "zh"], default="en", help="ROUGE-L tokenization (default: en)")
    hb.add_argument("--resume", action="store_true",
                    help="keep the answers already in --output (predictions.jsonl and the snapshots.jsonl journal) "
                         "and do the rest")
    hb.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_concurrency_argument(hb)

    add_engine_arguments(hb, max_tokens=256)  # short answers: one snapshot call each
    hb.set_defaults(tool_budget=0)  # a benchmark measures the model on the tools it gives: all of them
    hb.set_defaults(func=run_hammerbench)


def run_hammerbench(args: argparse.Namespace) -> int:
    """Run the evaluation the parsed ``args`` describe; print the table; 0 on success."""
    from .evaluation import evaluate
    from .report import percent
    from .runner import RunnerConfig

    engine = EngineSettings.from_args(args).build_engine() if args.predictions is None else None
    runner = RunnerConfig(layout=args.layout, hint=SNAPSHOT_HINT if args.snapshot_hint else None,
                          relax_required=not args.full_grammar, ground_values=args.ground_values, order=args.order)
    result = evaluate(
        data_dir_from_args(args, "hammerbench"), engine=engine, predictions=args.predictions, files=args.files, limit=args.limit,
        mode=None if args.mode == "official" else "all", runner=runner, language=args.language,
        output_dir=args.output, progress=not args.no_progress, resume=args.resume, name=args.name,
        concurrency=args.concurrency,
    )
    out = Path(args.output)
    print((out / "table.md").read_text(encoding="utf-8"))
    print(f"results in {out}/: table.md, results.json, scores.jsonl, accuracy.png, progress.png, snapshots.png"
          + (", predictions.jsonl" if args.predictions is None else ""), file=sys.stderr)
    if result.missing_predictions:
        print(f"warning: {len(result.missing_predictions)} records had no prediction: "
              f"{', '.join(result.missing_predictions[:5])}...", file=sys.stderr)
    if result.timing is not None:
        t = result.timing
        print(f"{t.snapshots} snapshots ({t.reused_snapshots} reused), {t.wall_seconds:.0f} s wall, "
              f"{t.seconds_per_snapshot or 0:.2f} s per prompt asked; "
              f"overall {percent(result.overall)}", file=sys.stderr)
    return 0
