"""Test helpers shared by several folders: the evaluation data folders, examples as modules, label replays.

Imported by name (pytest puts ``tests/`` on ``sys.path`` for ``tests/conftest.py``).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from hammer_evals import datasets

REPO = Path(__file__).resolve().parents[1]


def hammerbench_dir() -> Path:
    """The English HammerBench folder: ``$HAMMERBENCH_DATA`` (a full copy), else the one the package ships."""
    return Path(os.environ.get("HAMMERBENCH_DATA") or datasets.hammerbench_dir())


def academic_dir() -> Path:
    """The Hammer paper's academic test sets: ``$HAMMER_ACADEMIC_DATA``, else the ones the package ships."""
    return Path(os.environ.get("HAMMER_ACADEMIC_DATA") or datasets.academic_dir())


def hammerbench_record(name: str, index: int = 0) -> dict[str, Any]:
    """Record ``index`` of ``multi-turn/HammerBench_<name>.json``."""
    return datasets.read_json(hammerbench_dir() / "multi-turn" / f"HammerBench_{name}.json")[index]


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
