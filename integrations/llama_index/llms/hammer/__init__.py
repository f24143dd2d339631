"""LlamaIndex integration for Hammer models."""
