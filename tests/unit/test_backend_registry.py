"""One registry of backends (``hammer_plugins/backends/registry.py``): the settings, every command's
``--backend`` and the engine accept exactly its names, and an unknown name's error lists them with a fix."""

from __future__ import annotations

import argparse
import subprocess
import sys
import typing

import pytest

from hammer_plugins import HammerEngine
from hammer_plugins.backends.registry import BACKEND_NAMES, BACKENDS, backend_names, find_backend
from hammer_plugins.cli.main import build_parser
from hammer_plugins.cli.serve import LAUNCHED_SERVER
from hammer_plugins.engine.fields import DEFAULTS, EngineFields
from hammer_plugins.engine.settings import SERVER_OPTIONS, EngineSettings


def _backend_choices(parser: argparse.ArgumentParser) -> dict[str, tuple[str, ...]]:
    """Each subcommand's ``--backend`` choices, from the real ``hammer`` parser."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = {}
    for name, command in sub.choices.items():
        for action in command._actions:
            if "--backend" in action.option_strings:
                found[name] = tuple(action.choices or ())
    return found


def test_the_settings_accept_exactly_the_registrys_names_the_default_first() -> None:
    annotation = EngineFields.model_fields["backend"].annotation
    literal = next(m for m in typing.get_args(annotation) if typing.get_origin(m) is typing.Literal)
    assert typing.get_args(literal) == BACKEND_NAMES == backend_names() == tuple(BACKENDS)
    assert DEFAULTS.backend == BACKEND_NAMES[0]
    for name in BACKEND_NAMES:
        assert EngineSettings(backend=name).backend == name
    with pytest.raises(ValueError, match="backend"):
        EngineSettings(backend="vllm")


def test_every_commands_backend_flag_is_the_registrys() -> None:
    choices = _backend_choices(build_parser())
    assert {"call", "chat", "serve", "playground"} <= set(choices)
    for command, names in choices.items():
        # hammer serve --openai adds one: the server backend on a llama-server it starts.
        expected = (*BACKEND_NAMES, LAUNCHED_SERVER) if command in ("serve", "playground") else BACKEND_NAMES
        assert names == expected, command


def test_the_engine_accepts_each_name_and_alias_and_lists_them_for_another() -> None:
    for entry in BACKENDS.values():
        for name in (entry.name, *entry.aliases):
            engine = HammerEngine(backend=name)  # nothing is created or loaded yet
            assert engine.backend_name == name and not engine.is_loaded
    with pytest.raises(ValueError) as caught:
        HammerEngine(backend="vllm")
    message = str(caught.value)
    assert "'vllm'" in message and "Fix:" in message
    assert all(repr(name) in message for name in BACKEND_NAMES)


def test_the_server_options_go_to_the_backends_that_read_them() -> None:
    assert set(SERVER_OPTIONS) <= set(find_backend("server").options)
    remote = EngineSettings(backend="server", base_url="http://127.0.0.1:1/v1").engine_options()
    local = EngineSettings(backend="llama_cpp", base_url="http://127.0.0.1:1/v1").engine_options()
    assert remote["base_url"] == "http://127.0.0.1:1/v1" and "base_url" not in local


def test_the_registry_imports_no_backend_library() -> None:
    code = ("import sys; import hammer_plugins.backends.registry, hammer_plugins.engine.fields; "
            "print(sorted(m for m in ('llama_cpp', 'torch', 'transformers', 'httpx') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
