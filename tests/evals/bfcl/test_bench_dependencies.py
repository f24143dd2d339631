"""What ``hammer bench`` imports from bfcl-eval at run time is installed by ``hammer-evals[bench]`` itself.

bfcl-eval is installed ``--no-deps`` (its own tree pulls every vendor SDK), so each third-party module
that the bfcl-eval modules ``hammer bench`` uses import must be a requirement of the bench extra (or of
the ``hammer-plugins[llama-cpp]`` it brings), named there, not left to arrive through another package:
``filelock`` (bfcl_eval.utils) once was missing, and every accuracy run failed on it.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

from packaging.requirements import Requirement

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[3]
STUBBED = {"bfcl_eval.constants.model_config"}  # hammer_evals.bfcl.bfcl provides it (_offline_model_config)


def _source(module: str) -> Path | None:
    spec = importlib.util.find_spec(module.split(".")[0])
    base = Path(next(iter(spec.submodule_search_locations))).parent
    path = base.joinpath(*module.split("."))
    return path / "__init__.py" if (path / "__init__.py").is_file() else (
        path.with_suffix(".py") if path.with_suffix(".py").is_file() else None)


def _imports(path: Path, module: str) -> set[str]:
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([node.module] if node.module else []))
            found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
    return found


def _bench_entry_points() -> set[str]:
    """The bfcl_eval modules hammer_evals imports, and the multi-turn simulators its categories run."""
    from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING

    from hammer_evals.bfcl.multi_turn import CATEGORIES, load_entries

    modules = set()
    for path in (ROOT / "evals" / "hammer_evals").rglob("*.py"):
        modules |= {m for m in _imports(path, "hammer_evals.x") if m.startswith("bfcl_eval")}
    classes = {name for category in CATEGORIES for entry in load_entries(category) for name in entry["involved_classes"]}
    return {m for m in modules if _source(m)} | {CLASS_FILE_PATH_MAPPING[name] for name in classes}


def _third_party_imports() -> set[str]:
    todo, seen, outside = list(_bench_entry_points()), set(), set()
    while todo:
        module = todo.pop()
        if module in seen or module in STUBBED:
            continue
        seen.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # its packages' __init__ run first
        path = _source(module)
        for name in _imports(path, module) if path else ():
            if name.startswith("bfcl_eval"):
                todo.append(name)
            elif name.split(".")[0] not in sys.stdlib_module_names:
                outside.add(name.split(".")[0])
    return outside


def _declared() -> set[str]:
    extras = tomllib.loads((ROOT / "evals" / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {Requirement(r).name.lower() for r in extras["bench"] + core["llama-cpp"]}


def test_what_bench_imports_from_bfcl_eval_is_a_requirement_of_the_bench_extra() -> None:
    distributions = importlib.metadata.packages_distributions()
    needed = {name: {d.lower() for d in distributions.get(name, [name])} for name in _third_party_imports()}
    assert "filelock" in needed and "mpmath" in needed  # the scan reaches bfcl_eval.utils and MathAPI
    missing = {name: dists for name, dists in needed.items() if not dists & _declared()}
    assert missing == {}, "bfcl-eval imports these on hammer bench's paths; add them to hammer-evals[bench]"
