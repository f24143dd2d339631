"""The docs' lists of defaults, choices and flags, read against the code they describe (issue 40).

Each test parses one kind of list out of a doc and compares it with what the code says, so a changed
default, a new choice or a new flag fails here until the doc follows (docs/cli.md had lost
``--backend server`` and ``--base-url``; the adapters' docs gave ``prompt_format``'s default as
``"hammer2.1"`` where the code has ``None``).
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from hammer_plugins.cli.main import build_parser
from hammer_plugins.models.presets import PRESETS

REPO = Path(__file__).resolve().parents[2]
TICKED = re.compile(r"`([^`]*)`")


def _section(doc: str, heading: str) -> str:
    """The text under ``heading`` (a whole line) up to the next heading of the same or a higher level."""
    lines = (REPO / doc).read_text(encoding="utf-8").splitlines()
    start = lines.index(heading)
    level = len(heading) - len(heading.lstrip("#"))
    end = next((i for i in range(start + 1, len(lines)) if re.match(rf"#{{1,{level}}} ", lines[i])), len(lines))
    return "\n".join(lines[start + 1 : end])


def _option_rows(doc: str) -> list[tuple[list[str], list[str]]]:
    """(names, defaults) of the ``| option | default | meaning |`` table, each cell's backticked items."""
    text = (REPO / doc).read_text(encoding="utf-8")
    table = text[text.index("| option | default | meaning |") :].split("\n\n", 1)[0].splitlines()[2:]
    rows = []
    for row in table:
        names, defaults = (cell.strip() for cell in row.strip("|").split("|")[:2])
        rows.append((TICKED.findall(names), TICKED.findall(defaults)))
    return rows


def _adapter(doc: str) -> type[BaseModel]:
    if doc == "docs/langchain.md":
        from langchain_hammer import ChatHammer

        return ChatHammer
    from llama_index.llms.hammer import HammerLLM

    return HammerLLM


def _default(model: type[BaseModel], name: str) -> Any:
    field = model.model_fields[name]
    return field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]


@pytest.mark.parametrize("doc", ["docs/langchain.md", "docs/llama_index.md"])
def test_the_option_table_gives_the_code_defaults(doc: str) -> None:
    model = _adapter(doc)
    rows = _option_rows(doc)
    assert len(rows) > 15, f"{doc}: the option table was not found whole"
    wrong = []
    for names, defaults in rows:
        assert len(defaults) in (1, len(names)), f"{doc}: {names} against {defaults}"
        for name, stated in zip(names, defaults * len(names) if len(defaults) == 1 else defaults, strict=True):
            assert name in model.model_fields, f"{doc} documents {name!r}, which {model.__name__} has no field for"
            if ast.literal_eval(stated) != _default(model, name):
                wrong.append(f"{name}: the doc says {stated}, the code {_default(model, name)!r}")
    assert not wrong, f"{doc}'s option table against {model.__name__}:\n" + "\n".join(wrong)


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser([name])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_hammer_call_options_are_the_parsers() -> None:
    """docs/cli.md names every option of ``hammer call``, no other, and each ``--flag a|b`` list is its choices."""
    text = _section("docs/cli.md", '## `hammer call "<query>"`')
    options = text[text.index("Options:") :].split("\n\n", 1)[0]
    documented = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-v)\b", options))
    parser = _subparser("call")
    actions = {s: a for a in parser._actions for s in a.option_strings if s not in ("-h", "--help")}
    assert documented - set(actions) == set(), "docs/cli.md names options hammer call does not take"
    undocumented = {a.option_strings[-1] for a in actions.values() if not documented & set(a.option_strings)}
    # The MCP options, shared with hammer chat, have their own part of the page: the `--mcp` paragraph and its list.
    whole = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    mcp = whole[whole.index('`--mcp "<command>"` (both `call` and `chat`') : whole.index("## `hammer pull")]
    assert {o for o in undocumented if not (o.startswith("--mcp") and f"`{o}" in mcp)} == set(), (
        "hammer call options docs/cli.md does not name"
    )
    for flag, listed in re.findall(r"`(--[a-z-]+)\s+([\w.]+(?:\|[\w.<>]+)+)`", options.replace("\n", " ")):
        if "<" in listed:
            continue  # a free value with examples (`--tool-choice auto|required|none|<name>`), not a choice list
        choices = listed.split("|")
        assert actions[flag].choices is not None and sorted(choices) == sorted(actions[flag].choices), (
            f"docs/cli.md lists {flag} {listed}; the parser takes {actions[flag].choices}"
        )


def test_the_presets_table_is_the_code() -> None:
    """docs/models.md's preset table: name, GGUF repo and file, size, checkpoint, format, license as PRESETS has them."""
    rows = [row for row in (REPO / "docs" / "models.md").read_text(encoding="utf-8").splitlines() if row.startswith("| `hammer")]
    table = {}
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        table[TICKED.findall(cells[0])[0]] = cells
    assert sorted(table) == sorted(p.name for p in PRESETS)
    for preset in PRESETS:
        _, gguf, size, checkpoint, prompt_format, license_ = table[preset.name]
        assert TICKED.findall(gguf) == ([preset.gguf_repo, preset.gguf_file] if preset.gguf_repo else []), preset.name
        assert size == (preset.gguf_size if preset.gguf_bytes else "-"), preset.name
        assert TICKED.findall(checkpoint) == [preset.hf_repo], preset.name
        assert (prompt_format, license_) == (preset.prompt_format, preset.license), preset.name


def test_the_serve_backends_table_is_the_parsers() -> None:
    """docs/server.md's ``--backend`` table lists exactly the choices of ``hammer serve --openai --backend``."""
    text = _section("docs/server.md", "## Backends: in process, or on llama-server")
    table = text[text.index("| `--backend` |") :].split("\n\n", 1)[0].splitlines()[2:]
    listed = [TICKED.findall(row.split("|")[1])[0] for row in table]
    backend = next(a for a in _subparser("serve")._actions if "--backend" in a.option_strings)
    assert listed == list(backend.choices)


def test_the_schema_limits_table_gives_the_code_defaults() -> None:
    """docs/engine.md's SchemaLimits table: every field, at its default."""
    from dataclasses import fields

    from hammer_plugins.tools.limits import SchemaLimits

    text = (REPO / "docs" / "engine.md").read_text(encoding="utf-8")
    table = text[text.index("| limit | default | what it bounds |") :].split("\n\n", 1)[0].splitlines()[2:]
    stated = {}
    for row in table:
        name, default = (cell.strip() for cell in row.strip("|").split("|")[:2])
        value = default.replace(",", "").replace("2<sup>31</sup>-1", str(2**31 - 1))
        stated[TICKED.findall(name)[0]] = float(value)
    assert stated == {f.name: float(f.default) for f in fields(SchemaLimits)}
