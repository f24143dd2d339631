"""Every decimal figure docs/benchmarks.md cites is in a committed record (issue 32).

The records are the files under ``docs/benchmarks/``: their JSON numbers (not strings, so a model's
answer cannot match by chance) and every number in their ``.md`` tables. A decimal the page cites
in prose or a table (code aside) must be one of them at the decimals cited, as it is or as a
percentage of a fraction. What no record holds (a figure worked out by hand, single runs that kept
no file) is listed in ``NOT_IN_A_RECORD`` with the reason; an entry the page no longer cites fails
too, so the list cannot outlive its figures. Limits: integers are not checked (counts are
everywhere), and a small decimal can match some other record's number by chance, so this catches
a figure no record holds (a stale one, a typo) rather than proving where each figure came from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "benchmarks.md"

# A decimal standing alone: not part of a name or version (Qwen2.5, 0.5B, 2.1-0.5b), "1.08x" allowed.
CITED = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})*\.\d+(?![A-Za-wyz_\d]|\.\d)")
NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")

# (figure, a fragment of its line, why no record holds it). Keep it short: prefer a record.
SINGLE_RUNS = "single-run timelines of benchmarks/cold_call.py's rows, 2026-11-25: no file was kept (the page says so)"
DRAFT_RUNS = "decode_speed.py --draft-tokens 8 and 3, one run each, printed only (the page says so)"
NOT_IN_A_RECORD: list[tuple[str, str, str]] = [
    ("4.95", "the prompt evaluated at 4.95-5.0 s", SINGLE_RUNS),
    ("1.14", "the model loaded at 1.14 s", SINGLE_RUNS),
    ("4.43", "eval 4.73 s against 4.43 s", SINGLE_RUNS),
    ("1.14", "0.89-1.08 s instead of 1.14 s", SINGLE_RUNS),
    ("4.59", "(4.91 vs 4.59 s)", SINGLE_RUNS),
    ("4.53", "the same (4.53 vs 4.59 s)", SINGLE_RUNS),
    ("4.53", "(4.75 vs 4.53 s, 4 runs each)", SINGLE_RUNS),
    ("23.6", "| plain llama-cpp-python | 23.6 / 23.7 |", DRAFT_RUNS),
    ("34.2", "| fast-forward + drafts, K = 8 | 34.2 |", DRAFT_RUNS),
    ("25.4", "| fast-forward + drafts, K = 3 | 25.4 |", DRAFT_RUNS),
    ("0.16", "0.16 (fast-forward ends", "the margin tests/real/test_fast_forward.py reported when question 2 flipped"),
]


def _numbers(value: Any) -> Iterator[float]:
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield float(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from _numbers(item)


@cache
def _record_forms(path: Path) -> frozenset[str]:
    """The record's numbers written with 1 to 3 decimals, as they are and as percentages."""
    if path.suffix == ".json":
        values = set(_numbers(json.loads(path.read_text(encoding="utf-8"))))
    elif path.suffix == ".jsonl":
        values = {v for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
                  for v in _numbers(json.loads(line))}
    elif path.suffix == ".md":
        values = {float(n.replace(",", "")) for n in NUMBER.findall(path.read_text(encoding="utf-8"))}
    else:
        return frozenset()
    return frozenset(f"{v * scale:.{k}f}" for v in values for scale in (1, 100) for k in (1, 2, 3))


def _record_files() -> list[Path]:
    return sorted(p for p in (REPO / "docs" / "benchmarks").rglob("*") if p.suffix in (".json", ".jsonl", ".md"))


@cache
def _all_forms() -> frozenset[str]:
    return frozenset().union(*(_record_forms(path) for path in _record_files()))


def _cited() -> list[tuple[int, str, str]]:
    """(line number, figure, line) for every decimal the page cites outside code."""
    cited, in_code = [], False
    for number, line in enumerate(DOC.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if not in_code:
            prose = re.sub(r"`[^`]*`", "", line)  # commands and options, not figures
            cited.extend((number, m.group(), line) for m in CITED.finditer(prose))
    return cited


def _exempt(figure: str, line: str) -> bool:
    return any(figure == f and fragment in line for f, fragment, _ in NOT_IN_A_RECORD)


def test_every_cited_decimal_is_in_a_record() -> None:
    forms = _all_forms()
    missing = [f"line {number}: {figure} in: {line.strip()[:120]}" for number, figure, line in _cited()
               if figure.replace(",", "") not in forms and not _exempt(figure, line)]
    assert not missing, ("figures in docs/benchmarks.md that no record under docs/benchmarks/ holds: commit the "
                         "record, correct the figure, or list it in NOT_IN_A_RECORD with the reason:\n"
                         + "\n".join(missing))


def test_every_exemption_is_still_needed() -> None:
    cited = _cited()
    for figure, fragment, reason in NOT_IN_A_RECORD:
        assert reason
        assert any(f == figure and fragment in line for _, f, line in cited), (
            f"NOT_IN_A_RECORD lists {figure} ({fragment!r}), which docs/benchmarks.md no longer cites: drop it")


@pytest.mark.parametrize(("text", "expected"), [
    ("F1 107.69 and 1,315.5 s, 1.08x", ["107.69", "1,315.5", "1.08"]),
    ("Qwen2.5-Coder-0.5B, Hammer2.1-0.5b, v1.2.3", []),
    ("from 0.56-0.60 s (95.65 / 27.78)", ["0.56", "0.60", "95.65", "27.78"]),
])
def test_the_figure_pattern(text: str, expected: list[str]) -> None:
    assert CITED.findall(text) == expected
