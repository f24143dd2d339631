"""Docs rows that once said what the code did not: each kept true by a test."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_errors_table_lists_every_exported_error() -> None:
    """docs/engine.md's errors table names every error class ``hammer_plugins`` exports."""
    import hammer_plugins

    exported = {name for name in dir(hammer_plugins)
                if isinstance(getattr(hammer_plugins, name), type) and issubclass(getattr(hammer_plugins, name), Exception)}
    table = (ROOT / "docs" / "engine.md").read_text(encoding="utf-8").split("## Errors", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `(\w+)` \|", table, re.M)) | {"HammerError"}  # the base: said under the table
    assert exported - listed == set(), sorted(exported - listed)


def _table_rows(doc: str, header: str) -> list[list[str]]:
    """The rows of the table of ``doc`` whose header row starts with ``header``, as cells."""
    lines = (ROOT / doc).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split(" | ")])
    return rows


def test_the_limits_table_is_the_code() -> None:
    """docs/engine.md's schema limits and their defaults are SchemaLimits' fields and defaults."""
    from hammer_plugins.tools.limits import SchemaLimits

    defaults = SchemaLimits()
    rows = {name.strip("`"): value for name, value, *_ in _table_rows("docs/engine.md", "| limit | default |")}
    assert rows and set(rows) <= set(vars(defaults)), set(rows) - set(vars(defaults))
    for name, value in rows.items():
        power = re.fullmatch(r"(\d+)<sup>(\d+)</sup>-1", value)  # 2<sup>31</sup>-1
        stated = int(power[1]) ** int(power[2]) - 1 if power else float(value.replace(",", ""))
        assert stated == float(getattr(defaults, name)), (name, value, getattr(defaults, name))


def test_the_folders_table_gives_each_folders_layer() -> None:
    """docs/architecture.md's folders and layers are the package's folders and the layer each docstring states."""
    rows = _table_rows("docs/architecture.md", "| folder | layer |")
    stated = {}
    for folders, layer, *_ in rows:
        for folder in re.findall(r"`(\w+)/`", folders):
            stated[folder] = int(layer)
    actual = {}
    for folder in (ROOT / "hammer_plugins").iterdir():
        init = folder / "__init__.py"
        files = [init] if init.is_file() else sorted(folder.glob("*.py"))  # vllm_plugin: plugin files, no package
        found = {int(n) for f in files for n in re.findall(r"^Layer (\d)\b", f.read_text(encoding="utf-8"), re.M)}
        if found:
            actual[folder.name] = found.pop()
    assert stated == actual
