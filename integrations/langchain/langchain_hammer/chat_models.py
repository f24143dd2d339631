"""``ChatHammer``: Hammer function-calling models as a LangChain chat model.

The adapter is thin on purpose: it turns LangChain messages and tools into engine objects, calls
:class:`hammer_plugins.HammerEngine` (prompt, grammar, masking, parsing, refusals, async) and turns
the engine's :class:`~hammer_plugins.HammerResponse` back into an ``AIMessage``.

Example:
    >>> from langchain_hammer import ChatHammer
    >>> llm = ChatHammer(max_tokens=128)          # embedded default model, loaded on first call
    >>> llm._llm_type
    'hammer-chat'
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any, Literal, cast

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.chat_models import BaseChatModel, LangSmithParams
from langchain_core.language_models.model_profile import ModelProfile
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.ai import InputTokenDetails, UsageMetadata
from langchain_core.messages.tool import invalid_tool_call, tool_call, tool_call_chunk
from langchain_core.output_parsers import (
    JsonOutputKeyToolsParser,
    JsonOutputParser,
    PydanticOutputParser,
    PydanticToolsParser,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableMap, RunnablePassthrough
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_json_schema, convert_to_openai_tool
from langchain_core.utils.pydantic import is_basemodel_subclass
from pydantic import ConfigDict, model_validator

from hammer_plugins import (
    GenerationSettings,
    HammerEngine,
    HammerError,
    HammerResponse,
    Message,
    ToolCall,
    UnknownToolError,
    normalize_tool_choice,
    to_tool,
)
from hammer_plugins.engine.request import EngineRequest
from hammer_plugins.engine.settings import SERVER_OPTIONS, EngineSettings
from hammer_plugins.engine.slots import filler_for
from hammer_plugins.mcp.client import tool_result_text
from hammer_plugins.output.encoder import StreamEncoder
from hammer_plugins.slot_filling.filler import SlotFillingResponse
from hammer_plugins.slot_filling.snapshots import SLOT_FILLING_ACTION_KEY, SnapshotMessage, snapshot_of
from hammer_plugins.values.calls import new_call_id, pending_calls_of

# LangChain passes these through the call kwargs for its own bookkeeping; every other per-call
# argument goes to the engine, which raises TypeError for one it does not know.
_IGNORED_KEYS = frozenset({"stream", "ls_structured_output_format", "model"})
# The engine's sampling defaults, so a field left unset never overrides them with a copy.
_DEFAULTS = GenerationSettings()
# Multimodal content: Hammer models read text only.
_MEDIA_BLOCKS = frozenset({"image", "image_url", "audio", "input_audio", "video", "file", "document"})
# Content blocks an earlier AI turn may carry that the tool_calls field already says (or that no
# model but the one that wrote them can use).
_SKIPPED_BLOCKS = frozenset({"tool_use", "tool_call", "tool_call_chunk", "function_call", "thinking",
                             "reasoning", "redacted_thinking", "server_tool_call", "server_tool_result",
                             "invalid_tool_call"})


class ChatHammer(BaseChatModel, EngineSettings):
    """A Hammer function-calling model (local, offline) as a LangChain chat model.

    Nothing is loaded when you construct it: the model loads on the first call, and every
    ``ChatHammer`` with the same model settings shares one loaded model in the process.

    Model:
        model_path: a ``.gguf`` file (llama.cpp) or a checkpoint directory (transformers).
        model: a Hugging Face id or local directory (``backend="transformers"``), or a ``.gguf`` path.
            With neither, the embedded default model is used (a stand-in base model, not a Hammer
            fine-tune; see docs/langchain.md).
        backend: ``"llama_cpp"`` (default), ``"transformers"``, ``"server"`` (with ``base_url``,
            ``api_key``, ``timeout``, ``max_retries``; docs/server.md), or a ``hammer_plugins.Backend``.

    Hammer behaviour:
        prompt_format: ``"hammer2.1"``, ``"hammer2.0"`` or ``"hammer1.0"``; ``None`` (default): the named
            model's own (a Hammer 2.0 or 1.0 preset has its own), else ``"hammer2.1"``.
        constrained: grammar-constrained decoding of the call list (default on).
        mask_names: show the model opaque function/parameter names; calls come back with real names.
        on_refusal: what Hammer's ``[]`` becomes: ``"message"`` (an AIMessage with ``refusal_text``,
            marked ``response_metadata["refusal"] = True``), ``"answer"`` (a second pass without tools
            answers in plain language), or ``"raise"`` (``hammer_plugins.RefusalError``).
        on_missing: a call whose required values nobody gave: ``"ask"`` (an AIMessage without calls asking for
            them; the held-back calls in ``response_metadata["hammer_pending_calls"]`` and ``additional_kwargs``,
            completed by the next turn), ``"call"`` (as the model wrote it) or ``"error"``
            (``MissingArgumentsError``). See docs/slot_filling.md.
        max_tool_rounds: rounds of tool calls per user turn (default 1) after which the model answers
            from the tool results without being offered the tools again (``None``: no cap). The
            engine ends an agent turn: after tool results, ``[]`` or a repeat of an answered call
            becomes a plain-language answer (see docs/langchain.md, "The end of an agent's turn").

    Sampling: max_tokens, temperature (0 = greedy), top_p, top_k, repeat_penalty, seed, stop, loop_guard
    (close a string argument the model repeats itself in; on by default).
    In-process backends: n_ctx, n_threads, n_gpu_layers (llama.cpp); device, dtype (transformers);
    model_kwargs (anything else for the backend). Every one of these is an
    :class:`hammer_plugins.engine.settings.EngineSettings` field, shared with LlamaIndex's ``HammerLLM``.

    Example:
        >>> from langchain_hammer import ChatHammer
        >>> def get_weather(city: str) -> str:
        ...     '''Get the current weather for a city.'''
        ...     return "sunny"
        >>> llm = ChatHammer(n_ctx=4096, max_tokens=128).bind_tools([get_weather])
        >>> # llm.invoke("Weather in Paris?").tool_calls
        >>> # -> [{'name': 'get_weather', 'args': {'city': 'Paris'}, 'id': 'call_...', 'type': 'tool_call'}]
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, protected_namespaces=())

    # Every engine setting (model, backend and server, Hammer behaviour, sampling, in-process backend) is a field
    # inherited from hammer_plugins.engine.settings.EngineSettings: the same names and defaults as HammerLLM.
    stop: list[str] | None = None
    """Stop sequences (a per-call ``stop`` replaces these)."""
    streaming: bool = False
    """Route ``invoke`` through streaming (so streaming callbacks see tokens)."""

    @model_validator(mode="before")
    @classmethod
    def _drop_remote_only_params(cls, values: Any) -> Any:
        # Generic LangChain code passes api_key/timeout/max_retries to any chat model; they mean
        # nothing for a local model, so say so instead of failing or silently absorbing typos.
        if isinstance(values, dict):
            known = set(cls.model_fields) | {f.alias for f in cls.model_fields.values() if f.alias}
            unknown = sorted(k for k in values if k not in known)
            if unknown:
                warnings.warn(f"ChatHammer ignores {unknown}: it runs a local model, and these are not among "
                              "its parameters (see ChatHammer's docstring).", stacklevel=4)
                values = {k: v for k, v in values.items() if k in known}
            remote = sorted(k for k in SERVER_OPTIONS if values.get(k) is not None)
            if remote and values.get("backend", "llama_cpp") != "server":
                warnings.warn(f"ChatHammer ignores {remote} unless backend='server': a local model needs no "
                              "server settings.", stacklevel=4)
        return values

    # ------------------------------------------------------------------ identity
    @property
    def _llm_type(self) -> str:
        return "hammer-chat"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return self.identifying_params()

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        params = LangSmithParams(
            ls_provider="hammer", ls_model_name=self._model_label(kwargs.get("model")), ls_model_type="chat",
            ls_temperature=kwargs.get("temperature", self.temperature),
            ls_max_tokens=kwargs.get("max_tokens", self.max_tokens),
        )
        if stop or self.stop:
            params["ls_stop"] = list(stop or self.stop or [])
        return params

    def _resolve_model_profile(self) -> ModelProfile | None:
        # What ChatHammer does, tested: tool calling with every tool_choice, tool_call_chunks while
        # streaming, and native structured output (response_format), also beside bound tools.
        return ModelProfile(max_input_tokens=self.n_ctx, text_inputs=True, image_inputs=False, pdf_inputs=False,
                            audio_inputs=False, video_inputs=False, text_outputs=True, tool_calling=True,
                            tool_choice=True, tool_call_streaming=True, structured_output=True)

    def _model_label(self, override: Any = None) -> str:
        """The model as the user named it (what traces and response_metadata report)."""
        if isinstance(override, str) and override:
            return override
        if self.model:
            return self.model
        if self.model_path:
            return str(self.model_path)
        try:
            # Resolves the model without loading it; for the embedded default that may assemble its
            # file from the installed parts once (a local copy, never a download).
            return self._engine().model_name
        except HammerError:
            return "hammer-default"

    # -------------------------------------------------------------------- tokens
    def get_token_ids(self, text: str) -> list[int]:
        """The token ids of ``text`` by the model's own tokenizer (loads the model; never downloads)."""
        if self.custom_get_token_ids is not None:
            return self.custom_get_token_ids(text)
        return self._engine().token_ids(text)

    def get_num_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model's own tokenizer (loads the model; never downloads)."""
        if self.custom_get_token_ids is not None:
            return len(self.custom_get_token_ids(text))
        return self._engine().count_tokens(text)

    def get_num_tokens_from_messages(self, messages: list[BaseMessage], tools: Sequence[Any] | None = None) -> int:
        """Tokens of the prompt Hammer is given for ``messages`` (and ``tools``): the exact rendered
        prompt, counted by the model's own tokenizer. ``trim_messages(token_counter=llm)`` and the
        summarization middleware (``token_counter=llm.get_num_tokens_from_messages``) rely on it.
        """
        formatted = [_openai_tool(t) for t in tools] if tools else None
        return self._engine().count_prompt_tokens(to_engine_messages(messages), formatted)

    # -------------------------------------------------------------------- engine
    def _engine(self, model: str | None = None) -> HammerEngine:
        """The engine for this configuration (or a per-call ``model=`` override): cheap and lazy.

        Built from the fields on each call, so changing a field after a call (``llm.max_tokens = 64``)
        takes effect; engines are shared per configuration and the loaded model per backend settings.
        """
        return self.build_engine(model)

    def _prepare(self, messages: list[BaseMessage], stop: list[str] | None,
                 kwargs: dict[str, Any]) -> tuple[HammerEngine, EngineRequest, str | None]:
        """Engine, the engine's request, and the model override for one call.

        Call arguments (bound or per call) are the request's fields as they are: one that is not a field is a
        ``TypeError`` here. ``parallel_tool_calls=None`` means "not set" here, as in LangChain.
        """
        override = kwargs.get("model") or None
        call = {k: v for k, v in kwargs.items()
                if k not in _IGNORED_KEYS and not (k == "parallel_tool_calls" and v is None)}
        call["stop"] = list(stop if stop is not None else self.stop or [])
        return self._engine(override), EngineRequest.of(to_engine_messages(messages), **call), override

    # ---------------------------------------------------------------- generation
    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        engine, request, override = self._prepare(messages, stop, kwargs)
        response = engine.generate(request)
        return _result(response, self._model_label(override))

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        engine, request, override = self._prepare(messages, stop, kwargs)
        response = await engine.agenerate(request)
        return _result(response, self._model_label(override))

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        engine, request, override = self._prepare(messages, stop, kwargs)
        writer = _MessageChunkWriter(self._model_label(override))
        for event in engine.stream(request):
            for chunk in writer.feed(event):
                if run_manager:
                    run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                yield chunk

    async def _astream(self, messages: list[BaseMessage], stop: list[str] | None = None,
                       run_manager: AsyncCallbackManagerForLLMRun | None = None,
                       **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        engine, request, override = self._prepare(messages, stop, kwargs)
        writer = _MessageChunkWriter(self._model_label(override))
        async for event in engine.astream(request):
            for chunk in writer.feed(event):
                if run_manager:
                    await run_manager.on_llm_new_token(chunk.text, chunk=chunk)
                yield chunk

    # --------------------------------------------------------------------- tools
    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: dict[str, Any] | str | bool | None = None,
        parallel_tool_calls: bool | None = None,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools: LangChain tools, ``@tool`` functions, pydantic models, TypedDicts, JSON schemas,
        OpenAI tool dicts, typed callables, or runnables turned into tools (``runnable.as_tool()``).

        Args:
            tools: the tools the model may call.
            tool_choice: ``"auto"`` (default: call or refuse), ``"any"`` / ``"required"`` / ``True``
                (at least one call), ``"none"`` (answer without tools), a tool name, or an OpenAI-style
                ``{"type": "function", "function": {"name": ...}}``. Forced choices are enforced by the grammar.
            parallel_tool_calls: allow several calls in one answer (default: yes, except with a named
                ``tool_choice``, which forces one call of that tool).
            strict: accepted for OpenAI compatibility; constrained decoding already keeps every call
                within its schema (``constrained=True``).
            kwargs: more arguments for the call (``mask_names``, ``on_refusal``, ``max_tool_rounds``, ``max_tokens``,
                ...). ``pinned_tools=[names]``: always offered when a large tool set is narrowed (``tool_budget``;
                the tools offered are in ``response_metadata["offered_tools"]``). ``record_passes=True``: what the
                model read, pass by pass, in ``response_metadata["passes"]``. ``slot_filling=True`` (or a dict of
                :class:`~hammer_plugins.slot_filling.filler.SlotFiller` options such as ``{"ask": "all"}``): each
                user turn is a slot-filling step, the reply the follow-up question or the complete call, the snapshot
                in ``response_metadata["hammer_snapshot"]`` (docs/langchain.md, Slot filling).

        Example:
            >>> from langchain_hammer import ChatHammer
            >>> def ping(host: str) -> str:
            ...     '''Ping a host.'''
            ...     return "ok"
            >>> bound = ChatHammer().bind_tools([ping], tool_choice="ping")
            >>> bound.kwargs["tool_choice"]
            'ping'
        """
        del strict  # every call is grammar-constrained to its schema already
        formatted = [_openai_tool(t) for t in tools]
        # Convert now so an unrenderable schema or an unknown tool_choice fails here, not mid-run.
        names = [to_tool(t).name for t in formatted]
        if kwargs.get("slot_filling"):  # a wrong slot-filling setting fails at bind time, with the engine's own message
            filler_for(self._engine(), kwargs["slot_filling"], formatted, "auto" if tool_choice is None else tool_choice)
        if tool_choice is not None:
            normalize_tool_choice(tool_choice, names)
            kwargs["tool_choice"] = tool_choice
        unknown = [name for name in kwargs.get("pinned_tools") or () if name not in names]
        if unknown:
            raise UnknownToolError(f"pinned_tools {unknown[:8]} are not among the tools bound. Fix: pin names of "
                                   "tools passed to bind_tools.")
        if parallel_tool_calls is not None:
            kwargs["parallel_tool_calls"] = parallel_tool_calls
        return super().bind(tools=formatted, **kwargs)

    def with_structured_output(
        self,
        schema: dict[str, Any] | type | None = None,
        *,
        method: Literal["function_calling", "json_schema", "json_mode"] = "function_calling",
        include_raw: bool = False,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | Any]:
        """Answers as ``schema`` (a pydantic class, TypedDict, JSON schema or OpenAI tool dict).

        Args:
            schema: the output schema (optional only for ``method="json_mode"``).
            method: ``"function_calling"`` (default: a forced call to a tool named after the schema,
                Hammer's native skill), ``"json_schema"`` (grammar-constrained JSON of the schema, no
                tool prompt) or ``"json_mode"`` (any JSON object; ask for the keys in your prompt).
            include_raw: return ``{"raw", "parsed", "parsing_error"}`` instead of raising on bad output.
            strict: accepted for compatibility; decoding is grammar-constrained in every method.

        Example:
            >>> from pydantic import BaseModel
            >>> from langchain_hammer import ChatHammer
            >>> class Person(BaseModel):
            ...     '''A person.'''
            ...     name: str
            ...     age: int
            >>> structured = ChatHammer().with_structured_output(Person)
            >>> # structured.invoke("Anna is 31.") -> Person(name='Anna', age=31)
        """
        if kwargs:
            raise ValueError(f"Received unsupported arguments {kwargs}")
        if schema is None and method != "json_mode":
            raise ValueError(f"schema is required for method={method!r}. Fix: pass a pydantic class, TypedDict "
                             "or JSON schema, or use method='json_mode'")
        is_pydantic = isinstance(schema, type) and is_basemodel_subclass(schema)
        trace = {"kwargs": {"method": method, "strict": strict}, "schema": schema}
        output_parser: Runnable[Any, Any]
        if method == "function_calling":
            tool_name = _openai_tool(cast(Any, schema))["function"]["name"]
            llm = self.bind_tools([cast(Any, schema)], tool_choice=tool_name, parallel_tool_calls=False,
                                  ls_structured_output_format=trace)
            output_parser = (PydanticToolsParser(tools=[cast(Any, schema)], first_tool_only=True) if is_pydantic
                             else JsonOutputKeyToolsParser(key_name=tool_name, first_tool_only=True))
        elif method in ("json_schema", "json_mode"):
            llm = self.bind(response_format=_response_format(schema if method == "json_schema" else None),
                            ls_structured_output_format=trace if schema is not None else {"kwargs": {"method": method}})
            output_parser = (PydanticOutputParser(pydantic_object=cast(Any, schema)) if is_pydantic
                             else JsonOutputParser())
        else:
            raise ValueError(f"method must be 'function_calling', 'json_schema' or 'json_mode', got {method!r}")
        return _with_raw(llm, output_parser) if include_raw else llm | output_parser


def _response_format(schema: Any) -> dict[str, Any]:
    """The ``response_format`` of ``method="json_schema"`` for ``schema``; JSON mode without one."""
    if schema is None:
        return {"type": "json_object"}
    json_schema = convert_to_json_schema(schema)
    if json_schema.get("description") == dict.__doc__:
        json_schema.pop("description")  # see _openai_tool
    return {"type": "json_schema", "json_schema": {"name": json_schema.get("title", "response"), "schema": json_schema}}


def _with_raw(llm: Runnable[Any, Any], output_parser: Runnable[Any, Any]) -> Runnable[Any, Any]:
    """``include_raw=True``: ``{"raw", "parsed", "parsing_error"}``, a parse failure kept, not raised (as
    LangChain's own chat models answer)."""
    parser_assign = RunnablePassthrough.assign(parsed=itemgetter("raw") | output_parser, parsing_error=lambda _: None)
    parser_none = RunnablePassthrough.assign(parsed=lambda _: None)
    return RunnableMap(raw=llm) | parser_assign.with_fallbacks([parser_none], exception_key="parsing_error")


def _openai_tool(tool: Any) -> dict[str, Any]:
    """LangChain's conversion, minus one quirk: a TypedDict without a docstring comes back described
    by ``dict``'s own docstring, which would fill the small model's prompt with noise."""
    formatted = convert_to_openai_tool(tool)
    function = formatted.get("function", {})
    if function.get("description") == dict.__doc__:
        function["description"] = ""
    return formatted


# ----------------------------------------------------------------- messages in
def to_engine_messages(messages: Sequence[BaseMessage]) -> list[Message]:
    """LangChain messages to engine messages.

    ``ToolMessage(status="error")`` becomes a tool message with ``is_error=True``; list content is
    flattened to its text; images, audio and files raise ``ValueError`` (Hammer reads text only); an
    ``AIMessage`` carrying a slot-filling snapshot (``response_metadata["hammer_snapshot"]``) becomes a
    ``SnapshotMessage``.

    Example:
        >>> from langchain_core.messages import HumanMessage, ToolMessage
        >>> [m.role for m in to_engine_messages([HumanMessage("hi"), ToolMessage("boom", tool_call_id="1",
        ...                                                                     status="error")])]
        ['user', 'tool']
    """
    out: list[Message] = []
    for message in messages:
        if isinstance(message, AIMessage):
            calls = [ToolCall(name=c["name"], arguments=dict(c["args"]), id=c.get("id") or new_call_id())
                     for c in message.tool_calls]
            content = _text(message.content, "assistant")
            # A slot-filling turn's snapshot (response_metadata, or additional_kwargs after some stores)
            # comes along, so the slot-filling state is rebuilt from the history alone.
            snapshot = snapshot_of({"response_metadata": message.response_metadata,
                                    "additional_kwargs": message.additional_kwargs})
            # An ask's held-back calls (on_missing="ask") come back too: this turn completes them.
            pending = pending_calls_of({"response_metadata": message.response_metadata,
                                        "additional_kwargs": message.additional_kwargs})
            out.append(SnapshotMessage(role="assistant", content=content, tool_calls=calls, snapshot=snapshot,
                                       pending_calls=pending)
                       if snapshot is not None else Message(role="assistant", content=content, tool_calls=calls,
                                                            pending_calls=pending))
        elif isinstance(message, ToolMessage):
            # The engine names an unnamed result after the call it answers (by tool_call_id). A tool that
            # returned an MCP CallToolResult (or its str) gives the model the result's text, not its repr.
            content, is_error = _text(message.content, "tool"), message.status == "error"
            mcp_result = tool_result_text(content)
            if mcp_result is not None:
                content, is_error = mcp_result[0], is_error or mcp_result[1]
            structured = message.artifact.get("structured_content") if isinstance(message.artifact, dict) else None
            if not content and structured is not None:  # langchain-mcp-adapters: structured content only
                content = json.dumps(structured, ensure_ascii=False, default=str)
            out.append(Message(role="tool", content=content, tool_call_id=message.tool_call_id,
                               name=message.name, is_error=is_error))
        elif isinstance(message, HumanMessage):
            out.append(Message(role="user", content=_text(message.content, "user")))
        elif isinstance(message, SystemMessage):
            out.append(Message(role="system", content=_text(message.content, "system")))
        elif isinstance(message, FunctionMessage):
            out.append(Message(role="tool", content=_text(message.content, "tool"), name=message.name))
        elif isinstance(message, ChatMessage):
            role = {"human": "user", "user": "user", "ai": "assistant", "assistant": "assistant",
                    "system": "system", "developer": "system", "tool": "tool", "function": "tool"}.get(message.role)
            if role is None:
                raise ValueError(f"ChatMessage role {message.role!r} is not supported. Fix: use user, assistant, "
                                 "system or tool")
            out.append(Message(role=role, content=_text(message.content, role)))  # type: ignore[arg-type]
        else:
            raise ValueError(f"unsupported message type {type(message).__name__}. Fix: use HumanMessage, "
                             "AIMessage, SystemMessage or ToolMessage")
    return out


def _text(content: str | list[str | dict[str, Any]], role: str) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind in _MEDIA_BLOCKS:
            raise ValueError(f"a {role} message holds a {kind!r} block, but Hammer models read text only. Fix: "
                             "describe the content in text, or use a multimodal model for this step")
        elif kind in _SKIPPED_BLOCKS or role == "assistant":
            continue  # what the calls already say, or another provider's extras: not for this model
        elif role == "tool":
            parts.append(json.dumps(block, ensure_ascii=False, default=str))  # structured tool results stay readable
        else:
            raise ValueError(f"a {role} message holds a content block of type {kind!r}, which Hammer cannot read. "
                             "Fix: pass the content as text")
    return "".join(parts)


# ---------------------------------------------------------------- messages out
def _usage(response: HammerResponse) -> UsageMetadata:
    # LangChain's input_tokens count the whole prompt; cache_read the part of it the backend's cache served.
    return UsageMetadata(input_tokens=response.usage.prompt_tokens, output_tokens=response.usage.completion_tokens,
                         total_tokens=response.usage.total_tokens,
                         input_token_details=InputTokenDetails(cache_read=response.usage.cached_prompt_tokens))


def _metadata(response: HammerResponse, model_name: str) -> dict[str, Any]:
    metadata: dict[str, Any] = {"model_name": model_name, "model_provider": "hammer",
                                "finish_reason": response.finish_reason, "output_kind": response.kind,
                                "refusal": response.kind == "refusal"}
    if response.raw.strip() != response.text:
        metadata["raw_output"] = response.raw  # what the model wrote, when the content is not it
    if response.offered_tools is not None:  # a large tool set narrowed to its best matches (tool_budget)
        metadata["offered_tools"] = response.offered_tools
    if response.passes is not None:  # asked for (record_passes=True): what the model read, pass by pass, as JSON
        metadata["passes"] = [p.model_dump(mode="json") for p in response.passes]
    metadata.update(response.pending_extension())  # an ask (on_missing="ask"): the calls it held back
    if isinstance(response, SlotFillingResponse) and response.snapshot is not None:  # the state travels with it
        metadata.update(response.snapshot.to_metadata())
        metadata[SLOT_FILLING_ACTION_KEY] = response.slot_filling_action
    return metadata


def _extras(response: HammerResponse) -> dict[str, Any]:
    # Where LangChain keeps a refusal (as ChatOpenAI does, and convert_to_openai_messages carries it),
    # beside the text content and response_metadata["refusal"].
    # An ask's held-back calls (on_missing="ask") ride here too, where stores keep extensions.
    return {**({"refusal": response.text} if response.kind == "refusal" else {}), **response.pending_extension()}


def _result(response: HammerResponse, model_name: str) -> ChatResult:
    message = AIMessage(
        content=response.text,
        additional_kwargs=_extras(response),
        tool_calls=[tool_call(name=c.name, args=c.arguments, id=c.id) for c in response.tool_calls],
        invalid_tool_calls=[invalid_tool_call(name=c.name, args=c.arguments, id=c.id, error=c.reason)
                            for c in response.invalid_tool_calls],
        usage_metadata=_usage(response),
        response_metadata=_metadata(response, model_name),
    )
    return ChatResult(generations=[ChatGeneration(message=message,
                                                  generation_info={"finish_reason": response.finish_reason})])


class _MessageChunkWriter(StreamEncoder[ChatGenerationChunk]):
    """Engine stream events to chunks whose sum equals the ``AIMessage`` of ``invoke``.

    Prose (the engine's ``"prose"`` channel: a tool-free answer, the ``on_refusal="answer"`` pass,
    the answer that ends an agent turn, JSON of ``response_format``) streams as it comes; the engine
    trims it so the deltas add up to the final text. The ``"call"`` channel is Hammer's call list,
    not content: each call is sent as one tool_call_chunk as soon as the engine has it
    (``ToolCallDelta``), and the rest (text not streamed, late or invalid calls, usage, metadata)
    comes with the final chunk. What was already sent is the shared
    :class:`~hammer_plugins.output.encoder.StreamEncoder`'s state.
    """

    def __init__(self, model_name: str) -> None:
        super().__init__()
        self.model_name = model_name

    def on_prose(self, text: str) -> list[ChatGenerationChunk]:
        return [ChatGenerationChunk(message=AIMessageChunk(content=text))]

    def on_call(self, index: int, call: ToolCall) -> list[ChatGenerationChunk]:
        chunk = _call_chunk(call.name, _dump(call.arguments), call.id, index)
        return [ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[chunk]))]

    def on_finish(self, response: HammerResponse, text: str) -> list[ChatGenerationChunk]:
        # Every call went out already (the base sends the late ones through on_call); the invalid ones follow
        # them. LangChain re-derives invalid calls from chunk args; the raw text keeps a truncated call invalid.
        offset = len(self.sent_calls)
        chunks = [_call_chunk(c.name, c.arguments if c.arguments is not None else c.raw, c.id, offset + i)
                  for i, c in enumerate(response.invalid_tool_calls)]
        message = AIMessageChunk(content=text, tool_call_chunks=chunks, usage_metadata=_usage(response),
                                 additional_kwargs=_extras(response),
                                 response_metadata=_metadata(response, self.model_name), chunk_position="last")
        return [ChatGenerationChunk(message=message, generation_info={"finish_reason": response.finish_reason})]


def _call_chunk(name: str | None, args: str, call_id: str, index: int) -> Any:
    return tool_call_chunk(name=name, args=args, id=call_id, index=index)


def _dump(arguments: Mapping[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)
