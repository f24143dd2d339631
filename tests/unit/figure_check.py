"""Finding the measured figures of a text and the record numbers that may stand behind them (test_docs_figures.py).

A figure is, in prose and tables and in the ``#`` comments of code blocks (code itself, inline or fenced, is
commands and sample output, not claims):

- a number with a unit of measure: time (``ms``, ``s``, ``min``, ``minutes``, ``h``, ``hours``, and
  ``5 min 13 s`` / ``1 h 46 min`` as one duration), size (``B``, ``bytes``, ``kB``, ``KB``, ``MB``, ``GB``,
  ``KiB``, ``MiB``, ``GiB``), a count of ``tokens``, a rate (``tokens/s``, ``tok/s``, ``req/s``,
  ``requests/s``), a percentage (``%``), a ratio (``1.8x``, ``2×``); both ends of a range (``6-8 minutes``,
  ``5 to 10 minutes``), both sides of a comparison (``579 vs 562 tokens``) and every term of a sum
  (``1,189 + 330 passed``);
- a count of test results (``1,164 passed``, ``9 skipped``, ``1,173 tests``);
- in a table, every cell that is a number alone (``| 0.289 |``, ``| 1,268 |``);
- in docs/benchmarks.md, also every decimal standing alone (its prose cites records' numbers).

Not figures: versions and names (``Qwen2.5``, ``0.5B``, ``hammer2.1-1.5b``), counts written as counts in prose
(``14 questions``, ``25 of 50``), line numbers and other bare integers in prose, and numbers in words.

A record's numbers carry the unit their JSON key names (``wall_s``, ``seconds_pytest``, ``median_ms``,
``ttft_min``, ``percent``): a time is matched only after converting from that unit to the unit cited. A number
whose key names no unit (and every number of a record's ``.md`` tables) is matched as written, or, for a
percentage, as a fraction times 100.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

# A decimal standing alone: not part of a name or version (Qwen2.5, 0.5B, 2.1-0.5b), "1.08x" allowed.
CITED = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})*\.\d+(?![A-Za-wyz_\d]|\.\d)")
NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
# Two-part durations first, so "5 min 13 s" is one figure (313 s), not 5 min and 13 s.
DURATION = re.compile(r"(?<![\w.,/-])(?P<a>\d+) (?P<big>min|h) (?P<b>\d+) (?P<small>s|min)(?![\w/])")
# A number and its unit: time units and counts need a space before them ("429s" is a status code), "1.8x" and "5%"
# need none; "17 × 23" is arithmetic, not a ratio. A range ("6-8 minutes", "5 to 10 minutes") and a sum
# ("1,189 + 330 passed") are one figure per number.
_UNITS = (
    r"(?:\s(?:ms|s|seconds?|min|minutes?|h|hours?|tokens|bytes|B)"
    r"|\s?(?:kB|KB|MB|GB|TB|KiB|MiB|GiB|%|tokens/s|tok/s|req/s|requests/s)|\s?[x×](?!\s?\d))"
)
UNIT = re.compile(
    rf"(?<![\w.,/-])(?P<nums>(?:{_NUM})(?:(?:\s?[-–]\s?|\sto\s|\svs\.?\s|\s\+\s)(?:{_NUM}))*)"
    rf"(?:(?P<unit>{_UNITS})|\s(?P<word>passed|failed|skipped|tests))(?![\w/])"
)
# A table cell of numbers alone ("0.289", "**1,268**", "9/10", "1.01 (0.99-1.11)"): each of its numbers is a figure.
NUMERIC_CELL = re.compile(r"^[\d.,\s*()/x%±–-]*\d[\d.,\s*()/x%±–-]*$")

TIME_SCALE = {"ms": 1000.0, "s": 1.0, "min": 1 / 60, "h": 1 / 3600}  # from seconds
UNIT_KIND = {"seconds": "s", "second": "s", "minutes": "min", "minute": "min", "hours": "h", "hour": "h"}


def key_unit(key: str) -> str | None:
    """The unit a record's JSON key names, if any: ``wall_s`` s, ``median_ms`` ms, ``seconds_pytest`` s, ``percent`` %.

    A key with ``=`` in it labels settings (``pool1000 MIN_SHARE_OF_BEST=0.5``), not a measure: it names no unit.
    """
    if "=" in key:
        return None
    words = re.split(r"[_\W]+", key.lower())
    if "ms" in words or "milliseconds" in words:
        return "ms"
    if {"s", "sec", "seconds", "second"} & set(words):
        return "s"
    if {"min", "minutes"} & set(words):
        return "min"
    if {"h", "hours"} & set(words):
        return "h"
    if {"percent", "pct"} & set(words):
        return "%"
    return None


def _numbers(value: Any, unit: str | None = None) -> Iterator[tuple[float, str | None]]:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield float(value), unit
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, key_unit(str(key)) or unit)
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item, unit)


@cache
def record_values(path: Path) -> frozenset[tuple[float, str | None]]:
    """A record's numbers with the unit their key names (None: none named; a ``.md`` table's numbers have none)."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return frozenset(_numbers(json.loads(text)))
    if path.suffix == ".jsonl":
        return frozenset(v for line in text.splitlines() if line.strip() for v in _numbers(json.loads(line)))
    return frozenset((float(n.replace(",", "")), None) for n in NUMBER.findall(text))


@cache
def forms(files: tuple[Path, ...], unit: str, places: int) -> frozenset[str]:
    """How the files' numbers read when cited in ``unit`` with ``places`` decimals. A time converts from its key's
    unit; a number whose key names none is read as written (a percentage also as a fraction times 100). Whole
    numbers come from summaries only (``.json``, ``.md``), not the per-question ``.jsonl`` files, where any small
    integer occurs."""
    kind = UNIT_KIND.get(unit, unit)
    out = set()
    for path in files:
        if places == 0 and path.suffix == ".jsonl":
            continue
        for value, known in record_values(path):
            if kind in TIME_SCALE and known in TIME_SCALE:
                scaled = [value / TIME_SCALE[known] * TIME_SCALE[kind]]
            elif kind == "%" and known is None:
                scaled = [value, value * 100]
            elif known is None or known == kind or not kind:  # a number cited without a unit reads as written
                scaled = [value]
            else:
                scaled = []  # a time cited as something else, or a percentage key cited as a time
            out.update(f"{v:.{places}f}" for v in scaled)
    return frozenset(out)


def in_records(files: tuple[Path, ...], figure: str, unit: str) -> bool:
    cited = figure.replace(",", "")
    return cited in forms(files, unit, len(cited.partition(".")[2]))


def table_cells(line: str) -> list[str]:
    """The cells of a markdown table row (``|`` inside inline code is text)."""
    cells, depth, current = [], False, []
    for char in line.strip().strip("|"):
        if char == "`":
            depth = not depth
        if char == "|" and not depth:
            cells.append("".join(current))
            current = []
        else:
            current.append(char)
    cells.append("".join(current))
    return [c.strip() for c in cells]


def figures(text: str, decimals: bool, table: bool = False,
            skip_columns: frozenset[int] = frozenset()) -> list[tuple[str, str]]:
    """(figure, unit) in one line; "5 min 13 s" as (313, s), "1 h 46 min" as (106, min). In a table row, every
    number of a cell of numbers alone too, except in ``skip_columns`` (columns of codes or settings)."""
    found = [(str(int(m["a"]) * 60 + int(m["b"])), m["small"]) for m in DURATION.finditer(text)]
    text = DURATION.sub(" ", text)
    spans = []
    for m in UNIT.finditer(text):
        unit = (m["unit"] or "").strip()
        for n in re.finditer(_NUM, m["nums"]):
            found.append((n.group(), unit))
            spans.append((m.start("nums") + n.start(), m.start("nums") + n.end()))
    if decimals:
        found.extend((m.group(), "") for m in CITED.finditer(text) if m.span() not in spans)
    if table:
        cited = {figure for figure, _ in found}
        for column, cell in enumerate(table_cells(text)):
            if column not in skip_columns and NUMERIC_CELL.match(cell):
                found.extend((n, "") for n in re.findall(_NUM, cell) if n not in cited)
    return found


def prose_lines(text: str) -> Iterator[tuple[int, int, str, str, list[str] | None]]:
    """(section, line number, line, the part that can hold figures, the table's header cells for a table row, else
    None) of a markdown text: prose, tables, and code blocks' ``#`` comments; a section starts at each ``#``/``##``
    heading."""
    in_code, section, header, previous = False, 0, None, ""
    for number, line in enumerate(text.splitlines(), 1):
        rule = re.match(r"^\s*\|[\s:|-]+\|\s*$", line)
        if rule:
            header = table_cells(previous)
        elif not line.lstrip().startswith("|"):
            header = None
        previous = line
        if line.startswith("```"):
            in_code = not in_code
            continue
        if not in_code and re.match(r"#{1,2} ", line):
            section += 1
        if in_code:
            if " # " not in line:
                continue
            part = line.split(" # ", 1)[1]
        else:
            part = line
        if in_code or rule or header is None or not line.lstrip().startswith("|"):
            columns = None
        else:
            columns = header
        # Inline code is commands and options, not figures (in a table its cell stays a cell).
        yield section, number, line, re.sub(r"`[^`|]*`", " ", part), columns


def sections(text: str) -> list[str]:
    """The text cut at its ``#``/``##`` headings (outside code): the unit a record is named for."""
    parts, in_code = [[]], False
    for line in text.splitlines():
        in_code ^= line.startswith("```")
        if not in_code and re.match(r"#{1,2} ", line):
            parts.append([])
        parts[-1].append(line)
    return ["\n".join(lines) for lines in parts]


RECORD_MENTION = re.compile(r"[\w./-]*(?:benchmarks|hammerbench)/[\w./-]*")


def named_records(text: str, doc_folder: Path, repo: Path, record_dirs: list[Path]) -> tuple[Path, ...]:
    """The record files under the paths or links to files or folders under ``record_dirs`` that ``text`` names,
    read from the doc's folder or the repository's root."""
    named: set[Path] = set()
    for mention in RECORD_MENTION.findall(text):
        path = mention.rstrip("/.")
        for base in (doc_folder, repo):
            target = (base / path).resolve()
            if target.exists() and any(target == d or d in target.parents for d in record_dirs) and target not in record_dirs:
                named.add(target)
    files = {f for path in named for f in ([path] if path.is_file() else path.rglob("*"))}
    return tuple(sorted(f for f in files if f.suffix in (".json", ".jsonl", ".md")))
