"""What users read says nothing of how the project is run: no issue numbers, sessions, team notes or
first-person notes to oneself in the README files, docs, examples, help texts, docstrings or comments of
the shipped code and the benchmarks, nor in the names of the records the docs link to (a folder once named
``after-issue-12`` is ``reference-prompt``: what it holds)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

INTERNAL = re.compile(
    r"\b[Ii]ssues? \d+|\bthis session\b|\bGUIDE\b|\bI (?:paused|ran|measured|chose|left|found|think)\b"
    r"|\b(?:first|second|third|fourth|fifth|sixth) wave\b|\bthe tree that closed\b|\bthe issue(?:'s| was| reported)\b")

READ_BY_USERS = ["README.md", "README.pypi.md", "docs/**/*.md", "integrations/*/README.md", "evals/README.md",
                 "examples/**/*.py", "examples/**/*.ipynb", "hammer_plugins/**/*.py", "integrations/**/*.py",
                 "evals/hammer_evals/**/*.py", "benchmarks/**/*.py", "hammer_plugins/**/*.html",
                 "hammer_plugins/**/*.js"]


def internal_words(text: str) -> list[str]:
    return [m.group(0) for m in INTERNAL.finditer(text)]


INTERNAL_NAME = re.compile(r"(?i)issue-?\d+|wave-?\d+|session")


def internal_names(paths: list[str]) -> list[str]:
    return [path for path in paths if INTERNAL_NAME.search(path)]


def test_the_check_finds_what_it_is_for() -> None:
    planted = ("Before issue 12 it was slow; Issues 3 and 4 say so. I paused the run this session (GUIDE section 2), "
               "on the tree that closed the fifth wave, as the issue's floor.")
    assert internal_words(planted) == ["issue 12", "Issues 3", "I paused", "this session", "GUIDE", "the tree that closed",
                                       "fifth wave", "the issue's"]
    assert internal_words("an issue tracker; GitHub issues") == []
    assert internal_names(["docs/benchmarks/after-issue-12/a.json", "docs/x/issue37.json", "docs/wave6/a.md",
                           "docs/benchmarks/reference-prompt/a.json"]) == [
        "docs/benchmarks/after-issue-12/a.json", "docs/x/issue37.json", "docs/wave6/a.md"]


def test_nothing_users_read_has_internal_words() -> None:
    found = []
    for pattern in READ_BY_USERS:
        for path in sorted(ROOT.glob(pattern)):
            if "/tests/" in str(path) or ".venv" in path.parts:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                found += [f"{path.relative_to(ROOT)}:{number}: {word!r}" for word in internal_words(line)]
    assert not found, "internal words users would read (say what happened, not which issue or session):\n" + "\n".join(found)



def test_no_record_or_page_is_named_after_how_the_project_is_run() -> None:
    """File and folder names under docs/ (the records the pages link to) say what they hold."""
    paths = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "docs").rglob("*"))]
    assert internal_names(paths) == [], "rename these after what they hold"


RECORD_KEY = re.compile(r"(?i)issue[-_]?\d+|wave[-_]?\d*|this_session|one_session|session_start")
RECORD_TEXT = re.compile(INTERNAL.pattern + r"|\bthis wave\b|/tmp/bench\d+")


def record_words(record: Any, place: str = "") -> list[str]:
    """The keys and texts of a JSON record that say how the project was run (a key ``whole_run_warm_issue38``, a
    note "on this wave's tree", an output folder ``/tmp/bench12b``), each with its place."""
    if isinstance(record, dict):
        found = [f"{place}/{key} (key)" for key in record if RECORD_KEY.search(str(key))]
        return found + [word for key, value in record.items() for word in record_words(value, f"{place}/{key}")]
    if isinstance(record, list):
        return [word for i, value in enumerate(record) for word in record_words(value, f"{place}[{i}]")]
    if isinstance(record, str):
        return [f"{place}: {m.group(0)!r}" for m in RECORD_TEXT.finditer(record)]
    return []


def test_the_record_check_finds_what_it_is_for() -> None:
    planted = {"what": "on this wave's tree", "whole_run_warm_issue38": {"command": "x --out /tmp/bench12b"},
               "fast_loop_wave6": 1, "rows": [{"new_session_turn1_ttft_s": 1.0, "note": "Issue 37, Done when"}]}
    assert record_words(planted) == ["/whole_run_warm_issue38 (key)", "/fast_loop_wave6 (key)", "/what: 'this wave'",
                                     "/whole_run_warm_issue38/command: '/tmp/bench12'", "/rows[0]/note: 'Issue 37'"]


def test_no_record_the_docs_cite_has_internal_words_in_its_keys_or_notes() -> None:
    found = [f"{path.relative_to(ROOT)}{word}" for path in sorted((ROOT / "docs").rglob("*.json"))
             for word in record_words(json.loads(path.read_text(encoding="utf-8")))]
    assert found == [], "name keys and notes after what they hold:\n" + "\n".join(found)
