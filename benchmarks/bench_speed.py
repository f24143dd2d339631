"""Speed: time to first token cold vs warm over a 20-tool block, our overhead share, peak memory.

Usage::

    .venv/bin/python benchmarks/bench_speed.py --model default --repeats 5 --out docs/benchmarks/default
"""

from __future__ import annotations

import sys

from hammer_evals.bfcl.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["speed", *sys.argv[1:]]))
