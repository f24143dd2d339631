"""Every ``hammer`` command line the docs show is one the command takes: its subcommands exist, each flag is one
of that subcommand's options, and a flag with a fixed set of values is given one of them.

The docs had drifted from the parsers more than once (``hammer serve --log-level`` that did not exist,
``hammer eval --prefix-cache`` where only ``--no-prefix-cache`` does). This reads the README files (the
repository's, the PyPI page, each distribution's) and every page under docs/ for command lines (fenced code and
inline code that start with ``hammer`` or a path to it, ``.venv/bin/hammer``, also after ``&&``) and checks each against
the real parsers, so a flag renamed or removed fails here until the docs follow. docs/cli.md, the command's
own page, also names flags alone (```--no-prefix-cache```): each of those must be some command's flag.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from hammer_plugins.cli.main import build_parser

REPO = Path(__file__).resolve().parents[2]
DOCS = ["README.md", "README.pypi.md", "docs/**/*.md", "integrations/*/README*", "evals/README.md"]

FENCE = re.compile(r"^\s*```")
INLINE = re.compile(r"`(?:[\w.~-]*/)*(hammer [^`]+)`")
LINE_START = re.compile(r"^(?:\$ |>>> |!)?(?:[A-Z_]+=\S+ )*(?:[\w.~-]*/)*(hammer .*)$")
"""A command line in a code block: ``hammer ...`` (or ``.venv/bin/hammer ...``), maybe after a prompt and environment
variables."""
AFTER = re.compile(r"\s(?:&&|;|\|\|)\s")
"""Where a shell line starts its next command: ``bash scripts/install.sh && .venv/bin/hammer call "..."``."""
SHELL_END = {"|", "||", "&&", ";", ">", "2>&1", "&"}
PLACEHOLDER = re.compile(r"[<>$]|\.\.\.|^[A-Z][A-Z_]*$")
"""A value that stands for one (``<name>``, ``$M``, ``...``, ``FILE``): not checked against choices."""


COMMANDS = frozenset(next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices)
"""The ``hammer`` commands (plugins' included)."""


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:  # type: ignore[type-arg]
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def every_parser(parser: argparse.ArgumentParser | None = None) -> Iterator[argparse.ArgumentParser]:
    parser = parser or build_parser()
    yield parser
    sub = _subparsers(parser)
    for child in dict.fromkeys(sub.choices.values()) if sub else ():
        yield from every_parser(child)


def command_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, command) of every ``hammer ...`` line in fenced code (continuation lines joined) and every
    inline ```hammer ...``` span; a shell comment after the command is left out."""
    fenced = False
    pending: tuple[int, str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            if pending is not None:
                pending = (pending[0], pending[1] + " " + line.strip())
            else:
                found = next(filter(None, (LINE_START.match(part.strip()) for part in AFTER.split(line))), None)
                pending = (number, found.group(1)) if found else None
            if pending is not None and pending[1].endswith("\\"):
                pending = (pending[0], pending[1][:-1])
                continue
            if pending is not None:
                yield pending[0], " ".join(re.split(r"\s#\s|\s{2,}#", pending[1])[0].split())
                pending = None
            continue
        for span in INLINE.findall(line):
            if " -" in span or span.split()[1].split("/")[0] in COMMANDS:  # not a phrase (`hammer grammar probe`)
                yield number, span


def problems(command: str) -> list[str]:
    """What in ``command`` (``hammer serve --openai ...``) the parsers do not take; [] when all of it is real."""
    try:
        words = shlex.split(command)
    except ValueError:  # an unbalanced quote in prose: the words as they stand
        words = command.split()
    words = [w.strip("[]") for w in words[1:]]
    words = words[: next((i for i, w in enumerate(words) if w in SHELL_END), len(words))]
    if not words:
        return []
    first = words[0]
    if "/" in first:  # "hammer call/chat --mcp": each of them
        return [p for name in first.split("/") for p in problems(" ".join(["hammer", name, *words[1:]]))]
    parser = build_parser(words)
    found: list[str] = []
    position = 0
    while (sub := _subparsers(parser)) is not None:  # down the subcommands the words name
        names = [w for w in words[position:] if not w.startswith("-")]
        if not names or names[0] in ("|",) or PLACEHOLDER.search(names[0]) or "|" in names[0]:
            return found  # "hammer bench accuracy | robustness" or "hammer eval <benchmark>": a family, not one line
        if names[0] not in sub.choices:
            return [f"no command {names[0]!r}: the choices are {sorted(sub.choices)}"]
        position = words.index(names[0], position) + 1
        parser = sub.choices[names[0]]
    options = parser._option_string_actions
    rest = words[position:]
    for index, word in enumerate(rest):
        if word == "--":  # what follows goes to another program (llama-server's options)
            break
        if not word.startswith("-") or word == "-" or re.fullmatch(r"-\d+(\.\d+)?", word):
            continue
        flag, _, inline_value = word.partition("=")
        action = options.get(flag)
        if action is None:
            found.append(f"{flag} is not an option of `{parser.prog}`")
            continue
        value = inline_value or (rest[index + 1] if index + 1 < len(rest) and action.nargs != 0 else "")
        if action.choices is not None and value and not value.startswith("-") and not PLACEHOLDER.search(value) \
                and "|" not in value and value not in action.choices:
            found.append(f"{flag} {value}: `{parser.prog} {flag}` takes {sorted(map(str, action.choices))}")
    return found


def doc_files() -> list[Path]:
    return sorted({path for pattern in DOCS for path in REPO.glob(pattern) if ".venv" not in path.parts})


def test_the_check_finds_what_it_is_for() -> None:
    planted = ("Run `hammer serve --openai --log-level debug`, or `hammer serve --no-such-flag`.\n```console\n"
               "$ hammer eval hammerbench --threads 2 \\\n    --prefix-cache  # a comment --not-a-flag\n"
               "$ hammer bench multi-turn --runners hammer --backend nothing\n$ hammer serve -- --metrics\n```\n"
               "`hammer call/chat --mcp`, `hammer pull NAME --force`, `hammer bench accuracy | robustness`\n"
               "```bash\nbash scripts/install.sh && .venv/bin/hammer call --no-such-option \"hi\"\n```\n"
               "Then `.venv/bin/hammer playground --no-such-page`.\n")
    lines = list(command_lines(planted))
    assert [number for number, _ in lines] == [1, 1, 3, 5, 6, 8, 8, 8, 10, 12]
    found = {command: problems(command) for _, command in lines}
    assert [command for command, wrong in found.items() if wrong] == [
        "hammer serve --no-such-flag", "hammer eval hammerbench --threads 2 --prefix-cache",
        "hammer bench multi-turn --runners hammer --backend nothing", 'hammer call --no-such-option "hi"',
        "hammer playground --no-such-page"], found
    assert problems("hammer serve --backend nowhere") == [
        "--backend nowhere: `hammer serve --backend` takes ['llama-server', 'llama_cpp', 'server', 'transformers']"]
    assert problems("hammer evaluate academic") and problems("hammer eval nothing")


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_hammer_command_line_in_the_docs_is_one_the_parsers_take(path: Path) -> None:
    wrong = [f"{path.relative_to(REPO)}:{number}: `{command}`: {problem}"
             for number, command in command_lines(path.read_text(encoding="utf-8")) for problem in problems(command)]
    assert not wrong, "command lines the hammer command does not take:\n" + "\n".join(wrong)


def test_docs_cli_names_only_flags_some_command_has() -> None:
    """docs/cli.md names flags alone too (```--no-prefix-cache```); each must be a flag of some ``hammer`` command."""
    flags = {flag for parser in every_parser() for flag in parser._option_string_actions}
    text = re.sub(r"```.*?```", "", (REPO / "docs" / "cli.md").read_text(encoding="utf-8"), flags=re.S)  # prose only
    named = {flag for span in re.findall(r"`([^`]+)`", text) if not span.startswith(("hammer ", "vllm ", "llama-server"))
             for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]*", span)}
    assert named - flags == set(), "docs/cli.md names flags no hammer command has"
