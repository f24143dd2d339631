"""Fixtures for the HammerBench and snapshot tests: the data folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_data import hammerbench_dir


@pytest.fixture(scope="session")
def hb_data() -> Path:
    """The English HammerBench folder (``$HAMMERBENCH_DATA``, else the copy the package ships)."""
    return hammerbench_dir()
