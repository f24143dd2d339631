"""The ``hammer`` command (``main``), ``hammer serve`` (``serve``) and ``hammer vllm``'s command line
(``vllm_command``). ``python -m hammer_plugins.cli`` runs it too.

Layer 4: a door.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    # The console script is ``hammer_plugins.cli:console_main``; read lazily so that importing
    # ``hammer_plugins.cli.serve`` alone does not load the whole command.
    if name == "console_main":
        import importlib

        return importlib.import_module("hammer_plugins.cli.main").console_main
    raise AttributeError(f"module 'hammer_plugins.cli' has no attribute {name!r}")
