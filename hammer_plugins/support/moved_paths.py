"""Import paths the docs showed before the core was grouped into folders, kept working.

``from hammer_plugins.config import EngineSettings`` still imports: the old name is a module that reads every
name from the new one, so classes, functions and errors are the very same objects. Only these documented
paths are kept; the package's own code imports the new ones.

Example:
    >>> import hammer_plugins
    >>> from hammer_plugins.config import EngineSettings
    >>> from hammer_plugins.engine.settings import EngineSettings as Moved
    >>> EngineSettings is Moved
    True
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

MOVED: dict[str, str | tuple[str, ...]] = {
    "hammer_plugins.agent_turn": "hammer_plugins.values.agent_loop",
    "hammer_plugins.backends.server": ("hammer_plugins.backends.remote", "hammer_plugins.launch"),
    "hammer_plugins.config": "hammer_plugins.engine.settings",
    "hammer_plugins.demo_tools": "hammer_plugins.tools.demo",
    "hammer_plugins.encoder": "hammer_plugins.output.encoder",
    "hammer_plugins.engine.runtimes": "hammer_plugins.engine.shared_backends",
    "hammer_plugins.errors": "hammer_plugins.values.errors",
    "hammer_plugins.model_source": "hammer_plugins.models.source",
    "hammer_plugins.model_store": "hammer_plugins.models.store",
    "hammer_plugins.openai_server": "hammer_plugins.http_api",
    "hammer_plugins.schema_limits": "hammer_plugins.tools.limits",
    "hammer_plugins.snapshots": "hammer_plugins.slot_filling.snapshots",
}
"""Old documented path -> where it lives now (several places: the names of each, the first one's first)."""


class _MovedPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        places = MOVED[module.__name__]
        targets = [importlib.import_module(p) for p in ((places,) if isinstance(places, str) else places)]
        names: list[str] = []
        for target in reversed(targets):  # the first place's names win
            module.__dict__.update({k: v for k, v in vars(target).items() if not k.startswith("__")})
            names = [*getattr(target, "__all__", ()), *(n for n in names if n not in getattr(target, "__all__", ()))]
        module.__all__ = sorted(set(names))  # type: ignore[attr-defined]
        module.__doc__ = f"Moved to {', '.join(t.__name__ for t in targets)}; this path is kept for old imports."

        def __getattr__(name: str) -> Any:  # a name a target module makes lazily
            for target in targets:
                if hasattr(target, name):
                    return getattr(target, name)
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")

        module.__getattr__ = __getattr__  # type: ignore[attr-defined]


def install() -> None:
    """Let the old paths import (idempotent)."""
    if not any(isinstance(finder, _MovedPaths) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedPaths())
