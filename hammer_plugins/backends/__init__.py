"""Runtimes behind one interface: llama.cpp (GGUF), transformers, an OpenAI-compatible inference server
(:mod:`.server`: vLLM, llama-server, llama-cpp-python's server), and a scripted one for tests."""

from .base import Backend, GenerationChunk, GenerationSettings

__all__ = ["Backend", "GenerationChunk", "GenerationSettings"]
