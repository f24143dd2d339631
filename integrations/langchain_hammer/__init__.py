"""LangChain integration for Hammer function-calling models: ``ChatHammer``.

Example:
    >>> from langchain_hammer import ChatHammer
    >>> llm = ChatHammer(n_ctx=4096)   # the embedded default model; nothing loads until the first call
    >>> # llm.bind_tools([get_weather]).invoke("Weather in Paris?").tool_calls
"""

from __future__ import annotations

from hammer_plugins import __version__

from .chat_models import ChatHammer, to_engine_messages

__all__ = ["ChatHammer", "__version__", "to_engine_messages"]
