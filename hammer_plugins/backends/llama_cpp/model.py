"""What the parts of the llama.cpp backend (``decoder``, ``vocabulary``, ``prefix``) read of the model they
belong to, :class:`~hammer_plugins.backends.llama_cpp.LlamaCppBackend`, as a ``Protocol`` (so that no part
imports the backend that holds it).

Example:
    >>> sorted(LlamaCppModel.__annotations__)
    ['_cancel', 'llama_kwargs', 'n_gpu_layers', 'prefix_cache', 'prompt_states']
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Protocol

from hammer_plugins.backends.prefix_cache import PrefixCache
from hammer_plugins.backends.prompt_states import PromptStates


class LlamaCppModel(Protocol):
    """The loaded model, its settings and the operations on its context that the parts share."""

    prefix_cache: PrefixCache | None
    prompt_states: PromptStates | None
    n_gpu_layers: int
    llama_kwargs: dict[str, Any]
    _cancel: threading.Event | None

    @property
    def llama(self) -> Any: ...
    @property
    def is_loaded(self) -> bool: ...
    def tokenize(self, text: str) -> list[int]: ...
    def gguf_path(self) -> Path: ...
    def file_id(self) -> list[Any]: ...
    def evaluate(self, tokens: list[int]) -> None: ...
    def _check_cancel(self) -> None: ...
