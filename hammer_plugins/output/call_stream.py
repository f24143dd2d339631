"""A streamed Hammer answer as call events, for the vLLM tool parser: linear, and fail-closed.

vLLM hands its tool parser the whole answer so far on every token; this keeps the scanning state
between tokens (:class:`~hammer_plugins.output.call_scanner.CallScanner`), so a stream costs work linear in
its length. Only names the request offered become calls: a call to any other name (the model is
not held to the tools when vLLM decodes without Hammer's grammar) never sends its name, and its
JSON object goes out as content when it closes. Framework-free, so that it is tested without vLLM.

Example:
    >>> stream = CallStream(frozenset({"f"}))
    >>> [e.kind for e in stream.feed('[{"name": "f", "arg')]
    ['name']
    >>> [(e.kind, e.text) for e in stream.feed('uments": {"x": 1}}, {"name": "rm", "arguments": {}}]')]
    [('arguments', '{"x": 1}'), ('content', '{"name": "rm", "arguments": {}}')]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from hammer_plugins.output.call_scanner import CallScanner
from hammer_plugins.output.parsing import items_to_calls
from hammer_plugins.values.calls import ToolCall

EventKind = Literal["name", "arguments", "content", "refusal"]


@dataclass(frozen=True)
class CallEvent:
    """One thing to send: a call's ``name`` (``index`` and ``text`` = the name) or its ``arguments``
    (JSON text), ``content`` text, or Hammer's ``refusal`` (``[]``: no suitable tool)."""

    kind: EventKind
    text: str = ""
    index: int = -1


def arguments_text(call: ToolCall) -> str:
    """A call's arguments as sent: one spelling for streamed and whole answers (vLLM's own parsers
    use the same ``json.dumps``)."""
    return json.dumps(call.arguments, ensure_ascii=False)


def offered_calls(calls: Iterable[ToolCall], allowed: frozenset[str]) -> tuple[list[ToolCall], list[ToolCall]]:
    """``(calls to an offered name, the others)``."""
    kept: list[ToolCall] = []
    dropped: list[ToolCall] = []
    for call in calls:
        (kept if call.name in allowed else dropped).append(call)
    return kept, dropped


class CallStream:
    """Feed the answer piece by piece; get the events to send. ``allowed``: the names a call may have
    (the request's tools, or only the named ``tool_choice``). ``prose``: the answer is known to be
    prose (the answer after tool results), sent as content as it comes."""

    def __init__(self, allowed: frozenset[str], prose: bool = False) -> None:
        self.allowed = allowed
        self._mode: str | None = "text" if prose else None  # "calls" or "text", from the first character
        self._scanner = CallScanner()
        self._calls = 0  # indices given to calls (each named call takes one)
        self._sent_name: str | None = None  # the name sent early for the call object still open
        self._refused = False
        self._pending: list[str] = []  # leading whitespace, until the first character decides the mode
        self.dropped: list[str] = []  # names of calls not offered, in order

    @property
    def scanned(self) -> int:
        """Characters the call scanner looked at (the work done)."""
        return self._scanner.scanned

    def feed(self, delta: str) -> list[CallEvent]:
        """Events for the next piece of the answer."""
        if self._mode is None:
            if not delta.strip():
                self._pending.append(delta)
                return []
            delta = "".join([*self._pending, delta])
            self._pending.clear()
            self._mode = "calls" if delta.lstrip()[0] in "[{`" else "text"
        if self._mode == "text":
            return [CallEvent("content", delta)] if delta else []
        return self._calls_events(delta)

    def _calls_events(self, delta: str) -> list[CallEvent]:
        events: list[CallEvent] = []
        for text, item in self._scanner.feed_objects(delta):
            events.extend(self._closed(text, item))
        name = self._scanner.open_name
        if name is not None and self._sent_name is None and name.strip() in self.allowed:
            # The call being written: its id and name go out as soon as the name is complete.
            self._sent_name = name.strip()
            events.append(CallEvent("name", self._sent_name, self._calls))
        if not events and not self._refused and self._calls == 0 and self._scanner.closed_empty:
            self._refused = True
            events.append(CallEvent("refusal"))
        return events

    def _closed(self, text: str, item: object) -> Sequence[CallEvent]:
        sent, self._sent_name = self._sent_name, None
        calls = items_to_calls([item], text)[0] if isinstance(item, dict) else []
        call = calls[0] if calls else None
        if sent is not None:
            index = self._calls
            self._calls += 1
            if call is not None and call.name == sent:
                return [CallEvent("arguments", arguments_text(call), index)]
            # The object closed as something else than the call its name promised (a second "name"
            # key, broken JSON): that call gets no arguments, and the text is content.
            self.dropped.append(call.name if call is not None else sent)
            return [CallEvent("content", text)]
        if call is None:
            return []  # not a call (no name): nothing to stream
        if call.name not in self.allowed:
            self.dropped.append(call.name)
            return [CallEvent("content", text)]
        index = self._calls
        self._calls += 1
        return [CallEvent("name", call.name, index), CallEvent("arguments", arguments_text(call), index)]
