"""``HammerLLM``: Hammer function-calling models as a LlamaIndex ``FunctionCallingLLM``.

The class is an edge over :class:`hammer_plugins.HammerEngine`: LlamaIndex messages and tools go
in as the engine's, the engine's answers come back as ``ChatResponse`` objects whose messages hold
one ``ToolCallBlock`` per call. Prompt, grammar, masking, parsing and refusals are the engine's.

Example:
    >>> from llama_index.llms.hammer import HammerLLM
    >>> llm = HammerLLM(max_tokens=128)          # embedded default model, loaded on first use
    >>> llm.metadata.is_function_calling_model
    True
"""

from __future__ import annotations

import inspect
import json
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llama_index.core.base.llms.generic_utils import (
    achat_to_completion_decorator,
    astream_chat_to_completion_decorator,
    chat_to_completion_decorator,
    stream_chat_to_completion_decorator,
)
from llama_index.core.base.llms.types import (
    CachePoint,
    ChatMessage,
    ChatResponse,
    ChatResponseAsyncGen,
    ChatResponseGen,
    CompletionResponse,
    CompletionResponseAsyncGen,
    CompletionResponseGen,
    LLMMetadata,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
)
from llama_index.core.bridge.pydantic import Field, model_validator
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.llms.function_calling import FunctionCallingLLM
from llama_index.core.llms.llm import ToolSelection
from llama_index.core.llms.utils import parse_partial_json
from llama_index.core.types import PydanticProgramMode

from hammer_plugins import (
    HammerEngine,
    HammerResponse,
    InvalidModelFileError,
    InvalidToolCall,
    Message,
    ModelNotFoundError,
    ToolCall,
)
from hammer_plugins.engine.request import EngineRequest
from hammer_plugins.engine.settings import EngineSettings
from hammer_plugins.mcp.client import tool_result_text
from hammer_plugins.output.encoder import StreamEncoder
from hammer_plugins.slot_filling.filler import SlotFillingResponse
from hammer_plugins.slot_filling.snapshots import SLOT_FILLING_ACTION_KEY, SnapshotMessage, snapshot_of
from hammer_plugins.values.messages import to_message

if TYPE_CHECKING:
    from llama_index.core.program.utils import FlexibleModel
    from llama_index.core.prompts import PromptTemplate
    from llama_index.core.tools.types import BaseTool
    from llama_index.core.types import Model

_ROLES = {
    "system": "system", "developer": "system", "user": "user", "assistant": "assistant",
    "chatbot": "assistant", "model": "assistant", "tool": "tool", "function": "tool",
}
class HammerLLM(FunctionCallingLLM, EngineSettings):
    """A local Hammer model (llama.cpp or transformers) that calls LlamaIndex tools.

    Tool calls come back as ``ToolCallBlock`` s (and OpenAI-style ``additional_kwargs["tool_calls"]``),
    so ``FunctionAgent``, ``AgentWorkflow``, ``predict_and_call`` and ``structured_predict`` work.
    Hammer's ``[]`` ("no suitable tool") becomes a message without calls holding ``refusal_text``;
    ``raw`` is the engine's full answer (``raw["kind"]``, ``raw["usage"]``, ``raw["raw"]``).
    With ``on_missing="ask"`` a call whose required values nobody gave is held back: the message asks for them
    and keeps the call in ``additional_kwargs["hammer_pending_calls"]``, which the next turn completes.
    ``chat(..., record_passes=True)`` (or ``chat_with_tools``): the response's ``additional_kwargs["passes"]`` holds
    what the model read, pass by pass (prompt, offered tools, shown names, whether it ran).

    Every engine setting is a field (:class:`hammer_plugins.engine.settings.EngineSettings`, shared with
    LangChain's ``ChatHammer``: model, ``backend`` with the server options, Hammer behaviour, sampling,
    in-process backend options, ``model_kwargs``); per-call overrides go to ``chat(..., max_tokens=..., ...)``.
    Nothing loads in the constructor: the model loads on the first call (or :meth:`load`).

    Example:
        >>> from llama_index.core.tools import FunctionTool
        >>> def get_weather(city: str) -> str:
        ...     '''Get the current weather for a city.'''
        ...     return f"Sunny in {city}"
        >>> llm = HammerLLM(max_tokens=128)
        >>> response = llm.chat_with_tools([FunctionTool.from_defaults(get_weather)],
        ...                                user_msg="What's the weather in Paris?")  # doctest: +SKIP
        >>> llm.get_tool_calls_from_response(response)[0].tool_kwargs  # doctest: +SKIP
        {'city': 'Paris'}
    """

    # Every engine setting (model, backend and server, Hammer behaviour, sampling, in-process backend) is a field
    # inherited from hammer_plugins.engine.settings.EngineSettings: the same names and defaults as ChatHammer.
    parallel_tool_calls: bool = Field(
        default=True,
        description="Allow several calls in one answer; LlamaIndex's allow_parallel_tool_calls can only narrow it.")

    @model_validator(mode="before")
    @classmethod
    def _renamed_backend_kwargs(cls, values: Any) -> Any:
        # backend_kwargs was this adapter's name for what ChatHammer (and now both) call model_kwargs.
        if isinstance(values, dict) and "backend_kwargs" in values:
            warnings.warn("HammerLLM(backend_kwargs=...) is now model_kwargs=..., as in ChatHammer.",
                          DeprecationWarning, stacklevel=4)
            values = {**values, "model_kwargs": {**values.pop("backend_kwargs"), **values.get("model_kwargs", {})}}
        return values

    @classmethod
    def class_name(cls) -> str:
        return "HammerLLM"

    # ----------------------------------------------------------------- engine
    @property
    def engine(self) -> HammerEngine:
        """The engine behind this LLM (built from the fields, so a changed field takes effect; engines are
        shared per configuration and the loaded model per backend settings)."""
        return self.build_engine()

    # ----------------------------------------------------------------- tokens
    @property
    def tokenizer(self) -> Callable[[str], list[int]]:
        """The model's own tokenizer as LlamaIndex takes one (``text -> token ids``): set
        ``Settings.tokenizer = llm.tokenizer`` so token limits (memory, ``TokenCountingHandler``)
        count this model's tokens. Loads the model on first use; never downloads."""
        return self.engine.token_ids

    def get_num_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model's own tokenizer."""
        return self.engine.count_tokens(text)

    def get_num_tokens_from_messages(self, messages: Sequence[ChatMessage], tools: Sequence[Any] | None = None) -> int:
        """Tokens of the prompt Hammer is given for ``messages`` (and ``tools``): the exact rendered prompt."""
        converted = [to_engine_tool(t) for t in tools] if tools else None
        return self.engine.count_prompt_tokens(to_engine_messages(messages), converted)

    def load(self) -> HammerLLM:
        """Load the model now rather than on the first call; ``metadata`` then reads the real window."""
        self.engine.load()
        return self

    @property
    def metadata(self) -> LLMMetadata:
        """Function calling, chat, ``num_output=max_tokens``; the loaded model's window, ``n_ctx`` before."""
        # LlamaIndex reads metadata on every call, also inside the event loop: the backend is created
        # (the model resolved, not loaded; for the embedded default that may assemble its file from
        # the installed parts once) and asked for its window only once its model is loaded.
        window, name = self.n_ctx, Path(self.model_path).name if self.model_path else str(self.model or "hammer")
        try:
            backend = self.engine.backend
        except (ModelNotFoundError, InvalidModelFileError):  # a wrong path: the first call raises it, with the fix
            pass
        else:
            name = backend.model_name
            if backend.is_loaded:
                window = backend.context_window
        return LLMMetadata(context_window=window, num_output=self.max_tokens, is_chat_model=True,
                           is_function_calling_model=True, model_name=name)

    # ------------------------------------------------------------------- chat
    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._chat(messages, **kwargs)

    @llm_chat_callback()
    def stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseGen:
        return self._stream_chat(messages, **kwargs)

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return await self._achat(messages, **kwargs)

    @llm_chat_callback()
    async def astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        return self._astream_chat(messages, **kwargs)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return chat_to_completion_decorator(self._chat)(prompt, **kwargs)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
        return stream_chat_to_completion_decorator(self._stream_chat)(prompt, **kwargs)

    @llm_completion_callback()
    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return await achat_to_completion_decorator(self._achat)(prompt, **kwargs)

    @llm_completion_callback()
    async def astream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseAsyncGen:
        return await astream_chat_to_completion_decorator(self._astream_chat_awaitable)(prompt, **kwargs)

    def _chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        # Non-streaming is the stream's last answer, so the two can never disagree.
        last: ChatResponse | None = None
        for last in self._stream_chat(messages, **kwargs):  # noqa: B007
            pass
        assert last is not None
        return last

    async def _achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        last: ChatResponse | None = None
        async for last in self._astream_chat(messages, **kwargs):  # noqa: B007
            pass
        assert last is not None
        return last

    async def _astream_chat_awaitable(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponseAsyncGen:
        return self._astream_chat(messages, **kwargs)

    def _stream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> Iterator[ChatResponse]:
        writer = _ChatResponseWriter()
        for event in self.engine.stream(self._request(messages, kwargs)):
            yield from writer.feed(event)

    async def _astream_chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> AsyncIterator[ChatResponse]:
        writer = _ChatResponseWriter()
        async for event in self.engine.astream(self._request(messages, kwargs)):
            for response in writer.feed(event):
                yield response

    def _request(self, messages: Sequence[ChatMessage], kwargs: dict[str, Any]) -> EngineRequest:
        """The engine's request: the messages and tools converted, the ``parallel_tool_calls`` field as the default.

        Every other option is a field of the request as it is (an unknown one is a ``TypeError``); the end of an
        agent turn (``max_tool_rounds``, ``[]`` or repeats after tool results) is the engine's too.
        """
        options = dict(kwargs)
        options.setdefault("parallel_tool_calls", self.parallel_tool_calls)
        options["tools"] = [to_engine_tool(t) for t in options.get("tools") or []]
        return EngineRequest.of(to_engine_messages(messages), **options)

    # ------------------------------------------------------------- tool calling
    def _prepare_chat_with_tools(
        self,
        tools: Sequence[BaseTool],
        user_msg: str | ChatMessage | None = None,
        chat_history: list[ChatMessage] | None = None,
        verbose: bool = False,
        allow_parallel_tool_calls: bool = False,
        tool_required: bool = False,
        tool_choice: str | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Messages, tools and the engine's tool_choice; an explicit ``tool_choice`` beats ``tool_required``."""
        messages = list(chat_history or [])
        if isinstance(user_msg, str):
            user_msg = ChatMessage(role=MessageRole.USER, content=user_msg)
        if user_msg is not None:
            messages.append(user_msg)
        if tool_choice is None:
            tool_choice = "required" if tool_required else "auto"
        return {"messages": messages, "tools": list(tools), "tool_choice": tool_choice,
                "parallel_tool_calls": allow_parallel_tool_calls and self.parallel_tool_calls, **kwargs}

    def get_tool_calls_from_response(
        self,
        response: ChatResponse,
        error_on_no_tool_call: bool = True,
        **kwargs: Any,
    ) -> list[ToolSelection]:
        """The response's calls as ``ToolSelection`` s (id, tool name, arguments)."""
        selections = [
            ToolSelection(tool_id=block.tool_call_id or "", tool_name=block.tool_name,
                          tool_kwargs=_arguments(block.tool_kwargs))
            for block in response.message.blocks if isinstance(block, ToolCallBlock)
        ]
        if not selections:
            for raw in response.message.additional_kwargs.get("tool_calls") or []:
                item = raw.model_dump() if hasattr(raw, "model_dump") else dict(raw)
                function = item.get("function", item)
                selections.append(ToolSelection(tool_id=item.get("id") or "", tool_name=function.get("name", ""),
                                                tool_kwargs=_arguments(function.get("arguments", {}))))
        if not selections and error_on_no_tool_call:
            invalid = response.message.additional_kwargs.get("invalid_tool_calls") or []
            why = "; ".join(str(i.get("reason")) for i in invalid) or f"the model answered {response.message.content!r}"
            raise ValueError(f"Expected at least one tool call, but got 0 tool calls ({why}).")
        return selections

    # ------------------------------------------------------- structured output
    def _structured_stream_call(
        self,
        output_cls: type[Model],
        prompt: PromptTemplate,
        llm_kwargs: dict[str, Any] | None = None,
        **prompt_args: Any,
    ) -> Iterator[Model | list[Model] | FlexibleModel | list[FlexibleModel]]:
        # LlamaIndex's streaming program asks without tool_required; force the call as
        # structured_predict does, or a small model may stream [] instead of the object.
        if self.pydantic_program_mode != PydanticProgramMode.DEFAULT:
            return super()._structured_stream_call(output_cls, prompt, llm_kwargs, **prompt_args)
        return self._forced_program(output_cls, prompt).stream_call(llm_kwargs=llm_kwargs, **prompt_args)

    async def _structured_astream_call(
        self,
        output_cls: type[Model],
        prompt: PromptTemplate,
        llm_kwargs: dict[str, Any] | None = None,
        **prompt_args: Any,
    ) -> AsyncIterator[Model | list[Model] | FlexibleModel | list[FlexibleModel]]:
        if self.pydantic_program_mode != PydanticProgramMode.DEFAULT:
            return await super()._structured_astream_call(output_cls, prompt, llm_kwargs, **prompt_args)
        return await self._forced_program(output_cls, prompt).astream_call(llm_kwargs=llm_kwargs, **prompt_args)

    def _forced_program(self, output_cls: type[Model], prompt: PromptTemplate) -> Any:
        from llama_index.core.program.function_program import FunctionCallingProgram

        return FunctionCallingProgram.from_defaults(output_cls=output_cls, prompt=prompt, llm=self, tool_choice="required")


# ------------------------------------------------------------------ conversions
def to_engine_message(message: ChatMessage) -> Message:
    """A LlamaIndex ``ChatMessage`` as an engine :class:`~hammer_plugins.Message`.

    Text blocks become the content, ``ToolCallBlock`` s (or OpenAI-style ``additional_kwargs["tool_calls"]``)
    the calls, ``additional_kwargs["tool_call_id"]`` links a tool result to its call (an MCP tool's
    ``str(CallToolResult)`` becomes its text: :func:`hammer_plugins.mcp.client.tool_result_text`), and an assistant
    message carrying a slot-filling snapshot (``additional_kwargs["hammer_snapshot"]``) becomes a
    ``SnapshotMessage``.

    Example:
        >>> to_engine_message(ChatMessage(role="tool", content="sunny",
        ...                               additional_kwargs={"tool_call_id": "call_1"})).tool_call_id
        'call_1'
    """
    role = _ROLES.get(str(message.role.value))
    if role is None:
        raise ValueError(f"a message with role {message.role.value!r} cannot be sent to a Hammer model")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in message.blocks:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolCallBlock):
            calls.append({"id": block.tool_call_id, "function": {"name": block.tool_name, "arguments": block.tool_kwargs}})
        elif not isinstance(block, (ThinkingBlock, CachePoint)):
            raise ValueError(f"Hammer models read text only; a {type(block).__name__} in a {role} message cannot be "
                             "sent. Fix: pass its text in a TextBlock.")
    if not calls:
        calls = [raw.model_dump() if hasattr(raw, "model_dump") else dict(raw)
                 for raw in message.additional_kwargs.get("tool_calls") or []]
    content, is_error = "\n".join(texts), False
    # llama-index-tools-mcp's tools hand the agent str(CallToolResult) ("meta=None content=[TextContent(...)]"):
    # the model reads the result's text (or its structured content as JSON) instead.
    mcp_result = tool_result_text(content) if role == "tool" else None
    if mcp_result is not None:
        content, is_error = mcp_result
    converted = to_message({"role": role, "content": content, "tool_calls": calls, "is_error": is_error,
                            "tool_call_id": message.additional_kwargs.get("tool_call_id"),
                            "name": message.additional_kwargs.get("name"),
                            # an ask's held-back calls (hammer_pending_calls): the next turn completes them
                            "additional_kwargs": message.additional_kwargs})
    # A slot-filling turn's snapshot comes along, so the slot-filling state is rebuilt from the history alone.
    snapshot = snapshot_of(message.additional_kwargs) if role == "assistant" else None
    return SnapshotMessage(**converted.model_dump(), snapshot=snapshot) if snapshot is not None else converted


def to_engine_messages(messages: Sequence[ChatMessage]) -> list[Message]:
    """A LlamaIndex conversation as engine messages.

    LlamaIndex's tool messages carry only ``tool_call_id``; the engine links each result to the
    call it answers by that id (and names it after that call where it tells results in words).

    Example:
        >>> history = [ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="c1", tool_name="ping")]),
        ...            ChatMessage(role="tool", content="pong", additional_kwargs={"tool_call_id": "c1"})]
        >>> [(m.role, m.tool_call_id) for m in to_engine_messages(history)][1]
        ('tool', 'c1')
    """
    return [to_engine_message(m) for m in messages]


def to_engine_tool(tool: Any) -> Any:
    """A LlamaIndex ``BaseTool`` as the OpenAI tool dict the engine converts; anything else unchanged.

    ``FunctionTool.from_defaults`` starts its default description with the Python signature
    (``get_weather(city: str) -> str``); that line is dropped: the schema already carries it, Hammer
    was trained on prose descriptions, and it would show the real names under ``mask_names``.

    Example:
        >>> from llama_index.core.tools import FunctionTool
        >>> def ping(host: str) -> str:
        ...     '''Ping a host.'''
        ...     return "ok"
        >>> to_engine_tool(FunctionTool.from_defaults(ping))["function"]["description"]
        'Ping a host.'
    """
    to_openai = getattr(getattr(tool, "metadata", None), "to_openai_tool", None)
    if not callable(to_openai):
        return tool
    spec = to_openai(skip_length_check=True)
    function = spec["function"]
    first, _, rest = str(function.get("description") or "").partition("\n")
    if first.startswith(f"{function['name']}(") and (first.rstrip().endswith(")") or " -> " in first):
        function["description"] = inspect.cleandoc(rest)
    return spec


def _arguments(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = parse_partial_json(value) if value.strip() else {}
        except ValueError:
            return {}
    return dict(value) if isinstance(value, dict) else {}


def _assistant(text: str, calls: Sequence[ToolCall], invalid: Sequence[InvalidToolCall] = ()) -> ChatMessage:
    blocks: list[Any] = [TextBlock(text=text)]
    blocks += [ToolCallBlock(tool_call_id=c.id, tool_name=c.name, tool_kwargs=dict(c.arguments)) for c in calls]
    extra: dict[str, Any] = {}
    if calls:
        # LlamaIndex's streaming structured output reads this key (as OpenAI's integration fills it).
        extra["tool_calls"] = [{"id": c.id, "type": "function", "function": {
            "name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False, default=str)}} for c in calls]
    if invalid:
        extra["invalid_tool_calls"] = [i.model_dump() for i in invalid]
    return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks, additional_kwargs=extra)


class _ChatResponseWriter(StreamEncoder[ChatResponse]):
    """Engine events in, ``ChatResponse`` chunks out; each chunk carries every call so far.

    Prose (the engine's ``"prose"`` channel, already trimmed so it adds up to the final text) is
    content and streams in ``delta``; Hammer's call syntax (the ``"call"`` channel) is not: it stays
    out of ``delta``, visible in ``raw["delta"]``, and each call arrives as a ``ToolCallBlock``.
    What was already sent is the shared :class:`~hammer_plugins.output.encoder.StreamEncoder`'s state.
    """

    def on_prose(self, text: str) -> list[ChatResponse]:
        return [ChatResponse(message=_assistant(self.prose, self.sent_calls), delta=text)]

    def on_call_text(self, text: str) -> list[ChatResponse]:
        return [ChatResponse(message=_assistant(self.prose, self.sent_calls), delta="", raw={"delta": text})]

    def on_call(self, index: int, call: ToolCall) -> list[ChatResponse]:
        return [ChatResponse(message=_assistant(self.prose, self.sent_calls), delta="")]

    def on_finish(self, response: HammerResponse, text: str) -> list[ChatResponse]:
        """The final answer's chunk is the whole response; its delta is the text not streamed (a refusal text,
        prose around calls)."""
        usage = response.usage
        message = _assistant(response.text, response.tool_calls, response.invalid_tool_calls)
        # An ask (on_missing="ask") keeps its held-back calls where the next turn's history brings them back.
        message.additional_kwargs.update(response.pending_extension())
        if isinstance(response, SlotFillingResponse) and response.snapshot is not None:  # the state travels with it
            message.additional_kwargs.update({**response.snapshot.to_metadata(),
                                              SLOT_FILLING_ACTION_KEY: response.slot_filling_action})
        raw = response.model_dump(mode="json")
        return [ChatResponse(
            message=message,
            delta=text,
            raw=raw,
            additional_kwargs={"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                               "total_tokens": usage.total_tokens, "cached_prompt_tokens": usage.cached_prompt_tokens,
                               # which tools a large tool set was narrowed to (the engine's tool_budget)
                               **({"offered_tools": response.offered_tools} if response.offered_tools is not None
                                  else {}),
                               # asked for (record_passes=True): what the model read, pass by pass (raw["passes"] too)
                               **({"passes": raw["passes"]} if response.passes is not None else {})},
        )]
