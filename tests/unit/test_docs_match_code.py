"""Docs rows that once said what the code did not: each kept true by a test."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_errors_table_lists_every_exported_error() -> None:
    """docs/engine.md's errors table names every error class ``hammer_plugins`` exports."""
    import hammer_plugins

    exported = {name for name in dir(hammer_plugins)
                if isinstance(getattr(hammer_plugins, name), type) and issubclass(getattr(hammer_plugins, name), Exception)}
    table = (ROOT / "docs" / "engine.md").read_text(encoding="utf-8").split("## Errors", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(\w+)` \|", table, re.M)) | {"HammerError"}  # the base: said under the table
    assert exported - listed == set(), sorted(exported - listed)
