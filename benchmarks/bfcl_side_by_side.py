"""BFCL accuracy, side by side: ChatHammer (constrained/masking on and off), ChatLlamaCpp, llama-cpp-python tools.

Usage::

    .venv/bin/python benchmarks/bfcl_side_by_side.py --out docs/benchmarks/default --sample 5
"""

from __future__ import annotations

import sys

from hammer_evals.bfcl.cli import main

if __name__ == "__main__":
    raise SystemExit(main(["accuracy", *sys.argv[1:]]))
