"""Where hammer-plugins keeps what it builds and downloads: one folder, chosen by the environment.

The embedded default model, the prefix cache, the llama-server build and the datasets all live under
:func:`cache_dir`, so one variable (``$HAMMER_CACHE_DIR``) moves them all.

Example:
    >>> import os
    >>> "HAMMER_CACHE_DIR" in os.environ or cache_dir().name == "hammer-plugins"
    True
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$HAMMER_CACHE_DIR``, else ``$XDG_CACHE_HOME/hammer-plugins``, else ``~/.cache/hammer-plugins``."""
    if os.environ.get("HAMMER_CACHE_DIR"):
        return Path(os.environ["HAMMER_CACHE_DIR"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "hammer-plugins"
