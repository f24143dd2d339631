"""llama.cpp backend (llama-cpp-python), by job: ``backend`` (:class:`LlamaCppBackend`: the model, its
settings, tokenizing), ``decoding`` (the sampled and the greedy constrained loops), ``vocabulary``
(llguidance's tokenizer, built while the weights load), ``prefix`` (the tools prefix's KV state on
disk), ``native`` (importing llama-cpp-python, the native calls it does not wrap).

Example:
    >>> from hammer_plugins.backends.llama_cpp import LlamaCppBackend
    >>> LlamaCppBackend(n_ctx=4096).name
    'llama_cpp'
"""

from hammer_plugins.backends.llama_cpp.backend import LlamaCppBackend

__all__ = ["LlamaCppBackend"]
