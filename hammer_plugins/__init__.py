"""hammer-plugins: Hammer function-calling models in LangChain and LlamaIndex, offline.

The engine here is framework-free. Quick start:

    >>> from hammer_plugins import HammerEngine, Message
    >>> engine = HammerEngine()                      # embedded default model, loaded lazily
    >>> def get_weather(city: str) -> str:
    ...     '''Get the current weather for a city.'''
    ...     return "sunny"
    >>> # engine.generate([Message.user("Weather in Paris?")], tools=[get_weather]).tool_calls

The names below are the public API (what the README and docs use); modules hold more, for those
who extend the engine. ``OpenAICompatibleBackend`` loads on first use (it needs ``httpx``).
"""

from __future__ import annotations

from importlib.metadata import version as _distribution_version
from typing import TYPE_CHECKING, Any

from .backends.base import Backend, GenerationChunk, GenerationSettings, Runtime
from .backends.scripted import ScriptedBackend
from .calls import InvalidToolCall, ToolCall
from .config import EngineSettings
from .engine import (
    DEFAULT_MAX_TOOL_ROUNDS,
    HammerEngine,
    RefusalError,
    TextDelta,
    ToolCallDelta,
    normalize_tool_choice,
)
from .errors import (
    BackendNotInstalledError,
    ContextWindowExceededError,
    GrammarNotSupportedError,
    HammerError,
    InvalidModelFileError,
    ModelChecksumError,
    ModelNotFoundError,
    SchemaConversionError,
    SchemaLimitError,
    ServerAuthenticationError,
    ServerError,
    ServerHTTPError,
    ServerModelNotFoundError,
    ServerStreamError,
    ServerTimeoutError,
    ServerUnavailableError,
    UnknownModelError,
    UnknownToolError,
)
from .messages import Message
from .parsing import ParsedOutput, parse_output
from .response import DEFAULT_REFUSAL_TEXT, HammerResponse, Usage
from .schema_limits import SchemaLimits
from .slot_filling import SlotFiller, SlotFillingStep
from .snapshots import Snapshot, SnapshotMessage
from .tools import Tool, to_tool, to_tools

if TYPE_CHECKING:
    from .backends.remote import OpenAICompatibleBackend

__version__ = _distribution_version("hammer-plugins")  # one place: the root pyproject.toml


def __getattr__(name: str) -> Any:
    # The server backend imports httpx (the `server` extra): only when asked for.
    if name == "OpenAICompatibleBackend":
        from .backends.remote import OpenAICompatibleBackend

        return OpenAICompatibleBackend
    raise AttributeError(f"module 'hammer_plugins' has no attribute {name!r}")


__all__ = [
    "DEFAULT_MAX_TOOL_ROUNDS",
    "DEFAULT_REFUSAL_TEXT",
    "Backend",
    "BackendNotInstalledError",
    "ContextWindowExceededError",
    "EngineSettings",
    "GenerationChunk",
    "GenerationSettings",
    "GrammarNotSupportedError",
    "HammerEngine",
    "HammerError",
    "HammerResponse",
    "InvalidModelFileError",
    "InvalidToolCall",
    "Message",
    "ModelChecksumError",
    "ModelNotFoundError",
    "OpenAICompatibleBackend",
    "ParsedOutput",
    "RefusalError",
    "Runtime",
    "SchemaConversionError",
    "SchemaLimitError",
    "SchemaLimits",
    "ScriptedBackend",
    "ServerAuthenticationError",
    "ServerError",
    "ServerHTTPError",
    "ServerModelNotFoundError",
    "ServerStreamError",
    "ServerTimeoutError",
    "ServerUnavailableError",
    "SlotFiller",
    "SlotFillingStep",
    "Snapshot",
    "SnapshotMessage",
    "TextDelta",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "UnknownModelError",
    "UnknownToolError",
    "Usage",
    "__version__",
    "normalize_tool_choice",
    "parse_output",
    "to_tool",
    "to_tools",
]
