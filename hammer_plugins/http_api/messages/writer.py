"""The Messages API's answer: the engine's events as Anthropic stream events (:class:`MessagesWriter`).

Example:
    >>> [e["type"] for e in MessagesWriter("hammer").start()]
    ['message_start']
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from hammer_plugins.http_api.arguments import argument_fragments, arguments_json
from hammer_plugins.http_api.errors import APIError
from hammer_plugins.output.encoder import StreamEncoder
from hammer_plugins.output.response import HammerResponse
from hammer_plugins.values.calls import ToolCall

ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                         503: "overloaded_error", 504: "timeout_error"}
"""Anthropic's error ``type`` for each status (``api_error`` for a 5xx it has no name for)."""


def anthropic_error_body(error: APIError) -> dict[str, Any]:
    """``error`` in Anthropic's shape (``{"type": "error", "error": {"type", "message"}}``); a context overflow in
    Anthropic's own words, which its clients read (Claude Code compacts on them).

    Example:
        >>> anthropic_error_body(APIError(401, "Missing API key."))
        {'type': 'error', 'error': {'type': 'authentication_error', 'message': 'Missing API key.'}}
    """
    kind = ANTHROPIC_ERROR_TYPES.get(error.status, "invalid_request_error" if error.status < 500 else "api_error")
    message = error.message
    if error.code == "context_length_exceeded" and "prompt_tokens" in error.details:
        message = f"prompt is too long: {error.details['prompt_tokens']} tokens > {error.details['context_window']} maximum"
    return {"type": "error", "error": {"type": kind, "message": message}}


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex[:24]}"


def _stop_reason(response: HammerResponse) -> str:
    if response.finish_reason == "length":
        return "max_tokens"
    return "tool_use" if response.tool_calls else "end_turn"


class MessagesWriter(StreamEncoder[dict[str, Any]]):
    """Turns the engine's events into Anthropic stream events; :attr:`message` is the answer so far.

    What was already sent is the :class:`~hammer_plugins.output.encoder.StreamEncoder`'s state; the hooks
    frame it as content blocks: prose as a ``text`` block of ``text_delta`` s, each call as a
    ``tool_use`` block whose input streams as ``input_json_delta`` pieces, then ``message_delta`` with
    the ``stop_reason`` and usage, and ``message_stop``.

    Example:
        >>> from hammer_plugins import HammerResponse, ToolCall
        >>> writer = MessagesWriter("hammer")
        >>> call = ToolCall(name="f", arguments={"x": 1})
        >>> events = writer.start() + writer.feed(HammerResponse(kind="tool_calls", tool_calls=[call],
        ...                                                       finish_reason="tool_calls"))
        >>> [e["type"] for e in events]  # doctest: +NORMALIZE_WHITESPACE
        ['message_start', 'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop',
         'message_delta', 'message_stop']
        >>> writer.message["stop_reason"], writer.message["content"][0]["input"]
        ('tool_use', {'x': 1})
    """

    malformed_as_text = True  # no place for malformed calls in this API: what the model wrote is the text

    def __init__(self, model: str, message_id: str | None = None) -> None:
        super().__init__()
        self.message: dict[str, Any] = {"id": message_id or new_message_id(), "type": "message", "role": "assistant",
                                        "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
                                        "usage": {"input_tokens": 0, "output_tokens": 0}}
        self._text_open = False

    @property
    def whole(self) -> dict[str, Any]:
        """The ``message`` object so far (the non-streamed answer, once fed the final event)."""
        return self.message

    def start(self) -> list[dict[str, Any]]:
        return [{"type": "message_start", "message": json.loads(json.dumps(self.message))}]

    @staticmethod
    def heartbeat() -> list[dict[str, Any]]:
        """Anthropic's own ``ping`` event, on a stream quiet for a while (its clients skip it)."""
        return [{"type": "ping"}]

    def on_prose(self, text: str) -> list[dict[str, Any]]:
        return self._text(text) if text else []

    def on_call(self, index: int, call: ToolCall) -> list[dict[str, Any]]:
        return self._close_text() + self._call(call)

    def _text(self, delta: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if not self._text_open:
            self._text_open = True
            self.message["content"].append({"type": "text", "text": ""})
            out.append({"type": "content_block_start", "index": len(self.message["content"]) - 1,
                        "content_block": {"type": "text", "text": ""}})
        self.message["content"][-1]["text"] += delta
        out.append({"type": "content_block_delta", "index": len(self.message["content"]) - 1,
                    "delta": {"type": "text_delta", "text": delta}})
        return out

    def _close_text(self) -> list[dict[str, Any]]:
        if not self._text_open:
            return []
        self._text_open = False
        return [{"type": "content_block_stop", "index": len(self.message["content"]) - 1}]

    def _call(self, call: ToolCall) -> list[dict[str, Any]]:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}
        self.message["content"].append(block)
        index = len(self.message["content"]) - 1
        out = [{"type": "content_block_start", "index": index,
                "content_block": {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}}]
        out += [{"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": p}}
                for p in argument_fragments(arguments_json(call))]
        out.append({"type": "content_block_stop", "index": index})
        return out

    def on_finish(self, response: HammerResponse, text: str) -> list[dict[str, Any]]:
        out = (self._text(text) if text else []) + self._close_text()
        stop = _stop_reason(response)
        # Anthropic's input_tokens are those no cache served: cache_read_input_tokens + input_tokens is the prompt.
        usage = {"input_tokens": response.usage.evaluated_prompt_tokens,
                 "cache_read_input_tokens": response.usage.cached_prompt_tokens,
                 "output_tokens": response.usage.completion_tokens}
        # An ask's held-back calls (on_missing="ask") and the tools a selection offered.
        extension = {**response.pending_extension(), **response.offered_extension()}
        self.message.update(stop_reason=stop, usage=usage, **extension)
        return [*out, {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage,
                       **extension},
                {"type": "message_stop"}]

    @staticmethod
    def error(error: APIError) -> dict[str, Any]:
        return anthropic_error_body(error)
