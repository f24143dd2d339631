"""What Ollama's model routes say of the served model (``/api/tags``, ``/api/show``, ``/api/ps``).

Ollama describes a model by name, file size, digest and ``details`` (format, family, size, quantization);
``/api/show`` adds ``model_info`` (LlamaIndex's ``Ollama`` reads its context length from the key ending
in ``context_length``) and ``capabilities``. This module says what the server knows without loading
anything: the file, and the context window once the model is loaded.

Example:
    >>> from hammer_plugins import HammerEngine, ScriptedBackend
    >>> card = ModelCard(HammerEngine(backend=ScriptedBackend([])), "hammer", started=0)
    >>> card.entry()["model"], card.show(context_window=4096)["capabilities"]
    ('hammer:latest', ['completion', 'tools'])
"""

from __future__ import annotations

import hashlib
import os
from datetime import UTC, datetime
from typing import Any

from hammer_plugins.engine import HammerEngine
from hammer_plugins.http_api.ollama.request import LATEST

OLLAMA_API_VERSION = "0.12.0"
"""The Ollama release whose native API this door follows (streamed tool calls, ``tool_name``): ``/api/version``
answers it, as clients that check for tool support read it."""


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ModelCard:
    """The served model as Ollama's model routes describe it.

    Example:
        >>> from hammer_plugins import HammerEngine, ScriptedBackend
        >>> ModelCard(HammerEngine(backend=ScriptedBackend([])), "hammer", started=0).entry()["name"]
        'hammer:latest'
    """

    def __init__(self, engine: HammerEngine, model_name: str, *, started: float) -> None:
        self.engine = engine
        self.name = model_name if ":" in model_name else model_name + LATEST
        self.started = started

    def _file(self) -> str | None:
        path = getattr(self.engine.backend, "model_path", None)  # the in-process backends; a server has none
        return path if isinstance(path, str) and os.path.isfile(path) else None

    def details(self) -> dict[str, Any]:
        path = self._file()
        metadata = self._metadata()
        family = str(metadata.get("general.architecture", ""))
        return {"parent_model": "", "format": "gguf" if path and path.endswith(".gguf") else "",
                "family": family, "families": [family] if family else None,
                "parameter_size": str(metadata.get("general.size_label", "")), "quantization_level": ""}

    def _metadata(self) -> dict[str, Any]:
        """The GGUF's own metadata once llama.cpp has loaded it (never loads it)."""
        if not self.engine.is_loaded:
            return {}
        llama = getattr(self.engine.backend, "llama", None)  # llama.cpp in process, already loaded
        return dict(getattr(llama, "metadata", None) or {})

    def entry(self) -> dict[str, Any]:
        """One model of ``/api/tags``: the digest identifies the served file (its path, size and time), it is not
        the file's content hash, which would mean reading hundreds of megabytes."""
        path = self._file()
        stat = os.stat(path) if path else None
        identity = f"{path}:{stat.st_size}:{stat.st_mtime_ns}" if stat else f"{self.name}:{self.started}"
        return {"name": self.name, "model": self.name,
                "modified_at": _iso(stat.st_mtime if stat else self.started), "size": stat.st_size if stat else 0,
                "digest": hashlib.sha256(identity.encode()).hexdigest(), "details": self.details()}

    def show(self, context_window: int) -> dict[str, Any]:
        """``/api/show``'s answer."""
        details = self.details()
        family = details["family"] or "hammer"
        return {"modelfile": f"# served by hammer-plugins\nFROM {self.name}\n", "parameters": "", "template": "",
                "details": details, "model_info": {"general.architecture": family, "general.basename": self.name,
                                                   f"{family}.context_length": context_window},
                "capabilities": ["completion", "tools"], "modified_at": self.entry()["modified_at"]}

    def running(self, context_window: int) -> dict[str, Any]:
        """One model of ``/api/ps`` (the model stays loaded while the server runs: no ``expires_at``)."""
        return {**self.entry(), "size_vram": 0, "context_length": context_window}
