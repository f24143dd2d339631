"""What users read says nothing of how the project is run: no issue numbers, sessions, team notes or
first-person notes to oneself in the README files, docs, examples, help texts, docstrings or comments of
the shipped code and the benchmarks. (Record file names such as ``docs/benchmarks/after-issue-12/`` are
paths, not prose.)"""

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


def test_the_check_finds_what_it_is_for() -> None:
    planted = ("Before issue 12 it was slow; Issues 3 and 4 say so. I paused the run this session (GUIDE section 2), "
               "on the tree that closed the fifth wave, as the issue's floor.")
    assert internal_words(planted) == ["issue 12", "Issues 3", "I paused", "this session", "GUIDE", "the tree that closed",
                                       "fifth wave", "the issue's"]
    assert internal_words("records in docs/benchmarks/after-issue-12/; an issue tracker; GitHub issues") == []


def test_nothing_users_read_has_internal_words() -> None:
    found = []
    for pattern in READ_BY_USERS:
        for path in sorted(ROOT.glob(pattern)):
            if "/tests/" in str(path) or ".venv" in path.parts:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                found += [f"{path.relative_to(ROOT)}:{number}: {word!r}" for word in internal_words(line)]
    assert not found, "internal words users would read (say what happened, not which issue or session):\n" + "\n".join(found)

