"""What a door has already sent of one answer: the one piece every wire encoder shares.

The engine streams :class:`~hammer_plugins.output.events.TextDelta` (``"prose"``: content as it is
generated; ``"call"``: Hammer's call syntax, never content), :class:`~hammer_plugins.output.events.ToolCallDelta`
(a call complete before the answer ends) and the final :class:`~hammer_plugins.HammerResponse`. Each
wire format (LangChain chunks, LlamaIndex responses, OpenAI Chat Completions chunks, and the next
ones) needs the same bookkeeping on top: which calls went out already (the final answer repeats
them, and adds the ones no scanner saw complete) and how much prose streamed (the final text
repeats it). :class:`StreamEncoder` keeps that state, dispatches the events and ends every stream
the same way: the calls no event carried are sent (through the format's ``on_call``), then
``on_finish`` gets the answer and the text still to show. A format writes only its hooks.

Example:
    >>> from hammer_plugins import HammerResponse, TextDelta, ToolCall, ToolCallDelta
    >>> class Names(StreamEncoder[str]):
    ...     def on_prose(self, text): return [f"text {text}"]
    ...     def on_call(self, index, call): return [f"call {index} {call.name}"]
    ...     def on_finish(self, response, text): return [f"end {text!r}"]
    >>> a, b = ToolCall(name="a", arguments={}), ToolCall(name="b", arguments={})
    >>> encoder = Names()
    >>> encoder.feed(ToolCallDelta(0, a)) + encoder.feed(HammerResponse(kind="tool_calls", tool_calls=[a, b]))
    ['call 0 a', 'call 1 b', "end ''"]
"""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar

from hammer_plugins.output.events import StreamEvent, TextDelta, ToolCallDelta
from hammer_plugins.output.response import HammerResponse
from hammer_plugins.values.calls import ToolCall

Out = TypeVar("Out")


def shown_text(response: HammerResponse, *, malformed_as_text: bool = False) -> str:
    """What a person is shown of ``response``: its text; with ``malformed_as_text``, for malformed calls what
    the model wrote (a format with no place of its own for invalid calls shows them so).

    Example:
        >>> from hammer_plugins import HammerResponse
        >>> bad = HammerResponse(kind="invalid", raw='[{"name": "f"')
        >>> shown_text(bad), shown_text(bad, malformed_as_text=True)
        ('', '[{"name": "f"')
    """
    if malformed_as_text and response.kind == "invalid":
        return response.text or response.raw
    return response.text


class StreamEncoder(Generic[Out]):
    """The base of a wire encoder: feed it the engine's events, get the format's pieces back.

    ``sent_calls`` are the calls sent so far, in the order sent (a call's index in it is its index
    on the wire); ``prose`` is the prose streamed so far. Subclasses implement :meth:`on_prose`,
    :meth:`on_call` and :meth:`on_finish`, and :meth:`on_call_text` where the format shows Hammer's
    call syntax somewhere (default: nothing). The end of the stream is the base's: it sends the calls
    no event carried, then calls :meth:`on_finish` with what is left of the text to show.
    """

    malformed_as_text: ClassVar[bool] = False
    """True for a format with no place for malformed calls (the OpenAI and Anthropic APIs): their raw text
    is shown as text (:func:`shown_text`)."""

    def __init__(self) -> None:
        self.sent_calls: list[ToolCall] = []
        self.prose = ""

    def feed(self, event: StreamEvent) -> list[Out]:
        """The pieces one engine event becomes (often none: Hammer's call syntax is not content)."""
        if isinstance(event, TextDelta):
            if event.channel == "prose":
                self.prose += event.text
                return self.on_prose(event.text)
            return self.on_call_text(event.text)
        if isinstance(event, ToolCallDelta):
            return self._send(event.call)
        return self._end(event)

    def _send(self, call: ToolCall) -> list[Out]:
        self.sent_calls.append(call)
        return self.on_call(len(self.sent_calls) - 1, call)

    def _end(self, response: HammerResponse) -> list[Out]:
        out: list[Out] = []
        for _, call in self.unsent_calls(response):  # calls no scanner saw complete (e.g. unconstrained)
            out += self._send(call)
        return out + self.on_finish(response, self.unsent_text(self.shown_text(response)))

    # ---------------------------------------------------------------- the state
    def shown_text(self, response: HammerResponse) -> str:
        """What a person is shown of the answer in this format (:func:`shown_text`)."""
        return shown_text(response, malformed_as_text=self.malformed_as_text)

    def unsent_calls(self, response: HammerResponse) -> list[tuple[int, ToolCall]]:
        """The answer's calls not sent yet (the scanner did not see them complete, e.g. unconstrained),
        each with its index in ``response.tool_calls``."""
        sent = {c.id for c in self.sent_calls}
        return [(index, call) for index, call in enumerate(response.tool_calls) if call.id not in sent]

    def unsent_text(self, text: str) -> str:
        """What of the final ``text`` has not streamed: all of a refusal text or call-side prose, nothing
        after streamed prose (the engine trims prose deltas so they add up to the final text)."""
        return text.removeprefix(self.prose)

    # ---------------------------------------------------------------- the format's hooks
    def on_prose(self, text: str) -> list[Out]:
        raise NotImplementedError

    def on_call_text(self, text: str) -> list[Out]:
        return []

    def on_call(self, index: int, call: ToolCall) -> list[Out]:
        raise NotImplementedError

    def on_finish(self, response: HammerResponse, text: str) -> list[Out]:
        """The last pieces: ``text`` is what is left to show of the answer (all of a refusal text, nothing
        after streamed prose); every call was sent already. Then refusal, usage and finish reason."""
        raise NotImplementedError
