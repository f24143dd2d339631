"""LlamaIndex integration for Hammer function-calling models.

Example:
    >>> from llama_index.llms.hammer import HammerLLM
    >>> HammerLLM(max_tokens=128).metadata.is_function_calling_model   # nothing loads yet
    True
"""

from llama_index.llms.hammer.base import HammerLLM, to_engine_message, to_engine_messages, to_engine_tool

__all__ = ["HammerLLM", "to_engine_message", "to_engine_messages", "to_engine_tool"]
