"""The KV state of a prompt's tools prefix: found in the context, or restored from the prefix cache on
disk, or evaluated once and stored there, so that a new process skips it.

Example:
    >>> from hammer_plugins.backends.llama_cpp import LlamaCppBackend
    >>> isinstance(LlamaCppBackend(n_ctx=4096).prefix, LlamaCppPrefix)
    True
"""

from __future__ import annotations

import ctypes
import json
from typing import TYPE_CHECKING

from hammer_plugins.backends.llama_cpp.native import import_llama_cpp
from hammer_plugins.prompt.render import Prompt

if TYPE_CHECKING:
    from hammer_plugins.backends.llama_cpp.model import LlamaCppModel

# A head shorter than this evaluates in well under a second: not worth a file.
PREFILL_MIN_TOKENS = 64


class LlamaCppPrefix:
    """The prefix-cache job of :class:`~hammer_plugins.backends.llama_cpp.LlamaCppBackend` (its ``prefix``):
    it reads and writes the model's context, and keeps the KV states in the model's prefix cache.

    Example:
        >>> LlamaCppPrefix.__name__
        'LlamaCppPrefix'
    """

    def __init__(self, model: LlamaCppModel) -> None:
        self.model = model
        self._runtime: str | None = None  # what the KV state depends on besides the tokens, once known

    def common(self, tokens: list[int]) -> int:
        """How many leading ``tokens`` the context already holds."""
        llama = self.model.llama
        previous = llama.input_ids[: llama.n_tokens].tolist()
        same = 0
        for a, b in zip(previous, tokens, strict=False):
            if a != b:
                break
            same += 1
        return same

    def shared_tokens(self, prompt: str, prompt_tokens: list[int], chars: int) -> list[int]:
        """The prompt's leading tokens that stand for its first ``chars`` characters (the tools prefix).

        The prefix ends a ChatML turn, so its tokens are the prompt's own; should a tokenizer merge
        across that boundary, only the tokens both agree on are shared. One token is always left
        to evaluate, as llama-cpp-python needs logits for the first answer token.
        """
        own = self.model.tokenize(prompt.head(chars) if isinstance(prompt, Prompt) else prompt[:chars])
        n = 0
        for a, b in zip(own, prompt_tokens, strict=False):
            if a != b:
                break
            n += 1
        n = min(n, len(prompt_tokens) - 1)
        return prompt_tokens[:n] if n >= 16 else []

    def _runtime_id(self) -> str:
        """What the KV state depends on besides the tokens: a change makes every stored state miss."""
        if self._runtime is None:
            params = self.model.llama.context_params
            self._runtime = json.dumps([
                *self.model.file_id(),
                self.model.n_gpu_layers, int(params.n_ctx), int(params.n_batch), int(params.type_k), int(params.type_v),
                repr(getattr(params, "flash_attn", None)), repr(getattr(params, "flash_attn_type", None)),
            ])
        return self._runtime

    def restore_or_store(self, shared: list[int]) -> int:
        """Put the state of ``shared`` in the context, from disk when stored; the tokens it saved from evaluation.

        Without a stored state the prefix is evaluated on its own and stored, so a cold call and a
        later warm one decode from byte-identical KV state (and give identical answers).
        """
        cache = self.model.prefix_cache
        assert cache is not None
        llama_cpp = import_llama_cpp()
        llama = self.model.llama
        ctx = llama._ctx.ctx
        runtime = self._runtime_id()
        state = cache.load(runtime, shared)
        llama.reset()
        llama._ctx.kv_cache_clear()
        if state is not None:
            buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
            if llama_cpp.llama_state_seq_set_data(ctx, buffer, len(state), 0):
                llama.input_ids[: len(shared)] = shared
                llama.n_tokens = len(shared)
                return len(shared)
            llama._ctx.kv_cache_clear()  # a state this runtime cannot read: evaluate instead
        self.model.evaluate(shared)  # cancelled part-way: nothing is stored, and the next call evaluates it again
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0)
        if written:
            cache.store(runtime, shared, bytes(buffer)[:written])
        return 0

    def prefill(self, head: str) -> None:
        """Evaluate ``head`` and keep its state on disk, unless it is kept already or too short to matter (a
        later prompt that starts with it restores it instead: :meth:`restore_or_store`)."""
        cache = self.model.prefix_cache
        assert cache is not None
        tokens = self.model.tokenize(head)
        if len(tokens) < PREFILL_MIN_TOKENS or cache.path_for(self._runtime_id(), tokens).exists():
            return
        self.restore_or_store(tokens)
