"""Docs rows that once said what the code did not: each kept true by a test."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Folders docs/architecture.md already names by the name the code is moving to (old name -> new name), applied to
# the first part of a core folder's path. An entry goes once its new folder exists (test_the_map_names_every_folder).
RENAMED_IN_THE_MAP: dict[str, str] = {}


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
            actual[RENAMED_IN_THE_MAP.get(folder.name, folder.name)] = found.pop()
    assert stated == actual


# ------------------------------------------------------------------ the map names every folder
# docs/architecture.md names each folder as a path in backticks ending in "/": the core's folders relative to
# hammer_plugins/ (`tools/`, `http_api/ollama/`; asset folders too, as `prompt/templates/`), the distributions'
# package folders (those holding a module) relative to the repository (`evals/hammer_evals/bfcl/`).
MAP = "docs/architecture.md"
DISTRIBUTIONS = ("integrations", "evals")


def _holds_files(folder: Path) -> bool:
    return any(f.is_file() and "__pycache__" not in f.parts for f in folder.rglob("*"))


def _folders_to_map(root: Path = ROOT) -> list[str]:
    """Every folder the map must name, as the map names it. A folder with nothing in it but ``__pycache__`` (one
    left behind by a move) is no folder; under integrations/ and evals/ only folders holding a module count."""
    def folders(under: Path) -> list[Path]:
        return sorted(p for p in under.rglob("*") if p.is_dir() and "__pycache__" not in p.parts
                      and not any(part.startswith(".") for part in p.relative_to(root).parts))

    core = root / "hammer_plugins"
    found = [f"{p.relative_to(core).as_posix()}/" for p in folders(core) if _holds_files(p)]
    for distribution in DISTRIBUTIONS:
        found += [f"{p.relative_to(root).as_posix()}/" for p in folders(root / distribution) if any(p.glob("*.py"))]
    return found


def _unmapped(folders: list[str], doc: str, renamed: dict[str, str]) -> list[str]:
    """The folders ``doc`` never names as a backticked path, each read under its new name if it is being renamed."""
    named = set(re.findall(r"`([\w./-]+/)`", doc))

    def as_mapped(folder: str) -> str:
        first, _, rest = folder.partition("/")
        return f"{renamed.get(first, first)}/{rest}"

    return [folder for folder in folders if as_mapped(folder) not in named]


def test_the_map_check_finds_an_unnamed_folder(tmp_path: Path) -> None:
    for path in ("hammer_plugins/tools/a.py", "hammer_plugins/server/ollama/a.py", "hammer_plugins/page/static/a.js",
                 "hammer_plugins/moved/__pycache__/a.pyc", "integrations/x/x_pkg/__init__.py",
                 "integrations/x/x_pkg.egg-info/PKG-INFO", "evals/e/data/a.json"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    folders = _folders_to_map(tmp_path)
    assert folders == ["page/", "page/static/", "server/", "server/ollama/", "tools/", "integrations/x/x_pkg/"]
    doc = "`tools/`, `api/`, `api/ollama/` and `page/` (its `static/`); `integrations/x/x_pkg/`"
    assert _unmapped(folders, doc, {"server": "api"}) == ["page/static/"]
    assert _unmapped(folders, doc, {}) == ["page/static/", "server/", "server/ollama/"]


def test_the_map_names_every_folder() -> None:
    """docs/architecture.md names every folder of the core, walked to the bottom, and each distribution's packages."""
    folders = _folders_to_map()
    assert {"tools/", "http_api/ollama/", "http_api/playground/static/", "prompt/templates/",
            "integrations/langchain/langchain_hammer/", "evals/hammer_evals/bfcl/"} <= set(folders)
    assert _unmapped(folders, (ROOT / MAP).read_text(encoding="utf-8"), RENAMED_IN_THE_MAP) == []
    landed = [old for old, new in RENAMED_IN_THE_MAP.items() if (ROOT / "hammer_plugins" / new).is_dir()]
    assert landed == [], "renamed in the code now: take them off RENAMED_IN_THE_MAP"
