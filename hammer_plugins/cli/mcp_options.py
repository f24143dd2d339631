"""The ``--mcp`` options every command that starts MCP servers shares (``hammer call``, ``chat``, ``playground``).

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_mcp_arguments(parser)
    >>> parser.parse_args(["--mcp-timeout", "5"]).mcp_timeout
    5.0
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from typing import Any


def add_mcp_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mcp-env", action="append", metavar="NAME[=VALUE]",
                        help="a variable for the --mcp servers: NAME passes it from this environment, NAME=VALUE "
                             "sets it; repeatable. They get only a safe default (HOME, PATH, ...) besides")
    parser.add_argument("--mcp-timeout", type=float, default=60.0, metavar="SECONDS",
                        help="seconds for an MCP server to start and for each tool call; a call that outlasts it "
                             "is cancelled and its server restarted (default: 60)")


def attach_mcp_servers(args: argparse.Namespace, stack: contextlib.ExitStack, tools: list[Any],
                       functions: dict[str, Callable[..., Any]]) -> tuple[list[Any], dict[str, Callable[..., Any]]]:
    """``--mcp`` servers' tools added to ``tools`` (and callables to ``functions``); they close with ``stack``.

    A server gets the MCP SDK's safe default environment plus the ``--mcp-env`` variables, not this
    process's (API keys stay here); a call that outlasts ``--mcp-timeout`` is cancelled and its server restarted.
    """
    from hammer_plugins.mcp.client import attach_mcp, parse_env_options

    names, values = parse_env_options(args.mcp_env or [])
    return attach_mcp(args.mcp, tools, functions, stack=stack, pass_env=names, env=values, timeout=args.mcp_timeout)
