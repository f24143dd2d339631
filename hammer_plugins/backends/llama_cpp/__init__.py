"""llama.cpp backend (llama-cpp-python), by job: ``backend`` (:class:`LlamaCppBackend`: the model, its
settings, tokenizing, evaluating; it holds the three parts below as components), ``decoding`` (its
``decoder``: the sampled and the greedy constrained loops), ``vocabulary`` (its ``vocabulary``: llguidance's
tokenizer, built while the weights load), ``prefix`` (its ``prefix``: the tools prefix's KV state on disk),
``model`` (what the parts read of the backend, a ``Protocol``), ``native`` (importing llama-cpp-python, the
native calls it does not wrap).

Example:
    >>> from hammer_plugins.backends.llama_cpp import LlamaCppBackend
    >>> LlamaCppBackend(n_ctx=4096).name
    'llama_cpp'
"""

from hammer_plugins.backends.llama_cpp.backend import LlamaCppBackend

__all__ = ["LlamaCppBackend"]
