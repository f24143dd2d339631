"""``hammer eval``: one subcommand per benchmark evaluator.

* ``hammer eval hammerbench``: HammerBench's multi-turn slot filling (:mod:`hammer_evals.hammerbench`);
* ``hammer eval academic``: the Hammer paper's Table 3 sets and the masking case study
  (:mod:`hammer_evals.academic`).

The ``hammer`` command finds this through its ``hammer.commands`` entry point.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="hammer")
    >>> add_eval_parser(parser.add_subparsers(dest="command"))
    >>> parser.parse_args(["eval", "academic", "--data", "d", "--limit", "5"]).limit
    5
"""

from __future__ import annotations

from typing import Any

from .academic.cli import add_academic_parser
from .hammerbench.cli import add_hammerbench_parser


def add_eval_parser(sub: Any) -> None:
    """Add ``eval`` and its evaluators to ``sub`` (an argparse subparsers object)."""
    evaluation = sub.add_parser("eval", help="evaluate a model on a benchmark")
    benchmarks = evaluation.add_subparsers(dest="benchmark", required=True)
    add_hammerbench_parser(benchmarks)
    add_academic_parser(benchmarks)
