"""Ollama's answers: the engine's events as ``/api/chat`` (or ``/api/generate``) objects, one per NDJSON line.

Example:
    >>> from hammer_plugins import HammerResponse
    >>> writer = OllamaWriter("hammer")
    >>> lines = writer.feed(HammerResponse(kind="text", text="Hi"))
    >>> [(line["message"]["content"], line["done"]) for line in lines]
    [('Hi', False), ('', True)]
    >>> writer.whole["message"]["content"], writer.whole["done_reason"]
    ('Hi', 'stop')
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from hammer_plugins.http_api.errors import APIError
from hammer_plugins.output.encoder import StreamEncoder
from hammer_plugins.output.response import HammerResponse
from hammer_plugins.values.calls import ToolCall

NANOSECONDS = 1_000_000_000


def created_at() -> str:
    """Now as Ollama writes it: RFC 3339 in UTC with a ``Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def tool_call(call: ToolCall) -> dict[str, Any]:
    """One call as Ollama sends it: the name and the arguments as an object (clients give calls their ids)."""
    return {"function": {"name": call.name, "arguments": dict(call.arguments)}}


class OllamaWriter(StreamEncoder[dict[str, Any]]):
    """Turns the engine's events into Ollama's stream objects; :attr:`whole` is the non-streamed one.

    Prose streams as ``message.content`` pieces with ``done: false``; each call as a piece of its own whose
    ``message.tool_calls`` holds it whole (as Ollama streams calls); the last object has ``done: true``,
    ``done_reason`` (``stop`` or ``length``) and Ollama's counts and durations in nanoseconds
    (``prompt_eval_duration``: until the first token). ``generate=True`` writes ``/api/generate``'s
    ``response`` text instead of a ``message``.

    Example:
        >>> from hammer_plugins import HammerResponse, ToolCall
        >>> writer = OllamaWriter("hammer")
        >>> call = ToolCall(name="get_weather", arguments={"city": "Paris"})
        >>> lines = writer.feed(HammerResponse(kind="tool_calls", tool_calls=[call], finish_reason="tool_calls"))
        >>> lines[0]["message"]["tool_calls"], lines[-1]["done_reason"]
        ([{'function': {'name': 'get_weather', 'arguments': {'city': 'Paris'}}}], 'stop')
    """

    malformed_as_text = True  # no place for malformed calls in this API: what the model wrote is the text

    def __init__(self, model: str, *, generate: bool = False) -> None:
        super().__init__()
        self.model = model
        self.generate = generate
        self.started = time.perf_counter()
        self.text = ""
        self.calls: list[dict[str, Any]] = []
        self.whole: dict[str, Any] = {}

    def start(self) -> list[dict[str, Any]]:
        return []  # Ollama's stream opens with the first piece of the answer

    @staticmethod
    def heartbeat() -> list[dict[str, Any]]:
        return []  # every NDJSON line is a piece of the answer to its clients, and Ollama sends none while it evaluates

    def _piece(self, content: str, calls: list[dict[str, Any]] | None = None, *, done: bool = False) -> dict[str, Any]:
        piece: dict[str, Any] = {"model": self.model, "created_at": created_at()}
        if self.generate:
            piece["response"] = content
        else:
            piece["message"] = {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}
        piece["done"] = done
        return piece

    def on_prose(self, text: str) -> list[dict[str, Any]]:
        if not text:
            return []
        self.text += text
        return [self._piece(text)]

    def on_call(self, index: int, call: ToolCall) -> list[dict[str, Any]]:
        self.calls.append(tool_call(call))
        return [] if self.generate else [self._piece("", [self.calls[-1]])]

    def on_finish(self, response: HammerResponse, text: str) -> list[dict[str, Any]]:
        out = self.on_prose(text)
        total = time.perf_counter() - self.started
        first = response.timings.time_to_first_token or 0.0
        model_total = response.timings.total if response.timings.total is not None else total
        last = self._piece("", done=True)
        pending = response.pending_extension()  # an ask's held-back calls (on_missing="ask")
        if pending and not self.generate:
            last["message"].update(pending)
        last.update(done_reason="length" if response.finish_reason == "length" else "stop",
                    total_duration=int(total * NANOSECONDS), load_duration=0,
                    # Ollama counts the prompt tokens it evaluated: those its cache held are not counted.
                    prompt_eval_count=response.usage.evaluated_prompt_tokens,
                    prompt_eval_duration=int(first * NANOSECONDS), eval_count=response.usage.completion_tokens,
                    eval_duration=int(max(model_total - first, 0.0) * NANOSECONDS), **response.offered_extension())
        self.whole = {**last, **({"response": self.text} if self.generate else {"message": {
            "role": "assistant", "content": self.text, **({"tool_calls": self.calls} if self.calls else {}),
            **pending}})}
        return [*out, last]

    def loaded(self) -> dict[str, Any]:
        """Ollama's answer to a request with nothing to generate: the model is loaded (``done_reason: "load"``)."""
        self.whole = {**self._piece("", done=True), "done_reason": "load"}
        return self.whole

    @staticmethod
    def error(error: APIError) -> dict[str, Any]:
        return {"error": error.message}
