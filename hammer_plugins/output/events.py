"""The engine's stream: the typed events every door encodes (text deltas, complete calls, the answer).

One call of :meth:`~hammer_plugins.HammerEngine.stream` yields :class:`TextDelta` and
:class:`ToolCallDelta` events and ends with the :class:`~hammer_plugins.HammerResponse` (which holds
the refusal, the usage and the finish reason). Every wire format (LangChain chunks, LlamaIndex
responses, OpenAI Chat Completions chunks) is an encoder of this one stream
(:class:`hammer_plugins.output.encoder.StreamEncoder`); the value types live here, apart from the engine,
so an encoder needs no engine to name them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from hammer_plugins.output.response import HammerResponse
from hammer_plugins.values.calls import ToolCall


@dataclass(frozen=True)
class TextDelta:
    """A streamed piece of the model's output.

    ``channel`` is ``"call"`` for the output of a pass that offers tools (Hammer's call syntax, or
    whatever the model wrote instead) and ``"prose"`` for a tool-free answer. Prose deltas are
    trimmed like the final ``text``, so they add up to it exactly.

    Example:
        >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend
        >>> engine = HammerEngine(backend=ScriptedBackend(["Hello!"]))
        >>> [e.text for e in engine.stream([Message.user("hi")]) if isinstance(e, TextDelta)]
        ['Hello!']
    """

    text: str
    channel: Literal["call", "prose"] = "call"


@dataclass(frozen=True)
class ToolCallDelta:
    """A tool call complete in the stream (constrained decoding only), before the answer ends.

    ``index`` is its position in the final response's ``tool_calls``, which reuses the same id.

    Example:
        >>> from hammer_plugins import HammerEngine, Message, ScriptedBackend
        >>> engine = HammerEngine(backend=ScriptedBackend(['[{"name": "ping", "arguments": {}}]']))
        >>> events = list(engine.stream([Message.user("ping")], tools=[{"name": "ping", "parameters": {}}]))
        >>> [(e.index, e.call.name) for e in events if isinstance(e, ToolCallDelta)]
        [(0, 'ping')]
    """

    index: int
    call: ToolCall


StreamEvent = TextDelta | ToolCallDelta | HammerResponse
