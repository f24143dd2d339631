"""The engine's stream of one answer as the steps every wire format sends: prose, calls, the finish.

Each API's encoder (Chat Completions chunks, Responses events, Messages events) needs the same
bookkeeping: which calls it already sent, whether prose already streamed, which calls only the final
answer holds (an unconstrained pass names its calls only at the end). :class:`AnswerSteps` keeps that
state once; an encoder turns each step into its own framing and keeps nothing else of the answer.

Example:
    >>> from hammer_plugins import HammerResponse, ToolCall
    >>> from hammer_plugins.engine import TextDelta, ToolCallDelta
    >>> steps = AnswerSteps()
    >>> call = ToolCall(name="f", arguments={"x": 1})
    >>> [type(s).__name__ for s in steps.feed(TextDelta('[{"name": "f"', channel="call"))]
    []
    >>> [type(s).__name__ for s in steps.feed(ToolCallDelta(0, call))]
    ['CallStep']
    >>> final = HammerResponse(kind="tool_calls", tool_calls=[call], finish_reason="tool_calls")
    >>> [type(s).__name__ for s in steps.feed(final)]
    ['FinishStep']
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..calls import ToolCall
from ..engine import StreamEvent, TextDelta, ToolCallDelta
from ..response import HammerResponse


@dataclass(frozen=True)
class ProseStep:
    """Prose to show as it is generated (a tool-free answer, JSON of a response format)."""

    text: str


@dataclass(frozen=True)
class CallStep:
    """A complete tool call to send; ``index`` counts the calls of this answer from 0."""

    index: int
    call: ToolCall


@dataclass(frozen=True)
class FinishStep:
    """The answer is over. ``text`` is content not streamed yet (None when prose already went out)."""

    response: HammerResponse
    text: str | None


Step = ProseStep | CallStep | FinishStep


def content_of(response: HammerResponse) -> str | None:
    """What a person is shown of ``response``: its text; for malformed calls, what the model wrote."""
    if response.kind == "invalid":
        return response.text or response.raw  # the reasons go in each API's own field
    return response.text or None


def arguments_json(call: ToolCall) -> str:
    """A call's arguments as the JSON string every API sends."""
    return json.dumps(call.arguments, ensure_ascii=False)


@dataclass
class AnswerSteps:
    """What one answer has put on the wire so far; :meth:`feed` says what to send next."""

    calls: list[ToolCall] = field(default_factory=list)
    prose: bool = False

    def feed(self, event: StreamEvent) -> list[Step]:
        """The steps one engine event becomes (often none: Hammer's call syntax is never content)."""
        if isinstance(event, TextDelta):
            if event.channel == "prose" and event.text:
                self.prose = True
                return [ProseStep(event.text)]
            return []
        if isinstance(event, ToolCallDelta):
            return [self._call(event.call)]
        sent = {c.id for c in self.calls}
        steps: list[Step] = [self._call(c) for c in event.tool_calls if c.id not in sent]
        steps.append(FinishStep(event, None if self.prose else content_of(event)))
        return steps

    def _call(self, call: ToolCall) -> CallStep:
        self.calls.append(call)
        return CallStep(len(self.calls) - 1, call)
