"""Backends behind one interface (``base.py``): llama.cpp (GGUF), transformers, an OpenAI-compatible
inference server (:mod:`.remote`: vLLM, llama-server, llama-cpp-python's server, over HTTP), and a scripted
one for tests; the names that select them in :mod:`.registry`.

Layer 2: a backend.
"""

from hammer_plugins.backends.base import Backend, GenerationChunk, GenerationSettings

__all__ = ["Backend", "GenerationChunk", "GenerationSettings"]
