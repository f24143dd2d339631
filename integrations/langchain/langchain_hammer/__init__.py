"""LangChain integration for Hammer function-calling models: ``ChatHammer``.

Example:
    >>> from langchain_hammer import ChatHammer
    >>> llm = ChatHammer(n_ctx=4096)   # the embedded default model; nothing loads until the first call
    >>> # llm.bind_tools([get_weather]).invoke("Weather in Paris?").tool_calls
    >>> # llm.bind_tools(tools, slot_filling=True): ask for missing arguments over several turns
    >>> # ChatHammer(tool_selector=RetrieverToolSelector(retriever), tool_budget=512): your retriever picks the tools
"""

from __future__ import annotations

from importlib.metadata import version as _distribution_version

from .chat_models import ChatHammer, to_engine_messages
from .slot_filling import snapshot_from_message
from .tool_selectors import RetrieverToolSelector

__version__ = _distribution_version("langchain-hammer")  # released in lockstep with hammer-plugins

__all__ = ["ChatHammer", "RetrieverToolSelector", "__version__", "snapshot_from_message", "to_engine_messages"]
