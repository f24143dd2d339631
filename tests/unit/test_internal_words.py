"""What users read says nothing of how the project is run: no issue numbers, sessions, team notes or
first-person notes to oneself in the README files, docs, examples, help texts, docstrings or comments of
the shipped code and the benchmarks, nor in the names of the records the docs link to (a folder once named
``after-issue-12`` is ``reference-prompt``: what it holds)."""

from __future__ import annotations

import re
from pathlib import Path

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
