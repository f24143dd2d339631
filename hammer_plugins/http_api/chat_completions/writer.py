"""The OpenAI Chat Completions wire format, written from the engine's one event stream.

:func:`completion` builds the non-streaming ``chat.completion`` and :class:`ChunkWriter` the
streamed ``chat.completion.chunk`` s, both from the ``openai`` package's own pydantic types, so what
goes on the wire is what the SDK parses. The request side is
:mod:`hammer_plugins.http_api.chat_completions.request`.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessage
from openai.types.chat.chat_completion import Choice
from openai.types.chat.chat_completion_chunk import Choice as ChunkChoice
from openai.types.chat.chat_completion_chunk import ChoiceDelta, ChoiceDeltaToolCall, ChoiceDeltaToolCallFunction
from openai.types.chat.chat_completion_message_function_tool_call import (
    ChatCompletionMessageFunctionToolCall,
    Function,
)
from openai.types.completion_usage import CompletionUsage, PromptTokensDetails

from hammer_plugins.http_api.arguments import argument_fragments, arguments_json
from hammer_plugins.output.encoder import StreamEncoder, shown_text
from hammer_plugins.output.response import HammerResponse
from hammer_plugins.values.calls import ToolCall


# ------------------------------------------------------------------ responses
def new_completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex[:24]}"




def usage_of(response: HammerResponse) -> CompletionUsage:
    """The answer's usage; ``prompt_tokens_details.cached_tokens`` (OpenAI's field): the prompt tokens the
    backend's cache served (``usage.cached_prompt_tokens``, on every backend)."""
    details = PromptTokensDetails(cached_tokens=response.usage.cached_prompt_tokens)
    return CompletionUsage(prompt_tokens=response.usage.prompt_tokens,
                           completion_tokens=response.usage.completion_tokens,
                           total_tokens=response.usage.total_tokens, prompt_tokens_details=details)


def _finish_reason(response: HammerResponse) -> str:
    if response.tool_calls:
        return "tool_calls" if response.finish_reason in ("stop", "tool_calls") else response.finish_reason
    return "length" if response.finish_reason == "length" else "stop"


def _invalid(response: HammerResponse) -> list[dict[str, Any]]:
    return [{"id": c.id, "name": c.name, "arguments": c.arguments, "reason": c.reason}
            for c in response.invalid_tool_calls]


def completion(response: HammerResponse, model: str, refusal_text: str, completion_id: str | None = None,
               created: int | None = None) -> ChatCompletion:
    """The ``chat.completion`` object for one engine answer.

    A refusal (Hammer's ``[]``) has ``content`` = the refusal text (or the answer of
    ``on_refusal="answer"``), ``refusal`` = the refusal text and ``finish_reason="stop"``. Calls the
    model made that cannot be executed are listed in the extra field ``message.invalid_tool_calls``; the calls an
    ask held back (``on_missing="ask"``) in ``message.hammer_pending_calls``; the tools a selection offered in
    ``hammer_offered_tools``.

    Example:
        >>> from hammer_plugins import HammerResponse, ToolCall
        >>> r = HammerResponse(kind="tool_calls", tool_calls=[ToolCall(name="f", arguments={"x": 1})],
        ...                    finish_reason="tool_calls")
        >>> c = completion(r, "hammer", "Sorry.")
        >>> c.choices[0].finish_reason, c.choices[0].message.tool_calls[0].function.arguments
        ('tool_calls', '{"x": 1}')
    """
    calls = [ChatCompletionMessageFunctionToolCall(id=c.id, type="function",
                                                   function=Function(name=c.name, arguments=arguments_json(c)))
             for c in response.tool_calls]
    extra: dict[str, Any] = dict(response.pending_extension())  # an ask's held-back calls (on_missing="ask")
    if response.invalid_tool_calls:
        extra["invalid_tool_calls"] = _invalid(response)
    content = shown_text(response, malformed_as_text=True) or None  # malformed calls: what the model wrote
    message = ChatCompletionMessage(role="assistant", content=content, tool_calls=calls or None,
                                    refusal=refusal_text if response.kind == "refusal" else None, **extra)
    return ChatCompletion(id=completion_id or new_completion_id(), object="chat.completion",
                          created=created or int(time.time()), model=model,
                          choices=[Choice(index=0, message=message, finish_reason=_finish_reason(response),  # type: ignore[arg-type]
                                          logprobs=None)],
                          usage=usage_of(response), **response.offered_extension())




class ChunkWriter(StreamEncoder[ChatCompletionChunk]):
    """Turns the engine's stream events into ``chat.completion.chunk`` objects.

    Each call's first delta carries ``index``, ``id``, ``type`` and ``function.name`` (with empty
    arguments); its arguments follow as fragments under the same index. Hammer's call syntax itself
    is never sent as content; prose (``tool_choice="none"``, the answer of ``on_refusal="answer"``,
    JSON of a ``response_format``) streams as it is generated. What was already sent is the
    :class:`~hammer_plugins.output.encoder.StreamEncoder`'s state.

    Example:
        >>> from hammer_plugins import HammerResponse, ToolCall, ToolCallDelta
        >>> writer = ChunkWriter("hammer", "Sorry.", include_usage=True)
        >>> call = ToolCall(name="f", arguments={"x": 1})
        >>> chunks = writer.start() + writer.feed(ToolCallDelta(0, call))
        >>> chunks += writer.feed(HammerResponse(kind="tool_calls", tool_calls=[call], finish_reason="tool_calls"))
        >>> [c.choices[0].finish_reason if c.choices else "usage" for c in chunks]
        [None, None, None, None, 'tool_calls', 'usage']
    """

    malformed_as_text = True  # no place for malformed calls in this API: what the model wrote is the text

    def __init__(self, model: str, refusal_text: str, include_usage: bool = False, completion_id: str | None = None,
                 created: int | None = None) -> None:
        super().__init__()
        self.model = model
        self.refusal_text = refusal_text
        self.include_usage = include_usage
        self.id = completion_id or new_completion_id()
        self.created = created or int(time.time())

    def _chunk(self, delta: ChoiceDelta | None, finish: str | None = None,
               usage: CompletionUsage | None = None, **extension: Any) -> ChatCompletionChunk:
        choices = [] if delta is None else [ChunkChoice(index=0, delta=delta, finish_reason=finish)]  # type: ignore[arg-type]
        extra: dict[str, Any] = {"usage": usage} if self.include_usage else {}  # as OpenAI: null until the last chunk
        extra.update(extension)
        return ChatCompletionChunk(id=self.id, object="chat.completion.chunk", created=self.created, model=self.model,
                                   choices=choices, **extra)

    def start(self) -> list[ChatCompletionChunk]:
        return [self._chunk(ChoiceDelta(role="assistant", content=""))]

    def on_prose(self, text: str) -> list[ChatCompletionChunk]:
        return [self._chunk(ChoiceDelta(content=text))] if text else []

    def on_call(self, index: int, call: ToolCall) -> list[ChatCompletionChunk]:
        first = ChoiceDeltaToolCall(index=index, id=call.id, type="function",
                                    function=ChoiceDeltaToolCallFunction(name=call.name, arguments=""))
        chunks = [self._chunk(ChoiceDelta(tool_calls=[first]))]
        for piece in argument_fragments(arguments_json(call)):
            fragment = ChoiceDeltaToolCall(index=index, function=ChoiceDeltaToolCallFunction(arguments=piece))
            chunks.append(self._chunk(ChoiceDelta(tool_calls=[fragment])))
        return chunks

    def on_finish(self, response: HammerResponse, text: str) -> list[ChatCompletionChunk]:
        chunks: list[ChatCompletionChunk] = []
        refusal = self.refusal_text if response.kind == "refusal" else None
        extra: dict[str, Any] = {"invalid_tool_calls": _invalid(response)} if response.invalid_tool_calls else {}
        extra.update(response.pending_extension())  # an ask's held-back calls (on_missing="ask")
        if text or refusal or extra:
            chunks.append(self._chunk(ChoiceDelta(content=text or None, refusal=refusal, **extra)))
        # The tools a selection offered, on the chunk that finishes the choice (as the whole answer has them).
        chunks.append(self._chunk(ChoiceDelta(), finish=_finish_reason(response), **response.offered_extension()))
        if self.include_usage:
            chunks.append(self._chunk(None, usage=usage_of(response)))
        return chunks


def sse(chunk: ChatCompletionChunk) -> bytes:
    """One server-sent event in OpenAI's framing (``data: {...}`` and a blank line)."""
    return b"data: " + chunk.model_dump_json(exclude_unset=True).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
