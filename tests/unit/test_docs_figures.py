"""Every measured figure users read comes from the committed record its section names.

Where: every markdown file of the repository that is not a record itself (the README files of the four
distributions, every markdown file under benchmarks/, its data/ README included, and docs/), and the help text
of every ``hammer`` command. What a figure is, and how a record's numbers are read (each in the unit its key
names), is figure_check.py's docstring.

Where a figure may come from, in this order:

- a record its section names: a path (or a link) to a file or folder under ``docs/benchmarks/`` or
  ``docs/hammerbench/`` in the same ``#``/``##`` section, never the whole folder; the figure must be one of
  those records' numbers, converted to the unit cited and rounded to the decimals cited. A help text names no
  record: it states settings, never measurements;
- ``DERIVED``: a ratio of two numbers the section's records hold; ``COMPUTED``: a figure an expression works
  out of one record (a mean, a count, a quartile);
- ``SETTINGS``: a default, limit or setting stated with a unit (``120 s``, ``8 MiB``) is no measurement; each
  entry names the source file and the text there that holds it, which must still be there, so the list
  cannot state a default the code does not have;
- ``CHECKED_ELSEWHERE``: lines another test reads against the code (the presets table);
- ``NOT_IN_A_RECORD``: a measurement that kept no file, with the reason. Keep it short: remove or reword
  such a figure rather than list it.

An entry a doc no longer cites fails too, so no list outlives its figures; and the check is run on planted
texts, so that a wrong figure, a figure in the wrong unit or from another section's record, a sum's first term
and a unitless table cell are each shown to fail. Limits: a small number can match some other number of the
named records by chance, so this catches a figure its records do not hold (a stale one, a typo, one from a run
that kept no file, one from another record) rather than proving where each figure came from.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from figure_check import figures, in_records, key_unit, named_records, prose_lines, sections

REPO = Path(__file__).resolve().parents[2]
RECORD_DIRS = [REPO / "docs" / "benchmarks", REPO / "docs" / "hammerbench"]
DOCS = [REPO / "README.md", REPO / "README.pypi.md", *sorted((REPO / "benchmarks").rglob("*.md")),
        *sorted((REPO / "docs").glob("*.md")), REPO / "evals" / "README.md", *sorted((REPO / "integrations").glob("*/README.md"))]
DECIMALS_DOC = "docs/benchmarks.md"

# (doc, figure, a fragment of its line, the source file, the text there that holds it): stated settings, not
# measurements. The source must still hold the text, so a changed default fails here until the doc follows.
SETTINGS: list[tuple[str, str, str, str, str]] = [
    ("README.md", "491", "Q4 GGUF, 491 MB", "hammer_plugins/models/default.py", "DEFAULT_MODEL_SIZE = 491_400_064"),
    ("docs/tools.md", "90", "holds 90% or more", "hammer_plugins/tools/look_alikes.py", "LOOK_ALIKE_SHARE = 0.9"),
    ("docs/engine.md", "0.5", "each test asserts under 0.5 s", "tests/real/test_cancellation_real.py", "FREE_WITHIN = 0.5"),
    (
        "docs/hammerbench.md",
        "100",
        "the labels fed back score 100% on every metric",
        "tests/evals/hammerbench/test_metrics.py",
        "def test_labels_fed_back_score_100_percent_everywhere(",
    ),
    ("docs/server.md", "600", "(600 s; 0: none)", "hammer_plugins/http_api/defaults.py", "DEFAULT_TIME_LIMIT = 600.0"),
    (
        "docs/server.md",
        "5",
        "`--shutdown-grace` (5 s, at most 10)",
        "hammer_plugins/http_api/defaults.py",
        "DEFAULT_SHUTDOWN_GRACE = 5.0",
    ),
    ("docs/server.md", "15", "(`: ping`) every 15 s", "hammer_plugins/http_api/respond.py", "PING_SECONDS = 15"),
    ("docs/server.md", "15", "a stream quiet for 15 s", "hammer_plugins/http_api/respond.py", "PING_SECONDS = 15"),
    ("docs/server.md", "300", "after 300 s without one", "tests/openai_server/test_agent_clis_real.py",
     "``stream_idle_timeout_ms`` (300 s by default)"),
    ("docs/server.md", "10", "listener's `--header-timeout` (10 s)", "hammer_plugins/http_api/defaults.py",
     "DEFAULT_HEADER_TIMEOUT = 10.0"),
    ("docs/server.md", "30", "`--body-timeout` (30 s)", "hammer_plugins/http_api/defaults.py",
     "DEFAULT_BODY_TIMEOUT = 30.0"),
    ("docs/server.md", "5", "`--idle-timeout` (5 s)", "hammer_plugins/http_api/defaults.py", "DEFAULT_IDLE_TIMEOUT = 5"),
    ("README.md", "300", "Every test has a 300 s limit", "pyproject.toml", "timeout = 300"),
    (
        "docs/server.md",
        "0.2",
        "Every request checks every 0.2 s",
        "hammer_plugins/http_api/respond.py",
        "DISCONNECT_POLL_SECONDS = 0.2",
    ),
    ("docs/server.md", "0.2", "(a check every 0.2 s)", "hammer_plugins/http_api/respond.py", "DISCONNECT_POLL_SECONDS = 0.2"),
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
        "hammer_plugins/http_api/defaults.py",
        "DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024",
    ),
    (
        "docs/server.md",
        "30",
        "still running 30 s past its time limit",
        "hammer_plugins/http_api/worker.py",
        "STUCK_GRACE = 30.0",
    ),
    (
        "docs/server.md",
        "0.5",
        "one that takes over 0.5 s or raises",
        "hammer_plugins/http_api/status.py",
        "HEALTH_CHECK_SECONDS = 0.5",
    ),
    (
        "docs/server.md",
        "10",
        "uvicorn cancels anything left after 10 s",
        "hammer_plugins/http_api/runner.py",
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
    ("docs/server.md", "1,024", "(1,024 tokens, a setting)", "hammer_plugins/engine/tool_selection.py",
     "DEFAULT_TOOL_BUDGET = 1024"),
    ("docs/server.md", "128", "greedy, 128 tokens, two tools", "benchmarks/llama_server_jinja.py",
     'parser.add_argument("--max-tokens", type=int, default=128)'),
    ("docs/server.md", "128", "cut at 128 tokens", "benchmarks/llama_server_jinja.py",
     'parser.add_argument("--max-tokens", type=int, default=128)'),
    ("docs/benchmarks.md", "0.5", "less than the 0.5-logit bound below", "tests/real/test_fast_forward.py", "EPSILON = 0.5"),
    ("docs/benchmarks.md", "1.1", "(guard off, `repeat_penalty` 1.1)", "evals/hammer_evals/bfcl/runners.py",
     'repeat_penalty=1.1 if kind == "hammer-penalty"'),
    ("docs/benchmarks.md", "0.5", "is below 0.5 logits", "tests/real/test_fast_forward.py", "EPSILON = 0.5"),
    ("docs/cli.md", "1", "the states keep at most 1 GiB", "hammer_plugins/backends/prefix_cache.py",
     "DEFAULT_MAX_BYTES = 1 << 30"),
    ("docs/server.md", "64", "`/api/show` (a model name) takes 64 KiB", "hammer_plugins/http_api/ollama/router.py",
     "SHOW_BODY_BYTES = 64 * 1024"),
    ("docs/server.md", "64", "all 413 at 64 KiB", "hammer_plugins/http_api/ollama/router.py",
     "SHOW_BODY_BYTES = 64 * 1024"),
    ("docs/server.md", "32", "random key (32 bytes in `.key`", "hammer_plugins/support/private_folder.py",
     "KEY_BYTES = 32"),
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
    ("docs/benchmarks.md", "0.99", "| engine, grammar, fast-forward (default) | 36.3 |", "36.3 / 36.6"),
    ("docs/benchmarks.md", "0.98", "| engine, grammar, fast-forward (default) | 36.3 |", "1.68 / 1.72"),
    ("benchmarks/README.md", "1.36", "ahead by 1.36x the throughput", "0.894 / 0.655"),
    ("benchmarks/README.md", "2.09", "and 2.09x at N = 4", "1.268 / 0.608"),
]

# (doc, how its lines start, the test that reads them against the code): figures another test checks.
CHECKED_ELSEWHERE: list[tuple[str, str, str]] = [
    ("docs/models.md", "| `hammer", "tests/unit/test_docs_code.py::test_the_presets_table_is_the_code"),
]

# (doc, figure, a fragment of its line, a record, an expression): a figure worked out of one record by the expression,
# evaluated with ``r`` the record (a .jsonl record: its rows) and the helpers below; rounded to the figure's decimals.
OFF, ON = "docs/hammerbench/default-masking-off/predictions.jsonl", "docs/hammerbench/default-masking-on/predictions.jsonl"
COLD = "docs/benchmarks/cold-call/cold_call.json"
BFCL_DEFAULT, BFCL_12, BFCL_24 = ("docs/benchmarks/default/accuracy_records.jsonl",
                                  "docs/benchmarks/reference-prompt/accuracy_records.jsonl",
                                  "docs/benchmarks/grammar-fixes/accuracy_records.jsonl")
HAMMER = "ChatHammer (constrained on, masking off)"
COMPUTED: list[tuple[str, str, str, str, str]] = [
    ("docs/hammerbench.md", "562", "prompts 562 tokens", OFF, "mean_of(r, 'prompt_tokens')"),
    ("docs/hammerbench.md", "46", "answers 46 tokens", OFF, "mean_of(r, 'completion_tokens')"),
    ("docs/hammerbench.md", "579", "579 vs 562 tokens", ON, "mean_of(r, 'prompt_tokens')"),
    ("docs/hammerbench.md", "562", "579 vs 562 tokens", OFF, "mean_of(r, 'prompt_tokens')"),
    ("docs/hammerbench.md", "53", "53 vs 46 tokens", ON, "mean_of(r, 'completion_tokens')"),
    ("docs/hammerbench.md", "46", "53 vs 46 tokens", OFF, "mean_of(r, 'completion_tokens')"),
    # BFCL's totals: questions answered right, and answers cut at max_tokens, of one runner
    ("docs/benchmarks.md", "49", "| the run above |", BFCL_DEFAULT, "count(r, HAMMER, 'correct')"),
    ("docs/benchmarks.md", "11", "| the run above |", BFCL_DEFAULT, "count(r, HAMMER, 'truncated')"),
    ("docs/benchmarks.md", "48", "| reference prompt, loop guard |", BFCL_12, "count(r, HAMMER, 'correct')"),
    ("docs/benchmarks.md", "45", "| grammar fixes |", BFCL_24, "count(r, HAMMER, 'correct')"),
    # the cold call: ratios of medians, and quartiles of the per-round ratios to the floor
    ("docs/benchmarks.md", "1.02", "| cold (new tools, known model) | 8.20 |", COLD, "median(r, 'cold')"),
    ("docs/benchmarks.md", "0.99", "| cold (new tools, known model) | 8.20 |", COLD, "quartiles(r, 'cold')[0]"),
    ("docs/benchmarks.md", "1.11", "| cold (new tools, known model) | 8.20 |", COLD, "quartiles(r, 'cold')[2]"),
    ("docs/benchmarks.md", "1.02", "| first ever (every cache empty) | 8.21 |", COLD, "median(r, 'first ever')"),
    ("docs/benchmarks.md", "1.00", "| first ever (every cache empty) | 8.21 |", COLD, "quartiles(r, 'first ever')[0]"),
    ("docs/benchmarks.md", "1.07", "| first ever (every cache empty) | 8.21 |", COLD, "quartiles(r, 'first ever')[2]"),
    ("docs/benchmarks.md", "0.34", "| repeat | 2.75 |", COLD, "median(r, 'repeat')"),
    ("docs/benchmarks.md", "0.32", "| repeat | 2.75 |", COLD, "quartiles(r, 'repeat')[0]"),
    ("docs/benchmarks.md", "0.37", "| repeat | 2.75 |", COLD, "quartiles(r, 'repeat')[2]"),
    ("docs/benchmarks.md", "1.02", "| `--no-prefix-cache` | 8.23 |", COLD, "median(r, 'no prefix cache')"),
    ("docs/benchmarks.md", "0.91", "| `--no-prefix-cache` | 8.23 |", COLD, "quartiles(r, 'no prefix cache')[0]"),
    ("docs/benchmarks.md", "1.13", "| `--no-prefix-cache` | 8.23 |", COLD, "quartiles(r, 'no prefix cache')[2]"),
    ("docs/benchmarks.md", "0.22", "(0.22 s over a 4.50 s floor", "docs/benchmarks/cold-call/cold_call_readme_7.json",
     "r['median_s']['cold'] - r['median_s']['floor']"),
    ("docs/benchmarks.md", "15.1", "108 of 717 answer tokens (15.1%)", "docs/benchmarks/speed/decode_speed.json",
     "100 * r['forced'] / r['produced']"),
]


def _objects(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            yield from _objects(item)


def mean_of(record: Any, field: str) -> float:
    """The mean of ``field`` over every object of the record that holds it, answers reused from an earlier prompt
    (``"reused": true``) left out."""
    values = [obj[field] for obj in _objects(record) if field in obj and not obj.get("reused")]
    return sum(values) / len(values)


def count(rows: list[dict[str, Any]], runner: str, field: str) -> int:
    """How many of one runner's rows have ``field`` true."""
    return sum(bool(row[field]) for row in rows if row["runner"] == runner)


def _ratios(record: Any, run: str) -> list[float]:
    return [a / floor for a, floor in zip(record["runs_s"][run], record["runs_s"]["floor"], strict=True)]


def median(record: Any, run: str) -> float:
    """The ratio of a run's median time to the floor's."""
    return float(record["median_s"][run] / record["median_s"]["floor"])


def quartiles(record: Any, run: str) -> list[float]:
    """The quartiles of a run's per-round ratios to the floor (inclusive method)."""
    return statistics.quantiles(_ratios(record, run), n=4, method="inclusive")


@cache
def _load(record: str) -> Any:
    text = (REPO / record).read_text(encoding="utf-8")
    if record.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def _computed_value(record: str, expression: str) -> float:
    names = {"r": _load(record), "mean_of": mean_of, "count": count, "median": median, "quartiles": quartiles,
             "HAMMER": HAMMER}
    return float(eval(expression, {"__builtins__": {}}, names))  # noqa: S307 - expressions written in this file


def _computed(doc: str, figure: str, line: str) -> bool:
    """Whether COMPUTED works the figure out of its record."""
    return any((d, f) == (doc, figure) and fragment in line
               and f"{_computed_value(record, expression):.{len(figure.partition('.')[2])}f}" == figure.replace(",", "")
               for d, f, fragment, record, expression in COMPUTED)


# (doc, a table column's header, what its numbers are): table columns of codes or settings, not measurements.
COLUMNS_NOT_MEASURED: list[tuple[str, str, str]] = [
    ("docs/architecture.md", "layer",
     "each folder's layer: test_docs_match_code.py::test_the_folders_table_gives_each_folders_layer"),
    ("docs/server.md", "status", "HTTP statuses, read against the server by test_openai_server_logic.py::test_error_table"),
    ("docs/engine.md", "default", "SchemaLimits' defaults, read by test_docs_match_code.py::test_the_limits_table_is_the_code"),
]

# (doc, figure, a fragment of its line, why no record holds it).
NOT_IN_A_RECORD: list[tuple[str, str, str, str]] = [
    ("docs/benchmarks.md", "0.45", "repeat at or under 0.45x", "a target set before the run, not a measurement"),
]



def _help_texts() -> dict[str, str]:
    """``hammer ... --help`` of every command and subcommand, plugins included (``hammer bench``, ``hammer eval``)."""
    from hammer_plugins.cli.main import build_parser

    texts: dict[str, str] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        texts[name] = parser.format_help()
        for action in parser._actions:  # argparse keeps subparsers here only
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}")

    walk(build_parser(), "hammer")
    return texts


@cache
def _texts() -> dict[str, tuple[str, Path]]:
    """Every text checked: its name (a path, or ``hammer ... --help``), its text and the folder its links start from."""
    texts = {doc.relative_to(REPO).as_posix(): (doc.read_text(encoding="utf-8"), doc.parent) for doc in DOCS}
    texts.update({f"{name} --help": (" ".join(help_text.split()), REPO) for name, help_text in _help_texts().items()})
    return texts


@cache
def _record_files(doc: str, section: int) -> tuple[Path, ...]:
    text, folder = _texts()[doc]
    if doc.endswith("--help"):
        return ()
    return named_records(sections(text)[section], folder, REPO, RECORD_DIRS)


def _in_a_record(doc: str, section: int, figure: str, unit: str) -> bool:
    return in_records(_record_files(doc, section), figure, unit)


@cache
def _cited() -> tuple[tuple[str, int, int, str, str, str], ...]:
    """(doc, section, line number, figure, unit, line) for every figure of every text."""
    cited = []
    for name, (text, _) in _texts().items():
        for section, number, line, part, columns in prose_lines(text):
            skip = frozenset(i for i, header in enumerate(columns or [])
                             if any((name, header) == (d, h) for d, h, _ in COLUMNS_NOT_MEASURED))
            cited.extend((name, section, number, figure, unit, line)
                         for figure, unit in figures(part, name == DECIMALS_DOC, columns is not None, skip))
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


def _missing(cited: tuple[tuple[str, int, int, str, str, str], ...]) -> list[str]:
    return [
        f"{doc}:{number}: {figure} {unit} in: {line.strip()[:140]}"
        for doc, section, number, figure, unit, line in cited
        if not _in_a_record(doc, section, figure, unit)
        and not _listed(doc, figure, line)
        and not _derived(doc, section, figure, line)
        and not _computed(doc, figure, line)
    ]


def test_every_figure_is_in_its_sections_record() -> None:
    missing = _missing(_cited())
    assert not missing, (
        "figures no record named in their section holds: commit the record and name it there, correct or remove "
        "the figure, or list it in NOT_IN_A_RECORD (or SETTINGS) with the reason:\n" + "\n".join(missing)
    )


def test_every_text_users_read_is_checked() -> None:
    """Every markdown file that is not a record, and the help of every command, bench and eval included."""
    found = {p for p in REPO.rglob("*.md") if ".venv" not in p.parts and "node_modules" not in p.parts
             and not any(d in p.parents for d in RECORD_DIRS) and not p.is_relative_to(REPO / "tests")}
    assert found - set(DOCS) == set()
    helps = {name for name in _texts() if name.endswith("--help")}
    assert {"hammer serve --help", "hammer bench speed --help", "hammer eval hammerbench --help"} <= helps


def test_every_exemption_is_still_needed() -> None:
    cited = _cited()
    for doc, figure, fragment, reason in [*NOT_IN_A_RECORD, *DERIVED, *((d, f, fr, src) for d, f, fr, src, _ in SETTINGS),
                                          *((d, f, fr, rec) for d, f, fr, rec, _ in COMPUTED)]:
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
    assert figures(text, decimals=True) == expected


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
        ("1,189 + 330 passed; 12 + 3 + 4 s", [("1,189", ""), ("330", ""), ("12", "s"), ("3", "s"), ("4", "s")]),
        ("579 vs 562 tokens", [("579", "tokens"), ("562", "tokens")]),
        ("3,120 tokens, 1,024 bytes, 9.6 kB, 40 B", [("3,120", "tokens"), ("1,024", "bytes"), ("9.6", "kB"), ("40", "B")]),
        ("Qwen2.5-Coder-0.5B, 4 slots, 14 questions, line 12, hammer2.1-1.5b, 0.5B, (429s), 17 × 23", []),
    ],
)
def test_the_figure_pattern(text: str, expected: list[tuple[str, str]]) -> None:
    assert figures(text, decimals=False) == expected


def test_table_cells_that_are_numbers_are_figures() -> None:
    row = "| Hammer 2.0 | 0.289 | **1,268** | 4 slots | 12 s | 9/10 | 1.01 (0.99-1.11) | 400 |"
    assert figures(row, decimals=False, table=True, skip_columns=frozenset({7})) == [
        ("12", "s"), ("0.289", ""), ("1,268", ""), ("9", ""), ("10", ""), ("1.01", ""), ("0.99", ""), ("1.11", "")]
    doc = "| N | p50 s |\n|---|---|\n| 4 | 3.14 |\n\nprose 5.0 after"
    assert [(line, columns) for _, _, line, _, columns in prose_lines(doc)] == [
        ("| N | p50 s |", None), ("|---|---|", None), ("| 4 | 3.14 |", ["N", "p50 s"]), ("", None),
        ("prose 5.0 after", None)]


def test_every_column_not_measured_is_a_table_column() -> None:
    for doc, header, reason in COLUMNS_NOT_MEASURED:
        assert reason and any(columns and header in columns for *_, columns in prose_lines(_texts()[doc][0])), (doc, header)


PLANTED_RECORD = "docs/benchmarks/suite/phases.json"


@pytest.mark.parametrize(("line", "holds"), [
    ("The model phase took 1,799.52 s, 30.0 minutes in all (1,273 + 350 passed).", True),
    ("The model phase took 1,799.53 s.", False),  # a typo
    ("The model phase took 29.9 minutes.", False),  # rounded wrong
    ("The model phase took 1,799.52 ms.", False),  # the record's seconds cited as milliseconds
    ("It ran 1,274 + 350 passed.", False),  # the sum's first term
    ("| phase | seconds |\n|---|---|\n| model | 1,799.51 |", False),  # a unitless table cell
])
def test_a_planted_figure_is_checked_against_its_sections_record(line: str, holds: bool, tmp_path: Path) -> None:
    """The whole check (patterns, sections, records and units) on a planted doc whose section names the suite's
    record; the same figures in a section that names no record fail."""
    doc = f"# Suite\n\nRecord: [{PLANTED_RECORD}](../{PLANTED_RECORD}).\n\n{line}\n\n## Another section\n\n{line}\n"
    cited = []
    for section, _, _, part, columns in prose_lines(doc):
        files = named_records(sections(doc)[section], REPO / "docs", REPO, RECORD_DIRS)
        cited += [(section, figure, unit, files) for figure, unit in figures(part, False, columns is not None)]
    assert cited and {section for section, *_ in cited} == {1, 2}
    named = [in_records(files, figure, unit) for section, figure, unit, files in cited if section == 1]
    assert all(named) is holds, cited
    assert not any(in_records(files, figure, unit) for section, figure, unit, files in cited if section == 2)


def test_a_key_that_labels_settings_names_no_unit() -> None:
    """``MIN_SHARE_OF_BEST=0.5`` holds the word ``min`` but is a setting, not minutes: its numbers read as written."""
    assert key_unit("pool1000 tool_budget=1024,MIN_SHARE_OF_BEST=0.5") is None
    assert key_unit("ttft_min") == "min" and key_unit("wall_s") == "s"
