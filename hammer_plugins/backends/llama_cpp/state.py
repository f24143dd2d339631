"""What the parts of the llama.cpp backend share: the state :class:`LlamaCppBackend` holds and the
operations each part calls on another, declared once for the type checker.

Example:
    >>> from hammer_plugins.backends.llama_cpp import LlamaCppBackend
    >>> issubclass(LlamaCppBackend, LlamaCppState)
    True
"""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hammer_plugins.backends.prefix_cache import PrefixCache

if TYPE_CHECKING:
    from hammer_plugins.grammar.builder import Grammar
    from hammer_plugins.grammar.token_mask import TokenMask


class LlamaCppState:
    """The llama.cpp backend's state (set by ``LlamaCppBackend.__init__``), for its parts:
    :class:`~.decoding.LlamaCppDecoding`, :class:`~.vocabulary.LlamaCppVocabulary`,
    :class:`~.prefix.LlamaCppPrefix`.

    Example:
        >>> "prefix_cache" in LlamaCppState.__annotations__
        True
    """

    _llama: Any
    _ll_tokenizer: Any
    _tokenizer_job: Future[Any] | None
    _runtime: str | None
    _full_mask_decoding: bool
    llama_kwargs: dict[str, Any]
    prefix_cache: PrefixCache | None
    n_gpu_layers: int
    fast_forward: bool
    draft_tokens: int

    if TYPE_CHECKING:
        @property
        def llama(self) -> Any: ...
        def tokenize(self, text: str) -> list[int]: ...
        def prepare_grammar(self) -> None: ...
        def _gguf_path(self) -> Path: ...
        def _file_id(self) -> list[Any]: ...
        def _token_mask(self, grammar: Grammar, loop_guard: bool) -> TokenMask: ...
        def _common_prefix(self, tokens: list[int]) -> int: ...
        def _shared_tokens(self, prompt: str, prompt_tokens: list[int], chars: int) -> list[int]: ...
        def _restore_or_store(self, shared: list[int]) -> int: ...
        def _prefill(self, head: str) -> None: ...
        def _eval(self, tokens: list[int]) -> None: ...
        def _check_cancel(self) -> None: ...
