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
    for package in ("hammer_plugins", "evals/hammer_evals", "integrations/langchain/langchain_hammer",
                    "integrations/llama-index/llama_index/llms/hammer"):
        assert (ROOT / package / "py.typed").is_file(), package


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    commands = readme.split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert len(commands) == 2
    assert commands[1] == "bash scripts/test.sh"
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


PACKAGES = ("hammer_plugins", "hammer_evals", "langchain_hammer", "llama_index.llms.hammer")


def _import_graph() -> dict[str, set[str]]:
    import grimp

    # Imports under TYPE_CHECKING never run, so they cannot make a cycle; function-level imports do count.
    graph = grimp.build_graph(*PACKAGES, include_external_packages=False, exclude_type_checking_imports=True)
    return {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), i.e. import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    assert _cycles(_import_graph()) == []


def test_the_engine_package_depends_on_no_adapter_and_no_benchmark() -> None:
    graph = _import_graph()
    arrows = sorted((m, i) for m, imported in graph.items() if m.startswith("hammer_plugins")
                    for i in imported if not i.startswith("hammer_plugins"))
    assert arrows == []


def _twins(files: list[Path]) -> list[str]:
    """Blocks of 6+ lines (imports, docstrings and comments aside) that pylint's symilar finds in two files."""
    result = subprocess.run([sys.executable, "-m", "pylint.checkers.symilar", "-d", "6", "-i", "--ignore-docstrings",
                             "--ignore-imports", *map(str, files)], capture_output=True, text=True, timeout=120)
    assert "TOTAL lines=" in result.stdout, result.stdout + result.stderr
    return [block for block in result.stdout.split("\n\n") if block.strip().startswith(tuple("0123456789"))]


def test_the_twin_finder_finds_a_twin(tmp_path: Path) -> None:
    body = "\n".join(f"    total = total + {i} * value" for i in range(8))
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text(f"def f{name[0]}(value):\n    total = 0\n{body}\n    return total\n")
    assert _twins([tmp_path / "a.py", tmp_path / "b.py"])


def test_no_twins_between_the_two_adapters() -> None:
    """Logic both adapters need lives once in the engine: a block repeated across them is a design bug."""
    langchain = sorted((ROOT / "integrations" / "langchain" / "langchain_hammer").glob("*.py"))
    llama_index = sorted((ROOT / "integrations" / "llama-index" / "llama_index" / "llms" / "hammer").glob("*.py"))
    across = [t for t in _twins(langchain + llama_index) if "langchain_hammer" in t and "llama_index" in t]
    assert across == []


def test_every_public_class_shows_a_runnable_example() -> None:
    import importlib
    import inspect

    missing = []
    for package in ("hammer_plugins", "langchain_hammer", "llama_index.llms.hammer"):
        module = importlib.import_module(package)
        missing += [f"{package}.{name}" for name in module.__all__
                    if inspect.isclass(getattr(module, name)) and ">>>" not in (getattr(module, name).__doc__ or "")]
    assert missing == []


def test_every_docstring_example_runs() -> None:
    import doctest
    import importlib

    failed = {}
    for package in ("hammer_plugins", "hammer_evals", "langchain_hammer", "llama_index.llms.hammer"):
        root = importlib.import_module(package)
        names = [package] + [m.name for m in pkgutil.walk_packages(root.__path__, f"{package}.")
                             if not m.name.endswith("__main__")]
        for name in names:
            result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS, verbose=False)
            if result.failed:
                failed[name] = result.failed
    assert failed == {}
