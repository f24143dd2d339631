"""What a new `hammer call` process pays before the model runs (issue 17's cold call): it imports
only what it uses, and a constrained call asks the backend to build its grammar tokenizer before
the model loads, so that both run at once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hammer_plugins import HammerEngine, Message
from hammer_plugins.backends.scripted import ScriptedBackend
from hammer_plugins.cli.main import build_parser

TOOLS = [{"name": "ping", "description": "Ping a host", "parameters": {"type": "object", "properties": {
    "host": {"type": "string"}}, "required": ["host"]}}]


def test_a_call_process_imports_neither_asyncio_nor_the_hub_client_nor_the_plugin_commands(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from hammer_plugins.cli.main import build_parser, _engine\n"
        "args = build_parser(['call', 'hi']).parse_args(['call', 'hi'])\n"
        "engine = _engine(args)\n"  # resolves the model (and looks for pulled presets), loads nothing
        "heavy = ['asyncio', 'huggingface_hub.file_download', 'httpx', 'hammer_evals',\n"
        "         'hammer_evals.hammerbench', 'hammer_evals.academic']\n"
        "print(sorted(name for name in heavy if name in sys.modules))\n"
    )
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_the_plugin_commands_are_there_for_every_other_command() -> None:
    commands = build_parser(["eval", "academic", "--help"])._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert {"eval", "bench", "call", "serve"} <= set(commands)
    assert "eval" not in build_parser(["call", "hi"])._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    # No command at all (`hammer --help`, a typo): everything, so the help and the error list them.
    assert "bench" in build_parser([])._subparsers._group_actions[0].choices  # type: ignore[union-attr]


class _Recording(ScriptedBackend):
    """Records the order of prepare_grammar and the first context_window (which loads a real backend)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.events: list[str] = []

    def prepare_grammar(self) -> None:
        self.events.append("prepare_grammar")

    @property
    def context_window(self) -> int:
        self.events.append("context_window")
        return 32768


def test_a_constrained_call_prepares_the_grammar_before_the_model_loads() -> None:
    backend = _Recording(['[{"name": "ping", "arguments": {"host": "a"}}]', "plain"])
    engine = HammerEngine(backend=backend)
    assert engine.generate([Message.user("ping a")], tools=TOOLS).tool_calls[0].arguments == {"host": "a"}
    assert backend.events[:2] == ["prepare_grammar", "context_window"]
    backend.events.clear()
    engine.generate([Message.user("ping a")], tools=TOOLS, constrained=False)
    assert "prepare_grammar" not in backend.events  # nothing to build for an unconstrained call


def test_a_constrained_call_without_llama_cpp_python_names_the_package_to_install(
        default_model_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from hammer_plugins.backends.llama_cpp import LlamaCppBackend
    from hammer_plugins.values.errors import BackendNotInstalledError

    backend = LlamaCppBackend(default_model_path)
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if it were not installed
    with pytest.raises(BackendNotInstalledError, match="pip install 'hammer-plugins\\[llama-cpp\\]'"):
        HammerEngine(backend=backend).generate([Message.user("ping a")], tools=TOOLS)


def test_a_quick_exit_keeps_what_was_printed_and_logged_and_the_exit_status(tmp_path: Path) -> None:
    """`hammer call` ends its process without the interpreter's teardown: the answer, anything logged
    and the status must still come out whole (a pipe buffers the answer until it is flushed)."""
    log = tmp_path / "log.txt"
    script = (
        "import logging\n"
        f"logging.basicConfig(filename={str(log)!r}, level=logging.INFO)\n"
        "logging.info('logged before the exit')\n"
        "from hammer_plugins.cli.main import _exit_at_once\n"
        "print('[{\"name\": \"ping\"}]' * 1000, end='')\n"
        "_exit_at_once(3)\n"
        "print('never')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 3, done.stderr
    assert done.stdout == '[{"name": "ping"}]' * 1000
    assert "logged before the exit" in log.read_text()


def test_only_hammer_call_ends_at_once() -> None:
    """Programmatic `main()` returns its status; the executable exits at once after `call` only."""
    from hammer_plugins.cli import main as cli

    script = "from hammer_plugins.cli.main import _run; print(_run(['cache'], exit_at_once=True))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "0"  # `hammer cache` returned instead of exiting
    assert cli.main(["cache"]) == 0
