"""Runtimes behind one interface: llama.cpp (GGUF), transformers, an OpenAI-compatible inference server
(:mod:`.remote`: vLLM, llama-server, llama-cpp-python's server, over HTTP), and a scripted one for tests.

Layer 2: a runtime.
"""

from hammer_plugins.backends.base import Backend, GenerationChunk, GenerationSettings

__all__ = ["Backend", "GenerationChunk", "GenerationSettings"]
