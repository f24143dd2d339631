"""Runtimes behind one interface: llama.cpp (GGUF), transformers, and a scripted one for tests."""

from .base import Backend, GenerationChunk, GenerationSettings

__all__ = ["Backend", "GenerationChunk", "GenerationSettings"]
