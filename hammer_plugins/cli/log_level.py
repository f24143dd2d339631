"""``--log-level`` on every ``hammer`` command: what of the ``hammer_plugins`` logger reaches stderr.

The library itself configures no logging (an application decides where its logs go); the ``hammer``
command is an application, so it does. ``hammer serve`` and ``hammer playground`` default to ``info``,
which prints the server's one line per request (``hammer_plugins.http_api.access_log``): someone running an
agent against the server wants to see what came, how long it took and what was cached, as uvicorn's or
llama-server's own logs show. The one-shot commands (``call``, ``chat``, ``info``, ``eval``, ``bench``)
default to ``warning``: their answer is the output, and stderr stays quiet unless asked.
``--log-level debug`` adds, among others, the tool selector's line (``hammer_plugins.engine.tool_selection``).

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_log_level_argument(parser, default="info")
    >>> parser.parse_args([]).log_level, parser.parse_args(["--log-level", "debug"]).log_level
    ('info', 'debug')
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import TextIO

LEVELS = ("debug", "info", "warning", "error")
"""The levels ``--log-level`` takes, lowest first."""

LOGGER = "hammer_plugins"
"""The logger every module of the package logs under (its children: ``hammer_plugins.http_api``, ...)."""

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
"""One line per record, its time and source first: a log read beside an agent's own."""

def add_log_level_argument(parser: argparse.ArgumentParser, default: str = "warning") -> None:
    """``--log-level`` on ``parser`` (a command's own parser, so it goes after the command's name)."""
    parser.add_argument("--log-level", choices=LEVELS, default=default, type=str.lower,
                        help="what Hammer logs to stderr: debug (also the tool selector's choice), info (also one "
                             "line per server request), warning, error (default: %(default)s)")


def add_log_level_to_commands(parser: argparse.ArgumentParser, default: str = "warning") -> None:
    """``--log-level`` on every command under ``parser`` that has none yet (plugin commands: ``hammer eval``,
    ``hammer bench``), down to their own subcommands (``hammer bench multi-turn --log-level debug``).

    Only the innermost parsers get it: argparse reads an option only in the parser of the words it follows.
    A placeholder that takes whatever follows (a command whose distribution is missing) is left as it is.
    """
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for command in dict.fromkeys(action.choices.values()):  # aliases share one parser
            if command.get_default("takes_unknown_arguments"):
                continue
            if any(isinstance(a, argparse._SubParsersAction) for a in command._actions):
                add_log_level_to_commands(command, default)
            elif "--log-level" not in command._option_string_actions:
                add_log_level_argument(command, default)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at each record (as logging's own last resort does), so a command run
    in process under a replaced stderr (a test's capture, an embedding program) never writes to a closed one."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, value: TextIO) -> None:  # StreamHandler's __init__ and setStream assign it: always stderr
        pass


@contextlib.contextmanager
def logging_to_stderr(level: str) -> Iterator[None]:
    """While inside: the ``hammer_plugins`` logger's records at ``level`` and above go to stderr, one line each.

    Its own handler and level, not the root logger's: the libraries underneath (httpx, uvicorn, llama.cpp) keep
    theirs. Records still propagate, so an embedding program's root handlers (or a test's capture) see them too.
    On the way out the logger is as it was: ``hammer_plugins.cli.main.main`` may run many commands in one process.
    """
    logger = logging.getLogger(LOGGER)
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter(FORMAT))
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
