"""The Responses API's answer: the engine's events as Responses stream events (:class:`ResponsesWriter`).

Example:
    >>> writer = ResponsesWriter(ResponsesMeta(model="hammer"))
    >>> [e["type"] for e in writer.start()]
    ['response.created', 'response.in_progress']
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from hammer_plugins.http_api.arguments import argument_fragments, arguments_json
from hammer_plugins.http_api.errors import APIError
from hammer_plugins.http_api.responses.request import ResponsesMeta
from hammer_plugins.http_api.responses.tool_search import TOOL_SEARCH
from hammer_plugins.output.encoder import StreamEncoder
from hammer_plugins.output.response import HammerResponse
from hammer_plugins.values.calls import ToolCall


def new_response_id() -> str:
    return f"resp_{uuid.uuid4().hex}"


class ResponsesWriter(StreamEncoder[dict[str, Any]]):
    """Turns the engine's events into Responses stream events; :attr:`response` is the answer so far.

    What was already sent is the :class:`~hammer_plugins.output.encoder.StreamEncoder`'s state; the hooks
    only frame it: prose opens a ``message`` item and streams ``output_text`` deltas, a call closes it
    and sends a ``function_call`` item, the finish sends what no event carried and ``response.completed``
    (``response.incomplete`` when ``max_output_tokens`` cut the answer).

    Example:
        >>> from hammer_plugins import HammerResponse, ToolCall
        >>> writer = ResponsesWriter(ResponsesMeta(model="hammer"))
        >>> call = ToolCall(name="f", arguments={"x": 1})
        >>> events = writer.start() + writer.feed(HammerResponse(kind="tool_calls", tool_calls=[call],
        ...                                                       finish_reason="tool_calls"))
        >>> [e["type"] for e in events][:3], events[-1]["type"], writer.response["output"][0]["call_id"] == call.id
        (['response.created', 'response.in_progress', 'response.output_item.added'], 'response.completed', True)
    """

    malformed_as_text = True  # no place for malformed calls in this API: what the model wrote is the text

    def __init__(self, meta: ResponsesMeta, response_id: str | None = None) -> None:
        super().__init__()
        self.meta = meta
        self.sequence = 0
        self.response: dict[str, Any] = {
            "id": response_id or new_response_id(), "object": "response", "created_at": int(time.time()),
            "status": "in_progress", "background": False, "error": None, "incomplete_details": None,
            "instructions": meta.instructions, "max_output_tokens": meta.max_output_tokens, "model": meta.model,
            "output": [], "parallel_tool_calls": meta.parallel_tool_calls, "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None}, "store": False, "temperature": meta.temperature,
            "text": meta.text, "tool_choice": meta.tool_choice, "tools": meta.tools, "top_p": meta.top_p,
            "truncation": "disabled", "usage": None, "metadata": meta.metadata or {},
        }
        self._message: dict[str, Any] | None = None  # the message item being streamed, if any

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        event = {"type": kind, "sequence_number": self.sequence, **fields}
        self.sequence += 1
        return event

    @property
    def whole(self) -> dict[str, Any]:
        """The ``response`` object so far (the non-streamed answer, once fed the final event)."""
        return self.response

    def _snapshot(self) -> dict[str, Any]:
        return json.loads(json.dumps(self.response))  # the state at this event, not a live view

    def start(self) -> list[dict[str, Any]]:
        return [self._event("response.created", response=self._snapshot()),
                self._event("response.in_progress", response=self._snapshot())]

    def heartbeat(self) -> list[dict[str, Any]]:
        """``response.in_progress`` again, on a stream quiet for a while: the API has no ping, and clients that time
        out between events (Codex: 300 s) read any event as a sign of life."""
        return [self._event("response.in_progress", response=self._snapshot())]

    def on_prose(self, text: str) -> list[dict[str, Any]]:
        return self._text(text) if text else []

    def on_call(self, index: int, call: ToolCall) -> list[dict[str, Any]]:
        return self._close_message() + self._call(call)

    def _text(self, delta: str) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if self._message is None:
            self._message = {"id": f"msg_{uuid.uuid4().hex}", "type": "message", "status": "in_progress",
                             "role": "assistant", "content": []}
            index = len(self.response["output"])
            self.response["output"].append(self._message)
            out.append(self._event("response.output_item.added", output_index=index,
                                   item={**self._message, "content": []}))
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            self._message["content"].append(part)
            out.append(self._event("response.content_part.added", item_id=self._message["id"], output_index=index,
                                   content_index=0, part=dict(part)))
        self._message["content"][0]["text"] += delta
        out.append(self._event("response.output_text.delta", item_id=self._message["id"],
                               output_index=self.response["output"].index(self._message), content_index=0,
                               delta=delta, logprobs=[]))
        return out

    def _close_message(self) -> list[dict[str, Any]]:
        message, self._message = self._message, None
        if message is None:
            return []
        index = self.response["output"].index(message)
        part = message["content"][0]
        message["status"] = "completed"
        return [self._event("response.output_text.done", item_id=message["id"], output_index=index, content_index=0,
                            text=part["text"], logprobs=[]),
                self._event("response.content_part.done", item_id=message["id"], output_index=index, content_index=0,
                            part=dict(part)),
                self._event("response.output_item.done", output_index=index, item=json.loads(json.dumps(message)))]

    def _call(self, call: ToolCall) -> list[dict[str, Any]]:
        if call.name == TOOL_SEARCH and self.meta.tool_search.execution == "client":
            # One search a response: the stand-in model repeats its search with more names (tool_search.py).
            searched = any(item["type"] == "tool_search_call" for item in self.response["output"])
            return [] if searched else self._search(call)
        namespace, name = self.meta.namespaces.get(call.name, (None, call.name))
        item: dict[str, Any] = {"id": f"fc_{uuid.uuid4().hex}", "type": "function_call", "status": "in_progress",
                                "call_id": call.id, "name": name, "arguments": ""}
        if namespace is not None:
            item["namespace"] = namespace
        index = len(self.response["output"])
        self.response["output"].append(item)
        out = [self._event("response.output_item.added", output_index=index, item=dict(item))]
        arguments = arguments_json(call)
        for piece in argument_fragments(arguments):
            out.append(self._event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                                   delta=piece))
        item.update(arguments=arguments, status="completed")
        out.append(self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                               name=name, arguments=arguments))
        out.append(self._event("response.output_item.done", output_index=index, item=dict(item)))
        return out

    def _search(self, call: ToolCall) -> list[dict[str, Any]]:
        """A client-executed tool search's call: a ``tool_search_call`` item (the API streams no deltas for it)."""
        item: dict[str, Any] = {"id": f"tsc_{uuid.uuid4().hex}", "type": "tool_search_call", "status": "in_progress",
                                "call_id": call.id, "execution": "client", "arguments": dict(call.arguments)}
        index = len(self.response["output"])
        self.response["output"].append(item)
        out = [self._event("response.output_item.added", output_index=index, item=dict(item))]
        item["status"] = "completed"
        return [*out, self._event("response.output_item.done", output_index=index, item=dict(item))]

    def on_finish(self, response: HammerResponse, text: str) -> list[dict[str, Any]]:
        out = self._text(text) if text else []
        pending = response.pending_extension()  # an ask's held-back calls (on_missing="ask")
        if self._message is not None:
            self._message.update(pending)  # on the message item too: a client sends it back as input
        out += self._close_message()
        usage = response.usage
        self.response.update(pending)
        self.response.update(response.offered_extension())  # the tools a selection offered
        self.response["usage"] = {"input_tokens": usage.prompt_tokens,
                                  "input_tokens_details": {"cached_tokens": usage.cached_prompt_tokens,
                                                           "cache_write_tokens": 0},
                                  "output_tokens": usage.completion_tokens,
                                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": usage.total_tokens}
        if response.finish_reason == "length":
            self.response.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
            return [*out, self._event("response.incomplete", response=self._snapshot())]
        self.response.update(status="completed", completed_at=int(time.time()))
        return [*out, self._event("response.completed", response=self._snapshot())]

    def error(self, error: APIError) -> dict[str, Any]:
        """The ``error`` event a stream ends with when the engine fails after the headers went out."""
        return self._event("error", code=error.code, message=error.message, param=error.param)
