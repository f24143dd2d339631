"""The built distributions and clean virtual environments, shared by the packaging tests (the `dist`
fixture reaches them through conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]

# Distribution name -> (project folder, its top-level import path as folders).
DISTRIBUTIONS = {
    "hammer-plugins": (ROOT, "hammer_plugins"),
    "langchain-hammer": (ROOT / "integrations" / "langchain", "langchain_hammer"),
    "llama-index-llms-hammer": (ROOT / "integrations" / "llama-index", "llama_index/llms/hammer"),
    "hammer-evals": (ROOT / "evals", "hammer_evals"),
}

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def wheel_path(dist: Path, name: str) -> Path:
    return dist / f"{name.replace('-', '_')}-{VERSION}-py3-none-any.whl"


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every distribution built as ``python -m build`` does: the sdist, then the wheel from the sdist."""
    out = tmp_path_factory.mktemp("dist")
    for name, (folder, _) in DISTRIBUTIONS.items():
        result = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(folder)],
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, f"{name}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return out


def clean_venv(folder: Path, requirements: Sequence[str], pip_options: Sequence[str] = ()) -> Path:
    """A fresh venv in ``folder`` with ``requirements`` (wheel paths, with or without extras) installed by
    this environment's pip, every other dependency from the index pip is configured with; its python."""
    # No pip inside (ensurepip is most of a venv's creation time): this environment's pip installs into it.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    python = folder / "bin" / "python"
    install(python, requirements, pip_options)
    return python


def install(python: Path, requirements: Sequence[str], pip_options: Sequence[str] = ()) -> None:
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    result = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-compile",
                             *pip_options, *requirements], capture_output=True, text=True, timeout=900, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
