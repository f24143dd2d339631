"""The property tests follow the selected hypothesis profile: none pins ``derandomize`` (the ``ci`` profile
derandomizes; ``thorough`` must draw fresh examples, which a pinned setting would prevent)."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_property_test_pins_derandomize() -> None:
    pinned = [f"{path.relative_to(TESTS)}:{number}" for path in sorted(TESTS.rglob("test_*.py"))
              for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
              if re.search(r"derandomize\s*=", line)]
    assert pinned == [], pinned
