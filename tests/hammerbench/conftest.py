"""Fixtures for the HammerBench and snapshot tests: the data folder, and a scripted engine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The team's shared folder sits beside the repository (as it does in CI).
DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "hammerbench" / "en"


@pytest.fixture(scope="session")
def hb_data() -> Path:
    """The English HammerBench folder (``$HAMMERBENCH_DATA``, else the team's shared copy)."""
    path = Path(os.environ.get("HAMMERBENCH_DATA", DEFAULT_DATA))
    if not (path / "multi-turn").is_dir():
        message = f"HammerBench data not found at {path}; set HAMMERBENCH_DATA"
        if os.environ.get("CI"):
            pytest.fail(message)  # CI has ../shared beside the clone: a missing folder is a real failure
        pytest.skip(message)
    return path
