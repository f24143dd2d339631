"""httpx, the optional HTTP client: imported only where a server is spoken to, with the fix when missing.

The server backend (:mod:`hammer_plugins.backends.remote`) and the launcher of llama-server
(:mod:`hammer_plugins.launch`) both need it; ``pip install 'hammer-plugins[server]'`` brings it.

Example:
    >>> import_httpx().__name__
    'httpx'
"""

from __future__ import annotations

from typing import Any

from hammer_plugins.values.errors import BackendNotInstalledError


def import_httpx() -> Any:
    """The ``httpx`` module, or :class:`~hammer_plugins.values.errors.BackendNotInstalledError` naming the fix."""
    try:
        import httpx
    except ImportError as exc:
        raise BackendNotInstalledError(
            "the server backend needs httpx. Fix: pip install 'hammer-plugins[server]'"
        ) from exc
    return httpx
