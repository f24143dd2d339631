"""``hammer eval academic``: the Hammer paper's Table 3 sets, and the masking case study.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="hammer")
    >>> add_academic_parser(parser.add_subparsers(dest="benchmark"))
    >>> args = parser.parse_args(["academic", "--data", "d", "--case-study", "--sets", "sealtool"])
    >>> [v.label for v in variants(args)]
    ['original, inference masking off', 'original, inference masking on', 'masked, inference masking off', \
'masked, inference masking on']
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hammer_plugins.engine.settings import EngineSettings, add_concurrency_argument, add_engine_arguments

from ..datasets import add_data_arguments, data_dir_from_args
from .data import SETS
from .evaluation import Variant


def add_academic_parser(benchmarks: Any) -> None:
    """Add ``academic`` to the subparsers of ``hammer eval``."""
    parser = benchmarks.add_parser(
        "academic", help="API-Bank L-1/L-2, Tool-Alpaca, Seal-Tools: F1 of names and of names+arguments (paper Table 3)",
        description="Run a model (or score a predictions file) on the Hammer paper's academic test sets; writes "
                    "results.json, table.md (Table 3 layout with the published rows) and f1.png.")
    add_data_arguments(parser, "academic")
    parser.add_argument("--sets", nargs="+", choices=list(SETS), help="default: all four")
    parser.add_argument("--limit", type=int, help="first N entries of each set (a sample; say so when you report it)")
    parser.add_argument("--names", nargs="+", choices=["original", "masked"], default=["original"],
                        help="the test data's own names, and/or random ones (the paper's masking case study)")
    parser.add_argument("--inference-masking", nargs="+", choices=["off", "on"],
                        help="the engine's name masking, one run each (default: --mask-names's setting)")
    parser.add_argument("--case-study", action="store_true",
                        help="the whole case study: --names original masked --inference-masking off on")
    parser.add_argument("--predictions", help="score this answers file (JSON Lines) instead of running a model")
    parser.add_argument("--output", default="academic-results", help="folder for the results (default: %(default)s)")
    parser.add_argument("--name", help="the row label (default: the model name)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the masked names (default: 0)")
    parser.add_argument("--resume", action="store_true", help="keep the answers already in --output; ask the rest")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_concurrency_argument(parser)
    add_engine_arguments(parser, max_tokens=256)
    parser.set_defaults(tool_budget=0)  # a benchmark measures the model on the tools it gives: all of them
    parser.set_defaults(func=run_academic)


def variants(args: argparse.Namespace) -> list[Variant]:
    """The (names, inference masking) pairs the options ask for."""
    names = ["original", "masked"] if args.case_study else args.names
    masking = ["off", "on"] if args.case_study else args.inference_masking or ["on" if args.mask_names else "off"]
    return [Variant(names=n, mask_names=m == "on") for n in names for m in masking]


def run_academic(args: argparse.Namespace) -> int:
    """Run what ``args`` describe; print the table; 0 on success."""
    from .evaluation import evaluate, load_answers

    engine = EngineSettings.from_args(args).build_engine() if args.predictions is None else None
    answers = load_answers(args.predictions) if args.predictions else ()
    result = evaluate(data_dir_from_args(args, "academic"), sets=args.sets, limit=args.limit, engine=engine, answers=answers,
                      variants=variants(args), output_dir=args.output, resume=args.resume,
                      progress=not args.no_progress, name=args.name, seed=args.seed,
                      concurrency=args.concurrency)
    print((Path(args.output) / "table.md").read_text(encoding="utf-8"))
    print(f"{result.answers} answers ({result.asked} asked now), {result.wall_seconds:.0f} s wall, "
          f"{result.model_seconds:.0f} s in the model; results in {args.output}/", file=sys.stderr)
    return 0
