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

from hammer_plugins.backends.base import Backend, BackendInterface, GenerationChunk, GenerationSettings, Runtime
from hammer_plugins.backends.scripted import ScriptedBackend
from hammer_plugins.engine import (
    DEFAULT_MAX_TOOL_ROUNDS,
    HammerEngine,
    MissingArgumentsError,
    RefusalError,
    TextDelta,
    ToolCallDelta,
    normalize_tool_choice,
)
from hammer_plugins.engine.request import EngineRequest
from hammer_plugins.engine.settings import EngineSettings
from hammer_plugins.output.decoding import Decoding
from hammer_plugins.output.parsing import ParsedOutput, parse_output
from hammer_plugins.output.response import DEFAULT_REFUSAL_TEXT, HammerResponse
from hammer_plugins.output.timings import Timings
from hammer_plugins.output.usage import Usage
from hammer_plugins.slot_filling.filler import SlotFiller, SlotFillingStep
from hammer_plugins.slot_filling.snapshots import Snapshot, SnapshotMessage
from hammer_plugins.support import moved_paths as _moved_paths
from hammer_plugins.tools.definition import Tool, to_tool, to_tools
from hammer_plugins.tools.limits import SchemaLimits
from hammer_plugins.tools.meaning import LexicalSelector, MeaningSelector
from hammer_plugins.tools.selector import FunctionSelector, Selection, SelectionQuery, ToolSelector
from hammer_plugins.values.calls import InvalidToolCall, PendingCall, ToolCall
from hammer_plugins.values.errors import (
    BackendNotInstalledError,
    ContextWindowExceededError,
    GrammarNotSupportedError,
    HammerError,
    InvalidModelFileError,
    ModelChecksumError,
    ModelNotFoundError,
    RequestError,
    SchemaConversionError,
    SchemaLimitError,
    ServerAuthenticationError,
    ServerError,
    ServerHTTPError,
    ServerModelNotFoundError,
    ServerStreamError,
    ServerTimeoutError,
    ServerUnavailableError,
    ToolBudgetError,
    UnknownModelError,
    UnknownToolError,
)
from hammer_plugins.values.messages import Message

if TYPE_CHECKING:
    from hammer_plugins.backends.remote import OpenAICompatibleBackend

_moved_paths.install()  # documented paths from before the folders (support/moved_paths.py)

__version__ = _distribution_version("hammer-plugins")  # one place: the root pyproject.toml


def __getattr__(name: str) -> Any:
    # The server backend imports httpx (the `server` extra): only when asked for.
    if name == "OpenAICompatibleBackend":
        from hammer_plugins.backends.remote import OpenAICompatibleBackend

        return OpenAICompatibleBackend
    raise AttributeError(f"module 'hammer_plugins' has no attribute {name!r}")


__all__ = [
    "Backend",
    "BackendInterface",
    "BackendNotInstalledError",
    "ContextWindowExceededError",
    "DEFAULT_MAX_TOOL_ROUNDS",
    "DEFAULT_REFUSAL_TEXT",
    "Decoding",
    "EngineRequest",
    "EngineSettings",
    "FunctionSelector",
    "GenerationChunk",
    "GenerationSettings",
    "GrammarNotSupportedError",
    "HammerEngine",
    "HammerError",
    "HammerResponse",
    "InvalidModelFileError",
    "InvalidToolCall",
    "LexicalSelector",
    "MeaningSelector",
    "Message",
    "ModelChecksumError",
    "ModelNotFoundError",
    "OpenAICompatibleBackend",
    "ParsedOutput",
    "MissingArgumentsError",
    "PendingCall",
    "RefusalError",
    "RequestError",
    "Runtime",
    "SchemaConversionError",
    "SchemaLimitError",
    "SchemaLimits",
    "ScriptedBackend",
    "Selection",
    "SelectionQuery",
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
    "Timings",
    "Tool",
    "ToolBudgetError",
    "ToolCall",
    "ToolCallDelta",
    "ToolSelector",
    "UnknownModelError",
    "UnknownToolError",
    "Usage",
    "__version__",
    "normalize_tool_choice",
    "parse_output",
    "to_tool",
    "to_tools",
]
