"""llama-cpp-python itself: importing it with a clear error, and the native calls it does not wrap.

Example:
    >>> callable(import_llama_cpp)
    True
"""

from __future__ import annotations

import ctypes
from typing import Any

from hammer_plugins.values.errors import BackendNotInstalledError


def import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise BackendNotInstalledError(
            "the llama.cpp backend needs llama-cpp-python. Fix: pip install 'hammer-plugins[llama-cpp]'"
        ) from exc
    return llama_cpp


def last_logits(llama: Any, n_vocab: int) -> Any:
    """The logits after the last evaluated token: a view of llama.cpp's buffer, not a copy (0.1 ms a
    token saved), valid until the next evaluation, which the decoding loop does only after using it."""
    import numpy as np

    return np.ctypeslib.as_array(llama._ctx.get_logits(), shape=(n_vocab,))


def abort_callback(cancel: Any) -> Any:
    """A ggml abort callback that answers whether ``cancel`` (a ``threading.Event``) is set."""
    import llama_cpp

    return llama_cpp.ggml_abort_callback(lambda _data: cancel.is_set())


def set_abort_callback(ctx: Any, callback: Any) -> None:
    """``llama_set_abort_callback`` (exported by libllama, not wrapped by llama-cpp-python); ``None``
    removes the callback, so decoding one token at a time never calls back into Python."""
    import llama_cpp

    setter = llama_cpp.llama_cpp._lib.llama_set_abort_callback
    setter.argtypes = [ctypes.c_void_p, llama_cpp.ggml_abort_callback, ctypes.c_void_p]
    setter.restype = None
    setter(ctx, callback if callback is not None else llama_cpp.ggml_abort_callback(), None)
