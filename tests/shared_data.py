"""Test helpers shared by several folders: the HammerBench data folder, examples as modules, label replays.

Imported by name (pytest puts ``tests/`` on ``sys.path`` for ``tests/conftest.py``).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
# The team's shared folder sits beside the repository (as it does in CI).
DEFAULT_HAMMERBENCH = REPO.parent / "shared" / "data" / "hammerbench" / "en"


def _shared_data(variable: str, default: Path, marker: str, what: str) -> Path:
    """``$variable``, else ``default``; missing data (no ``marker`` inside) fails in CI (``CI`` set:
    the folder is there by contract) and skips elsewhere."""
    path = Path(os.environ.get(variable, default))
    if not (path / marker).exists():
        message = f"{what} not found at {path}; set {variable}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


def hammerbench_dir() -> Path:
    """The English HammerBench folder (``$HAMMERBENCH_DATA``, else ``../shared`` beside the repo)."""
    return _shared_data("HAMMERBENCH_DATA", DEFAULT_HAMMERBENCH, "multi-turn", "HammerBench data")


DEFAULT_ACADEMIC = REPO.parent / "shared" / "data" / "hammer-academic"


def academic_dir() -> Path:
    """The Hammer paper's academic test sets (``$HAMMER_ACADEMIC_DATA``, else ``../shared`` beside the repo)."""
    return _shared_data("HAMMER_ACADEMIC_DATA", DEFAULT_ACADEMIC, "sealtool.json", "academic test sets")


def hammerbench_record(name: str, index: int = 0) -> dict[str, Any]:
    """Record ``index`` of ``multi-turn/HammerBench_<name>.json``."""
    path = hammerbench_dir() / "multi-turn" / f"HammerBench_{name}.json"
    return json.loads(path.read_text(encoding="utf-8"))[index]


def label_replay(record: dict[str, Any], rename: Any = None) -> tuple[list[str], list[str]]:
    """The user turns and, per turn, its labelled snapshot as Hammer output (``[]`` where none).

    ``rename`` maps a tool name to the one the model sees (LlamaIndex turns dots into underscores).
    """
    users: list[str] = []
    outputs: list[str] = []
    for message in record["messages"]:
        if message["role"] == "user":
            users.append(message["content"])
            outputs.append("[]")
        elif message["role"] == "function call":
            call = dict(message["content"])
            if rename is not None:
                call["name"] = rename(call["name"])
            outputs[-1] = json.dumps([call], ensure_ascii=False)
    return users, outputs


def load_example(filename: str) -> ModuleType:
    """``examples/<filename>`` imported as a module (examples are scripts, not a package)."""
    path = REPO / "examples" / filename
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
