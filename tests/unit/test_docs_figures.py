"""Every measured figure in README.md and docs/*.md comes from a committed record (issues 32 and 40).

The rule. A figure is, in prose and tables and in the ``#`` comments of code blocks (code itself,
inline or fenced, is commands and sample output, not claims):

- a number with a unit of measure: time (``ms``, ``s``, ``min``, ``minutes``, ``h``, ``hours``, and
  ``5 min 13 s`` / ``1 h 46 min`` as one duration), size (``KB``, ``MB``, ``GB``, ``KiB``, ``MiB``,
  ``GiB``), a rate (``tokens/s``, ``tok/s``, ``req/s``, ``requests/s``), a percentage (``%``), a ratio
  (``1.8x``, ``2×``); both ends of a range (``6-8 minutes``, ``5 to 10 minutes``);
- a count of test results (``1,164 passed``, ``9 skipped``, ``1,173 tests``);
- in docs/benchmarks.md, also every decimal standing alone (its tables are records' numbers).

Not figures: versions and names (``Qwen2.5``, ``0.5B``, ``hammer2.1-1.5b``), counts of items and
results written as counts (``14 questions``, ``25 of 50``), line numbers and other bare integers, and
a number in words. Those are not checked, so a doc states no measurement that way without a record.

Where a figure may come from, in this order:

- a record its section names: a path (or a link) to a file or folder under ``docs/benchmarks/`` or
  ``docs/hammerbench/`` in the same ``#``/``##`` section (docs/benchmarks.md: every record). The
  records' JSON numbers count (not strings, so a model's answer cannot match by chance) and every
  number of their ``.md`` tables; whole-number figures only the summaries' (``.json``, ``.md``), not
  the per-question ``.jsonl`` files, where any small integer occurs. The figure must be a record's
  number rounded to the decimals cited, in the units cited (a time in ms, s, minutes or hours, a
  fraction as a percentage);
- ``DERIVED``: a ratio of two numbers the section's records hold;
- ``SETTINGS``: a default, limit or setting stated with a unit (``120 s``, ``8 MiB``) is no
  measurement; each entry names the source file and the text there that holds it, which must still be
  there, so the list cannot state a default the code does not have;
- ``CHECKED_ELSEWHERE``: lines another test reads against the code (the presets table);
- ``NOT_IN_A_RECORD``: a measurement that kept no file, with the reason. Keep it short: remove or
  reword such a figure rather than list it.

An entry a doc no longer cites fails too, so no list outlives its figures. Limits: a small number can
match some other number of the named records by chance, so this catches a figure no record holds (a
stale one, a typo, one from a run that kept no file) rather than proving where each figure came from.
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
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RECORD_DIRS = [REPO / "docs" / "benchmarks", REPO / "docs" / "hammerbench"]
DECIMALS_DOC = "docs/benchmarks.md"
# A record a doc names: a path to a file or folder under docs/benchmarks/ or docs/hammerbench/, or a link to one
# from docs/ (a bare "benchmarks/" is the scripts' folder at the root).
RECORD_PATH = re.compile(r"(?:(?<![\w/])docs/|\]\()(?P<path>(?:benchmarks|hammerbench)/[\w./-]*)")

# A decimal standing alone: not part of a name or version (Qwen2.5, 0.5B, 2.1-0.5b), "1.08x" allowed.
CITED = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})*\.\d+(?![A-Za-wyz_\d]|\.\d)")
NUMBER = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
# Two-part durations first, so "5 min 13 s" is one figure (313 s), not 5 min and 13 s.
DURATION = re.compile(r"(?<![\w.,/-])(?P<a>\d+) (?P<big>min|h) (?P<b>\d+) (?P<small>s|min)(?![\w/])")
# A number and its unit: time units need a space before them ("429s" is a status code), "1.8x" and "5%" need none;
# "17 × 23" is arithmetic, not a ratio.
# A range ("6-8 minutes", "5 to 10 minutes") is two figures.
_UNITS = (
    r"(?:\s(?:ms|s|seconds?|min|minutes?|h|hours?)"
    r"|\s?(?:KB|MB|GB|KiB|MiB|GiB|%|tokens/s|tok/s|req/s|requests/s)|\s?[x×](?!\s?\d))"
)
UNIT = re.compile(
    rf"(?<![\w.,/-])(?P<num>{_NUM})(?:(?:\s?[-–]\s?|\sto\s)(?P<num2>{_NUM}))?"
    rf"(?:(?P<unit>{_UNITS})|\s(?P<word>passed|failed|skipped|tests))(?![\w/])"
)

# (doc, figure, a fragment of its line, the source file, the text there that holds it): stated settings, not
# measurements. The source must still hold the text, so a changed default fails here until the doc follows.
SETTINGS: list[tuple[str, str, str, str, str]] = [
    ("README.md", "491", "Q4 GGUF, 491 MB", "hammer_plugins/models/default.py", "DEFAULT_MODEL_SIZE = 491_400_064"),
    ("docs/engine.md", "0.5", "each test asserts under 0.5 s", "tests/real/test_cancellation_real.py", "FREE_WITHIN = 0.5"),
    (
        "docs/hammerbench.md",
        "100",
        "the labels fed back score 100% on every metric",
        "tests/evals/hammerbench/test_metrics.py",
        "def test_labels_fed_back_score_100_percent_everywhere(",
    ),
    ("docs/server.md", "600", "(600 s; 0: none)", "hammer_plugins/openai_server/defaults.py", "DEFAULT_TIME_LIMIT = 600.0"),
    (
        "docs/server.md",
        "5",
        "`--shutdown-grace` (5 s, at most 10)",
        "hammer_plugins/openai_server/defaults.py",
        "DEFAULT_SHUTDOWN_GRACE = 5.0",
    ),
    ("docs/server.md", "15", "(`: ping`) every 15 s", "hammer_plugins/openai_server/app.py", "PING_SECONDS = 15"),
    ("docs/server.md", "10", "listener's `--header-timeout` (10 s)", "hammer_plugins/openai_server/defaults.py",
     "DEFAULT_HEADER_TIMEOUT = 10.0"),
    ("docs/server.md", "30", "`--body-timeout` (30 s)", "hammer_plugins/openai_server/defaults.py",
     "DEFAULT_BODY_TIMEOUT = 30.0"),
    ("docs/server.md", "5", "`--idle-timeout` (5 s)", "hammer_plugins/openai_server/defaults.py", "DEFAULT_IDLE_TIMEOUT = 5"),
    ("README.md", "300", "Every test has a 300 s limit", "pyproject.toml", "timeout = 300"),
    (
        "docs/server.md",
        "0.2",
        "Every request checks every 0.2 s",
        "hammer_plugins/openai_server/app.py",
        "DISCONNECT_POLL_SECONDS = 0.2",
    ),
    ("docs/server.md", "0.2", "(a check every 0.2 s)", "hammer_plugins/openai_server/app.py", "DISCONNECT_POLL_SECONDS = 0.2"),
    (
        "docs/server.md",
        "5",
        "each asserted within 5 s",
        "tests/openai_server/test_openai_server_on_llama_server.py",
        "within: float = 5.0",
    ),
    (
        "docs/server.md",
        "8",
        "over 8 MiB is 413",
        "hammer_plugins/openai_server/defaults.py",
        "DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024",
    ),
    (
        "docs/server.md",
        "30",
        "still running 30 s past its time limit",
        "hammer_plugins/openai_server/worker.py",
        "STUCK_GRACE = 30.0",
    ),
    (
        "docs/server.md",
        "0.5",
        "one that takes over 0.5 s or raises",
        "hammer_plugins/openai_server/app.py",
        "HEALTH_CHECK_SECONDS = 0.5",
    ),
    (
        "docs/server.md",
        "10",
        "uvicorn cancels anything left after 10 s",
        "hammer_plugins/openai_server/runner.py",
        "SHUTDOWN_DEADLINE = 10.0",
    ),
    ("docs/server.md", "5", "characters, 5 s to build", "hammer_plugins/tools/limits.py", "max_build_seconds: float = 5.0"),
    (
        "docs/server.md",
        "0.5",
        "a back-off that starts at 0.5 s and doubles up to 30 s",
        "hammer_plugins/launch/launcher.py",
        "restart_backoff: tuple[float, float] = (0.5, 30.0)",
    ),
    (
        "docs/server.md",
        "30",
        "a back-off that starts at 0.5 s and doubles up to 30 s",
        "hammer_plugins/launch/launcher.py",
        "restart_backoff: tuple[float, float] = (0.5, 30.0)",
    ),
    (
        "docs/server.md",
        "1",
        "kept in a 1 MiB in-memory ring",
        "hammer_plugins/launch/launcher.py",
        "log_limit: int = 1 << 20",
    ),
    (
        "docs/server.md",
        "120",
        "| `timeout` / `connect_timeout` | 120 s / 5 s |",
        "hammer_plugins/backends/remote/settings.py",
        "timeout: float = Field(120.0",
    ),
    ("docs/cli.md", "1", "the states keep at most 1 GiB", "hammer_plugins/backends/prefix_cache.py",
     "DEFAULT_MAX_BYTES = 1 << 30"),
]

# (doc, figure, a fragment of its line, "a / b"): a ratio of two numbers its section's records hold as written;
# the ratio, rounded to the figure's decimals, must be the figure.
DERIVED: list[tuple[str, str, str, str]] = [
    ("docs/server.md", "0.73", "serves 0.73x to 0.77x", "0.289 / 0.395"),
    ("docs/server.md", "0.77", "serves 0.73x to 0.77x", "0.354 / 0.46"),
    ("docs/server.md", "1.22", "(1.22x from N = 1 to N = 4 for Hammer", "0.354 / 0.289"),
    ("docs/server.md", "1.16", "1.16x for the other", "0.46 / 0.395"),
    ("docs/server.md", "1.36", "1.36x the throughput at N = 1", "0.894 / 0.655"),
    ("docs/server.md", "1.46", "1.46x at 2", "0.916 / 0.626"),
    ("docs/server.md", "2.09", "2.09x at", "1.268 / 0.608"),
]

# (doc, how its lines start, the test that reads them against the code): figures another test checks.
CHECKED_ELSEWHERE: list[tuple[str, str, str]] = [
    ("docs/models.md", "| `hammer", "tests/unit/test_docs_code.py::test_the_presets_table_is_the_code"),
]

# (doc, figure, a fragment of its line, why no record holds it). Empty: every figure the docs give is in a record.
NOT_IN_A_RECORD: list[tuple[str, str, str, str]] = []

# The scales a record's number may be cited in, by the unit cited: a time in ms, s, minutes or hours; a fraction as %.
SCALES = {"ms": (1, 1000), "s": (1, 1 / 1000), "min": (1, 1 / 60), "h": (1, 1 / 3600), "%": (1, 100)}
UNIT_KIND = {"seconds": "s", "second": "s", "minutes": "min", "minute": "min", "hours": "h", "hour": "h"}


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
def _record_values(path: Path) -> frozenset[float]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        return frozenset(_numbers(json.loads(text)))
    if path.suffix == ".jsonl":
        return frozenset(v for line in text.splitlines() if line.strip() for v in _numbers(json.loads(line)))
    return frozenset(float(n.replace(",", "")) for n in NUMBER.findall(text))


def _sections(doc: str) -> list[str]:
    """The doc's text cut at its ``#``/``##`` headings (outside code): the unit a record is named for."""
    sections, in_code = [[]], False
    for line in (REPO / doc).read_text(encoding="utf-8").splitlines():
        in_code ^= line.startswith("```")
        if not in_code and re.match(r"#{1,2} ", line):
            sections.append([])
        sections[-1].append(line)
    return ["\n".join(lines) for lines in sections]


@cache
def _record_files(doc: str, section: int) -> tuple[Path, ...]:
    """The record files under the record paths (files or folders) the doc's section names (benchmarks.md: all)."""
    text = "docs/benchmarks/ docs/hammerbench/" if doc == DECIMALS_DOC else _sections(doc)[section]
    named = {REPO / "docs" / m["path"].rstrip("/.") for m in RECORD_PATH.finditer(text)}
    files = {f for path in named if path.exists() for f in ([path] if path.is_file() else path.rglob("*"))}
    return tuple(sorted(f for f in files if f.suffix in (".json", ".jsonl", ".md")))


@cache
def _forms(files: tuple[Path, ...], scale: float, places: int) -> frozenset[str]:
    """The files' numbers written with ``places`` decimals after ``scale``; whole numbers from summaries only
    (``.json``, ``.md``), not the per-question ``.jsonl`` files, where any small integer occurs."""
    values = set().union(*(_record_values(p) for p in files if not (places == 0 and p.suffix == ".jsonl")))
    return frozenset(f"{v * scale:.{places}f}" for v in values)


def _in_a_record(doc: str, section: int, figure: str, unit: str) -> bool:
    cited = figure.replace(",", "")
    places = len(cited.partition(".")[2])
    scales = SCALES.get(UNIT_KIND.get(unit, unit), (1, 100))
    return any(cited in _forms(_record_files(doc, section), scale, places) for scale in scales)


def _figures(text: str, decimals: bool) -> list[tuple[str, str]]:
    """(figure, unit) for one line of prose; "5 min 13 s" as (313, s), "1 h 46 min" as (106, min)."""
    found = [(str(int(m["a"]) * 60 + int(m["b"])), m["small"]) for m in DURATION.finditer(text)]
    text = DURATION.sub(" ", text)
    spans = []
    for m in UNIT.finditer(text):
        unit = (m["unit"] or "").strip()
        found.extend((m[group], unit) for group in ("num", "num2") if m[group])
        spans.extend(m.span(group) for group in ("num", "num2") if m[group])
    if decimals:
        found.extend((m.group(), "") for m in CITED.finditer(text) if m.span() not in spans)
    return found


def _lines(doc: Path) -> Iterator[tuple[int, int, str, str]]:
    """(section, line number, line, the part that can hold figures): prose, tables, and code blocks' comments."""
    in_code, section = False, 0
    for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if not in_code and re.match(r"#{1,2} ", line):
            section += 1
        if in_code:
            if " # " not in line:
                continue
            text = line.split(" # ", 1)[1]
        else:
            text = line
        yield section, number, line, re.sub(r"`[^`]*`", " ", text)  # commands and options, not figures


@cache
def _cited() -> tuple[tuple[str, int, int, str, str, str], ...]:
    """(doc, section, line number, figure, unit, line) for every figure of every doc."""
    cited = []
    for doc in DOCS:
        name = doc.relative_to(REPO).as_posix()
        for section, number, line, text in _lines(doc):
            cited.extend((name, section, number, figure, unit, line) for figure, unit in _figures(text, name == DECIMALS_DOC))
    return tuple(cited)


def _derived(doc: str, section: int, figure: str, line: str) -> bool:
    """Whether DERIVED works the figure out of numbers the section's records hold."""
    for d, f, fragment, worked in DERIVED:
        if (d, f) == (doc, figure) and fragment in line:
            a, _, b = worked.split()
            assert _in_a_record(doc, section, a, "") and _in_a_record(doc, section, b, ""), (
                f"{worked}: not both in the records {doc}'s section names"
            )
            return f"{float(a) / float(b):.{len(figure.partition('.')[2])}f}" == figure
    return False


def _listed(doc: str, figure: str, line: str) -> bool:
    """Whether a list above accounts for the figure: checked elsewhere, a listed exception or a setting."""
    return (
        any(doc == d and line.startswith(start) for d, start, _ in CHECKED_ELSEWHERE)
        or any(doc == d and figure == f and fragment in line for d, f, fragment, _ in NOT_IN_A_RECORD)
        or any(doc == d and figure == f and fragment in line for d, f, fragment, _, _ in SETTINGS)
    )


def test_every_figure_is_in_a_record() -> None:
    missing = [
        f"{doc}:{number}: {figure} {unit} in: {line.strip()[:140]}"
        for doc, section, number, figure, unit, line in _cited()
        if not _in_a_record(doc, section, figure, unit)
        and not _listed(doc, figure, line)
        and not _derived(doc, section, figure, line)
    ]
    assert not missing, (
        "figures in the docs that no record under docs/benchmarks/ or docs/hammerbench/ holds: "
        "commit the record, correct or remove the figure, or list it in NOT_IN_A_RECORD "
        "(or SETTINGS) with the reason:\n" + "\n".join(missing)
    )


def test_every_exemption_is_still_needed() -> None:
    cited = _cited()
    for doc, figure, fragment, reason in [*NOT_IN_A_RECORD, *DERIVED, *((d, f, fr, src) for d, f, fr, src, _ in SETTINGS)]:
        assert reason
        assert any(d == doc and f == figure and fragment in line for d, _, _, f, _, line in cited), (
            f"{doc} no longer cites {figure} ({fragment!r}): drop it from the list"
        )


@pytest.mark.parametrize(("doc", "start", "test"), CHECKED_ELSEWHERE)
def test_every_check_elsewhere_exists(doc: str, start: str, test: str) -> None:
    path, name = test.split("::")
    assert f"def {name}(" in (REPO / path).read_text(encoding="utf-8"), f"{test}, which checks {doc}, is gone"
    assert any(line.startswith(start) for line in (REPO / doc).read_text(encoding="utf-8").splitlines())


@pytest.mark.parametrize(("doc", "figure", "fragment", "source", "code"), SETTINGS)
def test_every_setting_is_in_its_source(doc: str, figure: str, fragment: str, source: str, code: str) -> None:
    assert code in (REPO / source).read_text(encoding="utf-8"), (
        f"{doc} states {figure} ({fragment!r}) as {code!r} in {source}, which no longer holds it: correct the doc"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("F1 107.69 and 1,315.5 s, 1.08x", [("1,315.5", "s"), ("1.08", "x"), ("107.69", "")]),
        ("Qwen2.5-Coder-0.5B, Hammer2.1-0.5b, v1.2.3", []),
        ("from 0.56-0.60 s (95.65 / 27.78)", [("0.56", "s"), ("0.60", "s"), ("95.65", ""), ("27.78", "")]),
    ],
)
def test_the_decimal_pattern(text: str, expected: list[tuple[str, str]]) -> None:
    assert _figures(text, decimals=True) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("took **5 min 13 s** and 1 h 46 min", [("313", "s"), ("106", "min")]),
        ("2,129 s, 1,164 passed, 9 skipped; 1,173 tests", [("2,129", "s"), ("1,164", ""), ("9", ""), ("1,173", "")]),
        (
            "491 MB, +15 ms (1.7 %), 1.8x slower, 0.38 requests/s",
            [("491", "MB"), ("15", "ms"), ("1.7", "%"), ("1.8", "x"), ("0.38", "requests/s")],
        ),
        ("about 6-8 minutes, 5 to 10 min", [("6", "minutes"), ("8", "minutes"), ("5", "min"), ("10", "min")]),
        ("Qwen2.5-Coder-0.5B, 4 slots, 14 questions, line 12, hammer2.1-1.5b, 0.5B, (429s), 17 × 23", []),
    ],
)
def test_the_figure_pattern(text: str, expected: list[tuple[str, str]]) -> None:
    assert _figures(text, decimals=False) == expected


def test_a_figure_matches_its_record_in_the_units_cited() -> None:
    """The README's suite time, from docs/benchmarks/suite/phases.json (1,799.52 s), which its section names."""
    doc, section = "README.md", next(c[1] for c in _cited() if c[0] == "README.md" and c[3] == "1,799.52")
    assert _in_a_record(doc, section, "1,799.52", "s") and _in_a_record(doc, section, "30.0", "minutes")
    assert _in_a_record(doc, section, "1,273", "") and _in_a_record(doc, section, "193.44", "s")
    assert not _in_a_record(doc, section, "1,799.53", "s") and not _in_a_record(doc, section, "29.9", "minutes")
    assert not _in_a_record(doc, 0, "1,799.52", "s")  # a section that names no record
