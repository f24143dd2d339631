"""Robustness to random and misleading names, with and without inference-time masking.

Usage::

    .venv/bin/python benchmarks/bench_robustness.py --model default --sample 5 --out docs/benchmarks/default
"""

from __future__ import annotations

import sys

from hammer_evals.bfcl.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["robustness", *sys.argv[1:]]))
