"""hammer-plugins: Hammer function-calling models in LangChain and LlamaIndex, offline.

The engine here is framework-free. Quick start:

    >>> from hammer_plugins import HammerEngine, Message
    >>> engine = HammerEngine()                      # embedded default model, loaded lazily
    >>> def get_weather(city: str) -> str:
    ...     '''Get the current weather for a city.'''
    ...     return "sunny"
    >>> # engine.generate([Message.user("Weather in Paris?")], tools=[get_weather]).tool_calls
"""

from __future__ import annotations

from .backends.base import Backend, GenerationSettings
from .calls import InvalidToolCall, ToolCall
from .engine import (
    DEFAULT_MAX_TOOL_ROUNDS,
    DEFAULT_REFUSAL_TEXT,
    HammerEngine,
    RefusalError,
    TextDelta,
    ToolBinding,
    ToolCallDelta,
    normalize_tool_choice,
    to_message,
)
from .errors import (
    BackendNotInstalledError,
    ContextWindowExceededError,
    HammerError,
    InvalidModelFileError,
    ModelChecksumError,
    ModelNotFoundError,
    SchemaConversionError,
    ServerError,
    UnknownToolError,
)
from .masking import NameMask
from .messages import Message
from .parsing import ParsedOutput, parse_output
from .response import HammerResponse, Usage
from .tools import Tool, to_tool, to_tools

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAX_TOOL_ROUNDS",
    "DEFAULT_REFUSAL_TEXT",
    "Backend",
    "BackendNotInstalledError",
    "ContextWindowExceededError",
    "GenerationSettings",
    "HammerEngine",
    "HammerError",
    "HammerResponse",
    "InvalidModelFileError",
    "InvalidToolCall",
    "Message",
    "ModelChecksumError",
    "ModelNotFoundError",
    "NameMask",
    "ParsedOutput",
    "RefusalError",
    "SchemaConversionError",
    "ServerError",
    "TextDelta",
    "Tool",
    "ToolBinding",
    "ToolCall",
    "ToolCallDelta",
    "UnknownToolError",
    "Usage",
    "__version__",
    "normalize_tool_choice",
    "parse_output",
    "to_message",
    "to_tool",
    "to_tools",
]
