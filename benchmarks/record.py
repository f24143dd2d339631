"""What every benchmark's record says of its run, and how it is written: one JSON file.

A script builds its own fields and passes them through :func:`run_facts` (the command, the date, the machine,
the commit), then :func:`write_record` writes them where ``--json`` says (nothing without it).

Example:
    >>> sorted(run_facts("benchmarks/x.py", argv=["--fast"]))
    ['command', 'date', 'git', 'machine']
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_facts(script: str, argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The command as run, today's date, the machine and the commit: the fields every record starts with."""
    return {"command": " ".join([script, *(sys.argv[1:] if argv is None else argv)]), "date": time.strftime("%Y-%m-%d"),
            "machine": f"{os.cpu_count()} CPUs, {platform.machine()}",
            "git": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                  text=True).stdout.strip()}


def write_record(path: Path | None, record: dict[str, Any]) -> None:
    """``record`` as indented JSON at ``path`` (its folder made); nothing when ``path`` is None."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n")
