"""The KV states of prompts: the tools prefix found in the context, or restored from the prefix cache on
disk, or evaluated once and stored there, so that a new process skips it; and the states of whole
prompts kept in memory (:mod:`~hammer_plugins.backends.prompt_states`) before a request displaces them,
so that a later request restores the one sharing its longest prefix.

Why not llama-cpp-python's ``Llama.save_state`` / ``load_state`` and ``LlamaRAMCache``: a ``LlamaState``
carries a copy of the context's whole score buffer (``n_batch`` x vocabulary floats: 311 MB for Qwen2.5's
152k tokens at ``n_batch`` 512) and of its ``n_ctx`` input ids, besides the KV of every sequence, while
``LlamaRAMCache`` budgets only the KV bytes, so fifty states would hold gigabytes past its budget. The
sequence API (``llama_state_seq_get_data``), which the disk cache already uses, copies the KV of the prompt
alone (about 12 KiB a token for a 0.5B Qwen2); the decoding loops evaluate at least one token after a
restore, so no logits need keeping. ``LlamaRAMCache``'s longest-prefix lookup and LRU are what
:class:`~hammer_plugins.backends.prompt_states.PromptStates` does, with the budget counted on what is held.

Example:
    >>> from hammer_plugins.backends.llama_cpp import LlamaCppBackend
    >>> isinstance(LlamaCppBackend(n_ctx=4096).prefix, LlamaCppPrefix)
    True
"""

from __future__ import annotations

import ctypes
import json
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from hammer_plugins.backends.llama_cpp.native import import_llama_cpp
from hammer_plugins.prompt.render import Prompt

if TYPE_CHECKING:
    from hammer_plugins.backends.llama_cpp.model import LlamaCppModel
    from hammer_plugins.backends.prefix_cache import PrefixCache

# A head shorter than this evaluates in well under a second: not worth a file.
PREFILL_MIN_TOKENS = 64
# A context's state is copied to memory only when a request would discard at least this many of its tokens:
# fewer evaluate again in a fraction of a second, and a continuing conversation (the next turn keeps the
# context) copies nothing.
KEEP_MIN_TOKENS = 64
# A kept state is restored only when it saves at least this many tokens over what the context holds.
RESTORE_MIN_GAIN = 16
# A prefix that served a request from the context or a kept state goes to disk when it holds at least this many
# tokens more than the longest stored prompt that begins it: a conversation's next turn that adds a sentence
# writes nothing, one that adds a tool result writes its line's state again (and the shorter one goes).
PERSIST_MIN_TOKENS = 256

# Writes a served prefix's state to disk beside the next request (hashing and writing 100 MB take a second of one
# core); its thread is joined at interpreter exit, so a server stopped with Ctrl-C finishes the write it began.
_WRITER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hammer-kv-store")


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
        self._prompts: PrefixCache | None = None  # the disk store of prompts that paid off, once asked for
        self.writing: Future[None] | None = None  # the disk write in progress (one at a time)

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

    def _read(self) -> tuple[Any, int]:
        """The KV state of the context's sequence (a ``ctypes`` array) and its size in bytes (0: none)."""
        llama_cpp = import_llama_cpp()
        ctx = self.model.llama._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        return buffer, int(llama_cpp.llama_state_seq_get_data(ctx, buffer, size, 0))

    def _write(self, tokens: list[int] | tuple[int, ...], state: Any, size: int) -> bool:
        """Make the context hold ``state``, the KV of ``tokens``; False: the runtime refused it (then it is empty)."""
        llama = self.model.llama
        llama.reset()
        llama._ctx.kv_cache_clear()
        if not import_llama_cpp().llama_state_seq_set_data(llama._ctx.ctx, state, size, 0):
            llama._ctx.kv_cache_clear()
            return False
        llama.input_ids[: len(tokens)] = tokens
        llama.n_tokens = len(tokens)
        return True

    def keep(self, prompt_tokens: list[int]) -> None:
        """Copy the context's state to the memory cache when ``prompt_tokens`` would discard much of it (and no
        kept state holds it already). Called before a request changes the context."""
        states = self.model.prompt_states
        if states is None or not self.model.is_loaded:
            return
        n = int(self.model.llama.n_tokens)
        if n < KEEP_MIN_TOKENS or n - self.common(prompt_tokens) < KEEP_MIN_TOKENS:
            return
        tokens = self.model.llama.input_ids[:n].tolist()
        if states.covers(tokens):
            return
        best, _ = states.longest(prompt_tokens)
        if best is not None:
            states.touch(best)  # the state this request may restore: keeping the context must not evict it
        buffer, size = self._read()
        if size:
            states.add(tokens, buffer, size)

    def restore_longest(self, prompt_tokens: list[int]) -> tuple[int, bool]:
        """Restore the kept state sharing the longest prefix with ``prompt_tokens`` when it saves more than the
        context holds; (the prompt tokens the context now holds, whether a state was restored)."""
        cached = self.common(prompt_tokens)
        states = self.model.prompt_states
        if states is None:
            return cached, False
        state, shared = states.longest(prompt_tokens)
        if state is None or shared < cached + RESTORE_MIN_GAIN:
            return cached, False
        if not self._write(state.tokens, state.state, state.size):
            return 0, False
        states.touch(state)
        return shared, True

    def reused(self, shared: list[int]) -> None:
        """The context already holds ``shared``: a second request used its stored state, which leaves its trial
        on disk (:meth:`~hammer_plugins.backends.prefix_cache.PrefixCache.mark_reused`)."""
        if self.model.prefix_cache is not None:
            self.model.prefix_cache.mark_reused(self._runtime_id(), shared)

    def restore_or_store(self, shared: list[int]) -> int:
        """Put the state of ``shared`` in the context, from disk when stored; the tokens it saved from evaluation.

        Without a stored state the prefix is evaluated on its own and stored, so a cold call and a
        later warm one decode from byte-identical KV state (and give identical answers).
        """
        cache = self.model.prefix_cache
        assert cache is not None
        runtime = self._runtime_id()
        state = cache.load(runtime, shared)
        if state is not None:
            buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
            if self._write(shared, buffer, len(state)):
                return len(shared)
            # a state this runtime cannot read: evaluate instead (the context is empty now)
        self.model.llama.reset()
        self.model.llama._ctx.kv_cache_clear()
        self.model.evaluate(shared)  # cancelled part-way: nothing is stored, and the next call evaluates it again
        buffer, written = self._read()
        if written:
            cache.store(runtime, shared, ctypes.string_at(buffer, written))
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

    def _stored_prompts(self) -> PrefixCache | None:
        """The prefix cache's store of whole prompts that paid off (None: no prefix cache)."""
        if self._prompts is None and self.model.prefix_cache is not None:
            self._prompts = self.model.prefix_cache.prompts()
        return self._prompts

    def restore_stored(self, prompt_tokens: list[int], cached: int) -> tuple[int, int]:
        """Restore the stored prompt sharing the longest prefix with ``prompt_tokens`` (a restarted server's first
        requests) when it saves more than the ``cached`` tokens the context holds; (the prompt tokens the context
        now holds, those restored from disk). A damaged or unreadable file is a miss, and removed."""
        store = self._stored_prompts()
        if store is None:
            return cached, 0
        runtime = self._runtime_id()
        tokens, shared = store.longest(runtime, prompt_tokens)
        if shared < max(cached + RESTORE_MIN_GAIN, PREFILL_MIN_TOKENS):
            return cached, 0
        state = store.load(runtime, tokens)  # checked (header, tokens, HMAC): None for a damaged file, removed
        if state is None:
            return cached, 0
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if not self._write(tokens, buffer, len(state)):
            store.discard(runtime, tokens)  # a state this runtime cannot read: the context is empty now
            return 0, 0
        return shared, shared

    def persist(self, prompt_tokens: list[int], served: int) -> None:
        """Write the state of the prompt's first ``served`` tokens to disk: the context holds them because an
        earlier request left them (in the context or a kept state), so they paid off, and a restarted server
        finds them (:meth:`restore_stored`). Only when no stored prompt holds nearly as many, and no write is in
        progress; the context's tokens past them go first (the request rewrites them anyway)."""
        store = self._stored_prompts()
        n = min(served, len(prompt_tokens) - 1)
        if store is None or n < PERSIST_MIN_TOKENS or (self.writing is not None and not self.writing.done()):
            return
        runtime = self._runtime_id()
        head = prompt_tokens[:n]
        if n - store.longest(runtime, head)[1] < PERSIST_MIN_TOKENS:
            return
        llama = self.model.llama
        llama._ctx.kv_cache_seq_rm(-1, n, -1)
        llama.n_tokens = n
        buffer, size = self._read()
        if size:
            self.writing = _WRITER.submit(store.store_extending, runtime, head, ctypes.string_at(buffer, size))
