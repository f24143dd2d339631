"""Project promises that are easy to break silently."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import hammer_plugins

ROOT = Path(__file__).resolve().parents[2]


def test_engine_never_imports_langchain_or_llama_index() -> None:
    modules = [m.name for m in pkgutil.walk_packages(hammer_plugins.__path__, "hammer_plugins.")]
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('langchain', 'langchain_core', 'langgraph', 'llama_index'))\n"
        "print(bad)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def test_typed_markers_exist() -> None:
    for package in ("hammer_plugins", "integrations/langchain_hammer", "integrations/llama_index/llms/hammer"):
        assert (ROOT / package / "py.typed").is_file(), package


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = readme.split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert len(commands) == 2
    assert commands[1] == "bash scripts/test.sh"
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
