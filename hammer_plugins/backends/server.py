"""The import path before the backends were split by job (0.1.0), kept so that existing code runs:
``from hammer_plugins.backends.server import OpenAICompatibleBackend, LlamaServer``. The backend lives
in :mod:`hammer_plugins.backends.remote`, the server launchers in :mod:`hammer_plugins.launch`.

Example:
    >>> from hammer_plugins.backends.server import OpenAICompatibleBackend
    >>> from hammer_plugins.backends.remote import OpenAICompatibleBackend as Backend
    >>> OpenAICompatibleBackend is Backend
    True
"""

from ..launch import LlamaCppPythonServer, LlamaServer
from .remote import *  # noqa: F403 - the whole public surface of the old package
from .remote import __all__ as _remote_all

__all__ = [*_remote_all, "LlamaCppPythonServer", "LlamaServer"]
