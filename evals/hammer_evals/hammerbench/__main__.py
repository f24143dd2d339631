"""``python -m hammer_evals.hammerbench [options]``: the same as ``hammer eval hammerbench [options]``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hammer_plugins.values.errors import HammerError

from ..cli import add_eval_parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` as ``hammer eval hammerbench`` options and run."""
    parser = argparse.ArgumentParser(prog="hammer")
    add_eval_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["eval", "hammerbench", *(sys.argv[1:] if argv is None else argv)])
    try:
        return int(args.func(args))
    except (HammerError, FileNotFoundError, ValueError) as exc:
        print(f"hammer: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
