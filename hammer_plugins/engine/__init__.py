"""The engine: tools and messages in, tool calls / refusal / text out, on any backend.

Everything the doors (LangChain, LlamaIndex, the CLI, the OpenAI server, MCP) share lives in this
package, one job a module:

- :mod:`~hammer_plugins.engine.api`: :class:`HammerEngine`, the public sync and async calls;
- :mod:`~hammer_plugins.engine.core`: :class:`EngineCore`, the engine as its parts read it (they import no engine);
- :mod:`~hammer_plugins.engine.shared_backends`: the backend the settings name, shared per process;
- :mod:`~hammer_plugins.engine.binding`: a tool set converted, masked and its grammars cached;
- :mod:`~hammer_plugins.engine.planning`: one call validated, its prompt rendered and fitted;
- :mod:`~hammer_plugins.engine.turn`: the turn rules (refusals, answers after tool results), free of I/O;
- :mod:`~hammer_plugins.engine.slots`: a slot-filling turn, as snapshot calls of the turn rules;
- :mod:`~hammer_plugins.engine.drivers`: the rules run on a backend's sync API or its async half.

The stream's events are in :mod:`hammer_plugins.output.events`, ``tool_choice`` in
:mod:`hammer_plugins.tools.choice`; both are re-exported here, where they used to live.

Example:
    >>> from hammer_plugins import HammerEngine, Message
    >>> from hammer_plugins.backends.scripted import ScriptedBackend
    >>> engine = HammerEngine(backend=ScriptedBackend(["[]"]))
    >>> engine.generate([Message.user("Tell me a joke")], tools=[{"name": "get_weather",
    ...     "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]).kind
    'refusal'

Layer 3: the engine.
"""

from __future__ import annotations

from hammer_plugins.engine.api import DEFAULT_MAX_TOOL_ROUNDS, HammerEngine
from hammer_plugins.engine.binding import GRAMMAR_CACHE_BYTES, GRAMMAR_CACHE_CHARS, GRAMMAR_CACHE_ENTRIES, ToolBinding
from hammer_plugins.engine.core import EngineCore, RefusalMode
from hammer_plugins.engine.missing import MissingArgumentsError
from hammer_plugins.engine.shared_backends import model_prompt_format
from hammer_plugins.engine.turn import RefusalError
from hammer_plugins.output.events import StreamEvent, TextDelta, ToolCallDelta
from hammer_plugins.tools.choice import normalize_tool_choice

__all__ = ["DEFAULT_MAX_TOOL_ROUNDS", "GRAMMAR_CACHE_BYTES", "GRAMMAR_CACHE_CHARS", "GRAMMAR_CACHE_ENTRIES",
           "EngineCore", "HammerEngine", "MissingArgumentsError",
           "RefusalError", "RefusalMode", "StreamEvent", "TextDelta", "ToolBinding", "ToolCallDelta", "model_prompt_format",
           "normalize_tool_choice"]
