"""Prompt heads the server evaluates and keeps before a call: what an agent's next turn will begin with.

The in-process backend stores the answer pass's start (the agent's instructions as a system turn) on first
contact, so the turn after the tool results does not wait for it. A server does the same where it can keep a
state it was asked to evaluate: llama-server keeps it in the slot, then in its host-memory prompt cache
(``--cache-ram``, 8 GiB by default) once another prompt takes the slot, and restores it for a request that
begins with it. Other servers are not asked (vLLM's automatic prefix caching keeps what its requests left).

Example:
    >>> from hammer_plugins.backends.remote import OpenAICompatibleBackend
    >>> backend = OpenAICompatibleBackend("http://127.0.0.1:8080", model="hammer", server_kind="vllm")
    >>> list(backend.prefill.core("<|im_start|>system\\nBe brief.<|im_end|>\\n"))  # vLLM: nothing to send
    []
"""

from __future__ import annotations

import hashlib
import logging

from hammer_plugins.backends.remote.connection import ServerConnection
from hammer_plugins.backends.remote.facts import ServerFacts
from hammer_plugins.backends.remote.sansio import _Core
from hammer_plugins.support.sized_cache import SizedCache
from hammer_plugins.values.errors import HammerError

log = logging.getLogger("hammer_plugins.backends.remote")

REMEMBERED_HEADS = 256
"""Heads remembered as given to the server (a head is sent once per backend)."""


class ServerPrefill:
    """The prefill job of :class:`~hammer_plugins.backends.remote.OpenAICompatibleBackend` (its ``prefill``):
    each head once, to a server whose dialect knows how to keep it; a prefill that fails costs the call nothing
    (it is tried again on the next call).

    Example:
        >>> from hammer_plugins.backends.remote import OpenAICompatibleBackend
        >>> backend = OpenAICompatibleBackend("http://127.0.0.1:8080", model="m", server_kind="llama_server")
        >>> core = backend.prefill.core("<|im_start|>system\\nBe brief.<|im_end|>\\n")
        >>> next(core).path                         # llama-server: n_predict 0 on its native /completion
        '/completion'
    """

    def __init__(self, facts: ServerFacts, connection: ServerConnection) -> None:
        self.facts = facts
        self._connection = connection
        self._given: SizedCache[bytes, bool] = SizedCache(REMEMBERED_HEADS, REMEMBERED_HEADS * 200)

    def core(self, head: str) -> _Core[None]:
        """Have the server evaluate and keep ``head`` (as sent on the wire), unless it was given already."""
        request = self.facts.dialect.prefill(head)
        if request is None:
            return
        key = hashlib.sha256(head.encode("utf-8", "surrogatepass")).digest()
        if self._given.get(key):
            return
        try:
            yield from self._connection.json("POST", *request)
        except HammerError as exc:  # the call itself says what is wrong, if anything is
            log.debug("prefill of %d characters failed: %s", len(head), exc)
            return
        self._given.put(key, True)
