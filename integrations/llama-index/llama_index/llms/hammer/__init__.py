"""LlamaIndex integration for Hammer function-calling models.

Example:
    >>> from llama_index.llms.hammer import HammerLLM
    >>> HammerLLM(max_tokens=128).metadata.is_function_calling_model   # nothing loads yet
    True
"""

from importlib.metadata import version as _distribution_version

from llama_index.llms.hammer.base import HammerLLM, to_engine_message, to_engine_messages, to_engine_tool
from llama_index.llms.hammer.slot_filling import SlotFillingResult, SlotFillingWorkflow, snapshot_from_message
from llama_index.llms.hammer.tool_selectors import ObjectRetrieverToolSelector

__version__ = _distribution_version("llama-index-llms-hammer")  # released in lockstep with hammer-plugins

__all__ = ["HammerLLM", "ObjectRetrieverToolSelector", "SlotFillingResult", "SlotFillingWorkflow", "__version__",
           "snapshot_from_message", "to_engine_message", "to_engine_messages", "to_engine_tool"]
